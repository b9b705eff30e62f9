"""What the gemm kernel tests share: random operands, the float64 reference of an output and
its gradients, the comparison against it, the regime cases both backends' dispatch runs and
the Triton dispatch's plan at the H200's scale."""

from __future__ import annotations

from collections.abc import Callable

import torch

from operators.gemm import triton_dispatch
from operators.gemm.strategy import GPU_LIMITS, Regime
from operators.gemm.triton_dispatch import Plan

TOL = {torch.float32: 1e-4, torch.float16: 2e-2}


def randn(*shape: int, dtype: torch.dtype = torch.float32, grad: bool = True) -> torch.Tensor:
    """A standard normal tensor of ``shape``, requiring grad unless ``grad`` is False."""
    return torch.randn(*shape, dtype=dtype).requires_grad_(grad)


def assert_close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """``actual`` equals the float64 ``expected`` within its dtype's tolerance (relative and absolute)."""
    tol = TOL[actual.dtype]
    torch.testing.assert_close(actual.double(), expected, rtol=tol, atol=tol)


def float64_reference(fn: Callable[..., torch.Tensor], inputs: list[torch.Tensor],
              dy: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor | None]]:
    """Output and input gradients of ``fn`` evaluated in float64."""
    upcast = [t.detach().double().requires_grad_(t.requires_grad) for t in inputs]
    out = fn(*upcast)
    out.backward(dy.double())
    return out.detach(), [t.grad for t in upcast]


def check(fn: Callable[..., torch.Tensor], ref_fn: Callable[..., torch.Tensor],
          inputs: list[torch.Tensor]) -> None:
    """``fn``'s output and the gradients of the inputs that require grad match ``ref_fn`` in float64;
    the others get none."""
    out = fn(*inputs)
    dy = torch.randn_like(out)
    out.backward(dy)
    ref_out, ref_grads = float64_reference(ref_fn, inputs, dy)
    assert_close(out.detach(), ref_out)
    for tensor, ref_grad in zip(inputs, ref_grads, strict=True):
        if tensor.requires_grad:
            assert_close(tensor.grad, ref_grad)
        else:
            assert tensor.grad is None


RegimePlan = tuple[Regime, int, bool]
"""What a regime test checks of a backend's plan: its regime, K parts and whether it swaps."""


def regime_plan(regime: Regime, split_k: int = 1, swap: bool = False) -> RegimePlan:
    return regime, split_k, swap


TILED = regime_plan(Regime.TILED)
REGIME_CASES: dict[str, tuple[tuple[int, int, int], list[RegimePlan]]] = {
    # (M, N, K): the plans of the forward, grad_a = dy @ b.T and grad_b = a.T @ dy
    "split_k": ((24, 20, 300), [regime_plan(Regime.SPLIT_K, 3), TILED, TILED]),
    "split_k_weight_grad": ((300, 20, 24), [TILED, TILED, regime_plan(Regime.SPLIT_K, 3)]),
    "skinny": ((3, 20, 300), [regime_plan(Regime.SKINNY, 3), regime_plan(Regime.SKINNY), TILED]),
    "skinny_n": ((20, 3, 300), [regime_plan(Regime.SKINNY, 3, swap=True), TILED,
                                regime_plan(Regime.SKINNY, swap=True)]),
    "decode": ((1, 45, 200), [regime_plan(Regime.SKINNY), regime_plan(Regime.SKINNY), TILED]),
}
"""Shapes of the interpreter's regimes (its limits, 3 SMs) with no dim a multiple of 16, whose K of
300 is long enough to be cut into 3 parts, and the plans both backends run on them."""


def plans_in_run_order(case: str) -> list[RegimePlan]:
    """A regime case's plans in the order its matmuls run: the forward, then the gradient of the
    smaller operand, then the larger's (``autograd.operand_gradients``; a tie: grad_a first)."""
    (m, n, k), (forward, grad_a, grad_b) = REGIME_CASES[case]
    return [forward, *((grad_b, grad_a) if m * k > k * n else (grad_a, grad_b))]


H200_SMS = 132


def h200_plan(m: int, n: int, k: int, tma: bool = True, row_dot: bool = False) -> Plan:
    """The Triton dispatch's plan of ``(m, k) @ (k, n)`` at the H200's scale (its SMs, the GPU
    limits and routes), whatever machine runs the test."""
    return triton_dispatch.choose(m, n, k, sms=H200_SMS, tma=tma, row_dot=row_dot, limits=GPU_LIMITS,
                                  routes=triton_dispatch.ROUTES)

