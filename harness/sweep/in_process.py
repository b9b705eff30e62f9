"""Measure the backends of one shape in this process: inputs, float64 references, cells, timings.

For each shape the runner draws fresh inputs and computes the float64 reference once (the
operator's baseline on upcast inputs), and a second set of inputs with its own reference for
the check after timing.  Then for each backend it builds its cell (set-up, first call, check),
times it when a metric needs timing, and checks it again.  With ``repeats > 1`` every backend
is built first and then timed ``repeats`` times, interleaving the backends within each repeat
(rotating which goes first) so that clock and thermal drift hit all of them alike.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from harness.error_line import CONTEXT_LOST_NOTE, error_line
from harness.measure.cell import (
    Cell,
    Reference,
    backend_inputs,
    build_cell,
    changed_inputs,
    check_again,
    check_audited,
    check_call,
    compute_reference,
    peak_memory,
    snapshot,
    time_cell,
)
from harness.measure.errors import ContextLost, context_lost, error_text
from harness.measure.profile import profile_cell, with_work
from harness.metrics.cell_data import AccuracyResult, Measurement
from harness.operator import Backend, BenchmarkOperator, Mode, Shape
from harness.settings import RunSettings
from harness.sweep.spec import Sweep

CellResult = tuple[str, Measurement, str | None]
"""A finished cell: backend name, its measurement, its error text (None when it ran)."""

FRESH_SEED_OFFSET = 1_000_003
"""The check after timing draws its inputs with the run's seed plus this."""
MIN_SEED, MAX_SEED = -(2**63), 2**64 - 1 - FRESH_SEED_OFFSET
"""The ``--seed`` range: torch's seeds (-2^63 to 2^64 - 1), less the fresh inputs' offset."""


@dataclass
class ShapeInputs:
    """What every backend of one shape is checked against."""

    inputs: tuple[Any, ...]
    reference: Reference
    fresh: tuple[Any, ...]
    fresh_reference: Reference
    diff: list[int]


@dataclass
class BuiltCell:
    """A backend's cell while it is being measured: the cell, its input snapshot, the comparisons
    of its outputs, and what it changed that it was given to read."""

    cell: Cell
    before: list[tuple[int, torch.Tensor]]
    checks: list[AccuracyResult]
    tampering: list[AccuracyResult] = field(default_factory=list)


def _release(device: str) -> None:
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def _shape_inputs(sweep: Sweep, shape: Shape) -> ShapeInputs:
    op, mode, seed = sweep.op, sweep.mode, sweep.settings.seed
    torch.manual_seed(seed)
    inputs = op.make_inputs(shape)
    reference = compute_reference(op, inputs, mode)
    fresh = op.fresh_inputs(shape, seed + FRESH_SEED_OFFSET) or inputs
    fresh_reference = compute_reference(op, fresh, mode, fresh=True)
    return ShapeInputs(inputs, reference, fresh, fresh_reference, op.differentiable(inputs))


def _verdict(built: BuiltCell) -> AccuracyResult:
    """One accuracy result for the cell, with the worst errors of its checks: a modified input or
    ``dy`` first (the cause before the wrong values it leads to), else the first failing check."""
    checks = built.checks
    worst_abs = max(c.max_abs_err for c in checks)
    worst_rel = max(c.max_rel_err for c in checks)
    failed = built.tampering[0] if built.tampering else next((c for c in checks if not c.passed), None)
    return AccuracyResult(failed is None, worst_abs, worst_rel, None if failed is None else failed.reason)


def _failure(reason: str) -> AccuracyResult:
    return AccuracyResult(False, float("nan"), float("nan"), reason)


