"""What a metric is computed from: one cell's measurement (timings, accuracy, first call, memory,
kernels) and its work model against the device's ceilings.

Plain data, built by the runner (:mod:`harness.measure`) and read by the metric table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class SampleStats:
    """Summary of timing samples in milliseconds."""

    p20: float
    p50: float
    p80: float
    n: int

    @property
    def spread(self) -> float:
        """Half the p20-p80 range relative to the median (0.01 means +-1%)."""
        return (self.p80 - self.p20) / (2 * self.p50) if self.p50 > 0 else float("nan")

    @classmethod
    def of(cls, samples_ms: list[float]) -> SampleStats:
        p20, p50, p80 = np.percentile(np.asarray(samples_ms, dtype=np.float64), [20, 50, 80])
        return cls(float(p20), float(p50), float(p80), len(samples_ms))


def combined(repeats: list[SampleStats]) -> SampleStats | None:
    """One timing of a cell: its only repeat, or percentiles of the repeats' medians."""
    if not repeats:
        return None
    if len(repeats) == 1:
        return repeats[0]
    p20, p50, p80 = np.percentile([r.p50 for r in repeats], [20, 50, 80])
    return SampleStats(float(p20), float(p50), float(p80), sum(r.n for r in repeats))


@dataclass(frozen=True)
class AccuracyResult:
    """Outcome of one comparison (:mod:`harness.measure.accuracy`): pass/fail, the worst errors,
    and why it failed."""

    passed: bool
    max_abs_err: float
    max_rel_err: float
    reason: str | None = None


DEFAULT_TIMER = "device"
"""The timer kind a metric is timed by unless its entry names another (the latency's)."""


@dataclass
class Measurement:
    """One cell's timings (per timer kind, one SampleStats per repeat), accuracy, first-call time,
    memory and notes."""

    timings: dict[str, list[SampleStats]] = field(default_factory=dict)
    """Each timer kind's repeats (:data:`~harness.timing.TIMER_KINDS`: ``device``, ``wall``)."""
    accuracy: AccuracyResult | None = None
    first_call_ms: float | None = None
    peak_mem_bytes: int | None = None
    kernels: list[dict[str, Any]] | None = None
    """What one call launched (:func:`harness.measure.profile.profile_cell`), when profiled, with
    each launch's modelled work where known (:func:`harness.measure.profile.with_work`)."""
    notes: list[str] = field(default_factory=list)
    """What the cell's kernels said about how they ran (:mod:`harness.notes`), e.g. on
    which stored config."""

    def repeats_of(self, kind: str = DEFAULT_TIMER) -> list[SampleStats]:
        """The repeats of the timer ``kind`` (none when it did not run)."""
        return self.timings.get(kind, [])

    def stats_of(self, kind: str = DEFAULT_TIMER) -> SampleStats | None:
        """The cell's timing by the timer ``kind``: its only repeat, or the repeats' medians combined."""
        return combined(self.repeats_of(kind))

    @property
    def repeats(self) -> list[SampleStats]:
        """The device timer's repeats."""
        return self.repeats_of(DEFAULT_TIMER)

    @property
    def stats(self) -> SampleStats | None:
        """The cell's latency (device timer)."""
        return self.stats_of(DEFAULT_TIMER)


@dataclass(frozen=True)
class Roofline:
    """The cell's work model and the device ceilings it is compared with."""

    bytes_moved: int | None
    flops: int | None
    compute_bound: bool
    memory_ceiling_gbps: float | None
    """The measured bandwidth of the cell's traffic pattern (copy, read2_write1, read or a mix)."""
    peak_tflops: float | None
    peak_gbps: float | None = None

    def floor_ms(self) -> float | None:
        """The physical floor: bytes at peak bandwidth or flops at peak compute, whichever is larger."""
        floors = []
        if self.bytes_moved is not None and self.peak_gbps:
            floors.append(self.bytes_moved / (self.peak_gbps * 1e9) * 1e3)
        if self.flops is not None and self.peak_tflops:
            floors.append(self.flops / (self.peak_tflops * 1e12) * 1e3)
        return max(floors) if floors else None


@dataclass(frozen=True)
class CellContext:
    """Everything a metric is computed from: the measurement, the models and the speedup baseline."""

    measurement: Measurement
    roof: Roofline
    baseline_p50: float | None = None
    baseline_skipped: str | None = None
