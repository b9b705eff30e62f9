"""Accuracy is never silently true: wrong, NaN, mistyped or missing results fail, every gradient
is checked against a float64 reference, and outputs a kernel never writes are caught.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import torch

import harness.measure.cell
from harness.measure.accuracy import compare_all
from harness.measure.cell import compute_reference
from harness.operator import Mode, register_benchmark
from operators.exp.operator import ExpOperator
from operators.rms_norm.operator import RMSNormOperator, llama_rms_norm
from tests.helpers import run_cells


class FaultyExp(ExpOperator):
    """exp with deliberately broken backends next to the real baseline."""

    @register_benchmark()
    def off_by_one_percent(self, x: torch.Tensor) -> Callable[[], torch.Tensor]:
        return lambda: torch.exp(x) * 1.01

    @register_benchmark()
    def raises(self, x: torch.Tensor) -> Callable[[], torch.Tensor]:
        def fail() -> torch.Tensor:
            raise RuntimeError("kernel exploded")
        return fail

    @register_benchmark()
    def returns_nan(self, x: torch.Tensor) -> Callable[[], torch.Tensor]:
        return lambda: torch.exp(x) * float("nan")

    @register_benchmark()
    def wrong_dtype(self, x: torch.Tensor) -> Callable[[], torch.Tensor]:
        return lambda: torch.exp(x).double()

    @register_benchmark()
    def no_grad_path(self, x: torch.Tensor) -> Callable[[], torch.Tensor]:
        return lambda: torch.exp(x.detach()) + 0 * x.sum().detach()

    @register_benchmark()
    def gradient_one_percent_off(self, x: torch.Tensor) -> Callable[[], torch.Tensor]:
        """The right forward value with a gradient 1% too large."""
        return lambda: torch.exp(x + 0.01 * (x - x.detach()))

    @register_benchmark()
    def slow_backward(self, x: torch.Tensor) -> Callable[[], torch.Tensor]:
        return lambda: _SleepInBackward.apply(torch.exp(x))

    @register_benchmark()
    def caches_first_result(self, x: torch.Tensor) -> Callable[[], torch.Tensor]:
        cache: list[torch.Tensor] = []

        def cached() -> torch.Tensor:
            if not cache:
                cache.append(torch.exp(x))
            return cache[0]
        return cached

    @register_benchmark()
    def right_once(self, x: torch.Tensor) -> Callable[[], torch.Tensor]:
        calls = []

        def once() -> torch.Tensor:
            calls.append(1)
            return torch.exp(x) if len(calls) == 1 else torch.empty_like(x)
        return once

    @register_benchmark()
    def right_when_checked(self, x: torch.Tensor) -> Callable[[], torch.Tensor]:
        """Right on its first call and whenever its input was written since its last call (as a
        check's refill does); no work, garbage, on the repeated calls of the timing."""
        seen: list[int] = []

        def guarded() -> torch.Tensor:
            fresh = not seen or seen[-1] != x._version
            seen.append(x._version)
            return torch.exp(x) if fresh else torch.empty_like(x)
        return guarded

    @register_benchmark()
    def backward_once_per_graph(self, x: torch.Tensor) -> Callable[[], torch.Tensor]:
        return lambda: _BackwardOncePerGraph.apply(x)

    @register_benchmark()
    def detached_forward(self, x: torch.Tensor) -> Callable[[], torch.Tensor]:
        return lambda: torch.exp(x.detach())

    @register_benchmark(fwd_only=True)
    def inference_only(self, x: torch.Tensor) -> Callable[[], torch.Tensor]:
        return lambda: torch.exp(x.detach())

    @register_benchmark()
    def raises_after_first(self, x: torch.Tensor) -> Callable[[], torch.Tensor]:
        calls = []

        def broken_later() -> torch.Tensor:
            calls.append(1)
            if len(calls) > 1:
                raise RuntimeError("second call broke")
            return torch.exp(x)
        return broken_later

    @register_benchmark()
    def detached_after_first(self, x: torch.Tensor) -> Callable[[], torch.Tensor]:
        calls = []

        def detached_later() -> torch.Tensor:
            calls.append(1)
            return torch.exp(x) if len(calls) == 1 else torch.exp(x.detach())
        return detached_later

    @register_benchmark()
    def scales_dy_in_place(self, x: torch.Tensor) -> Callable[[], torch.Tensor]:
        return lambda: _ScaleGradInPlace.apply(torch.exp(x))


class _SleepInBackward(torch.autograd.Function):
    """Identity whose backward sleeps 20 ms: a bwd timing that missed it would read far less."""

    @staticmethod
    def forward(ctx, y: torch.Tensor) -> torch.Tensor:
        return y.view_as(y)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        time.sleep(0.02)
        return grad


class _BackwardOncePerGraph(torch.autograd.Function):
    """exp whose backward is right the first time its graph runs it, and garbage (no work) after:
    a check that always builds a new graph never sees the repeated backward the timer runs."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        y = torch.exp(x)
        ctx.save_for_backward(y)
        ctx.runs = 0
        return y

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        ctx.runs += 1
        (y,) = ctx.saved_tensors
        return grad * y if ctx.runs == 1 else torch.empty_like(grad)


class _ScaleGradInPlace(torch.autograd.Function):
    """Identity whose backward doubles the incoming gradient in place, then returns half of it."""

    @staticmethod
    def forward(ctx, y: torch.Tensor) -> torch.Tensor:
        return y.view_as(y)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        grad.mul_(2.0)
        return grad / 2.0


class WrongWeightGradient(RMSNormOperator):
    """rms_norm whose extra backend is right except for a weight gradient 1% too large."""

    @register_benchmark()
    def dw_one_percent_off(self, x: torch.Tensor, weight: torch.Tensor,
                           eps: float) -> Callable[[], torch.Tensor]:
        return lambda: llama_rms_norm(x, weight + 0.01 * (weight - weight.detach()), eps)


def _faulty_cells(mode: Mode) -> dict:
    op = FaultyExp("cpu", torch.float32)
    names = ["eager", "off_by_one_percent", "raises", "returns_nan", "wrong_dtype"]
    return run_cells(op, mode, (777,), ["accuracy", "latency", "speedup"], names)


def test_wrong_values_nan_and_wrong_dtype_fail_with_reason() -> None:
    cells = _faulty_cells(Mode.FWD)
    assert cells[("eager", "accuracy")].value == 1.0
    wrong = cells[("off_by_one_percent", "accuracy")]
    assert wrong.value == 0.0 and "outside" in wrong.note
    assert wrong.extra["max_rel_err"] > 0.009
    assert cells[("returns_nan", "accuracy")].value == 0.0
    assert "non-finite" in cells[("returns_nan", "accuracy")].note
    assert cells[("wrong_dtype", "accuracy")].value == 0.0
    assert "dtype" in cells[("wrong_dtype", "accuracy")].note


def test_missing_gradient_fails_backward_accuracy() -> None:
    op = FaultyExp("cpu", torch.float32)
    cells = run_cells(op, Mode.BWD, (300,), ["accuracy"], ["eager", "no_grad_path"])
    assert cells[("eager", "accuracy")].value == 1.0
    record = cells[("no_grad_path", "accuracy")]
    assert record.status == "error" or record.value == 0.0


def test_compare_all_reports_shape_mismatch() -> None:
    result = compare_all(["y"], [torch.ones(3)], [torch.ones(4, dtype=torch.float64)],
                         torch.float32, [(1e-4, 1e-5)])
    assert not result.passed and "shape" in result.reason


def test_compare_all_passes_within_tolerance_and_keeps_errors() -> None:
    ref = torch.linspace(1, 2, 100, dtype=torch.float64)
    result = compare_all(["y"], [(ref * (1 + 1e-6)).float()], [ref], torch.float32, [(1e-4, 1e-5)])
    assert result.passed
    assert 0 < result.max_rel_err < 1e-5


def test_non_finite_reference_must_be_matched_exactly() -> None:
    ref = torch.tensor([float("inf"), float("nan"), -float("inf"), 1.0], dtype=torch.float64)
    same = compare_all(["y"], [ref.float()], [ref], torch.float32, [(1e-4, 1e-5)])
    assert same.passed
    for wrong in ([1.0, float("nan"), -float("inf"), 1.0], [float("inf"), 5.0, -float("inf"), 1.0],
                  [float("inf"), float("nan"), float("inf"), 1.0]):
        result = compare_all(["y"], [torch.tensor(wrong)], [ref], torch.float32, [(1e-4, 1e-5)])
        assert not result.passed and "non-finite" in result.reason


@pytest.mark.parametrize("mode", [Mode.BWD, Mode.FWD_BWD])
def test_a_wrong_gradient_fails_accuracy_naming_it(mode: Mode) -> None:
    cells = run_cells(FaultyExp("cpu", torch.float32), mode, (300,), ["accuracy"],
                      ["eager", "gradient_one_percent_off"])
    assert cells[("eager", "accuracy")].value == 1.0
    wrong = cells[("gradient_one_percent_off", "accuracy")]
    assert wrong.value == 0.0 and "grad[0]" in wrong.note and "output" not in wrong.note


def test_every_gradient_is_checked_not_only_the_first() -> None:
    op = WrongWeightGradient("cpu", torch.float32)
    cells = run_cells(op, Mode.BWD, (64, 200), ["accuracy"], ["eager", "dw_one_percent_off"])
    assert cells[("eager", "accuracy")].value == 1.0
    wrong = cells[("dw_one_percent_off", "accuracy")]
    assert wrong.value == 0.0 and "grad[1]" in wrong.note and "grad[0]" not in wrong.note


def test_tolerance_boundary() -> None:
    ref = torch.linspace(1, 2, 100, dtype=torch.float64)
    just_outside = compare_all(["y"], [(ref * (1 + 3e-4)).float()], [ref], torch.float32, [(1e-4, 1e-5)])
    just_inside = compare_all(["y"], [(ref * (1 + 3e-5)).float()], [ref], torch.float32, [(1e-4, 1e-5)])
    assert not just_outside.passed and just_inside.passed


def test_rtol_override_loosens_the_check() -> None:
    op = FaultyExp("cpu", torch.float32)
    loose = run_cells(op, Mode.FWD, (300,), ["accuracy"], ["eager", "off_by_one_percent"], rtol=0.02)
    assert loose[("off_by_one_percent", "accuracy")].value == 1.0


def test_reference_outputs_and_gradients_are_float64() -> None:
    op = RMSNormOperator("cpu", torch.float32)
    reference = compute_reference(op, op.make_inputs((8, 200)), Mode.BWD)
    tensors = reference.tensors()
    assert len(reference.grads) == 2
    assert all(t.dtype == torch.float64 for t in tensors)


def test_output_blocks_are_poisoned_before_every_checked_call(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = harness.measure.cell.poison_free_blocks

    def spy(reference: dict, dtype: torch.dtype) -> None:
        calls.append(reference)
        real(reference, dtype)

    monkeypatch.setattr(harness.measure.cell, "poison_free_blocks", spy)
    op = FaultyExp("cpu", torch.float32)
    run_cells(op, Mode.BWD, (300,), ["accuracy"], ["eager", "off_by_one_percent"])
    assert len(calls) == 4, "the first call and the call on fresh inputs, for each backend"
    assert all(len(ref.outputs) == 1 and len(ref.grads) == 1 for ref in calls)


def test_exception_becomes_cell_error_and_sweep_goes_on() -> None:
    cells = _faulty_cells(Mode.FWD)
    for metric in ("accuracy", "latency", "speedup"):
        record = cells[("raises", metric)]
        assert record.status == "error"
        assert record.value is None
        assert "kernel exploded" in record.error
    assert cells[("wrong_dtype", "latency")].value > 0
    assert cells[("eager", "speedup")].value == 1.0


def test_bwd_times_the_backward_and_fwd_does_not() -> None:
    op = FaultyExp("cpu", torch.float32)
    bwd = run_cells(op, Mode.BWD, (300,), ["latency"], ["slow_backward"])
    fwd = run_cells(op, Mode.FWD, (300,), ["latency"], ["slow_backward"])
    assert bwd[("slow_backward", "latency")].value >= 20.0
    assert fwd[("slow_backward", "latency")].value < 5.0



@pytest.mark.parametrize("mode", [Mode.FWD, Mode.FWD_NO_GRAD])
@pytest.mark.parametrize("backend", ["caches_first_result", "right_once"])
def test_a_result_that_is_right_only_on_the_first_call_fails(mode: Mode, backend: str) -> None:
    """Garbage from the timed calls, or a cached first result, is caught on an audited timed call."""
    op = FaultyExp("cpu", torch.float32)
    cells = run_cells(op, mode, (500,), ["accuracy", "latency"], ["eager", backend])
    assert cells[("eager", "accuracy")].value == 1.0
    accuracy = cells[(backend, "accuracy")]
    assert accuracy.value == 0.0 and accuracy.note.startswith("in a timed call")


@pytest.mark.parametrize("mode", [Mode.FWD, Mode.FWD_NO_GRAD])
def test_a_backend_right_only_when_its_inputs_were_just_written_fails(mode: Mode) -> None:
    """It cannot tell the audited timed call from the others: none follows a write it can see."""
    op = FaultyExp("cpu", torch.float32)
    cells = run_cells(op, mode, (500,), ["accuracy", "latency"], ["eager", "right_when_checked"])
    accuracy = cells[("right_when_checked", "accuracy")]
    assert accuracy.value == 0.0 and accuracy.note.startswith("in a timed call: output[0]")


def test_a_backward_right_only_on_a_new_graph_fails_in_bwd() -> None:
    """bwd times the backward of one retained graph again and again, and audits one of those calls
    (the fresh-inputs check builds a new graph, where it is right)."""
    op = FaultyExp("cpu", torch.float32)
    cells = run_cells(op, Mode.BWD, (500,), ["accuracy", "latency"], ["eager", "backward_once_per_graph"])
    accuracy = cells[("backward_once_per_graph", "accuracy")]
    assert accuracy.value == 0.0 and accuracy.note.startswith("in a timed call: grad[0]")


def test_a_training_forward_must_be_differentiable_unless_forward_only() -> None:
    op = FaultyExp("cpu", torch.float32)
    backends = ["eager", "detached_forward", "inference_only"]
    fwd = run_cells(op, Mode.FWD, (500,), ["accuracy", "latency"], backends)
    assert fwd[("detached_forward", "accuracy")].value == 0.0
    assert fwd[("detached_forward", "accuracy")].note.startswith("output[0] has no autograd graph")
    assert fwd[("inference_only", "accuracy")].value == 1.0
    no_grad = run_cells(op, Mode.FWD_NO_GRAD, (500,), ["accuracy"], backends)
    assert {no_grad[(name, "accuracy")].value for name in backends} == {1.0}


@pytest.mark.parametrize("backend", ["caches_first_result", "right_once"])
def test_a_forward_backward_right_only_on_the_first_call_fails(backend: str) -> None:
    # Its timed calls already break autograd: the cell fails with that error.
    op = FaultyExp("cpu", torch.float32)
    cells = run_cells(op, Mode.FWD_BWD, (500,), ["accuracy", "latency"], ["eager", backend])
    assert cells[(backend, "latency")].status == "error" or cells[(backend, "accuracy")].value == 0.0


BROKEN_LATER = [(mode, metrics, backend) for mode, metrics in [(Mode.BWD, ["accuracy", "latency"]),
                                                                 (Mode.BWD, ["accuracy"])]
                for backend in ("raises_after_first", "detached_after_first")]
BROKEN_LATER.append((Mode.FWD, ["accuracy"], "raises_after_first"))


@pytest.mark.parametrize(("mode", "metrics", "backend"), BROKEN_LATER)
def test_a_backend_that_breaks_after_its_first_call_fails_accuracy(mode: Mode, metrics: list[str],
                                                                   backend: str) -> None:
    cells = run_cells(FaultyExp("cpu", torch.float32), mode, (500,), metrics, ["eager", backend])
    accuracy = cells[(backend, "accuracy")]
    assert accuracy.value == 0.0 and "check after timing failed" in accuracy.note, accuracy.note
    assert "\n" not in accuracy.note
    assert cells[("eager", "accuracy")].value == 1.0


def test_a_backend_whose_timed_call_raises_fails_accuracy_too() -> None:
    cells = run_cells(FaultyExp("cpu", torch.float32), Mode.FWD, (500,), ["accuracy", "latency"],
                      ["eager", "raises_after_first"])
    assert cells[("raises_after_first", "latency")].status == "error"
    accuracy = cells[("raises_after_first", "accuracy")]
    assert accuracy.value == 0.0 and "a timed call failed: RuntimeError: second call broke" in accuracy.note


def test_a_result_cached_from_the_first_call_fails_without_timing_too() -> None:
    op = FaultyExp("cpu", torch.float32)
    cells = run_cells(op, Mode.FWD, (500,), ["accuracy"], ["eager", "caches_first_result"])
    accuracy = cells[("caches_first_result", "accuracy")]
    assert accuracy.value == 0.0 and accuracy.note.startswith("on fresh inputs after timing")


@pytest.mark.parametrize("mode", [Mode.BWD, Mode.FWD_BWD])
def test_a_backward_that_writes_into_dy_fails_and_the_next_backend_does_not(mode: Mode) -> None:
    names = ["eager", "scales_dy_in_place", "triton"]
    cells = run_cells(FaultyExp("cpu", torch.float32), mode, (300,), ["accuracy", "latency"], names)
    culprit = cells[("scales_dy_in_place", "accuracy")]
    assert culprit.value == 0.0 and "dy of output[0] was modified in place" in culprit.note
    assert cells[("eager", "accuracy")].value == 1.0 and cells[("triton", "accuracy")].value == 1.0


def test_grad_outputs_hands_out_copies_with_the_same_values() -> None:
    op = FaultyExp("cpu", torch.float32)
    outputs = (torch.empty(10),)
    with op.track_grad_outputs() as handed_out:
        first, second = op.grad_outputs(outputs), op.grad_outputs(outputs)
    assert torch.equal(first[0], second[0]) and first[0].data_ptr() != second[0].data_ptr()
    assert op.changed_grad_outputs(handed_out) is None
    first[0].add_(1.0)
    assert op.changed_grad_outputs(handed_out) == "dy of output[0] was modified in place by the backend"
    fresh = op.grad_outputs(outputs, fresh=True)
    assert not torch.equal(fresh[0], second[0])
