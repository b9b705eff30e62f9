"""Metric definitions and their derivation from one cell's measurement."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from harness.accuracy import AccuracyResult
from harness.timing import SampleStats


@dataclass(frozen=True)
class MetricInfo:
    unit: str
    description: str


METRICS: dict[str, MetricInfo] = {
    "latency": MetricInfo("ms", "median time per call, shown with its spread (half p20-p80 / median)"),
    "speedup": MetricInfo("x", "baseline median latency / backend median latency"),
    "accuracy": MetricInfo("bool", "1 if every output/gradient matches the float64 reference"),
    "gbps": MetricInfo("GB/s", "bytes moved (operator's model for the mode) / median latency"),
    "tflops": MetricInfo("TFLOP/s", "floating-point operations (operator's model) / median latency"),
    "pct_peak": MetricInfo(
        "%", "gbps / measured copy bandwidth (memory-bound ops) or tflops / dense peak (matmuls)"
    ),
    "peak_mem": MetricInfo("MB", "peak device memory allocated during one call (CUDA only)"),
    "compile_time": MetricInfo("ms", "set-up plus first call, minus the steady-state median"),
}
DEFAULT_METRICS = ("latency", "speedup", "accuracy")


@dataclass
class Measurement:
    """What the runner measured for one (shape, backend) cell: one SampleStats per repeat."""

    repeats: list[SampleStats] = field(default_factory=list)
    accuracy: AccuracyResult | None = None
    first_call_ms: float | None = None
    peak_mem_bytes: int | None = None

    @property
    def stats(self) -> SampleStats | None:
        """The cell's latency: its one timing, or percentiles of the repeats' medians."""
        if not self.repeats:
            return None
        if len(self.repeats) == 1:
            return self.repeats[0]
        p20, p50, p80 = np.percentile([r.p50 for r in self.repeats], [20, 50, 80])
        return SampleStats(float(p20), float(p50), float(p80), sum(r.n for r in self.repeats))


@dataclass(frozen=True)
class Roofline:
    """The cell's work model and the device ceilings it is compared with."""

    bytes_moved: int | None
    flops: int | None
    compute_bound: bool
    copy_gbps: float | None
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


class MetricUnavailable(Exception):
    """A metric that cannot be computed for this cell; the message says why."""


class MetricNotApplicable(MetricUnavailable):
    """A metric this device or operator does not provide: the cell is skipped, not failed."""


def metric_value(metric: str, m: Measurement, roof: Roofline,
                 baseline_p50: float | None) -> float:
    """The value of ``metric`` for one cell; raises :class:`MetricUnavailable` with a reason."""
    if metric == "accuracy":
        if m.accuracy is None:
            raise MetricUnavailable("accuracy was not checked")
        return 1.0 if m.accuracy.passed else 0.0
    if metric == "peak_mem":
        if m.peak_mem_bytes is None:
            raise MetricNotApplicable("peak_mem is measured on CUDA only")
        return m.peak_mem_bytes / 1e6
    if m.stats is None:
        raise MetricUnavailable("not timed")
    p50 = m.stats.p50
    if p50 <= 0:
        raise MetricUnavailable(f"median latency {p50} ms: the timed call did no measurable work")
    if metric == "latency":
        return p50
    if metric == "compile_time":
        if m.first_call_ms is None:
            raise MetricUnavailable("first call not timed")
        return max(m.first_call_ms - p50, 0.0)
    if metric == "speedup":
        if baseline_p50 is None:
            raise MetricNotApplicable("the speedup baseline failed on this shape")
        return baseline_p50 / p50
    if metric == "gbps":
        return _gbps(roof, p50)
    if metric == "tflops":
        return _tflops(roof, p50)
    if metric == "pct_peak":
        if roof.compute_bound:
            if roof.peak_tflops is None:
                raise MetricNotApplicable("no peak TFLOP/s known for this device")
            return 100.0 * _tflops(roof, p50) / roof.peak_tflops
        if roof.copy_gbps is None:
            raise MetricUnavailable("copy bandwidth not measured")
        return 100.0 * _gbps(roof, p50) / roof.copy_gbps
    raise MetricUnavailable(f"unknown metric {metric}")


def _gbps(roof: Roofline, p50_ms: float) -> float:
    if roof.bytes_moved is None:
        raise MetricNotApplicable("operator has no bytes model for this mode")
    return roof.bytes_moved / (p50_ms * 1e-3) / 1e9


def _tflops(roof: Roofline, p50_ms: float) -> float:
    if roof.flops is None:
        raise MetricNotApplicable("operator has no flop model for this mode")
    return roof.flops / (p50_ms * 1e-3) / 1e12
