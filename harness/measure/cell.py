"""One benchmark cell: a backend on one shape in one mode, and the checks that keep it honest.

Building a cell runs the backend's set-up and first call and returns the callable the timer
repeats.  The first call's outputs and input gradients are checked against the float64
reference; every timing checks one of its own samples, chosen at random, against the
reference of what that call read, which changed before every sample (:mod:`harness.audit`:
a backend cannot tell that call from the others, nor keep a result its inputs no longer give);
after timing the inputs are refilled with fresh values and one more call is checked against
their own reference, so a backend that caches its first result, or is right once and then
returns garbage, fails.  In ``fwd`` every floating-point output must come with an autograd
graph (a training forward), unless the backend is ``fwd_only``, and every result must be a plain
tensor on the device.  Before each checked call the allocator's free blocks of the output sizes
are filled with NaN (an output a kernel never writes is caught); after the cell, its inputs and
the ``dy`` it was handed must be unchanged.  What the kernels note about how they ran (e.g. on a
stored config of another shape bucket) during the set-up and first call is kept with the cell's
measurement.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from harness.audit import AuditedSample, Results, SampleAudit, silent_alias
from harness.measure.accuracy import compare_all
from harness.metrics.cell_data import AccuracyResult, Measurement
from harness.notes import collecting
from harness.operator import Backend, BenchmarkOperator, Mode, as_tuple
from harness.timing import Timer, synchronize

Tolerance = Callable[[str], tuple[float, float]]
"""(rtol, atol) of a compared tensor, by its name (``output[0]``, ``grad[1]``)."""


@dataclass
class Reference:
    """Float64 outputs (forward modes) and input gradients (backward modes) of one set of inputs."""

    outputs: list[torch.Tensor]
    grads: list[torch.Tensor] = field(default_factory=list)

    def tensors(self) -> list[torch.Tensor]:
        return self.outputs + self.grads


@dataclass
class Cell:
    """A backend's callables for the chosen mode, with what it was given and must leave unchanged.

    ``timed`` is what the timer repeats and ``setup`` runs before each timed call; ``check``
    runs the mode's call afresh on the cell's inputs (forward, and backward with ``dy``) and
    returns the outputs, leaving the input gradients on the inputs.  ``timed`` reads
    ``read_inputs`` (indices of its floating-point inputs) and ``timed_dys``.
    """

    timed: Callable[[], object]
    setup: Callable[[], None]
    check: Callable[[tuple[torch.Tensor, ...] | None], tuple[torch.Tensor, ...]]
    inputs: list[Any]
    first_outputs: tuple[torch.Tensor, ...]
    """The first call's outputs; detached once the first call is checked (:meth:`drop_first_graph`)."""
    dys: list[tuple[Any, tuple[torch.Tensor, ...]]]
    """Every ``dy`` handed out to it, with its key (:meth:`BenchmarkOperator.track_grad_outputs`)."""
    read_inputs: list[int] = field(default_factory=list)
    timed_dys: tuple[torch.Tensor, ...] = ()
    trains: bool = False
    """Whether its forward outputs must be differentiable: ``fwd`` (a training forward) for a
    backend not declared ``fwd_only``."""

    def read(self) -> list[torch.Tensor]:
        """The tensors a timed call reads that the audit varies: inputs, then ``dy``."""
        return [*(self.inputs[i] for i in self.read_inputs), *self.timed_dys]

    def drop_first_graph(self) -> None:
        """Keep the first call's outputs detached, letting go of their autograd graph: kept alive,
        its AccumulateGrad nodes stay on the first call's stream, and a backward captured on
        another stream (``--cudagraph --mode fwd_bwd``) fails its capture."""
        self.first_outputs = tuple(output.detach() for output in self.first_outputs)


def _upcast(inputs: Sequence[Any], diff: list[int], needs_grad: bool) -> list[Any]:
    out = list(inputs)
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            out[i] = x.detach().to(torch.float64).requires_grad_(needs_grad and i in diff)
    return out


def backend_inputs(inputs: Sequence[Any], diff: list[int], needs_grad: bool) -> list[Any]:
    """The backend's own copies of every tensor input; the differentiable ones require grad per mode."""
    out = list(inputs)
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor):
            out[i] = x.detach().clone().requires_grad_(needs_grad and i in diff)
    return out


