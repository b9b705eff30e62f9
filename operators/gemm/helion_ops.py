"""The gemm and addmm Helion kernel as ``torch.library`` custom ops with registered autograd: the
``helion_op`` and ``helion_compiled`` backends.

Same kernel (:func:`~operators.gemm.helion_impl.fused_matmul`, stored configs) and backward as
:mod:`operators.gemm.helion_impl`'s autograd Functions::

    out    = alpha * mat1 @ mat2 + beta * bias                   (opbench_helion::addmm)
    grad_1 = alpha * grad @ mat2.T      grad_2 = alpha * mat1.T @ grad
    grad_bias = beta * grad            (summed over rows for a row-vector bias)

Outputs have 16-byte padded row pitches (:func:`~operators.gemm.alignment.output_buffer`), which
the fake implementations reproduce.  Dynamo cannot trace the Helion call itself (helion 1.5.0,
torch 2.13): binding a stored config (``Kernel.bind``) is a graph break, and a kernel call
with the epilogue function as an argument is refused.  As custom ops the kernels are opaque to Dynamo, so
``torch.compile(fullgraph=True)`` traces the call whole.  The ``helion`` backend keeps the
autograd Functions: the dispatcher costs host time on every call (the ``walltime`` metric of
``helion`` against ``helion_op`` shows how much).
"""

from __future__ import annotations

import torch

from operators.gemm.alignment import output_buffer
from operators.gemm.helion_impl import fused_matmul


@torch.library.custom_op("opbench_helion::matmul", mutates_args=())
def matmul_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` by the Helion kernel."""
    return fused_matmul(a, b)


@torch.library.custom_op("opbench_helion::addmm", mutates_args=())
def addmm_op(bias: torch.Tensor | None, mat1: torch.Tensor, mat2: torch.Tensor, alpha: float,
             beta: float) -> torch.Tensor:
    """``alpha * mat1 @ mat2 + beta * bias`` by the Helion kernel (no bias: a scaled matmul)."""
    return fused_matmul(mat1, mat2, bias, alpha, beta)


@matmul_op.register_fake
def _(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return output_buffer(a.shape[0], b.shape[1], a.dtype, a.device)


@addmm_op.register_fake
def _(bias: torch.Tensor | None, mat1: torch.Tensor, mat2: torch.Tensor, alpha: float,
      beta: float) -> torch.Tensor:
    return output_buffer(mat1.shape[0], mat2.shape[1], mat1.dtype, mat1.device)


def _save_operands(ctx, inputs: tuple, output: torch.Tensor) -> None:
    a, b = inputs
    ctx.save_for_backward(a, b)


def _matmul_backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
    a, b = ctx.saved_tensors
    grad_a = matmul_op(grad, b.mT) if ctx.needs_input_grad[0] else None
    grad_b = matmul_op(a.mT, grad) if ctx.needs_input_grad[1] else None
    return grad_a, grad_b


def _save_addmm(ctx, inputs: tuple, output: torch.Tensor) -> None:
    bias, mat1, mat2, alpha, beta = inputs
    ctx.save_for_backward(mat1, mat2)
    ctx.bias_shape = None if bias is None else bias.shape
    ctx.alpha, ctx.beta = alpha, beta


def _addmm_backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
    mat1, mat2 = ctx.saved_tensors
    grad_bias = grad_mat1 = grad_mat2 = None
    if ctx.bias_shape is not None and ctx.needs_input_grad[0]:
        grad_bias = grad.sum_to_size(ctx.bias_shape) * ctx.beta
    if ctx.needs_input_grad[1]:
        grad_mat1 = addmm_op(None, grad, mat2.mT, ctx.alpha, 0.0)
    if ctx.needs_input_grad[2]:
        grad_mat2 = addmm_op(None, mat1.mT, grad, ctx.alpha, 0.0)
    return grad_bias, grad_mat1, grad_mat2, None, None


matmul_op.register_autograd(_matmul_backward, setup_context=_save_operands)
addmm_op.register_autograd(_addmm_backward, setup_context=_save_addmm)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for 2-D tensors of one floating dtype, differentiable, traceable by Dynamo."""
    return matmul_op(a, b)


def addmm(bias: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, alpha: float = 1.0,
          beta: float = 1.0) -> torch.Tensor:
    """``beta * bias + alpha * mat1 @ mat2`` with ``bias`` of shape (N,) or (M, N), traceable by Dynamo."""
    return addmm_op(bias, mat1, mat2, float(alpha), float(beta))
