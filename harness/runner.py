"""The sweep: shapes x backends -> records.  A failure in one cell never stops the others.

For each shape the runner draws fresh inputs, computes the float64 reference once (the
operator's baseline on upcast inputs), then for each backend builds its callable, checks
accuracy on the first call, and times the steady state.  Records are handed to ``sink``
after every shape, so a caller can write finished cells as they come.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from harness.accuracy import compare_all
from harness.metrics import (
    METRICS,
    Measurement,
    MetricNotApplicable,
    MetricUnavailable,
    Roofline,
    metric_value,
)
from harness.operator import Backend, BenchmarkOperator, Mode, Shape, as_tuple
from harness.results import Record
from harness.timing import CpuTimer, CudaTimer, synchronize


@dataclass
class SweepSettings:
    """What to run: everything the command line decides except the operator and mode."""

    metrics: list[str]
    backends: list[str]
    speedup_baseline: str
    shapes: list[Shape]
    timer: CudaTimer | CpuTimer
    rtol: float | None = None
    atol: float | None = None
    copy_gbps: float | None = None
    peak_tflops: float | None = None
    seed: int = 0
    progress: Callable[[str], None] = field(default=lambda _: None)


@dataclass
class _Cell:
    """A backend's callable and what the timer needs for the chosen mode."""

    timed: Callable[[], object]
    setup: Callable[[], None]