class ShapeRun:
    """The backends of one shape being measured in this process: their cells, measurements and
    errors, and the backends whose failure lost the CUDA context."""

    def __init__(self, sweep: Sweep, shape: Shape, names: list[str], given: ShapeInputs):
        self.sweep, self.shape, self.names, self.given = sweep, shape, names, given
        self.tolerance = sweep.tolerance(shape)
        self.timers = sweep.timers_in_order()
        self.measurements = {name: Measurement() for name in names}
        self.errors: dict[str, str] = {}
        self.cells: dict[str, BuiltCell] = {}
        self.lost: list[str] = []

    @property
    def op(self) -> BenchmarkOperator:
        return self.sweep.op

    @property
    def mode(self) -> Mode:
        return self.sweep.mode

    @property
    def settings(self) -> RunSettings:
        return self.sweep.settings

    def failed(self, name: str, text: str) -> None:
        """Record ``name``'s error; a failure that poisoned the CUDA context ends the shape here."""
        self.errors[name] = text
        if context_lost(self.op.device, text):
            self.errors[name] += f" {CONTEXT_LOST_NOTE}"
            self.lost.append(name)

    def build(self, name: str, backend: Backend) -> None:
        """Set the cell up and make its first call, checked against the reference."""
        given, mode = self.given, self.mode
        local = backend_inputs(given.inputs, given.diff, mode.needs_grad)
        before = snapshot(local)
        try:
            cell = build_cell(self.op, backend, local, given.diff, mode, given.reference,
                              self.measurements[name], first_call_time="first_call" in self.sweep.needs)
            first = check_call(self.op, mode, cell, cell.first_outputs, given.diff, given.reference,
                               self.tolerance)
            cell.drop_first_graph()
            self.cells[name] = BuiltCell(cell, before, [first])
            self.check_unchanged(self.cells[name])
            if self.op.device == "cuda" and "peak_mem" in self.sweep.needs:
                self.measurements[name].peak_mem_bytes = peak_memory(cell)
        except Exception as exc:  # any backend failure becomes that cell's error
            self.cells.pop(name, None)
            self.failed(name, error_text(exc))

    def check_unchanged(self, built: BuiltCell) -> None:
        """Note it against the cell if it changed an input or the ``dy`` it was given."""
        for reason in (changed_inputs(built.before, built.cell.inputs),
                       self.op.changed_grad_outputs(built.cell.dys)):
            if reason is not None:
                built.tampering.append(_failure(reason))

    def time_once(self, name: str) -> None:
        """One repeat of the cell's timing, and the checks of its audited samples."""
        measurement, built, given = self.measurements[name], self.cells[name], self.given
        try:
            samples = time_cell(self.op, self.mode, built.cell, given.diff, given.reference, measurement,
                                self.timers)
        except Exception as exc:
            # A cell whose timing failed in any repeat has no latency: the repeats it finished
            # would pass for a healthy cell with fewer repeats.  Nor is it accurate: a call of
            # it returned no result.
            measurement.timings.clear()
            built = self.cells.pop(name)
            built.checks.append(_failure(f"a timed call failed: {error_line(error_text(exc))}"))
            measurement.accuracy = _verdict(built)
            self.failed(name, error_text(exc))
            return
        for sample in samples:
            try:
                built.checks.append(check_audited(self.op, self.mode, built.cell, sample, given.diff,
                                                  self.tolerance))
            except Exception as exc:  # the harness's reference failed: the cell keeps its latency
                why = "the check of a timed call failed: "
                built.checks.append(_failure(why + error_line(error_text(exc))))
                self.failed(name, why + error_text(exc))

    def finish(self, name: str) -> CellResult:
        """The checks after timing: inputs and ``dy`` unchanged, and a call on fresh inputs."""
        built = self.cells.pop(name, None)
        measurement = self.measurements[name]
        if built is not None and self.sweep.profiled:
            self.profile(name, built)
        if built is not None:
            self.check_unchanged(built)
            self.check_on_fresh_inputs(name, built)
            measurement.accuracy = _verdict(built)
        return name, measurement, self.errors.get(name)

    def profile(self, name: str, built: BuiltCell) -> None:
        """The kernels of a few calls, and their trace file under ``--profile DIR``."""
        trace = None
        if self.settings.profile_dir is not None:
            trace = Path(self.settings.profile_dir) / f"{self.sweep.cell_name(self.shape, name)}.json"
        try:
            kernels = profile_cell(built.cell, self.op.device, trace)
            self.measurements[name].kernels = with_work(kernels, self.op, self.shape, self.mode)
        except Exception as exc:
            self.failed(name, f"profiling failed: {error_text(exc)}")

    def check_on_fresh_inputs(self, name: str, built: BuiltCell) -> None:
        """A call on the second set of inputs, so that a stale or cached result fails."""
        given = self.given
        try:
            again = check_again(self.op, self.mode, built.cell, given.fresh, given.diff,
                                given.fresh_reference, self.tolerance)
        except Exception as exc:  # the cell's accuracy fails with the reason
            built.checks.append(_failure(f"check after timing failed: {error_line(error_text(exc))}"))
            self.failed(name, f"check after timing failed: {error_text(exc)}")
            return
        reason = None if again.passed else f"on fresh inputs after timing: {again.reason}"
        built.checks.append(AccuracyResult(again.passed, again.max_abs_err, again.max_rel_err, reason))
        built.before = [(i, x) for i, x in enumerate(given.fresh) if isinstance(x, torch.Tensor)]
        self.check_unchanged(built)

    def end_if_lost(self, done: list[str]) -> None:
        if self.lost:
            raise ContextLost(self.lost[0], done, None)


