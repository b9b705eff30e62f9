"""``matmul`` and ``addmm`` as ``torch.library`` custom ops with registered autograd, over any
kernel ``fused_matmul(mat1, mat2, bias=None, alpha=1.0, beta=1.0)``: the Triton backends' ops
(``opbench::``) and the Helion ones' (``opbench_helion::``) are built here alike::

    out       = alpha * mat1 @ mat2 + beta * bias
    grad_1    = alpha * grad @ mat2.T        grad_2 = alpha * mat1.T @ grad
    grad_bias = beta * grad, summed to the bias's shape (N,) or (M, N)

A kernel for the row-vector bias's ``beta * grad.sum(0)`` (``summed_rows``) becomes a third op,
``<namespace>::summed_rows``; without one, torch's reduction runs.

Outputs have 16-byte padded row pitches (:func:`~operators.gemm.alignment.output_buffer`), which
the fake implementations reproduce, so Inductor plans the strides the kernels return.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from operators.gemm.alignment import output_buffer
from operators.gemm.autograd import SummedRows, bias_gradient, operand_gradients, torch_summed_rows


@dataclass(frozen=True)
class MatmulOps:
    """The two custom ops of one kernel: ``matmul(a, b)`` and ``addmm(bias, mat1, mat2, alpha, beta)``."""

    matmul: Any
    addmm: Any


def define_matmul_ops(namespace: str, fused_matmul: Callable[..., torch.Tensor],
                      summed_rows: SummedRows | None = None) -> MatmulOps:
    """Register ``<namespace>::matmul`` and ``<namespace>::addmm`` over ``fused_matmul`` (and
    ``<namespace>::summed_rows`` over ``summed_rows``, when given, for the bias gradient)."""
    row_sum = torch_summed_rows if summed_rows is None else _summed_rows_op(namespace, summed_rows)

    @torch.library.custom_op(f"{namespace}::matmul", mutates_args=())
    def matmul_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return fused_matmul(a, b)

    @torch.library.custom_op(f"{namespace}::addmm", mutates_args=())
    def addmm_op(bias: torch.Tensor | None, mat1: torch.Tensor, mat2: torch.Tensor, alpha: float,
                 beta: float) -> torch.Tensor:
        return fused_matmul(mat1, mat2, bias, alpha, beta)

    @matmul_op.register_fake
    def _(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return output_buffer(a.shape[0], b.shape[1], a.dtype, a.device)

    @addmm_op.register_fake
    def _(bias: torch.Tensor | None, mat1: torch.Tensor, mat2: torch.Tensor, alpha: float,
          beta: float) -> torch.Tensor:
        return output_buffer(mat1.shape[0], mat2.shape[1], mat1.dtype, mat1.device)

    def save_operands(ctx, inputs: tuple, output: torch.Tensor) -> None:
        a, b = inputs
        ctx.save_for_backward(a, b)

    def matmul_backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        a, b = ctx.saved_tensors
        return operand_gradients(a, b, ctx.needs_input_grad[:2], lambda: matmul_op(grad, b.mT),
                                 lambda: matmul_op(a.mT, grad))

    def save_addmm(ctx, inputs: tuple, output: torch.Tensor) -> None:
        bias, mat1, mat2, alpha, beta = inputs
        ctx.save_for_backward(mat1, mat2)
        ctx.bias_shape = None if bias is None else bias.shape
        ctx.alpha, ctx.beta = alpha, beta

    def addmm_backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        mat1, mat2 = ctx.saved_tensors
        grad_bias = None
        if ctx.bias_shape is not None and ctx.needs_input_grad[0]:
            grad_bias = bias_gradient(grad, ctx.bias_shape, ctx.beta, row_sum)
        grad_mat1, grad_mat2 = operand_gradients(
            mat1, mat2, ctx.needs_input_grad[1:3], lambda: addmm_op(None, grad, mat2.mT, ctx.alpha, 0.0),
            lambda: addmm_op(None, mat1.mT, grad, ctx.alpha, 0.0))
        return grad_bias, grad_mat1, grad_mat2, None, None

    matmul_op.register_autograd(matmul_backward, setup_context=save_operands)
    addmm_op.register_autograd(addmm_backward, setup_context=save_addmm)
    return MatmulOps(matmul_op, addmm_op)


def _summed_rows_op(namespace: str, summed_rows: SummedRows) -> SummedRows:
    """``summed_rows`` as the custom op ``<namespace>::summed_rows``, so that compiled graphs keep
    the kernel opaque, as they keep the matmuls."""

    @torch.library.custom_op(f"{namespace}::summed_rows", mutates_args=())
    def summed_rows_op(grad: torch.Tensor, beta: float) -> torch.Tensor:
        return summed_rows(grad, beta)

    @summed_rows_op.register_fake
    def _(grad: torch.Tensor, beta: float) -> torch.Tensor:
        return grad.new_empty(grad.shape[1])

    return summed_rows_op
