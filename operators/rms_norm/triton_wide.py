"""rms_norm's Triton backward for wide rows: the kept-input one-pass kernel, the row split and two passes.

The math is that of :mod:`operators.rms_norm.triton_impl`'s one-pass backward; these kernels
keep wide rows streaming where a whole fp32 row and its ``dw`` no longer fit comfortably in
registers.  Each writes ``dx`` and fp32 partial ``dw`` rows that ``triton_impl`` sums.  Which
shapes take which is :mod:`operators.rms_norm.strategy`'s table, and how each is launched
:mod:`operators.rms_norm.triton_plans` (probe numbers refer to ``results/h200/rms_norm/NOTES.md``).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from operators.rms_norm.triton_plans import (
    BwdKernel,
    BwdPlan,
    grid_dependency_control,
    let_dw_sum_launch,
    persistent_grid,
)

_SHARE_READY: tl.constexpr = tl.constexpr(1 << 32)
"""The ready flag in the high word of a row-split share cell (64 bits: the share's fp32 bits below)."""

_ROW_DOT_BLOCK_N = 4096
"""Columns per step of the two-pass backward's row-sum kernel (8 warps, 16 values per thread)."""


@triton.jit
def _fp32_again(v):
    """``v`` as fp32, converted anew: bf16 through its bit pattern, so the compiler cannot
    reuse an earlier ``.to(tl.float32)`` of the same values and keep that fp32 copy alive."""
    if v.dtype == tl.bfloat16:
        return (v.to(tl.int16, bitcast=True).to(tl.int32) << 16).to(tl.float32, bitcast=True)
    return v.to(tl.float32)


@triton.jit
def _rms_norm_bwd_kept_kernel(
    dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, dw_partial_ptr, M, N: tl.constexpr,
    BLOCK_N: tl.constexpr, NUM_STAGES: tl.constexpr, USE_PDL: tl.constexpr,
):
    """One-pass backward, one row a step strided over the grid, ``x`` and ``dy`` kept in their dtype.

    ``c = rstd * sum(dy * w * x) / N``, ``dx = rstd * (dy * w - x * rstd * c)``; the program's
    ``sum(dy * x * rstd)`` is fp32 row ``pid`` of ``dw_partial`` [programs, N]; ``BLOCK_N >= N``.
    ``x`` and ``dy`` are converted to fp32 once for the row sum and again (:func:`_fp32_again`)
    for ``dx`` and ``dw``, so only their 16-bit copies live across the sum: at 16384 wide the row,
    the ``dw`` accumulator and ``w`` then fit in registers without spilling (probe 11).  The row
    loop has ``NUM_STAGES`` software-pipeline stages (more than one lost, probe 28).
    ``USE_PDL``: let the ``dw`` sum launch early (:func:`let_dw_sum_launch`).
    """
    let_dw_sum_launch(USE_PDL)
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < N
    dw = tl.zeros([BLOCK_N], dtype=tl.float32)
    programs = tl.num_programs(0)
    for i in tl.range(0, tl.cdiv(M - pid, programs), num_stages=NUM_STAGES):
        row = pid + i * programs
        offsets = row.to(tl.int64) * N + cols
        x = tl.load(x_ptr + offsets, mask=col_mask, other=0.0)
        dy = tl.load(dy_ptr + offsets, mask=col_mask, other=0.0)
        rstd = tl.load(rstd_ptr + row)
        w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
        c = tl.sum(dy.to(tl.float32) * w * x.to(tl.float32), axis=0) * rstd / N
        xhat = _fp32_again(x) * rstd
        dy32 = _fp32_again(dy)
        tl.store(dx_ptr + offsets, (rstd * (dy32 * w - xhat * c)).to(dx_ptr.dtype.element_ty), mask=col_mask)
        dw += dy32 * xhat
    tl.store(dw_partial_ptr + pid.to(tl.int64) * N + cols, dw, mask=col_mask)


@triton.jit
def _publish_share(cell_ptr, row, part, share, PARTS: tl.constexpr):
    """Store a part's share of a row sum in cell ``(row, part)``: the fp32 bits in the low word
    and a ready flag in the high word, in one 64-bit store, so readers need no fence."""
    tl.store(cell_ptr + tl.cast(row, tl.int64) * PARTS + part,
             share.to(tl.uint32, bitcast=True).to(tl.int64) | _SHARE_READY)


@triton.jit
def _row_sum_of_shares(cell_ptr, row, PARTS: tl.constexpr, CELLS: tl.constexpr):
    """Wait until every part of ``row`` has published its share, then add the shares (in the
    same fixed order in every part, so they all get the same sum).  ``CELLS``, the cells read at
    once, is ``PARTS`` rounded up to a power of two."""
    row_cells = cell_ptr + tl.cast(row, tl.int64) * PARTS
    cells = tl.arange(0, CELLS)
    published = tl.load(row_cells + cells, mask=cells < PARTS, other=_SHARE_READY, volatile=True)
    while tl.min(published >> 32, axis=0) == 0:
        published = tl.load(row_cells + cells, mask=cells < PARTS, other=_SHARE_READY, volatile=True)
    return tl.sum((published & 0xFFFFFFFF).to(tl.uint32).to(tl.float32, bitcast=True), axis=0)


@triton.jit
def _rms_norm_bwd_row_split_kernel(
    dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, dw_partial_ptr, cell_ptr, M, N,
    PARTS: tl.constexpr, CELLS: tl.constexpr, BLOCK_N: tl.constexpr, USE_PDL: tl.constexpr,
):
    """One-pass backward with each row split into ``PARTS`` parts, one program each.

    Program ``pid`` owns columns ``[part * BLOCK_N, (part + 1) * BLOCK_N)``, ``part = pid % PARTS``,
    of the rows of group ``pid // PARTS``, which strides over the rows.  The parts of a row meet
    through its ``PARTS`` share cells in global memory (:func:`_publish_share`,
    :func:`_row_sum_of_shares`) to form ``S = sum(dy * w * x)`` over the whole row; then
    ``dx = rstd * (dy * w - xhat * rstd * S / N)`` with ``xhat = x * rstd``, and the program's
    ``sum(dy * xhat)`` lands in its columns of fp32 row ``group`` of ``dw_partial`` [groups, N].

    Each share is published a step before it is needed: per step, for rows ``r`` (share published
    last step), ``r'`` (loaded last step) and ``r''``, the program loads ``r''``, publishes the
    share of ``r'``, then waits for the shares of ``r``, which its partners published a step ago,
    and finishes ``r``: publishing a step ahead beat waiting for same-step shares (probe 18).
    Rows stay in their input dtype and are converted again for ``dx`` (:func:`_fp32_again`).
    Preconditions: every program of a group is resident at once (a persistent grid); ``cell``
    (int64, ``PARTS`` per row, where Helion's exchange has a fixed 16) is zero on entry; ``CELLS``,
    the cells a row's sum reads at once, is ``PARTS`` rounded up to a power of two.
    ``USE_PDL``: let the ``dw`` sum launch early (:func:`let_dw_sum_launch`).
    """
    let_dw_sum_launch(USE_PDL)
    pid = tl.program_id(0)
    part = pid % PARTS
    group = pid // PARTS
    groups = tl.num_programs(0) // PARTS
    cols = part * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    dw = tl.zeros([BLOCK_N], dtype=tl.float32)
    step = groups.to(tl.int64) * N
    offsets = group.to(tl.int64) * N + cols
    x = tl.load(x_ptr + offsets, mask=col_mask & (group < M), other=0.0)
    dy = tl.load(dy_ptr + offsets, mask=col_mask & (group < M), other=0.0)
    if group < M:
        _publish_share(cell_ptr, group, part, tl.sum(dy.to(tl.float32) * w * x.to(tl.float32), axis=0), PARTS)
    x_next = tl.load(x_ptr + offsets + step, mask=col_mask & (group + groups < M), other=0.0)
    dy_next = tl.load(dy_ptr + offsets + step, mask=col_mask & (group + groups < M), other=0.0)
    for row in tl.range(group, M, groups, num_stages=1):
        after_mask = col_mask & (row + 2 * groups < M)
        x_after = tl.load(x_ptr + offsets + 2 * step, mask=after_mask, other=0.0)
        dy_after = tl.load(dy_ptr + offsets + 2 * step, mask=after_mask, other=0.0)
        if row + groups < M:
            share = tl.sum(dy_next.to(tl.float32) * w * x_next.to(tl.float32), axis=0)
            _publish_share(cell_ptr, row + groups, part, share, PARTS)
        rstd = tl.load(rstd_ptr + row)
        c = _row_sum_of_shares(cell_ptr, row, PARTS, CELLS) * rstd / N
        xhat = _fp32_again(x) * rstd
        dy32 = _fp32_again(dy)
        tl.store(dx_ptr + offsets, (rstd * (dy32 * w - xhat * c)).to(dx_ptr.dtype.element_ty), mask=col_mask)
        dw += dy32 * xhat
        x, dy, x_next, dy_next = x_next, dy_next, x_after, dy_after
        offsets += step
    tl.store(dw_partial_ptr + group.to(tl.int64) * N + cols, dw, mask=col_mask)


@triton.jit
def _rms_norm_bwd_row_dot_kernel(
    dy_ptr, x_ptr, w_ptr, rstd_ptr, c_ptr, M, N,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """First kernel of the two-pass backward: fp32 ``c = rstd * sum(dy * w * x) / N`` [M], ``BLOCK_M``
    rows a program, in ``BLOCK_N``-wide column steps."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < M
    row_offsets = rows.to(tl.int64)[:, None] * N
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        col_mask = cols < N
        mask = row_mask[:, None] & col_mask[None, :]
        x = tl.load(x_ptr + row_offsets + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row_offsets + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
        acc += dy * w[None, :] * x
    rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0)
    tl.store(c_ptr + rows, tl.sum(acc, axis=1) * rstd / N, mask=row_mask)


@triton.jit
def _rms_norm_bwd_stripe_kernel(
    dy_ptr, x_ptr, w_ptr, rstd_ptr, c_ptr, dx_ptr, dw_partial_ptr, M, N, ROWS_PER_PROGRAM,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, USE_PDL: tl.constexpr,
):
    """Second kernel of the two-pass backward, over a ``BLOCK_N``-wide stripe of columns.

    Program ``(i, j)`` takes columns ``[i * BLOCK_N, (i + 1) * BLOCK_N)`` of rows
    ``[j * ROWS_PER_PROGRAM, (j + 1) * ROWS_PER_PROGRAM)``, ``BLOCK_M`` a step, and, with ``c``
    from :func:`_rms_norm_bwd_row_dot_kernel`, writes ``dx = rstd * (dy * w - x * rstd * c)``; it
    keeps the stripe's ``sum(dy * x * rstd)`` over its rows in registers and stores it in fp32 row
    ``j`` of ``dw_partial`` [cdiv(M, ROWS_PER_PROGRAM), N].  ``USE_PDL``: let the ``dw`` sum
    launch early (:func:`let_dw_sum_launch`).
    """
    let_dw_sum_launch(USE_PDL)
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    dw = tl.zeros([BLOCK_N], dtype=tl.float32)
    first_row = tl.program_id(1) * ROWS_PER_PROGRAM
    last_row = tl.minimum(first_row + ROWS_PER_PROGRAM, M)
    for row_start in range(first_row, last_row, BLOCK_M):
        rows = row_start + tl.arange(0, BLOCK_M)
        row_mask = rows < last_row
        mask = row_mask[:, None] & col_mask[None, :]
        offsets = rows.to(tl.int64)[:, None] * N + cols[None, :]
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0)
        c = tl.load(c_ptr + rows, mask=row_mask, other=0.0)
        xhat = x * rstd[:, None]
        dx = rstd[:, None] * (dy * w[None, :] - xhat * c[:, None])
        tl.store(dx_ptr + offsets, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += tl.sum(dy * xhat, axis=0)
    tl.store(dw_partial_ptr + tl.program_id(1).to(tl.int64) * N + cols, dw, mask=col_mask)


def kept_input_kernel(plan: BwdPlan, use_pdl: bool) -> tuple[triton.JITFunction, dict]:
    """The kernel of a ``ONE_PASS_KEPT`` plan and its launch keywords (constexprs, ``USE_PDL``
    being ``use_pdl``, and ``num_warps``); the launch is that of the plain one-pass kernel."""
    if plan.kernel is not BwdKernel.ONE_PASS_KEPT:
        raise ValueError(f"not a kept-input plan: {plan}")
    return _rms_norm_bwd_kept_kernel, dict(BLOCK_N=plan.block_n, NUM_STAGES=plan.num_stages,
                                           USE_PDL=use_pdl, num_warps=plan.num_warps)


def launch_row_split(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor, dx: torch.Tensor,
    plan: BwdPlan,
) -> torch.Tensor:
    """Run the row-split backward of ``plan`` into ``dx``; returns the fp32 partial ``dw`` rows, one
    per group of ``cdiv(N, plan.block_n)`` programs.

    The grid is persistent and holds whole groups only, sized so that every part of a row is
    resident while it waits for the others on an otherwise idle GPU; CUDA does not promise it,
    so concurrent launches on other streams can deadlock it (see "Known limit of the row split"
    in ``results/h200/rms_norm/NOTES.md``).  Under the CPU interpreter, whose programs run one
    after another, a part would wait forever for a later program, so each row is one part there.
    """
    m, n = x.shape
    block_n = plan.block_n if x.device.type == "cuda" else triton.next_power_of_2(n)
    parts = triton.cdiv(n, block_n)
    meta = dict(PARTS=parts, CELLS=triton.next_power_of_2(parts), BLOCK_N=block_n,
                USE_PDL=grid_dependency_control(x.device), num_warps=plan.num_warps)
    cells = torch.zeros(m * parts, dtype=torch.int64, device=x.device)
    probe_args = (grad_out, x, weight, rstd, dx, rstd, cells, m, n)  # ``rstd`` stands in for dw_partial
    resident = persistent_grid(_rms_norm_bwd_row_split_kernel, probe_args, meta, x.device, m * parts)
    if resident < parts:
        raise RuntimeError(f"a row split into {parts} parts needs {parts} resident programs, "
                           f"the GPU holds {resident}")
    groups = resident // parts
    dw_partial = torch.empty(groups, n, dtype=torch.float32, device=x.device)
    _rms_norm_bwd_row_split_kernel[(groups * parts,)](
        grad_out, x, weight, rstd, dx, dw_partial, cells, m, n, **meta
    )
    return dw_partial


def launch_two_pass(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor,
    dx: torch.Tensor, plan: BwdPlan,
) -> torch.Tensor:
    """Run the two-pass backward of ``plan`` into ``dx``; returns the fp32 partial ``dw`` rows,
    one per group of ``plan.rows_per_program`` rows."""
    m, n = x.shape
    c = torch.empty(m, dtype=torch.float32, device=x.device)
    row_dot_block_n = min(_ROW_DOT_BLOCK_N, triton.next_power_of_2(n))
    _rms_norm_bwd_row_dot_kernel[(m,)](
        grad_out, x, weight, rstd, c, m, n, BLOCK_M=1, BLOCK_N=row_dot_block_n, num_warps=8
    )
    rows_per_program = plan.rows_per_program or m
    groups = triton.cdiv(m, rows_per_program)
    dw_partial = torch.empty(groups, n, dtype=torch.float32, device=x.device)
    _rms_norm_bwd_stripe_kernel[(triton.cdiv(n, plan.block_n), groups)](
        grad_out, x, weight, rstd, c, dx, dw_partial, m, n, rows_per_program,
        BLOCK_M=plan.block_m, BLOCK_N=plan.block_n, USE_PDL=grid_dependency_control(x.device),
        num_warps=plan.num_warps,
    )
    return dw_partial
