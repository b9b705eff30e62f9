"""On a GPU: the Triton TMA kernel's stream-K configs, run as given configs (picked or not), in
bf16 against float64 at shapes whose tiles leave a partial last wave, with a row bias and B
read through a transposed view (the backward's dX); the same bits from run to run (a cut tile's
two parts are added in either order, to the same sum); the workspace flags back at 0 after each
call (``operators.gemm.triton_stream_k``)."""

from __future__ import annotations

import pytest
import torch

from operators.gemm import strategy, triton_impl, triton_stream_k
from operators.gemm.alignment import output_buffer
from operators.gemm.operator import matmul_tolerance, operands, typical_magnitude
from operators.gemm.triton_configs import ROW_BIAS, TMA_CONFIGS, boxes_fit
from operators.gemm.triton_dispatch import Kernel

STREAM_K_CONFIGS = [config for config in TMA_CONFIGS if config.kwargs["STREAM_K"]]
SHAPES = [
    (20120, 512, 1536),   # the reference forward: 316 tiles of 128x256 on 132 SMs
    (20120, 1536, 512),   # its dX
    (3001, 1999, 4097),   # nothing a multiple of 16; K has a partial k-block
    (16896, 512, 1536),   # two whole waves of 128x256: data-parallel only
]


@pytest.mark.parametrize("b_transposed", [False, True], ids=["B", "B.T view"])
@pytest.mark.parametrize("config", STREAM_K_CONFIGS, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_stream_k_configs_match_float64_the_same_bits_every_run(shape: tuple[int, int, int], config,
                                                                b_transposed: bool) -> None:
    m, n, k = shape
    assert boxes_fit(config, m, n, k)
    a, b = operands(m, n, k, "cuda", torch.bfloat16)
    if b_transposed:
        b = b.T.contiguous().T
    bias = (torch.randn(n, device="cuda") * typical_magnitude(m, n, k)).to(torch.bfloat16)

    def run() -> torch.Tensor:
        out = output_buffer(m, n, torch.bfloat16, a.device)
        triton_impl.tiled_matmul(a, b, out, ROW_BIAS, bias.expand(m, n), 1.5, -0.75, "tf32",
                                 Kernel.TMA, config)
        return out

    first = run()
    want = 1.5 * a.double() @ b.double() - 0.75 * bias.double()
    rtol, atol = matmul_tolerance("cuda", torch.bfloat16, 2 * typical_magnitude(m, n, k))
    torch.testing.assert_close(first.double(), want, rtol=rtol, atol=atol)
    assert all(torch.equal(first, run()) for _ in range(5))
    _, flags = triton_stream_k.workspace(a.device, strategy.sm_count(a.device))
    assert not flags.any()
