"""On a GPU: both backends' gemm split-K and skinny paths, and the whole-K tiles of a split-K
problem whose 64x64 tiles fill one wave, compiled (Triton's autotuned, Helion's on
its stored bf16 configs), in bf16, against float64, at the shapes they were added for (issue 17),
with no Helion config note (each call finds its own stored config), and split-K's result the
same bits from run to run (its parts are added by a second kernel in a fixed order, not by
atomics)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from harness.notes import collecting
from operators.gemm import (
    helion_dispatch,
    helion_impl,
    triton_configs,
    triton_dispatch,
    triton_impl,
    triton_splitk,
)
from operators.gemm.operator import matmul_tolerance, operands, typical_magnitude
from operators.gemm.strategy import Regime
from operators.gemm.triton_configs import ROW_BIAS

CASES = {
    (1536, 512, 20120): Regime.SPLIT_K,  # addmm's mat1.T @ grad at the reference shape 20120x512x1536
    (128, 4096, 4096): Regime.TILED,  # 128 tiles of 64x64 over the whole of K (Helion: wide bucket)
    (250, 1000, 8191): Regime.SPLIT_K,  # too few 64x64 tiles; no dim a multiple of 16
    (1000, 1000, 3001): Regime.SPLIT_K,  # 256 tiles of 64x64: more than one wave
    (1, 4096, 4096): Regime.SKINNY,
    (16, 4096, 4096): Regime.SKINNY,
    (8192, 8, 8192): Regime.SKINNY,  # computed transposed
    (1, 1024, 4096): Regime.SKINNY,  # few column blocks: K split into 4
    (7, 4095, 4097): Regime.SKINNY,
}
H200_SMS = 132
FUSED: dict[str, Callable[..., torch.Tensor]] = {"triton": triton_impl.fused_matmul,
                                                 "helion": helion_impl.fused_matmul}
PLAN: dict[str, Callable[..., object]] = {
    "triton": lambda m, n, k, device: triton_dispatch.plan(m, n, k, "tf32", device),
    "helion": helion_dispatch.plan,
}


def _inputs(m: int, n: int, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    a, b = operands(m, n, k, "cuda", torch.bfloat16)
    bias = (torch.randn(n, device="cuda") * typical_magnitude(m, n, k)).to(torch.bfloat16)
    return a, b, bias


@pytest.mark.parametrize("backend", FUSED)
@pytest.mark.parametrize("shape", CASES, ids=lambda s: "x".join(map(str, s)))
def test_split_k_skinny_and_whole_k_paths_match_float64_in_bf16(backend: str,
                                                              shape: tuple[int, int, int]) -> None:
    a, b, bias = _inputs(*shape)
    notes: list[str] = []
    with collecting(notes):
        out = FUSED[backend](a, b, bias, alpha=1.5, beta=-0.75)
    want = 1.5 * a.double() @ b.double() - 0.75 * bias.double()
    rtol, atol = matmul_tolerance("cuda", torch.bfloat16, 2 * typical_magnitude(*shape))
    torch.testing.assert_close(out.double(), want, rtol=rtol, atol=atol)
    assert notes == []


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_properties(0).multi_processor_count
                    != H200_SMS, reason="the regimes are written for the H200's 132 SMs")
@pytest.mark.parametrize("backend", PLAN)
@pytest.mark.parametrize("shape", CASES, ids=lambda s: "x".join(map(str, s)))
def test_shapes_take_their_regime_on_a_132_sm_gpu(backend: str, shape: tuple[int, int, int]) -> None:
    assert PLAN[backend](*shape, torch.device("cuda", 0)).regime is CASES[shape]


@pytest.mark.parametrize("backend", FUSED)
def test_split_k_result_is_the_same_bits_every_run(backend: str) -> None:
    a, b, bias = _inputs(1536, 512, 20120)
    first = FUSED[backend](a, b, bias)
    assert all(torch.equal(first, FUSED[backend](a, b, bias)) for _ in range(5))


TMA_CONFIGS = [config for route in triton_dispatch.ROUTES.values() for config in route.configs
               if config.kwargs["TMA_LOADS"]]


@pytest.mark.parametrize("b_transposed", [False, True], ids=["B", "B.T view"])
@pytest.mark.parametrize("config", TMA_CONFIGS, ids=str)
@pytest.mark.parametrize("shape", CASES, ids=lambda s: "x".join(map(str, s)))
def test_triton_split_k_tma_configs_match_float64_in_bf16(shape: tuple[int, int, int], config,
                                                         b_transposed: bool) -> None:
    # Every TMA config, picked or not, on each shape whose plan runs split-K, B row-major or a
    # column-major view (the backward's grad @ w.T); where the rows the kernel streams are not
    # 16 bytes apart (7x4095x4097, or the B.T of 1000x1000x3001 and of 250x1000x8191) there is no
    # descriptor to run it on.
    m, n, k = shape
    a, b, bias = _inputs(m, n, k)
    if b_transposed:
        b = b.T.contiguous().T
    chosen = triton_dispatch.plan(m, n, k, "tf32", a.device)
    routed = triton_dispatch.ROUTES[chosen.regime]
    if chosen.kernel is not triton_dispatch.Kernel.SPLIT_K or config not in routed.configs:
        pytest.skip(f"{shape} does not run this config's regime")
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    args = (a, b, out, ROW_BIAS, bias.expand(m, n), 1.5, -0.75, "tf32", chosen, config)
    streamed = a.mT if chosen.swap else b
    rows = streamed.T if streamed.stride(1) != 1 else streamed
    if rows.stride(0) * rows.element_size() % 16:
        with pytest.raises(ValueError, match="loads B by TMA"):
            triton_splitk.split_k_matmul(*args)
        return
    triton_splitk.split_k_matmul(*args)
    want = 1.5 * a.double() @ b.double() - 0.75 * bias.double()
    rtol, atol = matmul_tolerance("cuda", torch.bfloat16, 2 * typical_magnitude(*shape))
    torch.testing.assert_close(out.double(), want, rtol=rtol, atol=atol)


GEMV_CASES = [(1, 4096, 4096), (1, 4095, 4097), (1, 2500, 4099), (4097, 1, 4095)]
"""One output row over B read along K (B a column-major view), or one column over a row-major A."""


@pytest.mark.parametrize("config", [None, *triton_configs.GEMV_CONFIGS], ids=str)
@pytest.mark.parametrize("shape", GEMV_CASES, ids=lambda s: "x".join(map(str, s)))
def test_triton_gemv_configs_match_float64_in_bf16_the_same_bits_every_run(shape: tuple[int, int, int],
                                                                         config) -> None:
    m, n, k = shape
    a, b, bias = _inputs(m, n, k)
    if m == 1:
        b = b.T.contiguous().T
    assert triton_dispatch.plan(m, n, k, "tf32", a.device, triton_dispatch.reads_rows_along_k(a, b)).kernel \
        is triton_dispatch.Kernel.GEMV
    first = triton_impl.fused_matmul(a, b, bias, alpha=1.5, beta=-0.75, config=config)
    want = 1.5 * a.double() @ b.double() - 0.75 * bias.double()
    rtol, atol = matmul_tolerance("cuda", torch.bfloat16, 2 * typical_magnitude(*shape))
    torch.testing.assert_close(first.double(), want, rtol=rtol, atol=atol)
    again = triton_impl.fused_matmul(a, b, bias, alpha=1.5, beta=-0.75, config=config)
    assert torch.equal(first, again)
