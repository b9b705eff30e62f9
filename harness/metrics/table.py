"""The metric table: every metric's facts and computation, one entry each in :data:`METRICS`.

An entry says what the metric is (name, unit, description), how result files check it and
tables average and flag it, the timer and other measurements it needs and how its value (and
whatever else its record carries) is computed from the cell's
:class:`~harness.metrics.cell_data.CellContext`.  The runner, the records, the result-file
checker, the tables, ``--list-metrics`` and ``--help`` all read this table: adding a metric is
one entry here, its compute function beside it, and its test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from harness.metrics.cell_data import DEFAULT_TIMER, CellContext, SampleStats


class MetricUnavailable(Exception):
    """A metric that cannot be computed for this cell; the message says why."""


class MetricNotApplicable(MetricUnavailable):
    """A metric this device or operator does not provide: the cell is skipped, not failed."""


@dataclass(frozen=True)
class RecordFields:
    """What a metric's record carries besides its value: each field is set on the record's field
    of the same name (None too), except ``extra``, whose entries are added to the record's."""

    note: str | None = None
    p20: float | None = None
    p50: float | None = None
    p80: float | None = None
    n_samples: int | None = None
    repeats: list[float] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """Entries of the record's ``extra`` (error sizes, spread, kernels)."""


Need = Literal["first_call", "peak_mem", "profile"]
"""A measurement besides the timers that a metric needs: ``first_call`` (the set-up and first call
timed), ``peak_mem`` (the peak device memory of one call, CUDA only), ``profile`` (a few calls
profiled)."""


def _no_fields(ctx: CellContext) -> RecordFields:
    return RecordFields()


@dataclass(frozen=True)
class Metric:
    """One metric: ``compute`` gives its value or raises :class:`MetricUnavailable`;
    ``record_fields`` gives what else its record carries (percentiles, error sizes)."""

    name: str
    unit: str
    description: str
    compute: Callable[[CellContext], float]
    timer: str | None = DEFAULT_TIMER
    """What timing it is computed from: a kind of :data:`~harness.timing.TIMER_KINDS`
    (``device``: CUDA events with an L2 flush, perf_counter on the CPU; ``wall``: host time of
    back-to-back calls, no flush) or None."""
    record_fields: Callable[[CellContext], RecordFields] = _no_fields
    needs: frozenset[Need] = frozenset()
    """What the sweep measures for it besides its timer (:data:`Need`)."""
    positive: bool = False
    """Every measured value is above zero (a ratio or a time): a file with one that is not is rejected."""
    mean: Literal["arithmetic", "geometric"] = "arithmetic"
    """How a table's ``average`` row averages the metric's values."""
    pass_fail: bool = False
    """Its values are 1 (passed) or 0 (failed)."""
    floor_flagged: bool = True
    """A cell timed faster than the physical floor flags this record ``below_physical_floor``."""
    reviewed: bool = False
    """A value above the operator's ``review_speedup`` (of a backend other than the registered
    baseline) flags the record ``review_speedup``."""


def _median_ms(ctx: CellContext) -> float:
    stats = ctx.measurement.stats
    if stats is None:
        raise MetricUnavailable("not timed")
    if stats.p50 <= 0:
        raise MetricUnavailable(f"median latency {stats.p50} ms: the timed call did no measurable work")
    return stats.p50


def _sample_fields(stats: SampleStats | None, repeats: list[SampleStats]) -> RecordFields:
    if stats is None:
        return RecordFields()
    return RecordFields(p20=stats.p20, p50=stats.p50, p80=stats.p80, n_samples=stats.n,
                        repeats=[r.p50 for r in repeats] if len(repeats) > 1 else None,
                        extra={"spread": stats.spread})


def _latency_fields(ctx: CellContext) -> RecordFields:
    return _sample_fields(ctx.measurement.stats, ctx.measurement.repeats)