def _grads(inputs: Sequence[Any], diff: list[int]) -> list[torch.Tensor | None]:
    return [inputs[i].grad for i in diff]


def compute_reference(op: BenchmarkOperator, inputs: Sequence[Any], mode: Mode,
                      fresh: bool = False, dys: Sequence[torch.Tensor] | None = None) -> Reference:
    """Float64 outputs and input gradients of the operator's baseline on upcast inputs.

    ``fresh`` uses the second set of ``dy`` (:meth:`BenchmarkOperator.grad_outputs`), the one
    the check after timing runs with; ``dys`` gives the ``dy`` instead.
    """
    diff = op.differentiable(inputs)
    upcast = _upcast(inputs, diff, mode.checks_grads)
    fn = getattr(op, op.baseline().method)(*upcast)
    outputs = as_tuple(fn())
    reference = Reference([o.detach() for o in outputs])
    if mode.checks_grads:
        given = op.grad_outputs(outputs, fresh=fresh) if dys is None else dys
        torch.autograd.backward(outputs, [d.to(torch.float64) for d in given])
        reference.grads = [g.detach() for g in _grads(upcast, diff)]
    return reference


def poison_free_blocks(reference: Reference, dtype: torch.dtype) -> None:
    """Leave NaN-filled blocks of every output's size in the allocator's free pool (allocated anew each
    time: a block held between calls is not one the call's own allocations can land on)."""
    poison = [torch.full(ref.shape, float("nan"), dtype=dtype, device=ref.device)
              for ref in reference.tensors()]
    del poison


def build_cell(op: BenchmarkOperator, backend: Backend, inputs: list[Any], diff: list[int],
               mode: Mode, reference: Reference, measurement: Measurement,
               first_call_time: bool = True) -> Cell:
    """Build the backend's callable and make its first call; records the first call's time
    (``first_call_time``: for a metric that needs ``first_call``, which in ``bwd`` takes one more forward)
    and the notes its kernels leave (:mod:`harness.notes`)."""
    poison_free_blocks(reference, op.dtype)
    start = time.perf_counter()
    with op.track_grad_outputs() as dys, collecting(measurement.notes):
        fn = getattr(op, backend.method)(*inputs)
        leaves = [inputs[i] for i in diff]

        def clear_grads() -> None:
            for leaf in leaves:
                leaf.grad = None

        def check(fresh_dys: tuple[torch.Tensor, ...] | None) -> tuple[torch.Tensor, ...]:
            clear_grads()
            if mode is Mode.FWD_NO_GRAD:
                with torch.no_grad():
                    return as_tuple(fn())
            outputs = as_tuple(fn())
            if mode.checks_grads:
                torch.autograd.backward(outputs, fresh_dys)
            return outputs

        if mode is Mode.FWD_NO_GRAD:
            def timed() -> object:
                with torch.no_grad():
                    return fn()
            cell = Cell(timed, lambda: None, check, inputs, as_tuple(timed()), dys)
        elif mode is Mode.FWD:
            cell = Cell(fn, lambda: None, check, inputs, as_tuple(fn()), dys)
        elif mode is Mode.BWD:
            outputs = as_tuple(fn())
            with op.track_grad_outputs() as timed_dys:
                backward = op.get_bwd_fn(outputs)
            dys.extend(timed_dys)
            backward()
            cell = Cell(backward, clear_grads, check, inputs, outputs, dys,
                        timed_dys=tuple(dy for _, handed in timed_dys for dy in handed))
            if first_call_time:
                # compile_time compares first and steady backward calls: one warm forward, timed
                # now, comes off the first call (and this extra call itself is left out).
                synchronize(op.device)
                forward_start = time.perf_counter()
                fn()
                synchronize(op.device)
                start += 2 * (time.perf_counter() - forward_start)
        else:
            outputs = as_tuple(fn())
            first_dys = op.grad_outputs(outputs)
            torch.autograd.backward(outputs, first_dys)

            def forward_backward() -> tuple[torch.Tensor, ...]:
                outputs = as_tuple(fn())
                torch.autograd.backward(outputs, first_dys)
                return outputs
            cell = Cell(forward_backward, clear_grads, check, inputs, outputs, dys, timed_dys=first_dys)
    if mode is not Mode.BWD:
        cell.read_inputs = [i for i, x in enumerate(inputs)
                            if isinstance(x, torch.Tensor) and x.is_floating_point()]
    cell.trains = mode is Mode.FWD and not backend.fwd_only and any(inputs[i].requires_grad for i in diff)
    synchronize(op.device)
    measurement.first_call_ms = (time.perf_counter() - start) * 1e3
    return cell


