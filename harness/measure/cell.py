"""One benchmark cell: a backend on one shape in one mode.

Building a cell runs the backend's set-up and first call, checks every output and input
gradient against the float64 reference, and returns the callable the timer repeats.  Before
that first call the harness poisons the allocator's free blocks of the output sizes with NaN
(so an output a kernel never writes is caught), and after it checks that the inputs are
unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from harness.measure.accuracy import AccuracyResult, compare_all
from harness.measure.measurement import Measurement
from harness.measure.timing import Timer, synchronize
from harness.operator import Backend, BenchmarkOperator, Mode, as_tuple


@dataclass
class Cell:
    """A backend's callable for the chosen mode and what the timer runs before each call."""

    timed: Callable[[], object]
    setup: Callable[[], None]


def error_text(exc: BaseException) -> str:
    """A one-line description of an exception for a result record."""
    lines = str(exc).strip().splitlines()
    first = lines[0] if lines else ""
    return f"{type(exc).__name__}: {first}"[:300]


def _upcast(inputs: Sequence[Any], diff: list[int], needs_grad: bool) -> list[Any]:
    out = list(inputs)
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            out[i] = x.detach().to(torch.float64).requires_grad_(needs_grad and i in diff)
    return out


def backend_inputs(inputs: Sequence[Any], diff: list[int], needs_grad: bool) -> list[Any]:
    """The backend's own copies of the differentiable inputs, requiring grad per mode."""
    out = list(inputs)
    for i in diff:
        out[i] = inputs[i].detach().clone().requires_grad_(needs_grad)
    return out


def _grads(inputs: Sequence[Any], diff: list[int]) -> list[torch.Tensor | None]:
    return [inputs[i].grad for i in diff]


def compute_reference(op: BenchmarkOperator, inputs: Sequence[Any], mode: Mode) -> dict[str, Any]:
    """Float64 outputs and input gradients of the operator's baseline on upcast inputs."""
    diff = op.differentiable(inputs)
    upcast = _upcast(inputs, diff, mode.checks_grads)
    fn = getattr(op, op.baseline().method)(*upcast)
    outputs = as_tuple(fn())
    reference: dict[str, Any] = {"outputs": [o.detach() for o in outputs]}
    if mode.checks_grads:
        dys = [d.to(torch.float64) for d in op.grad_outputs(outputs)]
        torch.autograd.backward(outputs, dys)
        reference["grads"] = [g.detach() for g in _grads(upcast, diff)]
    return reference


def _poison_free_blocks(reference: dict[str, Any], dtype: torch.dtype) -> None:
    """Leave NaN-filled blocks of every output's size in the allocator's free pool."""
    poison = [
        torch.full(ref.shape, float("nan"), dtype=dtype, device=ref.device)
        for ref in reference["outputs"] + reference.get("grads", [])
    ]
    del poison


def _inputs_unchanged(before: list[tuple[int, torch.Tensor]], inputs: Sequence[Any]) -> str | None:
    for i, saved in before:
        if not torch.equal(saved, inputs[i].detach()):
            return f"input[{i}] was modified by the call"
    return None


def build_cell(op: BenchmarkOperator, backend: Backend, inputs: list[Any], diff: list[int],
               mode: Mode, reference: dict[str, Any], tolerance: tuple[float, float],
               measurement: Measurement) -> Cell:
    """Build the backend's callable, run it once and check it; fills ``measurement``."""
    snapshot = [(i, x.detach().clone()) for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)]
    _poison_free_blocks(reference, op.dtype)
    start = time.perf_counter()
    fn = getattr(op, backend.method)(*inputs)
    leaves = [inputs[i] for i in diff]

    def clear_grads() -> None:
        for leaf in leaves:
            leaf.grad = None

    if mode is Mode.FWD_NO_GRAD:
        def timed() -> object:
            with torch.no_grad():
                return fn()
        cell = Cell(timed, lambda: None)
        outputs = as_tuple(timed())
    elif mode is Mode.FWD:
        cell = Cell(fn, lambda: None)
        outputs = as_tuple(fn())
    elif mode is Mode.BWD:
        outputs = as_tuple(fn())
        backward = op.get_bwd_fn(outputs)
        backward()
        cell = Cell(backward, clear_grads)
        # compile_time compares first and steady backward calls: one warm forward, timed now,
        # comes off the first call (and this extra call itself is left out).
        synchronize(op.device)
        forward_start = time.perf_counter()
        fn()
        synchronize(op.device)
        start += 2 * (time.perf_counter() - forward_start)
    else:
        outputs = as_tuple(fn())
        dys = op.grad_outputs(outputs)
        torch.autograd.backward(outputs, dys)

        def forward_backward() -> None:
            torch.autograd.backward(as_tuple(fn()), dys)
        cell = Cell(forward_backward, clear_grads)
    synchronize(op.device)
    measurement.first_call_ms = (time.perf_counter() - start) * 1e3
    measurement.accuracy = _check(op, mode, outputs, inputs, diff, reference, tolerance)
    modified = _inputs_unchanged(snapshot, inputs)
    if modified is not None:
        result = measurement.accuracy
        measurement.accuracy = AccuracyResult(False, result.max_abs_err, result.max_rel_err, modified)
    return cell


def _check(op: BenchmarkOperator, mode: Mode, outputs: tuple[torch.Tensor, ...], inputs: list[Any],
           diff: list[int], reference: dict[str, Any], tolerance: tuple[float, float]) -> AccuracyResult:
    names: list[str] = []
    actual: list[torch.Tensor | None] = []
    expected: list[torch.Tensor] = []
    if mode.checks_outputs:
        names += [f"output[{i}]" for i in range(len(reference["outputs"]))]
        actual += list(outputs)
        expected += reference["outputs"]
    if mode.checks_grads:
        names += [f"grad[{i}]" for i in diff]
        actual += _grads(inputs, diff)
        expected += reference["grads"]
    rtol, atol = tolerance
    return compare_all(names, actual, expected, op.dtype, rtol, atol)


def peak_memory(cell: Cell) -> int:
    """Bytes the call allocates at its peak, above what was allocated before it."""
    cell.setup()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    cell.timed()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base


def time_cell(cell: Cell, timer: Timer, measurement: Measurement) -> None:
    """One independent timing of the cell (one repeat), appended to ``measurement``."""
    measurement.repeats.append(timer.measure(cell.timed, cell.setup))
