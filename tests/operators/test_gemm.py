"""The gemm operator: every backend's output and gradients against the float64 reference.

Shapes are tiny (Triton's interpreter is slow).  20x12x9 (no dim a multiple of 16) runs the
Triton kernel's masked pointer path and partial tiles of Helion's default 16-wide config;
32x32x32 with TF32 allowed runs the Triton kernel's TMA path (exact fp32 takes the pointer path).
"""

from __future__ import annotations

import functools

import pytest
import torch

from harness.operator import Mode
from operators.gemm.operator import GemmOperator, matmul_tolerance, typical_magnitude
from tests.helpers import (
    assert_accurate,
    assert_interpreted_backends_skipped,
    cli_accuracy,
    run_cells,
    tf32_allowed,
)

KERNEL_BACKENDS = ["eager", "triton", "helion"]
ODD_SHAPE = (20, 12, 9)
POW2_SHAPE = (32, 32, 32)


@pytest.mark.parametrize("mode", list(Mode), ids=[m.value for m in Mode])
def test_kernel_backends_match_reference_in_every_mode(mode: Mode) -> None:
    op = GemmOperator("cpu", torch.float32)
    assert_accurate(run_cells(op, mode, ODD_SHAPE, ["accuracy"], KERNEL_BACKENDS), KERNEL_BACKENDS)


def test_kernel_backends_match_reference_on_power_of_two_sizes_with_tf32() -> None:
    op = GemmOperator("cpu", torch.float32)
    with tf32_allowed():
        cells = run_cells(op, Mode.FWD_BWD, POW2_SHAPE, ["accuracy"], KERNEL_BACKENDS)
    assert_accurate(cells, KERNEL_BACKENDS)


def test_torch_compile_matches_reference_forward_and_backward() -> None:
    op = GemmOperator("cpu", torch.float32)
    cells = run_cells(op, Mode.FWD_BWD, ODD_SHAPE, ["accuracy"], ["eager", "torch_compile"])
    assert_accurate(cells, ["torch_compile"])


def test_bf16_on_cpu_skips_interpreted_backends_with_reason() -> None:
    assert_interpreted_backends_skipped(GemmOperator("cpu", torch.bfloat16), (16, 16, 16), KERNEL_BACKENDS)


def test_inputs_give_output_and_gradients_the_typical_magnitude() -> None:
    torch.manual_seed(0)
    m, n, k = 300, 200, 500
    a, b = (t.requires_grad_() for t in GemmOperator("cpu", torch.float64).make_inputs((m, n, k)))
    out = a @ b
    out.backward(torch.randn(m, n, dtype=torch.float64))
    for tensor in (out, a.grad, b.grad):
        assert tensor.std().item() == pytest.approx(typical_magnitude(m, n, k), rel=0.1)


def test_tolerance_allows_tf32_on_cuda_and_scales_atol_with_magnitude() -> None:
    assert matmul_tolerance("cpu", torch.float32, 10.0) == pytest.approx((1e-4, 1e-3))
    assert matmul_tolerance("cuda", torch.float32, 10.0) == pytest.approx((5e-3, 5e-2))
    assert matmul_tolerance("cuda", torch.bfloat16, 1.0) == pytest.approx((2e-2, 2e-2))
    op = GemmOperator("cpu", torch.float16)
    assert op.tolerance((400, 100, 25), "output[0]") == pytest.approx((5e-3, 5e-3 * 40))


def test_flop_and_byte_models() -> None:
    op = GemmOperator("cpu", torch.float16)
    m, n, k = 64, 32, 16
    assert op.flops((m, n, k), Mode.FWD) == 2 * m * n * k
    assert op.flops((m, n, k), Mode.BWD) == 4 * m * n * k
    assert op.flops((m, n, k), Mode.FWD_BWD) == 6 * m * n * k
    assert op.bytes_moved((m, n, k), Mode.FWD) == 2 * (m * k + k * n + m * n)
    assert op.bytes_moved((m, n, k), Mode.BWD) == 2 * (m * n + 2 * m * k + 2 * k * n)


def _slots(dtype: torch.dtype, kernel: str, x: torch.Tensor, y: torch.Tensor) -> set[str]:
    """The tuning slots of the Helion call on ``x @ y`` with epilogue ``kernel``, routed as on the H200:
    the split-K pair's two, or the tiled kernel's (addmm_1d runs matmul's, and in the skinny, decode
    and outer buckets addmm_2d too; an N-skinny problem runs transposed, its bias with it)."""
    from operators.gemm.helion_dispatch import ROUTES, Kernel, choose
    from operators.gemm.helion_impl import POINTER_SIZES, bucket, config_key, config_keys
    from operators.gemm.strategy import GPU_LIMITS

    (m, k), n = x.shape, y.shape[1]
    chosen = choose(m, n, k, sms=132, limits=GPU_LIMITS, routes=ROUTES)
    if chosen.swap:
        x, y, kernel = y.mT, x.mT, "matmul" if kernel == "matmul" else "addmm_2d"
    name = bucket(x, y, chosen.size)
    if chosen.kernel is Kernel.SPLIT_K:
        size = name.split("|")[0]
        return {config_key("matmul_split_k", dtype, name), config_key("split_k_reduce", dtype, size)}
    keys = config_keys(kernel, dtype, name)
    return {keys[-1] if chosen.size in POINTER_SIZES or kernel == "addmm_1d" else keys[0]}


