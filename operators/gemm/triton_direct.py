"""The gemm and addmm Triton kernels through plain ``torch.autograd.Function``s: the ``triton_direct``
backends.

Same kernel (:func:`~operators.gemm.triton_impl.fused_matmul`) and backward as the
``opbench::matmul`` / ``opbench::addmm`` custom ops of :mod:`operators.gemm.triton_impl`::

    out    = alpha * mat1 @ mat2 + beta * bias
    grad_1 = alpha * grad @ mat2.T      grad_2 = alpha * mat1.T @ grad
    grad_bias = beta * grad            (summed over rows for a row-vector bias, by
                                        :func:`~operators.gemm.triton_row_sum.summed_rows`)

here through the Functions of :mod:`operators.gemm.autograd`, without torch.library's dispatch,
so the two backends differ only by that dispatch (the ``walltime`` metric shows its cost).
"""

from __future__ import annotations

import torch

from operators.gemm import autograd
from operators.gemm.triton_impl import fused_matmul
from operators.gemm.triton_row_sum import summed_rows


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for 2-D tensors of one floating dtype, differentiable, bypassing torch.library."""
    return autograd.matmul(a, b, fused_matmul)


def addmm(bias: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, alpha: float = 1.0,
          beta: float = 1.0) -> torch.Tensor:
    """``beta * bias + alpha * mat1 @ mat2`` with ``bias`` (N,) or (M, N), bypassing torch.library."""
    return autograd.addmm(bias, mat1, mat2, alpha, beta, fused_matmul, summed_rows)