def _error_text(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    first = lines[0] if lines else ""
    return f"{type(exc).__name__}: {first}"[:300]


def _upcast(inputs: Sequence[Any], diff: list[int], needs_grad: bool) -> list[Any]:
    out = list(inputs)
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            out[i] = x.detach().to(torch.float64).requires_grad_(needs_grad and i in diff)
    return out


def _backend_inputs(inputs: Sequence[Any], diff: list[int], needs_grad: bool) -> list[Any]:
    out = list(inputs)
    for i in diff:
        out[i] = inputs[i].detach().clone().requires_grad_(needs_grad)
    return out


def _grads(inputs: Sequence[Any], diff: list[int]) -> list[torch.Tensor | None]:
    return [inputs[i].grad for i in diff]


def _input_names(diff: list[int]) -> list[str]:
    return [f"grad[{i}]" for i in diff]


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


def _build_cell(op: BenchmarkOperator, backend: Backend, inputs: list[Any], diff: list[int],
                mode: Mode, reference: dict[str, Any], rtol: float, atol: float,
                measurement: Measurement) -> _Cell:
    """Build the backend's callable, run it once and check it; fills ``measurement``."""
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
        cell = _Cell(timed, lambda: None)
        outputs = as_tuple(timed())
    elif mode is Mode.FWD:
        cell = _Cell(fn, lambda: None)
        outputs = as_tuple(fn())
    elif mode is Mode.BWD:
        outputs = as_tuple(fn())
        backward = op.get_bwd_fn(outputs)
        backward()
        cell = _Cell(backward, clear_grads)
    else:
        outputs = as_tuple(fn())
        dys = op.grad_outputs(outputs)
        torch.autograd.backward(outputs, dys)

        def forward_backward() -> None:
            torch.autograd.backward(as_tuple(fn()), dys)
        cell = _Cell(forward_backward, clear_grads)
    synchronize(op.device)
    measurement.first_call_ms = (time.perf_counter() - start) * 1e3

    names: list[str] = []
    actual: list[torch.Tensor | None] = []
    expected: list[torch.Tensor] = []
    if mode.checks_outputs:
        names += [f"output[{i}]" for i in range(len(reference["outputs"]))]
        actual += list(outputs)
        expected += reference["outputs"]
    if mode.checks_grads:
        names += _input_names(diff)
        actual += _grads(inputs, diff)
        expected += reference["grads"]
    measurement.accuracy = compare_all(names, actual, expected, op.dtype, rtol, atol)
    return cell


def _peak_memory(cell: _Cell) -> int:
    cell.setup()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    cell.timed()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base


def measure_backend(op: BenchmarkOperator, backend: Backend, inputs: Sequence[Any], mode: Mode,
                    reference: dict[str, Any], settings: SweepSettings,
                    shape: Shape) -> tuple[Measurement, str | None]:
    """Measure one cell; returns what was measured and the error that stopped it, if any."""
    measurement = Measurement()
    diff = op.differentiable(inputs)
    rtol, atol = op.tolerance(shape)
    rtol = settings.rtol if settings.rtol is not None else rtol
    atol = settings.atol if settings.atol is not None else atol
    local = _backend_inputs(inputs, diff, mode.needs_grad)
    try:
        cell = _build_cell(op, backend, local, diff, mode, reference, rtol, atol, measurement)
        if op.device == "cuda" and "peak_mem" in settings.metrics:
            measurement.peak_mem_bytes = _peak_memory(cell)
        measurement.stats = settings.timer.measure(cell.timed, cell.setup)
    except Exception as exc:  # noqa: BLE001 - any backend failure becomes that cell's error
        return measurement, _error_text(exc)
    finally:
        del local
        gc.collect()
        if op.device == "cuda":
            torch.cuda.empty_cache()
    return measurement, None


def _cell_records(op: BenchmarkOperator, mode: Mode, shape: Shape, backend: str,
                  measurement: Measurement, error: str | None, settings: SweepSettings,
                  baseline_p50: float | None) -> list[Record]:
    x_val = op.x_val(shape)
    roof = Roofline(
        bytes_moved=op.bytes_moved(shape, mode),
        flops=op.flops(shape, mode),
        compute_bound=op.compute_bound,
        copy_gbps=settings.copy_gbps,
        peak_tflops=settings.peak_tflops,
    )
    records = []
    for metric in settings.metrics:
        record = Record(
            op=op.name, mode=mode.value, dtype=str(op.dtype).removeprefix("torch."),
            x_val=list(x_val) if isinstance(x_val, tuple) else x_val, backend=backend,
            metric=metric, value=None, unit=METRICS[metric].unit,
        )
        try:
            record.value = metric_value(metric, measurement, roof, baseline_p50)
        except MetricNotApplicable as reason:
            record.status = "skipped"
            record.error = str(reason)
        except MetricUnavailable as reason:
            record.status = "error"
            record.error = error or str(reason)
        if metric == "latency" and measurement.stats is not None:
            stats = measurement.stats
            record.p20, record.p50, record.p80, record.n_samples = (
                stats.p20, stats.p50, stats.p80, stats.n
            )
            record.extra["spread"] = stats.spread
        if metric == "accuracy" and measurement.accuracy is not None:
            record.note = measurement.accuracy.reason
            record.extra["max_abs_err"] = measurement.accuracy.max_abs_err
            record.extra["max_rel_err"] = measurement.accuracy.max_rel_err
        records.append(record)
    return records


def _skipped_records(op: BenchmarkOperator, mode: Mode, shape: Shape, backend: str,
                     reason: str, metrics: list[str]) -> list[Record]:
    x_val = op.x_val(shape)
    return [
        Record(
            op=op.name, mode=mode.value, dtype=str(op.dtype).removeprefix("torch."),
            x_val=list(x_val) if isinstance(x_val, tuple) else x_val, backend=backend,
            metric=metric, value=None, unit=METRICS[metric].unit, status="skipped", error=reason,
        )
        for metric in metrics
    ]


def _skip_reason(op: BenchmarkOperator, backend: Backend, mode: Mode) -> str | None:
    if backend.fwd_only and mode.checks_grads:
        return f"{backend.name} is forward-only"
    return op.skip_reason(backend)


def run_shape(op: BenchmarkOperator, mode: Mode, shape: Shape,
              settings: SweepSettings) -> list[Record]:
    """Every selected backend on one shape; returns their records."""
    by_name = {b.name: b for b in op.backends()}
    torch.manual_seed(settings.seed)
    inputs = op.make_inputs(shape)
    try:
        reference = compute_reference(op, inputs, mode)
        reference_error = None
    except Exception as exc:  # noqa: BLE001 - reported on every cell of the shape
        reference, reference_error = {}, f"reference failed: {_error_text(exc)}"
    results: dict[str, tuple[Measurement, str | None]] = {}
    skipped: dict[str, str] = {}
    for name in settings.backends:
        backend = by_name[name]
        reason = reference_error or _skip_reason(op, backend, mode)
        if reason is not None:
            skipped[name] = reason
            continue
        settings.progress(f"{op.name} {mode.value} {op.x_val(shape)} {name}")
        results[name] = measure_backend(op, backend, inputs, mode, reference, settings, shape)
    base = results.get(settings.speedup_baseline)
    baseline_p50 = base[0].stats.p50 if base and base[0].stats else None
    records: list[Record] = []
    for name in settings.backends:
        if name in skipped:
            records += _skipped_records(op, mode, shape, name, skipped[name], settings.metrics)
        else:
            measurement, error = results[name]
            records += _cell_records(
                op, mode, shape, name, measurement, error, settings, baseline_p50
            )
    return records


def run_sweep(op: BenchmarkOperator, mode: Mode, settings: SweepSettings,
              sink: Callable[[list[Record]], None] = lambda _: None) -> list[Record]:
    """All shapes of one operator in one mode; ``sink`` gets each shape's records."""
    records: list[Record] = []
    for shape in settings.shapes:
        shape_records = run_shape(op, mode, shape, settings)
        records += shape_records
        sink(shape_records)
    return records
