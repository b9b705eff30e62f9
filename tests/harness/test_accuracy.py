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


class _SleepInBackward(torch.autograd.Function):
    """Identity whose backward sleeps 20 ms: a bwd timing that missed it would read far less."""

    @staticmethod
    def forward(ctx, y: torch.Tensor) -> torch.Tensor:
        return y.view_as(y)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        time.sleep(0.02)
        return grad


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
                         torch.float32, 1e-4, 1e-5)
    assert not result.passed and "shape" in result.reason


def test_compare_all_passes_within_tolerance_and_keeps_errors() -> None:
    ref = torch.linspace(1, 2, 100, dtype=torch.float64)
    result = compare_all(["y"], [(ref * (1 + 1e-6)).float()], [ref], torch.float32, 1e-4, 1e-5)
    assert result.passed
    assert 0 < result.max_rel_err < 1e-5


def test_non_finite_reference_must_be_matched_exactly() -> None:
    ref = torch.tensor([float("inf"), float("nan"), -float("inf"), 1.0], dtype=torch.float64)
    same = compare_all(["y"], [ref.float()], [ref], torch.float32, 1e-4, 1e-5)
    assert same.passed
    for wrong in ([1.0, float("nan"), -float("inf"), 1.0], [float("inf"), 5.0, -float("inf"), 1.0],
                  [float("inf"), float("nan"), float("inf"), 1.0]):
        result = compare_all(["y"], [torch.tensor(wrong)], [ref], torch.float32, 1e-4, 1e-5)
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
    just_outside = compare_all(["y"], [(ref * (1 + 3e-4)).float()], [ref], torch.float32, 1e-4, 1e-5)
    just_inside = compare_all(["y"], [(ref * (1 + 3e-5)).float()], [ref], torch.float32, 1e-4, 1e-5)
    assert not just_outside.passed and just_inside.passed


def test_rtol_override_loosens_the_check() -> None:
    op = FaultyExp("cpu", torch.float32)
    loose = run_cells(op, Mode.FWD, (300,), ["accuracy"], ["eager", "off_by_one_percent"], rtol=0.02)
    assert loose[("off_by_one_percent", "accuracy")].value == 1.0


def test_reference_outputs_and_gradients_are_float64() -> None:
    op = RMSNormOperator("cpu", torch.float32)
    reference = compute_reference(op, op.make_inputs((8, 200)), Mode.BWD)
    tensors = list(reference["outputs"]) + list(reference["grads"])
    assert len(reference["grads"]) == 2
    assert all(t.dtype == torch.float64 for t in tensors)


def test_output_blocks_are_poisoned_before_every_backend_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = harness.measure.cell._poison_free_blocks

    def spy(reference: dict, dtype: torch.dtype) -> None:
        calls.append(reference)
        real(reference, dtype)

    monkeypatch.setattr(harness.measure.cell, "_poison_free_blocks", spy)
    op = FaultyExp("cpu", torch.float32)
    run_cells(op, Mode.BWD, (300,), ["accuracy"], ["eager", "off_by_one_percent"])
    assert len(calls) == 2
    assert all(len(ref["outputs"]) == 1 and len(ref["grads"]) == 1 for ref in calls)


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