def _forward_and_backward_keys(dtype: torch.dtype, kernel: str, shape: tuple[int, ...]) -> set[str]:
    """Slots of ``kernel`` forward and of ``matmul`` on the backward's transposed operands."""
    m, n, k = shape
    a, b, dy = (torch.empty(r, c, device="meta") for r, c in ((m, k), (k, n), (m, n)))
    return _slots(dtype, kernel, a, b) | _slots(dtype, "matmul", dy, b.T) | _slots(dtype, "matmul", a.T, dy)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_helion_tuning_jobs_cover_the_default_gemm_and_addmm_sweeps(dtype: torch.dtype) -> None:
    from operators.gemm import helion_tuning
    from operators.gemm.helion_impl import config_key, row_sum_size

    expected: set[str] = set()
    for shape in GemmOperator("cuda", dtype).default_shapes():
        for kernel in ("matmul", "addmm_1d", "addmm_2d"):
            expected |= _forward_and_backward_keys(dtype, kernel, shape)
        # addmm's row-bias gradient, over the (M, N) output gradient
        size = row_sum_size(*shape[:2])
        expected |= {config_key(name, dtype, size) for name in ("row_sum_parts", "row_sum_finish")}
    # and skinny problems whose columns leave SMs idle (e.g. 1x1024x4096), and short ones too
    # narrow for 64x64 tiles to fill the GPU (e.g. 256x1024x8192), which the sweep has none of
    beyond = [("matmul_split_k", "skinny|nn"), ("matmul_split_k", "skinny|nt"), ("split_k_reduce", "skinny"),
              ("matmul_split_k", "large|nn"), ("matmul_split_k", "large|nt")]
    expected |= {config_key(name, dtype, bucket) for name, bucket in beyond}
    jobs = helion_tuning.tuning_jobs(dtype, "cuda")
    assert {job.key for job in jobs} == expected
    assert len(jobs) == len(expected)
    for job in jobs:
        assert isinstance(job.make_args, functools.partial) and job.candidates


def test_run_py_end_to_end(tmp_path) -> None:
    accuracy = cli_accuracy(tmp_path / "gemm.json", "--op", "gemm", "--mode", "fwd_bwd",
                            "--shape", "20,12,9", "--only", "eager,triton")
    assert accuracy == {"eager": 1.0, "triton": 1.0}


@pytest.mark.parametrize(("bias_shape", "beta"), [((6, 5), 1.0), ((6, 5), 0.5), ((6, 1), 1.0), ((1, 5), 2.0)])
def test_the_bias_gradient_is_beta_times_grad_summed_to_the_bias_and_grad_itself_at_beta_one(
        bias_shape: tuple[int, int], beta: float) -> None:
    from operators.gemm.autograd import bias_gradient, torch_summed_rows

    grad = torch.randn(6, 5, dtype=torch.float64)
    got = bias_gradient(grad, torch.Size(bias_shape), beta, torch_summed_rows)
    torch.testing.assert_close(got, beta * grad.sum_to_size(bias_shape), rtol=0, atol=0)
    assert (got is grad) == (bias_shape == (6, 5) and beta == 1.0)  # no copy, as torch's addmm


def _recording_matmul(order: list[tuple[int, int]]):
    def fused(x, y, bias=None, alpha=1.0, beta=1.0):
        order.append((x.shape[0], y.shape[1]))
        out = alpha * x @ y
        return out if bias is None else out + beta * bias

    return fused


@pytest.mark.parametrize("path", ["function", "custom_op"])
@pytest.mark.parametrize(("m", "k", "n"), [(40, 24, 8), (8, 24, 40), (24, 16, 24)])
def test_the_backward_computes_the_larger_operand_gradient_last(path: str, m: int, k: int, n: int) -> None:
    # Its dirty L2 lines are then written back after the call, not inside the other gradient's
    # matmul (gemm NOTES: prediction 58); a tie keeps dX first.  Both gradients stay exact.
    from operators.gemm import autograd
    from operators.gemm.custom_ops import define_matmul_ops

    order: list[tuple[int, int]] = []
    fused = _recording_matmul(order)
    ops = define_matmul_ops(f"opbench_order_test_{m}_{k}_{n}", fused) if path == "custom_op" else None
    a = torch.randn(m, k, dtype=torch.float64, requires_grad=True)
    b = torch.randn(k, n, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(n, dtype=torch.float64, requires_grad=True)
    out = (ops.addmm(bias, a, b, 1.5, 0.5) if ops else autograd.addmm(bias, a, b, 1.5, 0.5, fused))
    grad = torch.randn_like(out)
    order.clear()
    out.backward(grad)
    dx_first = m * k <= k * n
    assert order == ([(m, k), (k, n)] if dx_first else [(k, n), (m, k)])
    torch.testing.assert_close(a.grad, 1.5 * grad @ b.detach().T)
    torch.testing.assert_close(b.grad, 1.5 * a.detach().T @ grad)
    torch.testing.assert_close(bias.grad, 0.5 * grad.sum(0))
    # A gradient not needed is not computed, in either op.
    product = ops.matmul(a.detach(), b) if ops else autograd.matmul(a.detach(), b, fused)
    order.clear()
    product.backward(grad)
    assert order == [(k, n)]
    frozen_bias = bias.detach()
    for mat1, mat2, wanted in ((a.detach(), b, [(k, n)]), (a, b.detach(), [(m, k)])):
        out = (ops.addmm(frozen_bias, mat1, mat2, 1.5, 0.5) if ops
               else autograd.addmm(frozen_bias, mat1, mat2, 1.5, 0.5, fused))
        order.clear()
        out.backward(grad)
        assert order == wanted
