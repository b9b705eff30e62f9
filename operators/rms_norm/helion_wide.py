"""rms_norm's Helion backward kernels for rows too wide for one program: row split, shared rows, two passes.

Each returns ``dx`` and fp32 partial ``dw`` rows that ``helion_impl.rms_norm_dw_sum`` adds up;
:data:`operators.rms_norm.helion_impl.BWD_KERNELS` says which shapes take which (probe
numbers refer to ``results/h200/rms_norm/NOTES.md``).  The row split's Triton helpers are source
strings: helion 1.5.0's ``hl.triton_kernel`` fails on a ``@triton.jit`` object under
``TRITON_INTERPRET=1`` (``InternalError: argument of type: <class 'function'>``).
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch
import triton

SHARE_CELLS_PER_ROW = 16
"""Share cells per row in :func:`rms_norm_bwd_row_split`'s exchange: the most parts a row can have,
fixed in the helpers' source (``tl.arange`` takes a constant); Triton's sizes them from its ``PARTS``."""

ROW_SPLIT_MIN_PART = 4096
"""Narrowest part :func:`rms_norm_bwd_row_split` may tune to: a 32768-wide row has at most 8
parts, within ``SHARE_CELLS_PER_ROW`` and any GPU's SMs."""

TRITON_PUBLISH_SHARE = f"""
@triton.jit
def publish_share(cell_ptr, row, part, share, m):
    bits = share.to(tl.uint32, bitcast=True).to(tl.int64) | (1 << 32)
    tl.store(cell_ptr + tl.cast(row, tl.int64) * {SHARE_CELLS_PER_ROW} + part, bits, mask=row < m)
"""
"""Triton source (for ``hl.triton_kernel``) that stores a part's share of row ``row``'s sum in
share cell ``(row, part)`` (rows below ``m`` only): the fp32 bits in the low word and a ready
flag in the high word, one 64-bit store, so a reader that sees the flag sees the share."""

TRITON_ROW_SUM_OF_SHARES = f"""
@triton.jit
def row_sum_of_shares(cell_ptr, row, parts):
    cells = tl.arange(0, {SHARE_CELLS_PER_ROW})
    ptrs = cell_ptr + tl.cast(row, tl.int64) * {SHARE_CELLS_PER_ROW} + cells
    published = tl.load(ptrs, mask=cells < parts, other=1 << 32, volatile=True)
    while tl.min(published >> 32, axis=0) == 0:
        published = tl.load(ptrs, mask=cells < parts, other=1 << 32, volatile=True)
    return tl.sum((published & 0xFFFFFFFF).to(tl.uint32).to(tl.float32, bitcast=True), axis=0)
"""
"""Triton source (for ``hl.triton_kernel``) that waits until all ``parts`` share cells of row
``row`` hold a share, then adds the shares (in cell order, so every part gets the same sum)."""