def _names(mode: Mode, reference: Reference, diff: list[int]) -> list[str]:
    outputs = [f"output[{i}]" for i in range(len(reference.outputs))] if mode.checks_outputs else []
    return outputs + ([f"grad[{i}]" for i in diff] if mode.checks_grads else [])


def compare_results(op: BenchmarkOperator, mode: Mode, results: Results, diff: list[int],
                    reference: Reference, tolerance: Tolerance) -> AccuracyResult:
    """Compare a call's results (:func:`call_results`) with ``reference``."""
    names = _names(mode, reference, diff)
    expected = ((reference.outputs if mode.checks_outputs else [])
                + (reference.grads if mode.checks_grads else []))
    return compare_all(names, list(results), expected, op.dtype, [tolerance(name) for name in names])


def call_results(mode: Mode, outputs: tuple[torch.Tensor, ...], inputs: Sequence[Any],
                 diff: list[int]) -> Results:
    """What a call's check compares: its outputs (forward modes), then its inputs' gradients
    (backward modes)."""
    return (*(outputs if mode.checks_outputs else ()), *(_grads(inputs, diff) if mode.checks_grads else ()))


def undifferentiable_output(cell: Cell, outputs: tuple[torch.Tensor, ...]) -> str | None:
    """Why a training forward's outputs cannot be differentiated (a floating-point output with no
    autograd graph that is not an input itself), or None; only for a cell that :attr:`~Cell.trains`."""
    if not cell.trains:
        return None
    for i, output in enumerate(outputs):
        if (output.is_floating_point() and output.grad_fn is None
                and not any(output is given for given in cell.inputs)):
            return (f"output[{i}] has no autograd graph: fwd times a training forward (a backend "
                    "without a backward is registered fwd_only)")
    return None


def foreign_result(results: Results, device: str) -> str | None:
    """Why a result is not a plain tensor on the operator's device, the current GPU on CUDA (a
    subclass could compute when read; a host tensor or another GPU's hides its work from the
    timer), or None."""
    expected = torch.device(device)
    if expected.type == "cuda" and expected.index is None:
        expected = torch.device("cuda", torch.cuda.current_device())
    for i, result in enumerate(results):
        if result is not None and type(result) is not torch.Tensor:
            return f"result {i} is a {type(result).__name__}, not a torch.Tensor"
        if result is not None and result.device != expected:
            return f"result {i} is on {result.device}, not {expected}"
    return None


def check_call(op: BenchmarkOperator, mode: Mode, cell: Cell, outputs: tuple[torch.Tensor, ...],
               diff: list[int], reference: Reference, tolerance: Tolerance) -> AccuracyResult:
    """A call of ``cell`` against ``reference``: plain tensors on the device
    (:func:`foreign_result`), then :func:`compare_results`, then, in a training forward, outputs
    autograd can differentiate (:func:`undifferentiable_output`)."""
    results = call_results(mode, outputs, cell.inputs, diff)
    foreign = foreign_result(results, op.device)
    if foreign is not None:
        return AccuracyResult(False, float("nan"), float("nan"), foreign)
    checked = compare_results(op, mode, results, diff, reference, tolerance)
    reason = undifferentiable_output(cell, outputs) if checked.passed else None
    return checked if reason is None else dataclasses.replace(checked, passed=False, reason=reason)


def poison_unread(tensors: Sequence[torch.Tensor | None], read: Sequence[Any]) -> None:
    """NaN-fill each floating-point tensor of ``tensors`` that shares no storage with a tensor of
    ``read`` (a gradient may be its ``dy`` itself, an output a view of an input)."""
    shared = {x.untyped_storage().data_ptr() for x in read if isinstance(x, torch.Tensor)}
    with torch.no_grad():
        for tensor in tensors:
            if (tensor is not None and tensor.is_floating_point()
                    and tensor.untyped_storage().data_ptr() not in shared):
                silent_alias(tensor).fill_(float("nan"))


