"""The plain ``torch.autograd.Function``s of gemm and addmm, around any backend's fused matmul.

A backend hands in its :class:`FusedMatmul` (Triton's for ``triton_direct``, Helion's, quack's
for the ``quack`` peer), which is not differentiable; the backward runs it on transposed views,
with ``alpha`` in its epilogue, and the backend's :class:`SummedRows` (torch's by default) for
a row-vector bias::

    out       = alpha * mat1 @ mat2 + beta * bias
    grad_1    = alpha * grad @ mat2.T      grad_2 = alpha * mat1.T @ grad
    grad_bias = beta * grad                (summed over rows for a row-vector bias)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import torch


class FusedMatmul(Protocol):
    """``alpha * x @ y + beta * bias`` for 2-D ``x`` (M, K) and ``y`` (K, N), ``bias`` None,
    (N,) or (M, N); without autograd."""

    def __call__(self, x: torch.Tensor, y: torch.Tensor, bias: torch.Tensor | None = None,
                 alpha: float = 1.0, beta: float = 1.0) -> torch.Tensor: ...


class SummedRows(Protocol):
    """``beta * grad.sum(0)`` for a 2-D ``grad``, in its dtype; without autograd."""

    def __call__(self, grad: torch.Tensor, beta: float) -> torch.Tensor: ...


def torch_summed_rows(grad: torch.Tensor, beta: float) -> torch.Tensor:
    """``beta * grad.sum(0)`` by torch's reduction."""
    return grad.sum(0) * beta


def bias_gradient(grad: torch.Tensor, bias_shape: torch.Size, beta: float,
                  summed_rows: SummedRows) -> torch.Tensor:
    """The gradient of ``beta * bias`` broadcast to ``grad``'s shape: ``summed_rows`` for a row
    vector ``(N,)``, else ``beta * grad`` summed to ``bias_shape``: for a full bias and ``beta``
    of 1, ``grad`` itself, no copy (as torch's addmm backward)."""
    if len(bias_shape) == 1:
        return summed_rows(grad, beta)
    summed = grad.sum_to_size(bias_shape)
    return summed if beta == 1 else summed * beta


def operand_gradients(mat1: torch.Tensor, mat2: torch.Tensor, needed: tuple[bool, bool],
                      grad_1: Callable[[], torch.Tensor],
                      grad_2: Callable[[], torch.Tensor]) -> tuple[torch.Tensor | None, ...]:
    """The gradients of ``mat1`` and ``mat2`` (``grad_1()``, ``grad_2()``; None where not
    ``needed``), computed in the order that writes the larger one last: its dirty L2 lines are
    then not written back inside the other one's matmul (Inductor's order at 8192x8x8192; gemm
    NOTES: prediction 58).  A tie keeps ``mat1``'s first."""
    steps = [(0, grad_1), (1, grad_2)]
    if mat1.numel() > mat2.numel():
        steps.reverse()
    grads: list[torch.Tensor | None] = [None, None]
    for index, step in steps:
        if needed[index]:
            grads[index] = step()
    return tuple(grads)


class MatmulFunction(torch.autograd.Function):
    """``a @ b`` by ``fused``; the backward runs it on transposed operands."""

    @staticmethod
    def forward(ctx: Any, a: torch.Tensor, b: torch.Tensor, fused: FusedMatmul) -> torch.Tensor:
        ctx.save_for_backward(a, b)
        ctx.fused = fused
        return fused(a, b)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        a, b = ctx.saved_tensors
        grad_a, grad_b = operand_gradients(a, b, ctx.needs_input_grad[:2], lambda: ctx.fused(grad, b.mT),
                                           lambda: ctx.fused(a.mT, grad))
        return grad_a, grad_b, None


class AddmmFunction(torch.autograd.Function):
    """``beta * bias + alpha * mat1 @ mat2`` by ``fused``; alpha is applied in the backward's epilogue."""

    @staticmethod
    def forward(ctx: Any, bias: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, alpha: float,
                beta: float, fused: FusedMatmul, summed_rows: SummedRows) -> torch.Tensor:
        ctx.save_for_backward(mat1, mat2)
        ctx.bias_shape, ctx.alpha, ctx.beta, ctx.fused = bias.shape, alpha, beta, fused
        ctx.summed_rows = summed_rows
        return fused(mat1, mat2, bias, alpha, beta)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        mat1, mat2 = ctx.saved_tensors
        grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_bias = bias_gradient(grad, ctx.bias_shape, ctx.beta, ctx.summed_rows)
        grad_mat1, grad_mat2 = operand_gradients(
            mat1, mat2, ctx.needs_input_grad[1:3], lambda: ctx.fused(grad, mat2.mT, None, ctx.alpha, 0.0),
            lambda: ctx.fused(mat1.mT, grad, None, ctx.alpha, 0.0))
        return grad_bias, grad_mat1, grad_mat2, None, None, None, None


def matmul(a: torch.Tensor, b: torch.Tensor, fused: FusedMatmul) -> torch.Tensor:
    """``a @ b`` by ``fused``, differentiable."""
    return MatmulFunction.apply(a, b, fused)


def addmm(bias: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, alpha: float, beta: float,
          fused: FusedMatmul, summed_rows: SummedRows = torch_summed_rows) -> torch.Tensor:
    """``beta * bias + alpha * mat1 @ mat2`` by ``fused``, with ``bias`` (N,) or (M, N), differentiable;
    a row vector's gradient by ``summed_rows``."""
    return AddmmFunction.apply(bias, mat1, mat2, float(alpha), float(beta), fused, summed_rows)
