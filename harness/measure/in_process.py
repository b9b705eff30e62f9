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

from harness.measure.accuracy import AccuracyResult
from harness.measure.cell import (
    Cell,
    Reference,
    backend_inputs,
    build_cell,
    changed_inputs,
    check_again,
    compare_cell,
    compute_reference,
    peak_memory,
    snapshot,
    time_cell,
)
from harness.measure.errors import ContextLost, context_lost, error_text
from harness.measure.measurement import Measurement
from harness.measure.profile import profile_cell
from harness.measure.sweep import Sweep
from harness.operator import Backend, Shape
from harness.report.error_line import CONTEXT_LOST_NOTE

CellResult = tuple[str, Measurement, str | None]
"""A finished cell: backend name, its measurement, its error text (None when it ran)."""

FRESH_SEED_OFFSET = 1_000_003
"""The check after timing draws its inputs with the run's seed plus this."""


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


def measure_in_process(sweep: Sweep, shape: Shape, names: list[str]) -> Iterator[CellResult]:
    """Measure backends ``names`` on one shape in this process, yielding each finished cell."""
    op, mode, settings = sweep.op, sweep.mode, sweep.settings
    by_name = {b.name: b for b in op.backends()}
    try:
        given = _shape_inputs(sweep, shape)
    except Exception as exc:  # noqa: BLE001 - reported on every cell of the shape
        for name in names:
            yield name, Measurement(), f"inputs or reference failed: {error_text(exc)}"
        return
    tolerance = sweep.tolerance(shape)
    timer, wall_timer = sweep.timer("device"), sweep.timer("wall")
    measurements = {name: Measurement() for name in names}
    errors: dict[str, str] = {}
    cells: dict[str, BuiltCell] = {}
    lost: list[str] = []

    def failed(name: str, text: str) -> None:
        """Record ``name``'s error; a failure that poisoned the CUDA context ends the shape here."""
        errors[name] = text
        if context_lost(op.device, text):
            errors[name] += f" {CONTEXT_LOST_NOTE}"
            lost.append(name)

    def build(name: str, backend: Backend) -> None:
        local = backend_inputs(given.inputs, given.diff, mode.needs_grad)
        before = snapshot(local)
        try:
            cell = build_cell(op, backend, local, given.diff, mode, given.reference, measurements[name],
                              first_call_time="compile_time" in settings.metrics)
            first = compare_cell(op, mode, cell.first_outputs, local, given.diff, given.reference, tolerance)
            cells[name] = BuiltCell(cell, before, [first])
            check_unchanged(cells[name])
            if op.device == "cuda" and "peak_mem" in settings.metrics:
                measurements[name].peak_mem_bytes = peak_memory(cell)
        except Exception as exc:  # noqa: BLE001 - any backend failure becomes that cell's error
            cells.pop(name, None)
            failed(name, error_text(exc))

    def check_unchanged(built: BuiltCell) -> None:
        for reason in (changed_inputs(built.before, built.cell.inputs),
                       op.changed_grad_outputs(built.cell.dys)):
            if reason is not None:
                built.tampering.append(_failure(reason))

    def time_once(name: str) -> None:
        try:
            time_cell(cells[name].cell, measurements[name], timer, wall_timer)
        except Exception as exc:  # noqa: BLE001
            # A cell whose timing failed in any repeat has no latency: the repeats it finished
            # would pass for a healthy cell with fewer repeats.
            measurements[name].repeats.clear()
            measurements[name].wall_repeats.clear()
            measurements[name].accuracy = _verdict(cells.pop(name))
            failed(name, error_text(exc))

    def finish(name: str) -> CellResult:
        """The checks after timing: inputs and ``dy`` unchanged, and a call on fresh inputs."""
        built = cells.pop(name, None)
        if built is not None and settings.profiled:
            trace = None
            if settings.profile_dir is not None:
                trace = Path(settings.profile_dir) / f"{sweep.cell_name(shape, name)}.json"
            try:
                measurements[name].kernels = profile_cell(built.cell, op.device, trace)
            except Exception as exc:  # noqa: BLE001
                failed(name, f"profiling failed: {error_text(exc)}")
        if built is not None:
            check_unchanged(built)
            try:
                again = check_again(op, mode, built.cell, given.fresh, given.diff, given.fresh_reference,
                                    tolerance)
            except Exception as exc:  # noqa: BLE001
                failed(name, f"check after timing failed: {error_text(exc)}")
            else:
                reason = None if again.passed else f"on fresh inputs after timing: {again.reason}"
                built.checks.append(AccuracyResult(again.passed, again.max_abs_err, again.max_rel_err,
                                                   reason))
                built.before = [(i, x) for i, x in enumerate(given.fresh) if isinstance(x, torch.Tensor)]
                check_unchanged(built)
            measurements[name].accuracy = _verdict(built)
        return name, measurements[name], errors.get(name)

    def end_if_lost(done: list[str]) -> None:
        if lost:
            raise ContextLost(lost[0], done, None)

    if settings.repeats == 1 or not sweep.timed:
        done: list[str] = []
        for name in names:
            sweep.report(shape, name, "build")
            build(name, by_name[name])
            if name in cells:
                # After the first call: the timing or, untimed, the check on fresh inputs.
                sweep.report(shape, name, "timing" if sweep.timed else "checking")
                if sweep.timed:
                    time_once(name)
            done.append(name)
            yield finish(name)
            end_if_lost(done)
            _release(op.device)
        return
    for name in names:
        sweep.report(shape, name, "build")
        build(name, by_name[name])
        if lost:
            break
    for repeat in range(settings.repeats if not lost else 0):
        order = names[repeat % len(names):] + names[:repeat % len(names)]
        for name in order:
            if name in cells and not lost:
                sweep.report(shape, name, f"repeat {repeat + 1}/{settings.repeats}")
                time_once(name)
    if lost:
        # Cells built in this process cannot be finished in it: only the culprit's error is kept.
        yield lost[0], measurements[lost[0]], errors[lost[0]]
        end_if_lost([lost[0]])
    results = [finish(name) for name in names]
    _release(op.device)
    yield from results
    end_if_lost(names)
