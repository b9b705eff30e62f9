"""quack's GEMM as the ``quack`` peer backend of the gemm and addmm operators.

quack-kernels' ``quack.gemm_interface`` (CuTe DSL, sm_90 and newer GPUs, bf16 or fp16
operands, autotuned on the first call of each shape) computes ``gemm(A, B, bias=, alpha=)``
``= alpha * A @ B + bias`` for a row-vector bias (N,), and ``gemm_add(A, B, C, alpha=, beta=)``
``= alpha * A @ B + beta * C``.  Neither is differentiable: :func:`fused_matmul` runs through the
Functions of :mod:`operators.gemm.autograd`, whose backward calls it on transposed views (quack
reads either major).  quack adds its bias unscaled, so a row-vector bias is scaled by ``beta``
first (in its own dtype); a full (M, N) bias is ``gemm_add``'s C.

quack is imported only when called; :func:`skip_reason` says why it cannot run, before anything
is imported, and :func:`check_quack_shape` refuses the sizes it cannot take before it is called.
"""

from __future__ import annotations

import torch

from operators import peers_support
from operators.gemm import autograd

QUACK_DTYPES = (torch.bfloat16, torch.float16)
"""The operand dtypes of quack's GEMM among those the operators run (its kernels refuse fp32)."""


def skip_reason(peer: str, device: str, dtype: torch.dtype) -> str | None:
    """Why ``peer`` cannot run on ``device`` in ``dtype`` (None: it can, or it is no peer)."""
    if peer != "quack":
        return None
    return peers_support.quack_skip_reason(device) or unsupported_dtype(dtype)


def unsupported_dtype(dtype: torch.dtype) -> str | None:
    """Why quack's GEMM cannot take operands of ``dtype`` (None: it can)."""
    if dtype in QUACK_DTYPES:
        return None
    names = " or ".join(str(d).removeprefix("torch.") for d in QUACK_DTYPES)
    return f"quack's GEMM takes {names}, not {str(dtype).removeprefix('torch.')}"


def check_quack_shape(mat1: torch.Tensor, mat2: torch.Tensor) -> None:
    """Refuse K and N whose rows break 16-byte alignment: the rows of mat1 (K), mat2 and the
    output (N) in the forward, and of the gradients (K and N) in the backward."""
    peers_support.check_quack_alignment(mat1.dtype, K=mat1.shape[1], N=mat2.shape[1])


def fused_matmul(x: torch.Tensor, y: torch.Tensor, bias: torch.Tensor | None = None, alpha: float = 1.0,
                 beta: float = 1.0) -> torch.Tensor:
    """``alpha * x @ y + beta * bias`` (``bias`` None, (N,) or (M, N)) by quack's ``gemm`` or,
    for a full bias, ``gemm_add``, with quack's defaults (autotuned); without autograd."""
    from quack.gemm_interface import gemm, gemm_add

    if bias is not None and bias.dim() == 2:
        return gemm_add(x, y, bias, alpha=alpha, beta=beta)
    return gemm(x, y, bias=bias if bias is None or beta == 1.0 else beta * bias, alpha=alpha)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` by quack's GEMM for 2-D bf16/fp16 tensors, differentiable."""
    return autograd.matmul(a, b, fused_matmul)


def addmm(bias: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, alpha: float = 1.0,
          beta: float = 1.0) -> torch.Tensor:
    """``beta * bias + alpha * mat1 @ mat2`` by quack's GEMM, with ``bias`` (N,) or (M, N), differentiable."""
    return autograd.addmm(bias, mat1, mat2, alpha, beta, fused_matmul)