def _speedup(ctx: CellContext) -> float:
    if ctx.baseline_skipped:
        raise MetricNotApplicable(ctx.baseline_skipped)
    p50 = _median_ms(ctx)
    if ctx.baseline_p50 is None:
        raise MetricNotApplicable("the speedup baseline failed on this shape")
    return ctx.baseline_p50 / p50


def _accuracy(ctx: CellContext) -> float:
    if ctx.measurement.accuracy is None:
        raise MetricUnavailable("accuracy was not checked")
    return 1.0 if ctx.measurement.accuracy.passed else 0.0


def _accuracy_fields(ctx: CellContext) -> RecordFields:
    accuracy = ctx.measurement.accuracy
    if accuracy is None:
        return RecordFields()
    return RecordFields(note=accuracy.reason,
                        extra={"max_abs_err": accuracy.max_abs_err, "max_rel_err": accuracy.max_rel_err})


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


def _compile_time(ctx: CellContext) -> float:
    p50 = _median_ms(ctx)
    if ctx.measurement.first_call_ms is None:
        raise MetricUnavailable("first call not timed")
    return max(ctx.measurement.first_call_ms - p50, 0.0)


def _walltime(ctx: CellContext) -> float:
    stats = ctx.measurement.stats_of("wall")
    if stats is None:
        raise MetricUnavailable("host time not measured")
    return stats.p50


def _walltime_fields(ctx: CellContext) -> RecordFields:
    return _sample_fields(ctx.measurement.stats_of("wall"), ctx.measurement.repeats_of("wall"))


def _kernels(ctx: CellContext) -> float:
    if ctx.measurement.kernels is None:
        raise MetricUnavailable("the call was not profiled")
    return float(len(ctx.measurement.kernels))


def _kernels_fields(ctx: CellContext) -> RecordFields:
    kernels = ctx.measurement.kernels
    return RecordFields() if kernels is None else RecordFields(extra={"kernels": kernels})


METRICS: dict[str, Metric] = {metric.name: metric for metric in (
    Metric("latency", "ms", "median time per call, shown with its spread (half p20-p80 / median)",
           _median_ms, record_fields=_latency_fields, positive=True),
    Metric("speedup", "x", "baseline median latency / backend median latency", _speedup,
           positive=True, mean="geometric", reviewed=True),
    Metric("accuracy", "bool", "1 if every output/gradient matches the float64 reference", _accuracy,
           timer=None, record_fields=_accuracy_fields, pass_fail=True, floor_flagged=False),
    Metric("gbps", "GB/s", "bytes moved (operator's model for the mode) / median latency", _gbps),
    Metric("tflops", "TFLOP/s", "floating-point operations (operator's model) / median latency", _tflops),
    Metric("pct_peak", "%",
           "gbps / the measured bandwidth of the cell's traffic pattern (memory-bound ops), or "
           "tflops / dense datasheet peak (matmuls)", _pct_peak),
    Metric("peak_mem", "MB", "peak device memory allocated during one call (CUDA only)", _peak_mem,
           timer=None, needs=frozenset({"peak_mem"})),
    Metric("compile_time", "ms", "set-up plus first call, minus the steady-state median", _compile_time,
           needs=frozenset({"first_call"})),
    Metric("walltime", "ms", "host time per call (Python, dispatch, launch): batches of calls back to "
           "back, one device sync per batch, no L2 flush", _walltime, timer="wall",
           record_fields=_walltime_fields, positive=True),
    Metric("kernels", "count", "kernels one call launches; each one's device time and share in the "
           "record and in a table after the run (profiled, no flush)", _kernels, timer=None,
           record_fields=_kernels_fields, needs=frozenset({"profile"})),
)}
"""Every metric by name, in the order ``--list-metrics`` lists them."""
DEFAULT_METRICS = ("latency", "speedup", "accuracy")
"""What a run measures without ``--metrics``."""


def needed(metrics: Iterable[str]) -> set[Need]:
    """What the ``metrics`` need measured besides their timers (:attr:`Metric.needs`)."""
    return {need for name in metrics for need in METRICS[name].needs}
