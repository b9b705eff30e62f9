"""The sweep: shapes x backends -> records.  A failure in one cell never stops the others.

Each shape's backends are measured in this process (:mod:`harness.sweep.in_process`) or,
with ``--isolate``, each in its own subprocess (:mod:`harness.sweep.isolate`), so a crash,
a poisoned CUDA context or a hang becomes that cell's error.  Records are emitted as soon as
a backend's cell is finished.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from harness.measure.errors import ContextLost
from harness.measure.records import Baseline, cell_records, skipped_records
from harness.operator import Backend, BenchmarkOperator, Mode, Shape
from harness.report.results import Record
from harness.sweep.in_process import CellResult, measure_in_process
from harness.sweep.isolate import measure_isolated
from harness.sweep.spec import Sweep

Emit = Callable[[list[Record]], None]


def _skip_reason(op: BenchmarkOperator, backend: Backend, mode: Mode) -> str | None:
    if backend.fwd_only and mode.checks_grads:
        return f"{backend.name} is forward-only"
    return op.skip_reason(backend)


def _measure(sweep: Sweep, shape: Shape, names: list[str]) -> Iterator[CellResult]:
    if not sweep.settings.isolate:
        yield from measure_in_process(sweep, shape, names)
        return
    for name in names:
        sweep.report(shape, name, "isolated")
        yield name, *measure_isolated(sweep, shape, name)


@dataclass(frozen=True)
class ShapeResume:
    """Where a shape left off in another process: the backends still to run, and the speedup
    baseline's median when it was already measured."""

    backends: list[str]
    baseline_p50: float | None = None


def run_shape(sweep: Sweep, shape: Shape, emit: Emit = lambda _: None,
              resume: ShapeResume | None = None) -> list[Record]:
    """Every selected backend on one shape (those of ``resume`` only); each backend's records
    are emitted when done.

    Skipped backends' records come after the measured ones, so tables keep the baseline's
    columns first.  A lost CUDA context raises :class:`ContextLost` with the backends done
    and, when it was measured, the speedup baseline's median.
    """
    op, mode, metrics = sweep.op, sweep.mode, sweep.settings.metrics
    by_name = {b.name: b for b in op.backends()}
    records: list[Record] = []
    runnable, skipped = [], []
    baseline = Baseline(sweep.speedup_baseline, op.baseline().name)
    if resume is not None:
        baseline.p50 = resume.baseline_p50
    for name in sweep.backends if resume is None else resume.backends:
        reason = _skip_reason(op, by_name[name], mode)
        if reason is None:
            runnable.append(name)
        else:
            if name == baseline.name:
                baseline.skipped = f"the speedup baseline {name} was skipped"
            skipped += skipped_records(op, mode, shape, name, reason, metrics)
    try:
        for name, measurement, error in _measure(sweep, shape, runnable):
            if name == baseline.name:
                baseline.p50 = measurement.stats.p50 if measurement.stats is not None else None
            done = cell_records(op, mode, shape, name, measurement, error, metrics, sweep.ceilings, baseline)
            records += done
            emit(done)
            sweep.report(shape, name, "done")
    except ContextLost as lost:
        raise ContextLost(lost.culprit, lost.done, baseline.p50) from lost
    if skipped:
        records += skipped
        emit(skipped)
        for name in dict.fromkeys(record.backend for record in skipped):
            sweep.report(shape, name, "done")
    return records


def run_sweep(sweep: Sweep, emit: Emit = lambda _: None, first: int = 0,
              resume: ShapeResume | None = None) -> list[Record]:
    """The shapes of one operator in one mode from index ``first`` (resuming that one as
    ``resume`` says); ``emit`` gets records as cells finish.  A lost CUDA context raises
    :class:`ContextLost` carrying the index of the shape it happened in (``shape_index``)."""
    records: list[Record] = []
    for index in range(first, len(sweep.shapes)):
        try:
            records += run_shape(sweep, sweep.shapes[index], emit, resume if index == first else None)
        except ContextLost as lost:
            lost.shape_index = index
            raise
    return records
