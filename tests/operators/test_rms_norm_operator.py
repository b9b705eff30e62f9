"""The rms_norm operator: every backend's output and gradients against the float64 reference."""

from harness.device import prepare_backends

prepare_backends("cpu")

import pytest  # noqa: E402
import torch  # noqa: E402

from harness.operator import Mode  # noqa: E402
from operators.rms_norm import helion_impl, triton_impl  # noqa: E402
from operators.rms_norm.operator import RMSNormOperator  # noqa: E402
from tests.helpers import assert_accurate, assert_interpreted_backends_skipped, cli_accuracy, run_cells  # noqa: E402
from tests.operators.rms_norm_helpers import (  # noqa: E402
    EPS,
    M,
    assert_matches_reference,
    reference,
    run_forward_backward,
)

KERNEL_BACKENDS = ["eager", "triton", "helion"]
ODD_SHAPE = (9, 200)
POW2_SHAPE = (16, 64)
IMPLS = {"triton": triton_impl, "helion": helion_impl}


@pytest.mark.parametrize("mode", list(Mode), ids=[m.value for m in Mode])
def test_kernel_backends_match_reference_in_every_mode(mode: Mode) -> None:
    op = RMSNormOperator("cpu", torch.float32)
    assert_accurate(run_cells(op, mode, ODD_SHAPE, ["accuracy"], KERNEL_BACKENDS), KERNEL_BACKENDS)


def test_kernel_backends_match_reference_on_power_of_two_sizes() -> None:
    op = RMSNormOperator("cpu", torch.float32)
    cells = run_cells(op, Mode.FWD_BWD, POW2_SHAPE, ["accuracy"], KERNEL_BACKENDS)
    assert_accurate(cells, KERNEL_BACKENDS)


@pytest.mark.parametrize("shape", [ODD_SHAPE, POW2_SHAPE], ids=["n200", "pow2"])
def test_fp16_backends_match_reference_in_fwd_bwd(shape: tuple[int, int]) -> None:
    op = RMSNormOperator("cpu", torch.float16)
    cells = run_cells(op, Mode.FWD_BWD, shape, ["accuracy"], KERNEL_BACKENDS)
    assert_accurate(cells, KERNEL_BACKENDS)


def test_torch_compile_matches_reference_in_fwd_bwd() -> None:
    op = RMSNormOperator("cpu", torch.float32)
    cells = run_cells(op, Mode.FWD_BWD, ODD_SHAPE, ["accuracy"], ["eager", "torch_compile"])
    assert_accurate(cells, ["torch_compile"])


def test_eager_keeps_float64_inputs_in_float64() -> None:
    op = RMSNormOperator("cpu", torch.float64)
    x, weight, eps = op.make_inputs((4, 8))
    assert op.eager(x, weight, eps)().dtype == torch.float64


def test_bf16_on_cpu_skips_interpreted_backends_with_reason() -> None:
    assert_interpreted_backends_skipped(RMSNormOperator("cpu", torch.bfloat16), (8, 64), KERNEL_BACKENDS)


def test_bytes_model_counts_rstd_in_both_passes() -> None:
    op = RMSNormOperator("cpu", torch.float16)
    m, n = 4096, 1024
    fwd = (2 * m * n + n) * 2 + 4 * m
    bwd = (3 * m * n + 2 * n) * 2 + 4 * m
    assert op.bytes_moved((m, n), Mode.FWD) == op.bytes_moved((m, n), Mode.FWD_NO_GRAD) == fwd
    assert op.bytes_moved((m, n), Mode.BWD) == bwd
    assert op.bytes_moved((m, n), Mode.FWD_BWD) == fwd + bwd


def test_run_py_end_to_end(tmp_path) -> None:
    accuracy = cli_accuracy(tmp_path / "rms_norm.json", "--op", "rms_norm", "--mode", "fwd_bwd",
                            "--shape", "9,200", "--only", "eager,triton")
    assert accuracy == {"eager": 1.0, "triton": 1.0}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("n", [200, 256])
@pytest.mark.parametrize("impl", IMPLS)
def test_kernels_match_float64_reference(impl, n, dtype):
    outputs, expected = run_forward_backward(IMPLS[impl].rms_norm, M, n, dtype)
    assert_matches_reference(outputs, expected, dtype)


@pytest.mark.parametrize("impl", IMPLS)
def test_eps_keeps_an_all_zero_row_finite(impl):
    """Without eps a zero row divides by zero: rstd = 1/sqrt(eps), y = 0, dx = dy * w / sqrt(eps)."""
    x = torch.randn(5, 200)
    x[2] = 0
    x.requires_grad_(True)
    weight = torch.randn(200, requires_grad=True)
    dy = torch.randn(5, 200)
    y = IMPLS[impl].rms_norm(x, weight, EPS)
    y.backward(dy)
    assert torch.isfinite(y).all() and torch.isfinite(x.grad).all() and torch.isfinite(weight.grad).all()
    expected = reference(x.detach(), weight.detach(), dy)
    assert_matches_reference((y, x.grad, weight.grad), expected, torch.float32)


@pytest.mark.parametrize("impl", IMPLS)
def test_rejects_input_that_is_not_2d(impl):
    with pytest.raises(ValueError, match="2-D"):
        IMPLS[impl].rms_norm(torch.randn(2, 3, 8), torch.randn(8))