@helion.kernel
def rms_norm_bwd_row_split(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor,
    sm_grid: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One-pass backward with each row split into column parts: ``dx`` [M, N] and partial ``dw``
    fp32 [G, N].

    ``G = len(sm_grid) // parts`` groups of ``parts`` programs, one program per SM at most, so all
    are resident at once on an idle GPU.  Program ``(g, p)`` owns part ``p`` of rows
    ``g, g + G, ...``; the parts of a row add up ``S = sum(dy * w * x)`` through the row's share
    cells (:data:`TRITON_PUBLISH_SHARE`, :data:`TRITON_ROW_SUM_OF_SHARES`, a fresh zeroed buffer
    each call), then ``dx = rstd * (dy * w - xhat * rstd * S / N)`` with ``xhat = x * rstd``, and
    the program's ``sum(dy * xhat)`` lands in its part of row ``g`` of the partial ``dw``.  Each
    share is published a row before it is needed: per step the program loads row ``r + 2G``,
    publishes the share of row ``r + G`` (loaded a step ago), then waits for the shares of row
    ``r`` (published a step ago by every part) and finishes it.  Rows stay in their input dtype
    between steps and are converted to fp32 where used.  ``sm_grid``: :func:`helion_impl.sm_grid`.
    """
    m, n = x.size()
    n = hl.specialize(n)
    padded = triton.next_power_of_2(n)
    part = hl.register_block_size(min(ROW_SPLIT_MIN_PART, padded), padded)
    parts = helion.cdiv(n, part)
    groups = sm_grid.size(0) // parts
    share_cells = torch.zeros([m * SHARE_CELLS_PER_ROW], dtype=torch.int64, device=x.device)
    dx = torch.empty_like(x)
    dw_partial = torch.empty([groups, n], dtype=torch.float32, device=x.device)
    for tile_g, tile_p in hl.tile([groups, n], block_size=[1, part]):
        g = tile_g.begin
        part_id = tile_p.id
        w = weight[tile_p].to(torch.float32)
        dw_acc = hl.zeros([tile_p], dtype=torch.float32)
        x_cur = hl.load(x, [g, tile_p], extra_mask=g < m)
        dy_cur = hl.load(grad_out, [g, tile_p], extra_mask=g < m)
        share = (dy_cur.to(torch.float32) * w * x_cur.to(torch.float32)).sum(-1)
        hl.triton_kernel(TRITON_PUBLISH_SHARE, args=(share_cells, g, part_id, share, m), output_like=None)
        x_next = hl.load(x, [g + groups, tile_p], extra_mask=(g + groups) < m)
        dy_next = hl.load(grad_out, [g + groups, tile_p], extra_mask=(g + groups) < m)
        for row in hl.grid(g, m, groups):
            x_after = hl.load(x, [row + 2 * groups, tile_p], extra_mask=(row + 2 * groups) < m)
            dy_after = hl.load(grad_out, [row + 2 * groups, tile_p], extra_mask=(row + 2 * groups) < m)
            share_next = (dy_next.to(torch.float32) * w * x_next.to(torch.float32)).sum(-1)
            hl.triton_kernel(TRITON_PUBLISH_SHARE, args=(share_cells, row + groups, part_id, share_next, m),
                             output_like=None)
            rstd_row = rstd[row]
            row_sum = hl.triton_kernel(TRITON_ROW_SUM_OF_SHARES, args=(share_cells, row, parts),
                                       output_like=share)
            xhat = x_cur.to(torch.float32) * rstd_row
            dy_row = dy_cur.to(torch.float32)
            dx[row, tile_p] = (rstd_row * (dy_row * w - xhat * (row_sum * rstd_row / n))).to(dx.dtype)
            dw_acc += dy_row * xhat
            x_cur = x_next
            dy_cur = dy_next
            x_next = x_after
            dy_next = dy_after
        dw_partial[g, tile_p] = dw_acc
    return dx, dw_partial


@helion.kernel
def rms_norm_bwd_shared_rows(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """One-pass backward for wide rows: ``dx`` [M, N] and partial ``dw`` fp32 [G, N], G groups of rows.

    Each (column stripe, group of rows) tile walks its rows; per row it reduces the whole row to
    ``s = sum(dy * w * x)``, then writes its stripe of ``dx = rstd * (dy * w - xhat * rstd * s / N)``
    and adds ``dy * xhat`` to the stripe's ``dw`` in registers.  The stripes of a row run side by
    side, so the row read for ``s`` by all but one of them mostly comes from L2 (probe 13).
    """
    m, n = x.size()
    n = hl.specialize(n)
    block_g = hl.register_block_size(m)
    dx = torch.empty_like(x)
    dw_partial = torch.empty([helion.cdiv(m, block_g), n], dtype=torch.float32, device=x.device)
    for tile_n, tile_g in hl.tile([n, m], block_size=[None, block_g]):
        w = weight[tile_n].to(torch.float32)
        dw_acc = hl.zeros([tile_n], dtype=torch.float32)
        for tile_m in hl.tile(tile_g.begin, tile_g.end):
            rstd_tile = rstd[tile_m][:, None]
            s = (grad_out[tile_m, :].to(torch.float32) * weight[None, :].to(torch.float32)
                 * x[tile_m, :].to(torch.float32)).sum(-1)
            xhat = x[tile_m, tile_n].to(torch.float32) * rstd_tile
            dy_tile = grad_out[tile_m, tile_n].to(torch.float32)
            c = s[:, None] * rstd_tile / n
            dx[tile_m, tile_n] = (rstd_tile * (dy_tile * w[None, :] - xhat * c)).to(dx.dtype)
            dw_acc += (dy_tile * xhat).sum(0)
        dw_partial[tile_g.id, tile_n] = dw_acc
    return dx, dw_partial


@helion.kernel
def rms_norm_bwd_row_dot(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor
) -> torch.Tensor:
    """First kernel of the two-pass backward: ``c = rstd * sum(dy * w * x) / N`` per row, fp32 [M]."""
    m, n = x.size()
    n = hl.specialize(n)
    c = torch.empty([m], dtype=torch.float32, device=x.device)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m], dtype=torch.float32)
        for tile_n in hl.tile(n):
            dy_tile = grad_out[tile_m, tile_n].to(torch.float32)
            g = dy_tile * weight[None, tile_n].to(torch.float32)
            acc += (g * x[tile_m, tile_n].to(torch.float32)).sum(-1)
        c[tile_m] = acc * rstd[tile_m] / n
    return c


@helion.kernel
def rms_norm_bwd_stripe(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor,
    c: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Second kernel of the two-pass backward: ``dx`` [M, N] and partial ``dw`` fp32 [G, N].

    Each (group of rows, column stripe) tile walks its rows writing ``dx = rstd * (dy * w - xhat * c)``,
    with ``c`` from :func:`rms_norm_bwd_row_dot` and ``xhat = x * rstd``, and keeps the stripe's
    ``sum(dy * xhat)`` in fp32 registers; it stores that sum in its group's row of the partial ``dw``.
    """
    m, n = x.size()
    n = hl.specialize(n)
    block_g = hl.register_block_size(m)
    dx = torch.empty_like(x)
    dw_partial = torch.empty([helion.cdiv(m, block_g), n], dtype=torch.float32, device=x.device)
    for tile_g, tile_n in hl.tile([m, n], block_size=[block_g, None]):
        w = weight[tile_n].to(torch.float32)
        dw_acc = hl.zeros([tile_n], dtype=torch.float32)
        for tile_m in hl.tile(tile_g.begin, tile_g.end):
            rstd_tile = rstd[tile_m][:, None]
            dy_tile = grad_out[tile_m, tile_n].to(torch.float32)
            xhat = x[tile_m, tile_n].to(torch.float32) * rstd_tile
            dx_tile = rstd_tile * (dy_tile * w[None, :] - xhat * c[tile_m][:, None])
            dx[tile_m, tile_n] = dx_tile.to(dx.dtype)
            dw_acc += (dy_tile * xhat).sum(0)
        dw_partial[tile_g.id, tile_n] = dw_acc
    return dx, dw_partial
