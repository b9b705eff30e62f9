"""The gemm and addmm Helion kernel as ``torch.library`` custom ops with registered autograd: the
``helion_op`` and ``helion_compiled`` backends.

The same kernel (:func:`~operators.gemm.helion_impl.fused_matmul`, stored configs) and backward
as :mod:`operators.gemm.helion_impl`'s autograd Functions, registered by
:func:`~operators.gemm.custom_ops.define_matmul_ops` (``opbench_helion::matmul``, ``::addmm`` and
``::summed_rows``, the row-bias gradient).
Dynamo cannot trace the Helion call itself (helion 1.5.0,
torch 2.13): binding a stored config (``Kernel.bind``) is a graph break, and a kernel call
with the epilogue function as an argument is refused.  As custom ops the kernels are opaque to Dynamo, so
``torch.compile(fullgraph=True)`` traces the call whole.  The ``helion`` backend keeps the
autograd Functions: the dispatcher costs host time on every call (the ``walltime`` metric of
``helion`` against ``helion_op`` shows how much).
"""

from __future__ import annotations

import torch

from operators.gemm.custom_ops import define_matmul_ops
from operators.gemm.helion_impl import fused_matmul, summed_rows

OPS = define_matmul_ops("opbench_helion", fused_matmul, summed_rows)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for 2-D tensors of one floating dtype, differentiable, traceable by Dynamo."""
    return OPS.matmul(a, b)


def addmm(bias: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, alpha: float = 1.0,
          beta: float = 1.0) -> torch.Tensor:
    """``beta * bias + alpha * mat1 @ mat2`` with ``bias`` of shape (N,) or (M, N), traceable by Dynamo."""
    return OPS.addmm(bias, mat1, mat2, float(alpha), float(beta))
