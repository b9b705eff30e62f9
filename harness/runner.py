"""The sweep: shapes x backends -> records.  A failure in one cell never stops the others.

For each shape the runner draws fresh inputs, computes the float64 reference once (the
operator's baseline on upcast inputs), then for each backend builds its cell (set-up, first
call, accuracy check) and times it.  With ``repeats > 1`` every backend is built first and
then timed ``repeats`` times, interleaving the backends within each repeat so that clock and
thermal drift hit all of them alike.  With ``isolate`` each backend of each shape runs in its
own subprocess (``harness.isolate``), so a crash, a poisoned CUDA context or a hang becomes
that cell's error.  Records are emitted as soon as a backend's cell is finished.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from harness.cell import (
    Cell,
    backend_inputs,
    build_cell,
    compute_reference,
    error_text,
    peak_memory,
    time_cell,
)
from harness.cell_records import Baseline, DeviceCeilings, cell_records, skipped_records
from harness.metrics import Measurement
from harness.operator import Backend, BenchmarkOperator, Mode, Shape
from harness.results import Record
from harness.timing import CpuTimer, CudaTimer


@dataclass
class IsolateSettings:
    """How to rebuild a cell in a subprocess: the worker's command-line state."""

    timeout: float | None
    worker_spec: dict[str, Any]


@dataclass
class SweepSettings:
    """What to run: everything the command line decides except the operator and mode."""

    metrics: list[str]
    backends: list[str]
    speedup_baseline: str
    shapes: list[Shape]
    timer: CudaTimer | CpuTimer
    ceilings: DeviceCeilings = field(default_factory=lambda: DeviceCeilings(None, None, None))
    rtol: float | None = None
    atol: float | None = None
    seed: int = 0
    repeats: int = 1
    isolate: IsolateSettings | None = None
    progress: Callable[[str], None] = field(default=lambda _: None)


def _release(device: str) -> None:
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def _tolerance(op: BenchmarkOperator, shape: Shape, settings: SweepSettings) -> tuple[float, float]:
    rtol, atol = op.tolerance(shape)
    return (settings.rtol if settings.rtol is not None else rtol,
            settings.atol if settings.atol is not None else atol)


def measure_in_process(op: BenchmarkOperator, mode: Mode, shape: Shape, names: list[str],
                       settings: SweepSettings) -> Iterator[tuple[str, Measurement, str | None]]:
    """Measure ``names`` on one shape in this process, yielding each finished cell."""
    by_name = {b.name: b for b in op.backends()}
    torch.manual_seed(settings.seed)
    try:
        inputs = op.make_inputs(shape)
    except Exception as exc:  # noqa: BLE001 - reported on every cell of the shape
        for name in names:
            yield name, Measurement(), f"inputs failed: {error_text(exc)}"
        return
    try:
        reference = compute_reference(op, inputs, mode)
    except Exception as exc:  # noqa: BLE001 - reported on every cell of the shape
        for name in names:
            yield name, Measurement(), f"reference failed: {error_text(exc)}"
        return
    diff = op.differentiable(inputs)
    tolerance = _tolerance(op, shape, settings)
    measurements = {name: Measurement() for name in names}
    errors: dict[str, str] = {}
    cells: dict[str, tuple[Cell, list[Any]]] = {}

    def build(name: str, backend: Backend) -> None:
        local = backend_inputs(inputs, diff, mode.needs_grad)
        try:
            cell = build_cell(op, backend, local, diff, mode, reference, tolerance, measurements[name])
            if op.device == "cuda" and "peak_mem" in settings.metrics:
                measurements[name].peak_mem_bytes = peak_memory(cell)
            cells[name] = (cell, local)
        except Exception as exc:  # noqa: BLE001 - any backend failure becomes that cell's error
            errors[name] = error_text(exc)

    def time_once(name: str) -> None:
        try:
            time_cell(cells[name][0], settings.timer, measurements[name])
        except Exception as exc:  # noqa: BLE001
            # A cell whose timing failed in any repeat has no latency: the repeats it finished
            # would pass for a healthy cell with fewer repeats.
            errors[name] = error_text(exc)
            measurements[name].repeats.clear()
            del cells[name]

    if settings.repeats == 1:
        for name in names:
            settings.progress(f"{op.name} {mode.value} {op.x_val(shape)} {name}")
            build(name, by_name[name])
            if name in cells:
                time_once(name)
                cells.pop(name, None)
            _release(op.device)
            yield name, measurements[name], errors.get(name)
        return
    for name in names:
        settings.progress(f"{op.name} {mode.value} {op.x_val(shape)} {name} (build)")
        build(name, by_name[name])
    for repeat in range(settings.repeats):
        order = names[repeat % len(names):] + names[:repeat % len(names)]
        for name in order:
            if name in cells:
                settings.progress(f"{op.name} {mode.value} {op.x_val(shape)} {name} "
                                  f"(repeat {repeat + 1}/{settings.repeats})")
                time_once(name)
    cells.clear()
    _release(op.device)
    for name in names:
        yield name, measurements[name], errors.get(name)


def _skip_reason(op: BenchmarkOperator, backend: Backend, mode: Mode) -> str | None:
    if backend.fwd_only and mode.checks_grads:
        return f"{backend.name} is forward-only"
    return op.skip_reason(backend)


def _measure(op: BenchmarkOperator, mode: Mode, shape: Shape, names: list[str],
             settings: SweepSettings) -> Iterator[tuple[str, Measurement, str | None]]:
    if settings.isolate is None:
        yield from measure_in_process(op, mode, shape, names, settings)
        return
    from harness.isolate import measure_isolated

    for name in names:
        settings.progress(f"{op.name} {mode.value} {op.x_val(shape)} {name} (isolated)")
        yield name, *measure_isolated(op, mode, shape, name, settings)


def run_shape(op: BenchmarkOperator, mode: Mode, shape: Shape, settings: SweepSettings,
              emit: Callable[[list[Record]], None] = lambda _: None) -> list[Record]:
    """Every selected backend on one shape; each backend's records are emitted when done.

    Skipped backends' records come after the measured ones, so tables keep the baseline's
    columns first.
    """
    by_name = {b.name: b for b in op.backends()}
    records: list[Record] = []
    runnable, skipped = [], []
    baseline = Baseline(settings.speedup_baseline, op.baseline().name)
    for name in settings.backends:
        reason = _skip_reason(op, by_name[name], mode)
        if reason is None:
            runnable.append(name)
        else:
            if name == baseline.name:
                baseline.skipped = f"the speedup baseline {name} was skipped"
            skipped += skipped_records(op, mode, shape, name, reason, settings.metrics)
    for name, measurement, error in _measure(op, mode, shape, runnable, settings):
        if name == baseline.name:
            baseline.p50 = measurement.stats.p50 if measurement.stats is not None else None
        done = cell_records(op, mode, shape, name, measurement, error, settings.metrics,
                            settings.ceilings, baseline)
        records += done
        emit(done)
    if skipped:
        records += skipped
        emit(skipped)
    return records


def run_sweep(op: BenchmarkOperator, mode: Mode, settings: SweepSettings,
              emit: Callable[[list[Record]], None] = lambda _: None) -> list[Record]:
    """All shapes of one operator in one mode; ``emit`` gets records as cells finish."""
    records: list[Record] = []
    for shape in settings.shapes:
        records += run_shape(op, mode, shape, settings, emit)
    return records
