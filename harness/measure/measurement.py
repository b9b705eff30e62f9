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
    """One cell's timings (one SampleStats per repeat, device and wall), accuracy, first-call time,
    memory and notes."""

    repeats: list[SampleStats] = field(default_factory=list)
    accuracy: AccuracyResult | None = None
    first_call_ms: float | None = None
    peak_mem_bytes: int | None = None
    kernels: list[dict[str, Any]] | None = None
    """What one call launched (:func:`harness.measure.profile.profile_cell`), when profiled."""
    wall_repeats: list[SampleStats] = field(default_factory=list)
    """Host time per call (:class:`~harness.measure.timing.WallTimer`), one per repeat."""
    notes: list[str] = field(default_factory=list)
    """What the cell's kernels said about how they ran (:mod:`harness.notes`), e.g. on
    which stored config."""

    @property
    def stats(self) -> SampleStats | None:
        """The cell's latency (device timer)."""
        return combined(self.repeats)

    @property
    def wall_stats(self) -> SampleStats | None:
        """The cell's host time per call (wall timer)."""
        return combined(self.wall_repeats)
