"""The gemm and addmm Triton kernels through plain ``torch.autograd.Function``s: the ``triton_direct``
backends.

Same kernel (:func:`~operators.gemm.triton_impl.fused_matmul`) and backward as the
``opbench::matmul`` / ``opbench::addmm`` custom ops of :mod:`operators.gemm.triton_impl`::

    out    = alpha * mat1 @ mat2 + beta * bias
    grad_1 = alpha * grad @ mat2.T      grad_2 = alpha * mat1.T @ grad
    grad_bias = beta * grad            (summed over rows for a row-vector bias)

here without torch.library's dispatch, so the two backends differ only by that dispatch (the
``walltime`` metric shows its cost).
"""

from __future__ import annotations

from typing import Any

import torch

from operators.gemm.triton_impl import fused_matmul


class MatmulFunction(torch.autograd.Function):
    """``a @ b``; the backward runs the same kernel on transposed operands."""

    @staticmethod
    def forward(ctx: Any, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(a, b)
        return fused_matmul(a, b)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        a, b = ctx.saved_tensors
        grad_a = fused_matmul(grad, b.mT) if ctx.needs_input_grad[0] else None
        grad_b = fused_matmul(a.mT, grad) if ctx.needs_input_grad[1] else None
        return grad_a, grad_b


class AddmmFunction(torch.autograd.Function):
    """``beta * bias + alpha * mat1 @ mat2``; alpha is applied in the backward's epilogue."""

    @staticmethod
    def forward(ctx: Any, bias: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, alpha: float,
                beta: float) -> torch.Tensor:
        ctx.save_for_backward(mat1, mat2)
        ctx.bias_shape, ctx.alpha, ctx.beta = bias.shape, alpha, beta
        return fused_matmul(mat1, mat2, bias, alpha, beta)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        mat1, mat2 = ctx.saved_tensors
        grad_bias = grad_mat1 = grad_mat2 = None
        if ctx.needs_input_grad[0]:
            grad_bias = grad.sum_to_size(ctx.bias_shape) * ctx.beta
        if ctx.needs_input_grad[1]:
            grad_mat1 = fused_matmul(grad, mat2.mT, None, ctx.alpha, 0.0)
        if ctx.needs_input_grad[2]:
            grad_mat2 = fused_matmul(mat1.mT, grad, None, ctx.alpha, 0.0)
        return grad_bias, grad_mat1, grad_mat2, None, None


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for 2-D tensors of one floating dtype, differentiable, bypassing torch.library."""
    return MatmulFunction.apply(a, b)


def addmm(bias: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, alpha: float = 1.0,
          beta: float = 1.0) -> torch.Tensor:
    """``beta * bias + alpha * mat1 @ mat2`` with ``bias`` (N,) or (M, N), bypassing torch.library."""
    return AddmmFunction.apply(bias, mat1, mat2, float(alpha), float(beta))
