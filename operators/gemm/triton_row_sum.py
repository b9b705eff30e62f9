"""addmm's row-vector bias gradient in Triton: the sum of the output gradient's rows, scaled.

For ``grad`` (M, N) and ``S`` parts of ``R`` rows each (the last one shorter), in fp32::

    part[s] = grad[s*R : (s+1)*R, :].sum(0)                  _row_sum_parts_kernel
    out     = beta * (part[0] + part[1] + ... + part[S-1])   _row_sum_finish_kernel (cast to grad's dtype)

With one part (M of at most ``R``: the decode shapes; up to 256 rows at N of 16 or less) the
parts kernel writes ``out`` itself, ``beta * part[0]`` cast, and the finish is not launched: the
same bits, one launch fewer.

The parts give every SM a few programs even where N is narrow (N = 512 at addmm's reference
shapes is 4 column blocks), where torch's ``grad.sum(0)`` takes several times what reading ``grad``
once costs (``results/h200/gemm/NOTES.md``, "The bias gradient").  The second kernel adds the parts
in a fixed order, so the result is the same bits on every run (no atomics).  Loads are masked
pointer loads with arbitrary strides and 64-bit offsets: any M, N and layout.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from operators.gemm.row_sum_plan import column_block, row_block, row_parts
from operators.gemm.strategy import sm_count
from operators.gemm.triton_configs import INTERPRETED

INTERPRETER_TILE = (16, 16)
"""Both kernels' tile under the interpreter (rows or parts, columns)."""
FINISH_BLOCK_P, FINISH_BLOCK_N = 32, 64
"""The finish's step at N of 33 or more: 32 parts of 64 columns, 8 programs at N = 512 (Helion's
tuned finish of the same sum: gemm NOTES, "Session 17"); narrower, as many more parts."""


def parts_tile(n: int) -> tuple[int, int]:
    """The parts kernel's tile at N: :func:`~operators.gemm.row_sum_plan.row_block` rows of
    :func:`~operators.gemm.row_sum_plan.column_block` columns (32 x 128, 256 contiguous bytes a
    row in bf16, from N = 65; 256 x 16 at N = 8)."""
    return INTERPRETER_TILE if INTERPRETED else (row_block(n), column_block(n))


def finish_tile(n: int) -> tuple[int, int]:
    """The finish's tile at N: (parts, columns), :data:`FINISH_BLOCK_P` x :data:`FINISH_BLOCK_N`
    elements."""
    if INTERPRETED:
        return INTERPRETER_TILE
    columns = min(FINISH_BLOCK_N, column_block(n))
    return FINISH_BLOCK_P * FINISH_BLOCK_N // columns, columns


@triton.jit
def _row_sum_parts_kernel(grad_ptr, part_ptr, M, N, stride_m, stride_n, rows_per_part, beta,
                          FINAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """``part[program_id(1), cols] = grad[rows of that part, cols].sum(0)`` in fp32 for the column
    block ``program_id(0)``; ``rows_per_part`` is a multiple of ``BLOCK_M``
    (:func:`~operators.gemm.row_sum_plan.part_rows`).  ``FINAL`` (one part): ``part_ptr`` is the
    output, and the sum is scaled by ``beta`` and cast to its dtype."""
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    part = tl.program_id(1)
    start = part * rows_per_part
    end = tl.minimum(start + rows_per_part, M)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for row0 in range(start, end, BLOCK_M):
        rows = row0 + tl.arange(0, BLOCK_M)
        mask = (rows[:, None] < end) & (cols[None, :] < N)
        offsets = rows[:, None].to(tl.int64) * stride_m + cols[None, :].to(tl.int64) * stride_n
        tile = tl.load(grad_ptr + offsets, mask=mask, other=0.0)
        acc += tile.to(tl.float32)
    total = tl.sum(acc, axis=0)
    if FINAL:
        total = (total * beta).to(part_ptr.dtype.element_ty)
    tl.store(part_ptr + part * N + cols, total, mask=cols < N)


@triton.jit
def _row_sum_finish_kernel(part_ptr, out_ptr, N, parts, beta,
                           BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr):
    """``out[cols] = beta * part[:, cols].sum(0)``, the parts added in order, cast to ``out``'s dtype."""
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_P, BLOCK_N), dtype=tl.float32)
    for p0 in range(0, parts, BLOCK_P):
        ps = p0 + tl.arange(0, BLOCK_P)
        mask = (ps[:, None] < parts) & (cols[None, :] < N)
        acc += tl.load(part_ptr + ps[:, None] * N + cols[None, :], mask=mask, other=0.0)
    total = tl.sum(acc, axis=0) * beta
    tl.store(out_ptr + cols, total.to(out_ptr.dtype.element_ty), mask=cols < N)


def summed_rows(grad: torch.Tensor, beta: float) -> torch.Tensor:
    """``beta * grad.sum(0)`` for a 2-D ``grad`` (M, N), summed in fp32, in ``grad``'s dtype: (N,)."""
    m, n = grad.shape
    out = torch.empty(n, dtype=grad.dtype, device=grad.device)
    if n == 0:
        return out
    block_m, block_n = parts_tile(n)
    rows, parts = row_parts(m, n, sm_count(grad.device))
    final = parts == 1
    part = out if final else torch.empty((parts, n), dtype=torch.float32, device=grad.device)
    _row_sum_parts_kernel[(triton.cdiv(n, block_n), parts)](
        grad, part, m, n, grad.stride(0), grad.stride(1), rows, float(beta), FINAL=final,
        BLOCK_M=block_m, BLOCK_N=block_n)
    if final:
        return out
    block_p, block_n = finish_tile(n)
    _row_sum_finish_kernel[(triton.cdiv(n, block_n),)](part, out, n, parts, float(beta),
                                                        BLOCK_P=block_p, BLOCK_N=block_n)
    return out
