"""On a GPU: Helion's gemm in fp16, which has no stored configs of its own, runs the bf16 configs
of its bucket (the same element size; where the kernel shares matmul's configs, as addmm_1d does
and addmm_2d in the pointer buckets, matmul's) and says so, against float64."""

from __future__ import annotations

import pytest
import torch

from harness.notes import collecting
from harness.tuning.configs import split_key
from operators.gemm import helion_impl
from operators.gemm.operator import matmul_tolerance, operands, typical_magnitude


@pytest.mark.parametrize("shape", [(4096, 4096, 4096), (16, 4096, 4096), (1000, 1000, 3001)],
                         ids=lambda s: "x".join(map(str, s)))
def test_fp16_gemm_runs_the_bf16_configs_of_its_bucket(shape: tuple[int, int, int]) -> None:
    a, b = operands(*shape, "cuda", torch.float16)
    bias = (torch.randn(shape[1], device="cuda") * typical_magnitude(*shape)).to(torch.float16)
    notes: list[str] = []
    with collecting(notes):
        out = helion_impl.fused_matmul(a, b, bias, alpha=1.0, beta=1.0)
    rtol, atol = matmul_tolerance("cuda", torch.float16, 2 * typical_magnitude(*shape))
    torch.testing.assert_close(out.double(), a.double() @ b.double() + bias.double(), rtol=rtol, atol=atol)
    borrowed_notes = [note for note in notes if "fixed by the call" not in note]  # K = 3001: TMA loads
    assert borrowed_notes, "fp16 found a config of its own"
    for note in borrowed_notes:  # "helion config: <bf16 key>, the bfloat16 config (...), for <own key>"
        borrowed, _, own = note.removeprefix("helion config: ").partition(
            ", the bfloat16 config (the same element size), for ")
        assert own, note
        kernel, dtype, bucket = split_key(own)
        # The bucket's bf16 config of the kernel or of matmul, whose configs it may share (config_keys).
        shared = helion_impl.config_keys(kernel, torch.bfloat16, bucket)
        assert dtype == "float16" and borrowed in shared, note
