"""The addmm operator: every backend against the float64 reference, with 1-D and 2-D bias,
alpha and beta other than 1; its command-line options."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import torch

from harness.cli.args import add_operator_options
from harness.operator import Mode, register_benchmark
from harness.report.results import read_json
from operators.addmm.operator import AddmmOperator
from tests.helpers import (
    assert_accurate,
    assert_interpreted_backends_skipped,
    cli_accuracy,
    run_cells,
    run_cli,
    run_compiling,
    tf32_allowed,
)

KERNEL_BACKENDS = ["eager", "triton", "helion"]


class _AddmmGradientsOf(torch.autograd.Function):
    """``beta * bias + alpha * mat1 @ mat2`` with the backward's gradients ``grads(dy, mat1, mat2)``."""

    @staticmethod
    def forward(ctx, bias, mat1, mat2, alpha, beta, grads):
        ctx.save_for_backward(mat1, mat2)
        ctx.bias_shape, ctx.grads = bias.shape, grads
        return torch.addmm(bias, mat1, mat2, alpha=alpha, beta=beta)

    @staticmethod
    def backward(ctx, dy):
        mat1, mat2 = ctx.saved_tensors
        grad_bias, grad_mat1, grad_mat2 = ctx.grads(dy, mat1, mat2)
        return grad_bias.sum_to_size(ctx.bias_shape), grad_mat1, grad_mat2, None, None, None


class FaultyAddmm(AddmmOperator):
    """addmm with backends whose gradients drop ``alpha`` or ``beta``."""

    @register_benchmark()
    def zero_grad_mat1(self, bias, mat1, mat2):
        alpha, beta = self.alpha, self.beta
        return lambda: _AddmmGradientsOf.apply(bias, mat1, mat2, alpha, beta, lambda dy, a, b: (
            beta * dy, torch.zeros_like(a), alpha * a.T @ dy))

    @register_benchmark()
    def bias_grad_ignores_beta(self, bias, mat1, mat2):
        alpha, beta = self.alpha, self.beta
        return lambda: _AddmmGradientsOf.apply(bias, mat1, mat2, alpha, beta, lambda dy, a, b: (
            dy, alpha * dy @ b.T, alpha * a.T @ dy))
SCALED_2D = {"bias": "2d", "alpha": 1.5, "beta": -0.5}


@pytest.mark.parametrize("mode", list(Mode), ids=[m.value for m in Mode])
def test_kernel_backends_match_reference_in_every_mode(mode: Mode) -> None:
    op = AddmmOperator("cpu", torch.float32, SCALED_2D)
    assert_accurate(run_cells(op, mode, (20, 12, 9), ["accuracy"], KERNEL_BACKENDS), KERNEL_BACKENDS)


@pytest.mark.parametrize(
    ("options", "shape"),
    [
        ({}, (32, 32, 32)),
        ({"bias": "1d", "alpha": 0.5, "beta": 2.0}, (20, 12, 9)),
        (SCALED_2D, (32, 32, 32)),
        ({"bias": "2d"}, (20, 12, 9)),
    ],
    ids=["1d-defaults", "1d-scaled", "2d-scaled", "2d-defaults"],
)
def test_bias_kinds_and_scales_match_reference(options: dict, shape: tuple[int, ...]) -> None:
    op = AddmmOperator("cpu", torch.float32, options)
    with tf32_allowed():
        cells = run_cells(op, Mode.FWD_BWD, shape, ["accuracy"], KERNEL_BACKENDS)
    assert_accurate(cells, KERNEL_BACKENDS)


def test_torch_compile_matches_reference_forward_and_backward() -> None:
    op = AddmmOperator("cpu", torch.float32, SCALED_2D)
    cells = run_cells(op, Mode.FWD_BWD, (20, 12, 9), ["accuracy"], ["eager", "torch_compile"])
    assert_accurate(cells, ["torch_compile"])


def test_bf16_on_cpu_skips_interpreted_backends_with_reason() -> None:
    assert_interpreted_backends_skipped(AddmmOperator("cpu", torch.bfloat16), (16, 16, 16), KERNEL_BACKENDS)


def test_options_come_from_the_command_line_or_default() -> None:
    parser = argparse.ArgumentParser()
    add_operator_options(parser.add_argument_group("addmm"), AddmmOperator.command_line_options)
    parsed = vars(parser.parse_args(["--bias", "2d", "--alpha", "1.5", "--beta", "-0.5"]))
    op = AddmmOperator("cpu", torch.float32, parsed)
    assert (op.full_bias, op.alpha, op.beta) == (True, 1.5, -0.5)
    assert op.make_inputs((5, 4, 3))[0].shape == (5, 4)
    default = AddmmOperator("cpu", torch.float32)
    assert (default.full_bias, default.alpha, default.beta) == (False, 1.0, 1.0)
    assert default.make_inputs((5, 4, 3))[0].shape == (4,)


def test_byte_model_counts_the_bias_and_its_gradient() -> None:
    m, n, k = 64, 32, 16
    row = AddmmOperator("cpu", torch.float16)
    full = AddmmOperator("cpu", torch.float16, {"bias": "2d"})
    assert full.bytes_moved((m, n, k), Mode.FWD) - row.bytes_moved((m, n, k), Mode.FWD) == 2 * (m * n - n)
    assert full.bytes_moved((m, n, k), Mode.BWD) - row.bytes_moved((m, n, k), Mode.BWD) == 2 * (m * n - n)
    assert row.flops((m, n, k), Mode.FWD_BWD) == 6 * m * n * k


def test_run_py_end_to_end_with_options(tmp_path) -> None:
    accuracy = cli_accuracy(tmp_path / "addmm.json", "--op", "addmm", "--mode", "bwd", "--bias", "2d",
                            "--alpha", "1.5", "--beta", "-0.5", "--shape", "20,12,9",
                            "--only", "eager,triton")
    assert accuracy == {"eager": 1.0, "triton": 1.0}
    header, _ = read_json(tmp_path / "addmm.json")
    assert header["options"] == SCALED_2D
    shown = run_cli("show", str(tmp_path / "addmm.json"))
    assert "operator options: alpha=1.5, beta=-0.5, bias=2d" in shown.stdout.splitlines()


@pytest.mark.parametrize(("options", "backend"), [
    ({"alpha": 0.001, "beta": 1.0}, "zero_grad_mat1"),
    ({"bias": "2d", "alpha": 1.0, "beta": 0.9}, "bias_grad_ignores_beta"),
])
def test_each_gradient_is_checked_against_its_own_magnitude(options: dict, backend: str) -> None:
    # bf16 and a large T = sqrt(M * N / K): a tolerance from the largest scale would pass both.
    op = FaultyAddmm("cpu", torch.bfloat16, options)
    cells = run_cells(op, Mode.BWD, (256, 256, 8), ["accuracy"], ["eager", backend])
    assert cells[("eager", "accuracy")].value == 1.0
    assert cells[(backend, "accuracy")].value == 0.0


def test_helion_2d_bias_configs_compile_for_sm90_within_shared_memory() -> None:
    # On the H200 every 2-D bias cell once ran on matmul's config, which with the (M, N) bias
    # tile needs 278,568 bytes of shared memory (of 232,448).  The check compiles kernels,
    # which the interpreter this session runs cannot.
    check = run_compiling(Path(__file__).with_name("sm90") / "addmm_2d_fits_sm90.py")
    assert check.returncode == 0, check.stdout + check.stderr
    # the seven forward buckets (wide since gemm NOTES' prediction 43, medium since 52), then
    # matmul's misfit
    assert check.stdout.count("bytes of shared memory") == 8, check.stdout
