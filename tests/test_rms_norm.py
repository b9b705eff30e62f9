"""The rms_norm operator: every backend's output and gradients against the float64 reference."""

from __future__ import annotations

import functools

import pytest
import torch

from harness.operator import Mode
from operators.rms_norm.operator import RMSNormOperator
from tests.helpers import assert_accurate, assert_interpreted_backends_skipped, cli_accuracy, run_cells

KERNEL_BACKENDS = ["eager", "triton", "helion"]
ODD_SHAPE = (9, 200)
POW2_SHAPE = (16, 64)


@pytest.mark.parametrize("mode", list(Mode), ids=[m.value for m in Mode])
def test_kernel_backends_match_reference_in_every_mode(mode: Mode) -> None:
    op = RMSNormOperator("cpu", torch.float32)
    assert_accurate(run_cells(op, mode, ODD_SHAPE, ["accuracy"], KERNEL_BACKENDS), KERNEL_BACKENDS)


def test_kernel_backends_match_reference_on_power_of_two_sizes() -> None:
    op = RMSNormOperator("cpu", torch.float32)
    cells = run_cells(op, Mode.FWD_BWD, POW2_SHAPE, ["accuracy"], KERNEL_BACKENDS)
    assert_accurate(cells, KERNEL_BACKENDS)


@pytest.mark.parametrize("shape", [ODD_SHAPE, POW2_SHAPE], ids=["n200", "pow2"])
def test_fp16_outputs_and_gradients_match_reference(shape: tuple[int, int]) -> None:
    op = RMSNormOperator("cpu", torch.float16)
    cells = run_cells(op, Mode.FWD_BWD, shape, ["accuracy"], KERNEL_BACKENDS)
    assert_accurate(cells, KERNEL_BACKENDS)


def test_torch_compile_matches_reference_forward_and_backward() -> None:
    op = RMSNormOperator("cpu", torch.float32)
    cells = run_cells(op, Mode.FWD_BWD, ODD_SHAPE, ["accuracy"], ["eager", "torch_compile"])
    assert_accurate(cells, ["torch_compile"])


def test_eager_keeps_float64_inputs_in_float64() -> None:
    op = RMSNormOperator("cpu", torch.float64)
    x, weight, eps = op.make_inputs((4, 8))
    assert op.eager(x, weight, eps)().dtype == torch.float64


def test_bf16_on_cpu_skips_interpreted_backends_with_reason() -> None:
    assert_interpreted_backends_skipped(RMSNormOperator("cpu", torch.bfloat16), (8, 64), KERNEL_BACKENDS)


def test_bytes_model_counts_rstd_and_both_passes() -> None:
    op = RMSNormOperator("cpu", torch.float16)
    m, n = 4096, 1024
    fwd = (2 * m * n + n) * 2 + 4 * m
    bwd = (3 * m * n + 2 * n) * 2 + 4 * m
    assert op.bytes_moved((m, n), Mode.FWD) == op.bytes_moved((m, n), Mode.FWD_NO_GRAD) == fwd
    assert op.bytes_moved((m, n), Mode.BWD) == bwd
    assert op.bytes_moved((m, n), Mode.FWD_BWD) == fwd + bwd


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_helion_tuning_jobs_cover_every_kernel_of_the_default_cuda_sweep(dtype: torch.dtype) -> None:
    from operators.rms_norm import helion_impl

    jobs = helion_impl.tuning_jobs(dtype, "cuda")
    shapes = RMSNormOperator("cuda", dtype).default_shapes()
    # Every key a call on a default shape can look up (many rows: its many-rows slot too).
    expected = {
        key
        for _, n in shapes
        for name in helion_impl.kernels_for_width(n, dtype)
        for key in helion_impl.config_keys(name, dtype, n, rows=2**30)
    }
    assert {job.key for job in jobs} == expected
    assert len(jobs) == len(expected)
    for job in jobs:
        assert isinstance(job.make_args, functools.partial) and job.candidates


@pytest.mark.parametrize("n, fwd_bucket, bwd_bucket", [
    (1024, "n1024", "n1024"), (5120, "n4096", "n8192"), (8192, "n8192", "n8192"), (40000, "n32768", "n65536"),
])
def test_helion_forward_configs_are_keyed_by_the_power_of_two_below_the_width(
    n: int, fwd_bucket: str, bwd_bucket: str
) -> None:
    # The forward's looped configs walk a row in chunks: a 5120-wide row takes the 2048-wide
    # chunks of the 4096 bucket; the backward keeps padded rows and its next power of two.
    from operators.rms_norm import helion_impl

    fwd_keys = helion_impl.config_keys("rms_norm_fwd", torch.bfloat16, n, 4096)
    bwd_keys = helion_impl.config_keys("rms_norm_bwd", torch.bfloat16, n, 4096)
    assert fwd_keys == (f"rms_norm_fwd|bfloat16|{fwd_bucket}",)
    assert bwd_keys == (f"rms_norm_bwd|bfloat16|{bwd_bucket}",)


def test_run_py_end_to_end(tmp_path) -> None:
    accuracy = cli_accuracy(tmp_path / "rms_norm.json", "--op", "rms_norm", "--mode", "fwd_bwd",
                            "--shape", "9,200", "--only", "eager,triton")
    assert accuracy == {"eager": 1.0, "triton": 1.0}
