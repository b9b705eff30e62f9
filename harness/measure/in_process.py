"""Measure the backends of one shape in this process: inputs, float64 reference, cells, timings.

For each shape the runner draws fresh inputs, computes the float64 reference once (the
operator's baseline on upcast inputs), then for each backend builds its cell (set-up, first
call, accuracy check) and times it.  With ``repeats > 1`` every backend is built first and
then timed ``repeats`` times, interleaving the backends within each repeat (rotating which
goes first) so that clock and thermal drift hit all of them alike.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import torch

from harness.measure.cell import (
    Cell,
    backend_inputs,
    build_cell,
    compute_reference,
    error_text,
    peak_memory,
    time_cell,
)
from harness.measure.measurement import Measurement
from harness.measure.sweep import Sweep
from harness.operator import Backend, Shape

CellResult = tuple[str, Measurement, str | None]
"""A finished cell: backend name, its measurement, its error text (None when it ran)."""


def _release(device: str) -> None:
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def measure_in_process(sweep: Sweep, shape: Shape, names: list[str]) -> Iterator[CellResult]:
    """Measure backends ``names`` on one shape in this process, yielding each finished cell."""
    op, mode, settings = sweep.op, sweep.mode, sweep.settings
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
    tolerance = sweep.tolerance(shape)
    timer = sweep.timer()
    measurements = {name: Measurement() for name in names}
    errors: dict[str, str] = {}
    cells: dict[str, tuple[Cell, list[Any]]] = {}
    label = f"{op.name} {mode.value} {op.x_val(shape)}"

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
            time_cell(cells[name][0], timer, measurements[name])
        except Exception as exc:  # noqa: BLE001
            # A cell whose timing failed in any repeat has no latency: the repeats it finished
            # would pass for a healthy cell with fewer repeats.
            errors[name] = error_text(exc)
            measurements[name].repeats.clear()
            del cells[name]

    if settings.repeats == 1:
        for name in names:
            sweep.progress(f"{label} {name}")
            build(name, by_name[name])
            if name in cells:
                time_once(name)
                cells.pop(name, None)
            _release(op.device)
            yield name, measurements[name], errors.get(name)
        return
    for name in names:
        sweep.progress(f"{label} {name} (build)")
        build(name, by_name[name])
    for repeat in range(settings.repeats):
        order = names[repeat % len(names):] + names[:repeat % len(names)]
        for name in order:
            if name in cells:
                sweep.progress(f"{label} {name} (repeat {repeat + 1}/{settings.repeats})")
                time_once(name)
    cells.clear()
    _release(op.device)
    for name in names:
        yield name, measurements[name], errors.get(name)