def _one_backend_at_a_time(run: ShapeRun, backends: dict[str, Backend]) -> Iterator[CellResult]:
    """One repeat, or no timing: each backend built, timed or checked, and finished in turn."""
    sweep, shape, names = run.sweep, run.shape, run.names
    done: list[str] = []
    for name in names:
        sweep.report(shape, name, "build")
        run.build(name, backends[name])
        if name in run.cells:
            # After the first call: the timing or, untimed, the check on fresh inputs.
            sweep.report(shape, name, "timing" if sweep.timed else "checking")
            if sweep.timed:
                run.time_once(name)
        done.append(name)
        yield run.finish(name)
        run.end_if_lost(done)
        _release(run.op.device)


def _interleaved_repeats(run: ShapeRun, backends: dict[str, Backend]) -> Iterator[CellResult]:
    """Every backend built, then timed ``repeats`` times, the backends interleaved in each repeat."""
    sweep, shape, names, repeats = run.sweep, run.shape, run.names, run.settings.repeats
    for name in names:
        sweep.report(shape, name, "build")
        run.build(name, backends[name])
        if run.lost:
            break
    for repeat in range(repeats if not run.lost else 0):
        order = names[repeat % len(names):] + names[:repeat % len(names)]
        for name in order:
            if name in run.cells and not run.lost:
                sweep.report(shape, name, f"repeat {repeat + 1}/{repeats}")
                run.time_once(name)
    if run.lost:
        # Cells built in this process cannot be finished in it: only the culprit's error is kept.
        culprit = run.lost[0]
        yield culprit, run.measurements[culprit], run.errors[culprit]
        run.end_if_lost([culprit])
    results = [run.finish(name) for name in names]
    _release(run.op.device)
    yield from results
    run.end_if_lost(names)


def measure_in_process(sweep: Sweep, shape: Shape, names: list[str]) -> Iterator[CellResult]:
    """Measure backends ``names`` on one shape in this process, yielding each finished cell."""
    try:
        given = _shape_inputs(sweep, shape)
    except Exception as exc:  # reported on every cell of the shape
        for name in names:
            yield name, Measurement(), f"inputs or reference failed: {error_text(exc)}"
        return
    run = ShapeRun(sweep, shape, names, given)
    backends = {b.name: b for b in sweep.op.backends()}
    if sweep.settings.repeats == 1 or not sweep.timed:
        yield from _one_backend_at_a_time(run, backends)
    else:
        yield from _interleaved_repeats(run, backends)
