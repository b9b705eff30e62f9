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


def transposed_problem(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, bias: torch.Tensor | None
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int, torch.Tensor | None]:
    """``a``, ``b``, ``out``, the bias kind and the bias of ``out.T = b.T @ a.T``, for ``bias`` None
    or broadcast to ``out``'s shape: its transpose is a full bias, whatever it was."""
    kind, bias = (NO_BIAS, None) if bias is None else (FULL_BIAS, bias.mT)
    return b.mT, a.mT, out.mT, kind, bias


def bias_kind(bias: torch.Tensor | None, m: int, n: int) -> tuple[int, torch.Tensor | None]:
    """Classify ``bias`` broadcast to (M, N): absent, a row vector, or a full matrix (any strides,
    also a column vector broadcast along the rows)."""
    if bias is None:
        return NO_BIAS, None
    view = bias.expand(m, n)
    return (ROW_BIAS if view.stride(0) == 0 else FULL_BIAS), view
