"""How each metric is computed: its entry of :data:`harness.metric_kinds.METRIC_KINDS` with the
timer it needs, its compute function and what else its record carries.

Adding a metric is its :class:`~harness.metric_kinds.MetricKind` (name, unit, description, how
records check and tables average it) plus one :func:`_metric` line and its compute function here,
and their test: the runner, the records, the tables, ``--list-metrics`` and ``--help`` read these.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from harness.measure.measurement import Measurement
from harness.measure.timing import SampleStats
from harness.metric_kinds import METRIC_KINDS, MetricKind
from harness.report.results import Record


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


class MetricUnavailable(Exception):
    """A metric that cannot be computed for this cell; the message says why."""


class MetricNotApplicable(MetricUnavailable):
    """A metric this device or operator does not provide: the cell is skipped, not failed."""


@dataclass(frozen=True)
class Metric:
    """One metric: ``compute`` gives its value or raises :class:`MetricUnavailable`; ``annotate``
    adds what else its record carries (percentiles, error sizes)."""

    kind: MetricKind
    compute: Callable[[CellContext], float]
    timer: str | None = "device"
    """What timing it is computed from: ``device`` (the device timer: CUDA events with an L2 flush,
    perf_counter on the CPU), ``wall`` (host time of back-to-back calls, no flush) or None."""
    annotate: Callable[[Record, CellContext], None] | None = None


def _median_ms(ctx: CellContext) -> float:
    stats = ctx.measurement.stats
    if stats is None:
        raise MetricUnavailable("not timed")
    if stats.p50 <= 0:
        raise MetricUnavailable(f"median latency {stats.p50} ms: the timed call did no measurable work")
    return stats.p50


def _accuracy(ctx: CellContext) -> float:
    if ctx.measurement.accuracy is None:
        raise MetricUnavailable("accuracy was not checked")
    return 1.0 if ctx.measurement.accuracy.passed else 0.0


def _annotate_accuracy(record: Record, ctx: CellContext) -> None:
    accuracy = ctx.measurement.accuracy
    if accuracy is not None:
        record.note = accuracy.reason
        record.extra["max_abs_err"] = accuracy.max_abs_err
        record.extra["max_rel_err"] = accuracy.max_rel_err


def _annotate_samples(record: Record, stats: SampleStats | None, repeats: list[SampleStats]) -> None:
    if stats is None:
        return
    record.p20, record.p50, record.p80, record.n_samples = stats.p20, stats.p50, stats.p80, stats.n
    record.extra["spread"] = stats.spread
    if len(repeats) > 1:
        record.repeats = [r.p50 for r in repeats]


def _annotate_latency(record: Record, ctx: CellContext) -> None:
    _annotate_samples(record, ctx.measurement.stats, ctx.measurement.repeats)


def _walltime(ctx: CellContext) -> float:
    stats = ctx.measurement.stats_of("wall")
    if stats is None:
        raise MetricUnavailable("host time not measured")
    return stats.p50


def _annotate_walltime(record: Record, ctx: CellContext) -> None:
    _annotate_samples(record, ctx.measurement.stats_of("wall"), ctx.measurement.repeats_of("wall"))


def _speedup(ctx: CellContext) -> float:
    if ctx.baseline_skipped:
        raise MetricNotApplicable(ctx.baseline_skipped)
    p50 = _median_ms(ctx)
    if ctx.baseline_p50 is None:
        raise MetricNotApplicable("the speedup baseline failed on this shape")
    return ctx.baseline_p50 / p50


def _gbps(ctx: CellContext) -> float:
    p50 = _median_ms(ctx)
    if ctx.roof.bytes_moved is None:
        raise MetricNotApplicable("operator has no bytes model for this mode")
    return ctx.roof.bytes_moved / (p50 * 1e-3) / 1e9


def _tflops(ctx: CellContext) -> float:
    p50 = _median_ms(ctx)
    if ctx.roof.flops is None:
        raise MetricNotApplicable("operator has no flop model for this mode")
    return ctx.roof.flops / (p50 * 1e-3) / 1e12


def _pct_peak(ctx: CellContext) -> float:
    if ctx.roof.compute_bound:
        tflops = _tflops(ctx)
        if ctx.roof.peak_tflops is None:
            raise MetricNotApplicable("no peak TFLOP/s known for this device")
        return 100.0 * tflops / ctx.roof.peak_tflops
    gbps = _gbps(ctx)
    if ctx.roof.memory_ceiling_gbps is None:
        raise MetricUnavailable("the bandwidth of this cell's traffic pattern was not measured")
    return 100.0 * gbps / ctx.roof.memory_ceiling_gbps


def _peak_mem(ctx: CellContext) -> float:
    if ctx.measurement.peak_mem_bytes is None:
        raise MetricNotApplicable("peak_mem is measured on CUDA only")
    return ctx.measurement.peak_mem_bytes / 1e6


def _kernels(ctx: CellContext) -> float:
    if ctx.measurement.kernels is None:
        raise MetricUnavailable("the call was not profiled")
    return float(len(ctx.measurement.kernels))


def _annotate_kernels(record: Record, ctx: CellContext) -> None:
    if ctx.measurement.kernels is not None:
        record.extra["kernels"] = ctx.measurement.kernels


def _compile_time(ctx: CellContext) -> float:
    p50 = _median_ms(ctx)
    if ctx.measurement.first_call_ms is None:
        raise MetricUnavailable("first call not timed")
    return max(ctx.measurement.first_call_ms - p50, 0.0)


def _metric(name: str, compute: Callable[[CellContext], float], timer: str | None = "device",
            annotate: Callable[[Record, CellContext], None] | None = None) -> Metric:
    """The metric table's entry ``name``, computed by ``compute``."""
    return Metric(METRIC_KINDS[name], compute, timer, annotate)


METRICS: dict[str, Metric] = {metric.kind.name: metric for metric in (
    _metric("latency", _median_ms, annotate=_annotate_latency),
    _metric("speedup", _speedup),
    _metric("accuracy", _accuracy, timer=None, annotate=_annotate_accuracy),
    _metric("gbps", _gbps),
    _metric("tflops", _tflops),
    _metric("pct_peak", _pct_peak),
    _metric("peak_mem", _peak_mem, timer=None),
    _metric("compile_time", _compile_time),
    _metric("walltime", _walltime, timer="wall", annotate=_annotate_walltime),
    _metric("kernels", _kernels, timer=None, annotate=_annotate_kernels),
)}
DEFAULT_METRICS = ("latency", "speedup", "accuracy")
