"""On an sm_90+ GPU with quack-kernels installed: the ``quack`` peer's gemm and addmm (quack's
own GEMM, autotuned) forward and backward against float64, in bf16 and fp16, at shapes of odd M
whose K and N are multiples of 8 but of no larger power of 2, with each operator's tolerances."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from operators.addmm.operator import AddmmOperator
from operators.gemm import peers
from operators.gemm.operator import GemmOperator

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
REASON = peers.skip_reason("quack", DEVICE, torch.bfloat16)
pytestmark = pytest.mark.skipif(REASON is not None, reason=str(REASON))

SHAPES = [(37, 520, 1032), (1003, 264, 4104)]  # (M, N, K)
DTYPES = [torch.bfloat16, torch.float16]


def assert_matches_float64(op: GemmOperator | AddmmOperator, shape: tuple[int, int, int],
                           fn: Callable[..., torch.Tensor], ref_fn: Callable[..., torch.Tensor]) -> None:
    """``fn``'s output and every input's gradient match ``ref_fn`` on float64 copies of
    ``op``'s inputs (a unit-variance ``dy``), within ``op``'s tolerance for each tensor."""
    inputs = [t.requires_grad_(True) for t in op.make_inputs(shape)]
    out = fn(*inputs)
    dy = torch.randn_like(out)
    out.backward(dy)
    upcast = [t.detach().double().requires_grad_(True) for t in inputs]
    want = ref_fn(*upcast)
    want.backward(dy.double())
    compared = [("output[0]", out, want)] + [(f"grad[{i}]", t.grad, u.grad)
                                            for i, (t, u) in enumerate(zip(inputs, upcast, strict=True))]
    for name, got, expected in compared:
        rtol, atol = op.tolerance(shape, name)
        torch.testing.assert_close(got.double(), expected, rtol=rtol, atol=atol,
                                   msg=lambda detail, name=name: f"{name}: {detail}")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_quack_gemm_matches_float64(shape: tuple[int, int, int], dtype: torch.dtype) -> None:
    assert_matches_float64(GemmOperator("cuda", dtype), shape, peers.matmul, torch.matmul)


@pytest.mark.parametrize("bias", ["1d", "2d"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_quack_addmm_matches_float64(shape: tuple[int, int, int], dtype: torch.dtype, bias: str) -> None:
    alpha, beta = 1.5, -0.75
    op = AddmmOperator("cuda", dtype, {"bias": bias, "alpha": alpha, "beta": beta})
    assert_matches_float64(op, shape, lambda *args: peers.addmm(*args, alpha, beta),
                           lambda *args: torch.addmm(*args, alpha=alpha, beta=beta))
