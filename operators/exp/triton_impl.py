"""Elementwise exp in Triton, forward and backward, as a ``torch.library`` custom op.

Forward:  y = exp(x), computed in fp32 and rounded to x's dtype.
Backward: dx = dy * y, from the saved output (no second exp).

Both ops (:func:`~operators.exp.custom_ops.define_exp_ops`) have fake implementations and
autograd, so ``torch.compile(fullgraph=True)`` traces through them without a graph break.  The host
functions they call, :func:`exp_forward` and :func:`exp_backward`, are also called directly by
:mod:`operators.exp.triton_direct`.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from operators.exp.custom_ops import define_exp_ops


@triton.jit
def _block_start(BLOCK_SIZE: tl.constexpr, INT64: tl.constexpr):
    if INT64:
        return tl.program_id(0).to(tl.int64) * BLOCK_SIZE
    return tl.program_id(0) * BLOCK_SIZE


@triton.jit
def _exp_fwd_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr, INT64: tl.constexpr):
    """y[i] = exp(x[i]) for one block of BLOCK_SIZE elements, in fp32.

    Full blocks load and store without a mask, so the accesses stay 16 bytes wide whatever
    n_elements is; only the last, partial block is masked.  Offsets are 32-bit unless the
    tensor needs 64.
    """
    start = _block_start(BLOCK_SIZE, INT64)
    offsets = start + tl.arange(0, BLOCK_SIZE)
    if start + BLOCK_SIZE <= n_elements:
        x = tl.load(x_ptr + offsets)
        tl.store(y_ptr + offsets, tl.exp(x.to(tl.float32)).to(y_ptr.dtype.element_ty))
    else:
        mask = offsets < n_elements
        x = tl.load(x_ptr + offsets, mask=mask)
        tl.store(y_ptr + offsets, tl.exp(x.to(tl.float32)).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _exp_bwd_kernel(dy_ptr, y_ptr, dx_ptr, n_elements, BLOCK_SIZE: tl.constexpr,
                    INT64: tl.constexpr):
    """dx[i] = dy[i] * y[i] for one block of BLOCK_SIZE elements, in fp32 (unmasked full blocks)."""
    start = _block_start(BLOCK_SIZE, INT64)
    offsets = start + tl.arange(0, BLOCK_SIZE)
    if start + BLOCK_SIZE <= n_elements:
        dy = tl.load(dy_ptr + offsets).to(tl.float32)
        y = tl.load(y_ptr + offsets).to(tl.float32)
        tl.store(dx_ptr + offsets, (dy * y).to(dx_ptr.dtype.element_ty))
    else:
        mask = offsets < n_elements
        dy = tl.load(dy_ptr + offsets, mask=mask).to(tl.float32)
        y = tl.load(y_ptr + offsets, mask=mask).to(tl.float32)
        tl.store(dx_ptr + offsets, (dy * y).to(dx_ptr.dtype.element_ty), mask=mask)


BLOCK_SIZE = 1024


def _launch(kernel, n: int, element_size: int, *tensors: torch.Tensor) -> None:
    """One 1024-element block per program, one 16-byte vector per thread (as Helion's tuning found:
    step 3, block size, in ``results/h200/exp/NOTES.md``)."""
    warps = max(1, BLOCK_SIZE * element_size // (16 * 32))
    kernel[(triton.cdiv(n, BLOCK_SIZE),)](
        *tensors, n, BLOCK_SIZE=BLOCK_SIZE, INT64=n + BLOCK_SIZE >= 2**31, num_warps=warps
    )


def exp_forward(x: torch.Tensor) -> torch.Tensor:
    """exp(x) by the Triton kernel, into a new contiguous tensor (no dispatcher, no autograd)."""
    x = x.contiguous()
    y = torch.empty_like(x)
    _launch(_exp_fwd_kernel, x.numel(), x.element_size(), x, y)
    return y


def exp_backward(dy: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """dy * y by the Triton kernel, into a new contiguous tensor (no dispatcher, no autograd)."""
    dy, y = dy.contiguous(), y.contiguous()
    dx = torch.empty_like(y)
    _launch(_exp_bwd_kernel, y.numel(), y.element_size(), dy, y, dx)
    return dx


exp = define_exp_ops("opbench", exp_forward, exp_backward)
"""Differentiable exp through the Triton kernels (``opbench::exp_fwd``, ``opbench::exp_bwd``)."""
