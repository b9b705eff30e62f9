"""Accuracy is never silently true: wrong, NaN, mistyped or missing results fail, and a
backend that raises becomes that cell's error while the other backends still run."""

from __future__ import annotations

from collections.abc import Callable

import torch

from harness.accuracy import compare_all
from harness.operator import Mode, register_benchmark
from operators.exp.operator import ExpOperator
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


def test_exception_becomes_cell_error_and_sweep_goes_on() -> None:
    cells = _faulty_cells(Mode.FWD)
    for metric in ("accuracy", "latency", "speedup"):
        record = cells[("raises", metric)]
        assert record.status == "error"
        assert record.value is None
        assert "kernel exploded" in record.error
    assert cells[("wrong_dtype", "latency")].value > 0
    assert cells[("eager", "speedup")].value == 1.0


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
