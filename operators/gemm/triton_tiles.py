"""What every gemm Triton kernel shares: the order it visits output tiles in, the fused addmm
epilogue, and the host-side classification of the bias that the epilogue is compiled for::

    C = alpha * acc + beta * bias        (fp32; bias absent, a row vector (N,) or any (M, N) view)
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from operators.gemm.triton_configs import FULL_BIAS, NO_BIAS, ROW_BIAS


@triton.jit
def tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Grouped order: tile ids run down ``GROUP_M`` row-blocks, then across the columns."""
    tiles_per_group = GROUP_M * num_pid_n
    first_m = (tile_id // tiles_per_group) * GROUP_M
    group_rows = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (tile_id % tiles_per_group) % group_rows
    pid_n = (tile_id % tiles_per_group) // group_rows
    return pid_m, pid_n


@triton.jit
def epilogue(acc, bias_ptr, offs_m, offs_n, M, N, stride_bias_m, stride_bias_n, alpha, beta,
             BIAS_KIND: tl.constexpr):
    """``alpha * acc + beta * bias`` in fp32 for the tile at rows ``offs_m``, columns ``offs_n``."""
    out = acc * alpha
    if BIAS_KIND == 1:
        bias = tl.load(bias_ptr + offs_n * stride_bias_n, mask=offs_n < N, other=0.0)
        out += beta * bias.to(tl.float32)[None, :]
    elif BIAS_KIND == 2:
        mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
        ptrs = bias_ptr + offs_m[:, None] * stride_bias_m + offs_n[None, :] * stride_bias_n
        out += beta * tl.load(ptrs, mask=mask, other=0.0).to(tl.float32)
    return out


@triton.jit
def promised_multiple(x, VECTOR: tl.constexpr):
    """``x``, which the host promises is a multiple of ``VECTOR``, written so that Triton's
    alignment analysis sees it (a ``tl.multiple_of`` hint on a kernel argument is dropped)."""
    if VECTOR > 1:
        x = x // VECTOR * VECTOR
    return x


@triton.jit
def vector_operands(M, N, K, stride_am, stride_ak, stride_bk, stride_bn, A_TRANS: tl.constexpr,
                    B_TRANS: tl.constexpr, VECTOR: tl.constexpr):
    """The sizes and strides of A (M, K) and B (K, N) with the promise of :func:`operand_promises`
    applied: each operand's contiguous size and its other stride are multiples of ``VECTOR``, so
    its masked loads move 16-byte vectors where Triton's own specialization (multiples of 16)
    finds none, as at K = 8 or N = 5000.  ``A_TRANS``/``B_TRANS``: the operand is column-major
    (its unit stride, a constant to Triton, is the other one)."""
    if A_TRANS:
        M, stride_ak = promised_multiple(M, VECTOR), promised_multiple(stride_ak, VECTOR)
    else:
        K, stride_am = promised_multiple(K, VECTOR), promised_multiple(stride_am, VECTOR)
    if B_TRANS:
        K, stride_bn = promised_multiple(K, VECTOR), promised_multiple(stride_bn, VECTOR)
    else:
        N, stride_bk = promised_multiple(N, VECTOR), promised_multiple(stride_bk, VECTOR)
    return M, N, K, stride_am, stride_ak, stride_bk, stride_bn


def operand_promises(a: torch.Tensor, b: torch.Tensor, a_trans: bool, b_trans: bool) -> tuple[int, ...]:
    """The sizes and strides of ``a @ b`` that :func:`vector_operands` promises are multiples of
    its ``VECTOR`` (for :func:`~operators.gemm.alignment.vector_elements`)."""
    (m, k), n = a.shape, b.shape[1]
    a_values = (m, a.stride(1)) if a_trans else (k, a.stride(0))
    b_values = (k, b.stride(1)) if b_trans else (n, b.stride(0))
    return (*a_values, *b_values)


def bias_kind(bias: torch.Tensor | None, m: int, n: int) -> tuple[int, torch.Tensor | None]:
    """Classify ``bias`` broadcast to (M, N): absent, a row vector, or a full matrix (any strides,
    also a column vector broadcast along the rows)."""
    if bias is None:
        return NO_BIAS, None
    view = bias.expand(m, n)
    return (ROW_BIAS if view.stride(0) == 0 else FULL_BIAS), view
