"""On a GPU: the Triton gemm's split-K and skinny paths compiled and autotuned, in bf16, against
float64, at the shapes they were added for (issue 17), and split-K's result the same bits
from run to run (its parts are added by a second kernel in a fixed order, not by atomics)."""

from __future__ import annotations

import pytest
import torch

from operators.gemm import triton_dispatch, triton_impl
from operators.gemm.operator import matmul_tolerance, operands, typical_magnitude
from operators.gemm.strategy import Regime

CASES = {
    (1536, 512, 20120): Regime.SPLIT_K,  # addmm's mat1.T @ grad at the reference shape 20120x512x1536
    (128, 4096, 4096): Regime.SPLIT_K,
    (1000, 1000, 3001): Regime.SPLIT_K,  # no dim a multiple of 16
    (1, 4096, 4096): Regime.SKINNY,
    (8192, 8, 8192): Regime.SKINNY,
    (7, 4095, 4097): Regime.SKINNY,
}
H200_SMS = 132


def _inputs(m: int, n: int, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    a, b = operands(m, n, k, "cuda", torch.bfloat16)
    bias = (torch.randn(n, device="cuda") * typical_magnitude(m, n, k)).to(torch.bfloat16)
    return a, b, bias


@pytest.mark.parametrize("shape", CASES, ids=lambda s: "x".join(map(str, s)))
def test_split_k_and_skinny_paths_match_float64_in_bf16(shape: tuple[int, int, int]) -> None:
    a, b, bias = _inputs(*shape)
    out = triton_impl.fused_matmul(a, b, bias, alpha=1.5, beta=-0.75)
    want = 1.5 * a.double() @ b.double() - 0.75 * bias.double()
    rtol, atol = matmul_tolerance("cuda", torch.bfloat16, 2 * typical_magnitude(*shape))
    torch.testing.assert_close(out.double(), want, rtol=rtol, atol=atol)


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_properties(0).multi_processor_count
                    != H200_SMS, reason="the regimes are written for the H200's 132 SMs")
@pytest.mark.parametrize("shape", CASES, ids=lambda s: "x".join(map(str, s)))
def test_shapes_take_their_regime_on_a_132_sm_gpu(shape: tuple[int, int, int]) -> None:
    assert triton_dispatch.plan(*shape, "tf32", torch.device("cuda", 0)).regime is CASES[shape]


def test_split_k_result_is_the_same_bits_every_run() -> None:
    a, b, bias = _inputs(1536, 512, 20120)
    first = triton_impl.fused_matmul(a, b, bias)
    assert all(torch.equal(first, triton_impl.fused_matmul(a, b, bias)) for _ in range(5))