def sample_audit(op: BenchmarkOperator, mode: Mode, cell: Cell, diff: list[int],
                 reference: Reference) -> SampleAudit:
    """The audit of a timing of ``cell`` (:class:`~harness.audit.SampleAudit`)."""

    def collect(result: object) -> tuple[Results, str | None]:
        outputs = as_tuple(result) if mode.checks_outputs else ()
        results = call_results(mode, outputs, cell.inputs, diff)
        return results, foreign_result(results, op.device) or undifferentiable_output(cell, outputs)

    return SampleAudit(cell.read(), collect, lambda: poison_free_blocks(reference, op.dtype), poison_unread,
                       lambda: synchronize(op.device))


def check_audited(op: BenchmarkOperator, mode: Mode, cell: Cell, sample: AuditedSample, diff: list[int],
                  tolerance: Tolerance) -> AccuracyResult:
    """The audited sample's results against the float64 reference of the inputs and ``dy`` it read."""
    if sample.problem is not None:
        checked = AccuracyResult(False, float("nan"), float("nan"), sample.problem)
    else:
        inputs = list(cell.inputs)
        for i, seen in zip(cell.read_inputs, sample.read, strict=False):
            inputs[i] = seen
        reference = compute_reference(op, inputs, mode, dys=sample.read[len(cell.read_inputs):] or None)
        checked = compare_results(op, mode, sample.results, diff, reference, tolerance)
    if checked.passed:
        return checked
    return dataclasses.replace(checked, reason=f"in a timed call: {checked.reason}")


def changed_inputs(before: list[tuple[int, torch.Tensor]], inputs: Sequence[Any]) -> str | None:
    """Why the inputs differ from their snapshot ``before``, or None when they are unchanged."""
    for i, saved in before:
        if not torch.equal(saved, inputs[i].detach()):
            return f"input[{i}] was modified by the backend"
    return None


def snapshot(inputs: Sequence[Any]) -> list[tuple[int, torch.Tensor]]:
    """Copies of the tensor inputs, to check later that the backend left them unchanged."""
    return [(i, x.detach().clone()) for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)]


def refill(inputs: Sequence[Any], fresh: Sequence[Any]) -> None:
    """Copy the fresh inputs' values into the cell's own input tensors, in place, leaving their
    version counters as they were (as the audit's moves do)."""
    with torch.no_grad():
        for x, new in zip(inputs, fresh, strict=True):
            if isinstance(x, torch.Tensor):
                silent_alias(x).copy_(new)


def check_again(op: BenchmarkOperator, mode: Mode, cell: Cell, fresh: Sequence[Any], diff: list[int],
                reference: Reference, tolerance: Tolerance) -> AccuracyResult:
    """Refill the cell's inputs with ``fresh`` values and check one more call against their reference."""
    refill(cell.inputs, fresh)
    cell.setup()  # frees the last call's gradients before the free blocks are poisoned
    poison_free_blocks(reference, op.dtype)
    with op.track_grad_outputs() as dys:
        fresh_dys = op.grad_outputs(cell.first_outputs, fresh=True) if mode.checks_grads else None
    outputs = cell.check(fresh_dys)
    synchronize(op.device)
    cell.dys.extend(dys)
    return check_call(op, mode, cell, outputs, diff, reference, tolerance)


def peak_memory(cell: Cell) -> int:
    """Bytes the call allocates at its peak, above what was allocated before it."""
    cell.setup()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    cell.timed()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base


def time_cell(op: BenchmarkOperator, mode: Mode, cell: Cell, diff: list[int], reference: Reference,
              measurement: Measurement, timers: dict[str, Timer]) -> list[AuditedSample]:
    """One independent timing of the cell (one repeat) by each timer (kind -> timer), appended to
    ``measurement.timings`` in the order given (the device timer's first, so the wall timer never
    runs between its flushes); returns each timing's audited sample (:func:`check_audited`)."""
    samples = []
    for kind, timer in timers.items():
        audit = sample_audit(op, mode, cell, diff, reference)
        try:
            stats = timer.measure(cell.timed, cell.setup, audit)
        except BaseException:
            with contextlib.suppress(Exception):  # the timing's own error is the one to report
                audit.end()
            raise
        sample = audit.end()
        measurement.timings.setdefault(kind, []).append(stats)
        if sample is None:
            raise RuntimeError(f"the {kind} timer kept no audited sample")
        samples.append(sample)
    return samples

