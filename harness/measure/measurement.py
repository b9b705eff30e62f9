"""What the runner measured for one (shape, backend) cell, before it becomes records."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.measure.accuracy import AccuracyResult
from harness.measure.timing import SampleStats


def combined(repeats: list[SampleStats]) -> SampleStats | None:
    """One timing of a cell: its only repeat, or percentiles of the repeats' medians."""
    if not repeats:
        return None
    if len(repeats) == 1:
        return repeats[0]
    p20, p50, p80 = np.percentile([r.p50 for r in repeats], [20, 50, 80])
    return SampleStats(float(p20), float(p50), float(p80), sum(r.n for r in repeats))


@dataclass
class Measurement:
    """One cell's timings (per timer kind, one SampleStats per repeat), accuracy, first-call time,
    memory and notes."""

    timings: dict[str, list[SampleStats]] = field(default_factory=dict)
    """Each timer kind's repeats (:data:`~harness.measure.timing.TIMER_KINDS`: ``device``, ``wall``)."""
    accuracy: AccuracyResult | None = None
    first_call_ms: float | None = None
    peak_mem_bytes: int | None = None
    kernels: list[dict[str, Any]] | None = None
    """What one call launched (:func:`harness.measure.profile.profile_cell`), when profiled."""
    notes: list[str] = field(default_factory=list)
    """What the cell's kernels said about how they ran (:mod:`harness.notes`), e.g. on
    which stored config."""

    def repeats_of(self, kind: str = "device") -> list[SampleStats]:
        """The repeats of the timer ``kind`` (none when it did not run)."""
        return self.timings.get(kind, [])

    def stats_of(self, kind: str = "device") -> SampleStats | None:
        """The cell's timing by the timer ``kind``: its only repeat, or the repeats' medians combined."""
        return combined(self.repeats_of(kind))

    @property
    def repeats(self) -> list[SampleStats]:
        """The device timer's repeats."""
        return self.repeats_of("device")

    @property
    def stats(self) -> SampleStats | None:
        """The cell's latency (device timer)."""
        return self.stats_of("device")
