"""Triton kernels that move each traffic pattern's bytes, the second candidate for every ceiling.

PyTorch's ``copy_``, ``add`` and ``sum`` are not the fastest way to move their bytes: generated
kernels beat them on the H200 and so read as ``pct_peak`` over 100% ("Ceilings" in
``results/h200/trust/NOTES.md``).  Each ceiling is the faster of PyTorch's kernel and one of these,
which stream fp32 the way the operators' own kernels do: 1024 elements a program, one 16-byte
vector a thread, full blocks unmasked.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import triton
import triton.language as tl

BLOCK = 1024
NUM_WARPS = 8
"""1024 fp32 values over 8 warps: one 16-byte vector a thread, as the exp kernels load."""


@triton.jit
def _offsets(n, BLOCK: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK
    return start + tl.arange(0, BLOCK), start + BLOCK <= n


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    """``dst[i] = src[i]`` for one block: reads ``4n`` bytes and writes ``4n`` over the grid."""
    offsets, full = _offsets(n, BLOCK)
    if full:
        tl.store(dst_ptr + offsets, tl.load(src_ptr + offsets))
    else:
        mask = offsets < n
        tl.store(dst_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """``out[i] = a[i] + b[i]`` for one block: two reads to a write."""
    offsets, full = _offsets(n, BLOCK)
    if full:
        tl.store(out_ptr + offsets, tl.load(a_ptr + offsets) + tl.load(b_ptr + offsets))
    else:
        mask = offsets < n
        total = tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, total, mask=mask)


@triton.jit
def sum_kernel(src_ptr, partial_ptr, n, BLOCK: tl.constexpr):
    """``partial[p] = sum(src[p * BLOCK : (p + 1) * BLOCK])``: a read-only pass (the partial sums
    add one 4-byte write per 4 KiB read)."""
    offsets, full = _offsets(n, BLOCK)
    if full:
        values = tl.load(src_ptr + offsets)
    else:
        values = tl.load(src_ptr + offsets, mask=offsets < n, other=0.0)
    tl.store(partial_ptr + tl.program_id(0), tl.sum(values, axis=0))


def pattern_call(name: str, inputs: tuple[torch.Tensor, ...]) -> tuple[Callable[[], object], torch.Tensor]:
    """The launch that moves traffic pattern ``name`` (``copy``, ``read2_write1`` or ``read``) over
    contiguous fp32 ``inputs`` (one tensor, two for ``read2_write1``), and the output it writes:
    a tensor like the first input, or for ``read`` one partial sum per block."""
    n = inputs[0].numel()
    grid = (triton.cdiv(n, BLOCK),)
    if name == "read":
        kernel, out = sum_kernel, inputs[0].new_empty(grid[0])
    else:
        kernel, out = (copy_kernel if name == "copy" else add_kernel), torch.empty_like(inputs[0])
    return (lambda: kernel[grid](*inputs, out, n, BLOCK=BLOCK, num_warps=NUM_WARPS)), out
