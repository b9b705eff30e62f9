"""RMS normalization in Triton: forward, backward, custom ops and autograd.

For ``x`` of shape ``(M, N)`` and ``weight`` of shape ``(N,)``, with all math in fp32::

    rstd = 1 / sqrt(mean(x**2, axis=-1) + eps)            # one value per row, saved
    y    = x * rstd * weight

Backward, with ``xhat = x * rstd`` and ``g = dy * weight``::

    dx = rstd * (g - xhat * mean(g * xhat, axis=-1))
    dw = sum over rows of dy * xhat

The forward reads ``x`` from DRAM once (the looped kernel reads it again, mostly from L2) and
writes ``y`` once; the one-pass backward reads ``x``, ``dy`` and ``rstd`` once (from DRAM) and
writes ``dx`` once, plus one fp32 partial ``dw`` row per program (per group of programs in
the row split).

* Forward: rows from ``_FWD_LOOPED_MIN_N`` wide take one program each, which walks the row
  twice in column chunks: the first loop sums ``x^2``, the second reads ``x`` again, mostly
  from L2 (the loads carry eviction hints for that), and stores ``y``.  Only a chunk is live,
  so many programs share an SM whatever the width: on the H200 this ran 1.2-8.3 points of copy
  bandwidth ahead of keeping whole rows in registers from 2048 to 32768 wide, and matched a
  copy of the same bytes at 4096x16384, 4096x32768 and 16384x8192 (probe 30).  Narrower rows
  are normalized whole, in blocks of rows held in registers.
* Backward, one pass: as many programs as fit on the GPU at once stride over the rows,
  writing ``dx`` and accumulating a partial ``dw`` in fp32 registers; one partial row per
  program lands in a ``(programs, N)`` buffer that a second small kernel sums (and casts),
  launched as a programmatic dependent so that its launch overlaps the main kernel's end.
  At 4096 wide, each program loads its next row into registers before it reduces and
  stores the current one, so one resident program per SM keeps DRAM busy; 16-bit rows 8192
  wide take the plain one-pass kernel with its row loop given four pipeline stages instead
  (probe 23: 2.4-2.9 points of copy bandwidth ahead of the register prefetch, whole; why is
  not established: compiled by Triton 3.7.1 for sm_90, only the ``rstd`` load is staged
  through shared memory).  fp32 rows keep the prefetch there: staged, their ``x``, ``dy``
  and ``w`` would need 288 KiB of shared memory.
  At 16384 wide (bf16), programs of 32 warps keep ``x`` and ``dy`` in bf16 and convert them
  twice, which is what lets the row and ``dw`` fit without spilling (probe 11: 84% of copy
  bandwidth for the main kernel, against 60% for the spilling kernel).
* Backward, 16-bit rows padded from 32768 to ``_BWD_MAX_BLOCK_N`` wide (and ``N`` a multiple of
  16, which keeps the loads vectorized): a row and its ``dw`` accumulator no longer fit in
  one SM's registers.  Each row is split into 8192-wide parts, one program each, that add up
  the row sum through slots in global memory, each share published a row before it is needed
  (probe 18: 81% of copy bandwidth at 4096 x 32768, against 57% for the split backward).
* Backward, other rows wider than ``_BWD_ONE_PASS_MAX_BLOCK_N`` (fp32, ``N`` not a multiple of
  16, or wider than ``_BWD_MAX_BLOCK_N``): the split backward first computes each row's
  ``c = rstd * sum(dy * w * x) / N`` (reading ``x`` and ``dy``), then walks column stripes
  over groups of rows, writing ``dx`` and keeping each stripe's ``dw`` in registers: it reads
  ``x`` and ``dy`` twice, 5/3 of the one-pass traffic, but streams: on the H200 it beat a
  two-pass kernel that re-read each block of rows from L2 and kept ``dw`` in global memory
  (57% against 45% of copy bandwidth at 4096 x 32768).

How each kernel is launched (block sizes, warps, pipelining, grid) is a :class:`FwdPlan` or
:class:`BwdPlan`; :func:`fwd_plan` and :func:`bwd_plan` choose them from the shape, as
measured on the H200 (``results/h200/rms_norm/NOTES.md``).  Persistent grids are sized from
the compiled kernel's register and shared-memory use, so they never run a second wave.

The host functions are registered as ``torch.library`` custom ops (``opbench::rms_norm_fwd``,
``opbench::rms_norm_bwd``) with autograd, so ``torch.compile`` traces through them.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

_FWD_LOOPED_MIN_N = 2048
"""Row width from which the forward takes the looped kernel, one row per program."""

_FWD_LOOPED_PLANS = {2048: (1024, 4), 4096: (2048, 8), 8192: (4096, 16), 16384: (4096, 32), 32768: (8192, 32)}
"""``(chunk, num_warps)`` of the looped forward by the largest power of two not above the
width (the fastest in the H200 probe 30; the widest entry serves all wider rows)."""

_BWD_ONE_PASS_MAX_BLOCK_N = 16384
"""Widest padded row one program keeps whole; wider rows are split across programs."""

_BWD_MAX_BLOCK_N = 131072
"""Widest padded row the row-split backward handles (16 parts); wider rows take the split backward."""

_INTERPRETER_PROGRAMS = 4
"""Persistent grid size under Triton's CPU interpreter."""

_SLOT_READY: tl.constexpr = tl.constexpr(1 << 32)
"""The ready flag in the high word of a row-split backward's 64-bit slot."""

def _grid_dependency_control() -> bool:
    """Whether this process's kernels can use ``griddepcontrol``: compiled (not Triton's CPU
    interpreter) for a GPU of compute capability 9.0 or later, the first with the instruction."""
    interpreted = os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "yes", "on")
    return not interpreted and torch.cuda.is_available() and torch.cuda.get_device_capability() >= (9, 0)


_GRID_DEPENDENCY_CONTROL: tl.constexpr = tl.constexpr(_grid_dependency_control())
"""Whether kernels issue ``griddepcontrol`` instructions and the ``dw`` sum is a programmatic
dependent launch (the capability of the current GPU when this module is imported)."""

_resident_programs: dict[tuple, int] = {}


@triton.jit
def _let_dw_sum_launch():
    """Let the partial-``dw`` sum, launched as a programmatic dependent, start its programs now;
    they wait in :func:`_sum_rows_kernel` until this kernel has finished."""
    if _GRID_DEPENDENCY_CONTROL:
        gdc_launch_dependents()


@triton.jit
def _rms_norm_fwd_kernel(
    x_ptr, w_ptr, y_ptr, rstd_ptr, M, N, eps,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, NUM_STAGES: tl.constexpr,
):
    """Normalize blocks of ``BLOCK_M`` rows, taking blocks ``pid, pid + programs, ...``.

    Per row: ``rstd = rsqrt(sum(x^2) / N + eps)``, ``y = x * rstd * w``.
    """
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < N
    step = tl.num_programs(0) * BLOCK_M
    for row_start in tl.range(tl.program_id(0) * BLOCK_M, M, step, num_stages=NUM_STAGES):
        rows = row_start + tl.arange(0, BLOCK_M)
        row_mask = rows < M
        mask = row_mask[:, None] & col_mask[None, :]
        offsets = rows.to(tl.int64)[:, None] * N + cols[None, :]

        x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps)
        w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
        y = x * rstd[:, None] * w[None, :]
        tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)
        tl.store(rstd_ptr + rows, rstd, mask=row_mask)


@triton.jit
def _rms_norm_fwd_looped_kernel(x_ptr, w_ptr, y_ptr, rstd_ptr, eps, N: tl.constexpr, CHUNK: tl.constexpr,
                                NUM_STAGES: tl.constexpr):
    """Normalize row ``pid`` in two loops over ``CHUNK``-wide column chunks.

    The first loop accumulates ``sum(x^2)`` (its loads marked to stay in L2), then
    ``rstd = rsqrt(sum(x^2) / N + eps)``; the second reads ``x`` again, from L2 when it stayed
    there (marked to leave it), and stores ``y = x * rstd * w``.  Only a chunk is live at a
    time, so many programs fit on an SM whatever the width.
    """
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * N
    acc = tl.zeros([CHUNK], dtype=tl.float32)
    for start in tl.range(0, N, CHUNK, num_stages=NUM_STAGES):
        cols = start + tl.arange(0, CHUNK)
        x = tl.load(x_row + cols, mask=cols < N, other=0.0, eviction_policy="evict_last").to(tl.float32)
        acc += x * x
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
    for start in tl.range(0, N, CHUNK, num_stages=NUM_STAGES):
        cols = start + tl.arange(0, CHUNK)
        x = tl.load(x_row + cols, mask=cols < N, other=0.0, eviction_policy="evict_first").to(tl.float32)
        w = tl.load(w_ptr + cols, mask=cols < N, other=0.0, eviction_policy="evict_last").to(tl.float32)
        tl.store(y_ptr + row * N + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=cols < N)
    tl.store(rstd_ptr + row, rstd)


@triton.jit
def _rms_norm_bwd_kernel(
    dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, dw_partial_ptr, M, N,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, NUM_STAGES: tl.constexpr,
):
    """One-pass backward over blocks of ``BLOCK_M`` whole rows, strided across programs.

    Per row: ``xhat = x * rstd``, ``g = dy * w``, ``dx = rstd * (g - xhat * sum(g * xhat) / N)``.
    The program's ``sum(dy * xhat)`` over its rows is stored as row ``pid`` of ``dw_partial``.
    """
    _let_dw_sum_launch()
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < N
    dw = tl.zeros([BLOCK_N], dtype=tl.float32)

    step = tl.num_programs(0) * BLOCK_M
    for row_start in tl.range(pid * BLOCK_M, M, step, num_stages=NUM_STAGES):
        rows = row_start + tl.arange(0, BLOCK_M)
        row_mask = rows < M
        mask = row_mask[:, None] & col_mask[None, :]
        offsets = rows.to(tl.int64)[:, None] * N + cols[None, :]
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0)
        w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)

        xhat = x * rstd[:, None]
        g = dy * w[None, :]
        c = tl.sum(g * xhat, axis=1) / N
        dx = rstd[:, None] * (g - xhat * c[:, None])
        tl.store(dx_ptr + offsets, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += tl.sum(dy * xhat, axis=0)

    tl.store(dw_partial_ptr + pid.to(tl.int64) * N + cols, dw, mask=col_mask)


@triton.jit
def _rms_norm_bwd_prefetch_kernel(
    dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, dw_partial_ptr, M, N,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """The one-pass backward with the next block of rows loaded into registers ahead of use.

    Same math as :func:`_rms_norm_bwd_kernel`: per row ``xhat = x * rstd``, ``g = dy * w``,
    ``dx = rstd * (g - xhat * sum(g * xhat) / N)``, and the program's ``sum(dy * xhat)`` in row
    ``pid`` of ``dw_partial``.  Each step issues the loads of its next block (kept in the input
    dtype) before it reduces and stores the current one, so the row reduction and the ``dx``
    stores overlap the next block's DRAM latency without a trip through shared memory.  The
    step to the next block, ``programs * BLOCK_M * N`` elements, is an int32 product (the
    launcher refuses grids where it would wrap): a version with the step in int64 and the row
    math in a shared helper ran 5-8% slower on the H200 (same run, ``ab_prefetch.txt``).
    """
    _let_dw_sum_launch()
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < N
    dw = tl.zeros([BLOCK_N], dtype=tl.float32)
    step = tl.num_programs(0) * BLOCK_M

    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    mask = (rows < M)[:, None] & col_mask[None, :]
    offsets = rows.to(tl.int64)[:, None] * N + cols[None, :]
    x_next = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    dy_next = tl.load(dy_ptr + offsets, mask=mask, other=0.0)
    for row_start in tl.range(pid * BLOCK_M, M, step, num_stages=1):
        rows = row_start + tl.arange(0, BLOCK_M)
        row_mask = rows < M
        mask = row_mask[:, None] & col_mask[None, :]
        offsets = rows.to(tl.int64)[:, None] * N + cols[None, :]
        x = x_next.to(tl.float32)
        dy = dy_next.to(tl.float32)
        next_mask = (rows + step < M)[:, None] & col_mask[None, :]
        x_next = tl.load(x_ptr + offsets + step * N, mask=next_mask, other=0.0)
        dy_next = tl.load(dy_ptr + offsets + step * N, mask=next_mask, other=0.0)
        rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0)
        w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)

        xhat = x * rstd[:, None]
        g = dy * w[None, :]
        c = tl.sum(g * xhat, axis=1) / N
        dx = rstd[:, None] * (g - xhat * c[:, None])
        tl.store(dx_ptr + offsets, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += tl.sum(dy * xhat, axis=0)

    tl.store(dw_partial_ptr + pid.to(tl.int64) * N + cols, dw, mask=col_mask)


@triton.jit
def _fp32_again(v):
    """``v`` as fp32, converted anew: bf16 through its bit pattern, so the compiler cannot
    reuse an earlier ``.to(tl.float32)`` of the same values and keep that fp32 copy alive."""
    if v.dtype == tl.bfloat16:
        return (v.to(tl.int16, bitcast=True).to(tl.int32) << 16).to(tl.float32, bitcast=True)
    return v.to(tl.float32)


@triton.jit
def _rms_norm_bwd_kept_kernel(
    dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, dw_partial_ptr, M, N,
    BLOCK_N: tl.constexpr, NUM_STAGES: tl.constexpr,
):
    """One-pass backward, one row a step strided over the grid, ``x`` and ``dy`` kept in their dtype.

    ``c = rstd * sum(dy * w * x) / N``, ``dx = rstd * (dy * w - x * rstd * c)``; the
    program's ``sum(dy * x * rstd)`` is row ``pid`` of ``dw_partial``.  ``x`` and ``dy`` are
    converted to fp32 once for the row sum and again (:func:`_fp32_again`) for ``dx`` and
    ``dw``, so only their 16-bit copies live across the sum: at 16384 wide the row, the
    ``dw`` accumulator and ``w`` then fit in registers without spilling.  The row loop is
    given ``NUM_STAGES`` software-pipeline stages (more than one lost on the H200, probe 28).
    """
    _let_dw_sum_launch()
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
def _publish_share(slot_ptr, row, part, share, PARTS: tl.constexpr):
    """Store a part's share of a row sum in slot ``(row, part)``: the fp32 bits in the low word
    and a ready flag in the high word, in one 64-bit store, so readers need no fence."""
    tl.store(slot_ptr + tl.cast(row, tl.int64) * PARTS + part,
             share.to(tl.uint32, bitcast=True).to(tl.int64) | _SLOT_READY)


@triton.jit
def _row_sum_of_shares(slot_ptr, row, PARTS: tl.constexpr, SLOTS: tl.constexpr):
    """Wait until every part of ``row`` has published its share, then add the shares (in the
    same fixed order in every part, so they all get the same sum)."""
    row_slots = slot_ptr + tl.cast(row, tl.int64) * PARTS
    slots = tl.arange(0, SLOTS)
    published = tl.load(row_slots + slots, mask=slots < PARTS, other=_SLOT_READY, volatile=True)
    while tl.min(published >> 32, axis=0) == 0:
        published = tl.load(row_slots + slots, mask=slots < PARTS, other=_SLOT_READY, volatile=True)
    return tl.sum((published & 0xFFFFFFFF).to(tl.uint32).to(tl.float32, bitcast=True), axis=0)


@triton.jit
def _rms_norm_bwd_row_split_kernel(
    dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, dw_partial_ptr, slot_ptr, M, N,
    PARTS: tl.constexpr, SLOTS: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """One-pass backward with each row split into ``PARTS`` parts, one program each.

    Program ``pid`` owns columns ``[part * BLOCK_N, (part + 1) * BLOCK_N)``, ``part = pid % PARTS``,
    of the rows of group ``pid // PARTS``, which strides over the rows.  The parts of a row
    meet through its ``PARTS`` slots in global memory (:func:`_publish_share`,
    :func:`_row_sum_of_shares`) to form ``S = sum(dy * w * x)`` over the whole row; then
    ``dx = rstd * (dy * w - xhat * rstd * S / N)`` with ``xhat = x * rstd``, and the program's
    ``sum(dy * xhat)`` lands in its columns of row ``group`` of ``dw_partial``.

    Each share is published a step before it is needed: per step, for rows ``r`` (share
    published last step), ``r'`` (loaded last step) and ``r''``, the program loads ``r''``,
    publishes the share of ``r'``, then waits for the shares of ``r``, which its partners
    published a step ago, and finishes ``r``.  Rows stay in their input dtype and are
    converted again for ``dx`` (:func:`_fp32_again`).  Every program of a group must be
    resident at once (a persistent grid); ``slot`` (``PARTS`` per row) must be zero on entry;
    ``SLOTS`` is ``PARTS`` rounded up to a power of two.
    """
    _let_dw_sum_launch()
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
        _publish_share(slot_ptr, group, part, tl.sum(dy.to(tl.float32) * w * x.to(tl.float32), axis=0), PARTS)
    x_next = tl.load(x_ptr + offsets + step, mask=col_mask & (group + groups < M), other=0.0)
    dy_next = tl.load(dy_ptr + offsets + step, mask=col_mask & (group + groups < M), other=0.0)
    for row in tl.range(group, M, groups, num_stages=1):
        after_mask = col_mask & (row + 2 * groups < M)
        x_after = tl.load(x_ptr + offsets + 2 * step, mask=after_mask, other=0.0)
        dy_after = tl.load(dy_ptr + offsets + 2 * step, mask=after_mask, other=0.0)
        if row + groups < M:
            share = tl.sum(dy_next.to(tl.float32) * w * x_next.to(tl.float32), axis=0)
            _publish_share(slot_ptr, row + groups, part, share, PARTS)
        rstd = tl.load(rstd_ptr + row)
        c = _row_sum_of_shares(slot_ptr, row, PARTS, SLOTS) * rstd / N
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
    """First kernel of the split backward: ``c = rstd * sum(dy * w * x) / N`` for ``BLOCK_M`` rows."""
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
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """Second kernel of the split backward, over a ``BLOCK_N``-wide stripe of columns.

    Program ``(i, j)`` takes columns ``[i * BLOCK_N, (i + 1) * BLOCK_N)`` of rows
    ``[j * ROWS_PER_PROGRAM, (j + 1) * ROWS_PER_PROGRAM)`` and, with ``c`` from the first
    kernel, writes ``dx = rstd * (dy * w - x * rstd * c)``; it keeps the stripe's
    ``sum(dy * x * rstd)`` over its rows in registers and stores it in row ``j`` of ``dw_partial``.
    """
    _let_dw_sum_launch()
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


@triton.jit
def _sum_rows_kernel(partial_ptr, out_ptr, P, N, BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr):
    """``out[j] = sum_i partial[i, j]`` over the ``P`` fp32 rows, cast to ``out``'s dtype.

    Launched as a programmatic dependent of the kernel that wrote ``partial``, its programs
    may start while that kernel runs; they wait for it to finish before reading.
    """
    if _GRID_DEPENDENCY_CONTROL:
        gdc_wait()
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    acc = tl.zeros([BLOCK_P, BLOCK_N], dtype=tl.float32)
    for start in range(0, P, BLOCK_P):
        rows = start + tl.arange(0, BLOCK_P)
        mask = (rows < P)[:, None] & col_mask[None, :]
        acc += tl.load(partial_ptr + rows.to(tl.int64)[:, None] * N + cols[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + cols, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty), mask=col_mask)


@dataclass(frozen=True)
class FwdPlan:
    """A forward launch: ``block_m`` rows per step; ``persistent`` grids prefetch ``num_stages - 1`` steps.

    ``chunk`` plans run :func:`_rms_norm_fwd_looped_kernel` instead: one row per program
    (so ``block_m`` 1, not persistent) in two loops over ``chunk``-wide column chunks, each
    ``num_stages`` deep.
    """

    block_m: int
    num_warps: int
    num_stages: int = 1
    persistent: bool = False
    chunk: int | None = None

    def __post_init__(self) -> None:
        if self.chunk is not None and (self.block_m, self.persistent) != (1, False):
            raise ValueError(f"a looped forward runs one row per program on a plain grid, not {self}")
        if self.chunk is not None and (self.chunk < 1 or self.chunk & (self.chunk - 1)):
            raise ValueError(f"a looped forward's chunk must be a power of two, not {self.chunk}")


@dataclass(frozen=True)
class BwdPlan:
    """A backward launch.

    ``kernel`` is ``"one_pass"`` (whole rows of padded width ``block_n`` in registers),
    ``"one_pass_prefetch"`` (the same, loading the next rows while it works on the current
    ones), ``"one_pass_kept"`` (one row a step with ``x`` and ``dy`` kept in their dtype),
    ``"row_split"`` (each row in ``block_n``-wide parts, one program each, meeting in global
    memory; persistent; one part a row under the CPU interpreter) or ``"split"`` (a row-sum
    kernel, then ``block_n``-wide column stripes over groups of ``rows_per_program`` rows).
    The one-pass grids are persistent (as many programs as are resident) unless
    ``rows_per_program`` fixes them at ``cdiv(M, rows_per_program)`` programs.  Only
    ``"one_pass"`` and ``"one_pass_kept"`` pipeline their row loop (``num_stages``);
    ``"one_pass_kept"`` and ``"row_split"`` take one row a step; a plan with a setting its
    kernel would ignore is refused.
    """

    kernel: str
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int = 1
    rows_per_program: int | None = None

    def __post_init__(self) -> None:
        if self.kernel in ("one_pass_kept", "row_split") and self.block_m != 1:
            raise ValueError(f"a {self.kernel} backward takes one row a step, not {self}")
        if self.kernel not in ("one_pass", "one_pass_kept") and self.num_stages != 1:
            raise ValueError(f"a {self.kernel} backward does not pipeline its row loop, not {self}")
        if self.kernel == "row_split" and self.rows_per_program is not None:
            raise ValueError(f"a row_split backward runs on a persistent grid, not {self}")


_BWD_ONE_PASS_PLANS = {
    4096: BwdPlan("one_pass_prefetch", 1, 4096, 16),
    8192: BwdPlan("one_pass", 1, 8192, 16, num_stages=4),
    16384: BwdPlan("one_pass", 1, 16384, 16),
}
"""The one-pass backward by padded width, the fastest in the H200 probes
(``results/h200/rms_norm/NOTES.md``): one row per step; at 4096 wide the next row is loaded
ahead into registers, at 8192 (16-bit rows; fp32 takes ``_BWD_FP32_PREFETCH_PLAN``) the row
loop has four pipeline stages (probe 23, whole backward: 77.3% of copy bandwidth at 4096 x
8192 against 74.4% for the register prefetch, 92.1% against 89.7% at 16384 x 8192, 62.4%
against 59.7% at 4096 x 5120), while at 16384 the prefetching kernel spills and ran at 5-37%
of copy bandwidth."""

_BWD_FP32_PREFETCH_PLAN = BwdPlan("one_pass_prefetch", 1, 8192, 16)
"""The fp32 backward at padded width 8192: the register prefetch, every dtype's plan before
probe 23.  The four-stage plan would need 288 KiB of shared memory for fp32 rows (compiled
for sm_90 by Triton 3.7.1), more than an SM has."""

_BWD_ROW_SPLIT = BwdPlan("row_split", 1, 8192, 16)
"""The backward of 16-bit rows padded from 32768 to ``_BWD_MAX_BLOCK_N`` wide, ``N`` a multiple
of 16: 8192-wide parts with 16 warps (probe 18: 80.8% of copy bandwidth at 4096 x 32768 and
85.1% at 16384 x 32768; 4096-wide parts with 8 warps ran at 60-62%)."""

_BWD_KEPT_PLAN = BwdPlan("one_pass_kept", 1, 16384, 32, rows_per_program=32)
"""The bf16 backward at padded width 16384: ``x`` and ``dy`` kept in bf16, 32 warps and 32
rows a program (probe 11: 84% of copy bandwidth, against 81-83% for 16 rows or 16 warps)."""

_KEPT_FIXED_GRID_MIN_ROWS = 4096
"""Rows from which the kept-input backward takes its measured fixed grid (128 programs at
4096 rows); fewer rows would leave SMs idle on it, so they take a persistent grid."""

_SPLIT_STRIPE = BwdPlan("split", block_m=4, block_n=1024, num_warps=4, rows_per_program=256)
"""The split backward for rows wider than 16384 that the row split does not take (see
:func:`bwd_plan`), the fastest split in the H200 probe."""

_SUM_ROWS_TILE = 4096
"""Values each program of the partial-``dw`` sum loads at once."""

_ROW_DOT_BLOCK_N = 4096
"""Columns per step of the split backward's row-sum kernel (8 warps, 16 values per thread)."""


def _tile(block_n: int, values_per_thread: int, min_tile: int) -> tuple[int, int]:
    """``(BLOCK_M, num_warps)`` for a tile of at least ``min_tile`` values of padded rows."""
    block_m = max(1, min_tile // block_n)
    num_warps = min(32, max(4, block_m * block_n // (32 * values_per_thread)))
    return block_m, num_warps


def fwd_plan(m: int, n: int) -> FwdPlan:
    """The forward launch for an ``(m, n)`` input.

    Rows from ``_FWD_LOOPED_MIN_N`` wide take the looped kernel as ``_FWD_LOOPED_PLANS`` says
    for the largest power of two not above ``n`` (so a 5120-wide row loops three times over
    2048-wide chunks, the last half masked, rather than twice over 4096-wide ones, the second
    three quarters masked); narrower rows, tiles of 4096 values.
    """
    if n >= _FWD_LOOPED_MIN_N:
        chunk, num_warps = _FWD_LOOPED_PLANS[min(1 << (n.bit_length() - 1), max(_FWD_LOOPED_PLANS))]
        return FwdPlan(1, num_warps, chunk=chunk)
    return FwdPlan(*_tile(triton.next_power_of_2(n), values_per_thread=32, min_tile=4096))


def bwd_plan(m: int, n: int, dtype: torch.dtype) -> BwdPlan:
    """The backward launch for an ``(m, n)`` input of ``dtype`` (one-pass up to ``_BWD_MAX_BLOCK_N``).

    Only bf16 takes the kept-input kernel at 16384 wide: its second conversion goes through
    the bit pattern, while the compiler merges fp16's two conversions into one live fp32 copy.
    fp32 rows 8192 wide keep the register prefetch (the staged plan overflows shared memory).
    Below ``_KEPT_FIXED_GRID_MIN_ROWS`` rows it runs on a persistent grid instead of its
    fixed one, which would leave SMs idle.  Wider rows take the row split when they are
    16-bit and ``N`` is a multiple of 16 (it holds three rows of its part in the input dtype:
    fp32 rows spill, and so do unvectorized loads), else the split backward.
    """
    block_n = triton.next_power_of_2(n)
    if block_n > _BWD_ONE_PASS_MAX_BLOCK_N:
        row_split = block_n <= _BWD_MAX_BLOCK_N and dtype.itemsize == 2 and n % 16 == 0
        return _BWD_ROW_SPLIT if row_split else _SPLIT_STRIPE
    if block_n == _BWD_KEPT_PLAN.block_n and dtype == torch.bfloat16:
        if m < _KEPT_FIXED_GRID_MIN_ROWS:
            return dataclasses.replace(_BWD_KEPT_PLAN, rows_per_program=None)
        return _BWD_KEPT_PLAN
    if block_n == _BWD_FP32_PREFETCH_PLAN.block_n and dtype.itemsize == 4:
        return _BWD_FP32_PREFETCH_PLAN
    if block_n in _BWD_ONE_PASS_PLANS:
        return _BWD_ONE_PASS_PLANS[block_n]
    block_m, num_warps = _tile(block_n, values_per_thread=8, min_tile=2048)
    return BwdPlan("one_pass", block_m, block_n, num_warps, num_stages=2)


def _specialization(arg: object) -> object:
    """What Triton specializes a compiled kernel on: tensor dtypes, ints equal to 1 or 0 mod 16."""
    if isinstance(arg, torch.Tensor):
        return arg.dtype
    if isinstance(arg, int):
        return arg == 1, arg % 16 == 0
    return type(arg)


def _persistent_grid(kernel, args: tuple, meta: dict, device: torch.device, work: int) -> int:
    """Programs for a persistent launch: as many as the GPU holds at once, at most ``work``.

    Residency per SM comes from the compiled kernel's registers and shared memory (as in
    Triton's fused-softmax tutorial), so the grid never spills into a second wave.
    """
    if device.type != "cuda":
        return min(_INTERPRETER_PROGRAMS, work)
    key = (kernel, device, tuple(map(_specialization, args)), tuple(sorted(meta.items())))
    if key not in _resident_programs:
        compiled = kernel.warmup(*args, grid=(1,), **meta)
        compiled._init_handles()
        props = torch.cuda.get_device_properties(device)
        threads = 32 * meta["num_warps"]
        regs = -(-compiled.n_regs // 8) * 8  # registers are allocated 8 per thread at a time
        smem = compiled.metadata.shared + 1024  # the driver reserves 1 KiB per block
        regs_per_sm = getattr(props, "regs_per_multiprocessor", 65536)  # 64K on every sm_50+
        per_sm = min(
            regs_per_sm // (regs * threads),
            props.max_threads_per_multi_processor // threads,
            props.shared_memory_per_multiprocessor // smem,
        )
        _resident_programs[key] = props.multi_processor_count * max(1, per_sm)
    return min(_resident_programs[key], work)


def launch_fwd(
    x: torch.Tensor, weight: torch.Tensor, eps: float, plan: FwdPlan
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the forward on contiguous 2-D ``x`` as ``plan`` says; returns ``y`` and fp32 ``rstd``."""
    m, n = x.shape
    y = torch.empty_like(x)
    rstd = torch.empty(m, dtype=torch.float32, device=x.device)
    if plan.chunk is not None:
        _rms_norm_fwd_looped_kernel[(m,)](x, weight, y, rstd, eps, N=n, CHUNK=plan.chunk,
                                          NUM_STAGES=plan.num_stages, num_warps=plan.num_warps)
        return y, rstd
    meta = dict(BLOCK_M=plan.block_m, BLOCK_N=triton.next_power_of_2(n),
                NUM_STAGES=plan.num_stages, num_warps=plan.num_warps)
    args = (x, weight, y, rstd, m, n, eps)
    row_blocks = triton.cdiv(m, plan.block_m)
    programs = (_persistent_grid(_rms_norm_fwd_kernel, args, meta, x.device, row_blocks)
                if plan.persistent else row_blocks)
    _rms_norm_fwd_kernel[(programs,)](*args, **meta)
    return y, rstd


def sum_rows_tile(rows: int) -> tuple[int, int]:
    """``(BLOCK_P, BLOCK_N)`` of the partial-``dw`` sum over ``rows`` partial rows.

    A program loads ``_SUM_ROWS_TILE`` values (32 per thread over 4 warps), as many of the
    rows as fit at once, so the sum waits on one memory round trip rather than one per step
    of rows; columns stay at least 8 wide (one 32-byte sector of fp32).
    """
    block_n = max(8, min(256, _SUM_ROWS_TILE // triton.next_power_of_2(rows)))
    return min(triton.next_power_of_2(rows), _SUM_ROWS_TILE // block_n), block_n


def sum_partial_rows(
    dw_partial: torch.Tensor, weight: torch.Tensor, tile: tuple[int, int] | None = None,
    dependent: bool = True,
) -> torch.Tensor:
    """Sum the fp32 partial ``dw`` rows into a tensor like ``weight`` (``tile`` as :func:`sum_rows_tile`).

    On an sm_90+ GPU the sum is ``dependent`` by default: a programmatic dependent launch, whose
    programs start while the kernel launched before it on the stream (the backward kernel
    that wrote ``dw_partial``) is still running and wait for it to finish before reading.
    """
    programs, n = dw_partial.shape
    dw = torch.empty_like(weight)
    block_p, block_n = tile or sum_rows_tile(programs)
    launch = dict(launch_pdl=True) if dependent and _GRID_DEPENDENCY_CONTROL else {}
    _sum_rows_kernel[(triton.cdiv(n, block_n),)](
        dw_partial, dw, programs, n, BLOCK_P=block_p, BLOCK_N=block_n, num_warps=4, **launch
    )
    return dw


def _launch_split_bwd(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor,
    dx: torch.Tensor, plan: BwdPlan,
) -> torch.Tensor:
    """Run the split backward into ``dx``; returns the partial ``dw`` rows."""
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
        BLOCK_M=plan.block_m, BLOCK_N=plan.block_n, num_warps=plan.num_warps,
    )
    return dw_partial


def one_pass_kernel(plan: BwdPlan) -> tuple[triton.JITFunction, dict]:
    """The kernel of a one-pass ``plan`` and its launch keywords (constexprs and ``num_warps``)."""
    if plan.kernel == "one_pass_kept":
        return _rms_norm_bwd_kept_kernel, dict(BLOCK_N=plan.block_n, NUM_STAGES=plan.num_stages,
                                               num_warps=plan.num_warps)
    if plan.kernel == "one_pass_prefetch":
        return _rms_norm_bwd_prefetch_kernel, dict(BLOCK_M=plan.block_m, BLOCK_N=plan.block_n,
                                                   num_warps=plan.num_warps)
    return _rms_norm_bwd_kernel, dict(BLOCK_M=plan.block_m, BLOCK_N=plan.block_n,
                                      NUM_STAGES=plan.num_stages, num_warps=plan.num_warps)


def _launch_one_pass_bwd(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor,
    dx: torch.Tensor, plan: BwdPlan,
) -> torch.Tensor:
    """Run the one-pass backward into ``dx``; returns the partial ``dw`` rows."""
    m, n = x.shape
    kernel, meta = one_pass_kernel(plan)
    if plan.rows_per_program is not None:
        programs = triton.cdiv(m, plan.rows_per_program)
    else:
        # The partial-dw buffer is sized from the grid; ``rstd`` (fp32 too) stands in for it
        # while the grid is worked out, which compiles the kernel but does not run it.
        probe_args = (grad_out, x, weight, rstd, dx, rstd, m, n)
        programs = _persistent_grid(kernel, probe_args, meta, x.device, triton.cdiv(m, plan.block_m))
    if kernel is _rms_norm_bwd_prefetch_kernel and programs * plan.block_m * n >= 2**31:
        raise ValueError(f"a prefetching backward of {programs} programs over {n}-wide rows would step "
                         f"past 2**31 elements; give it a persistent grid (rows_per_program=None)")
    dw_partial = torch.empty(programs, n, dtype=torch.float32, device=x.device)
    kernel[(programs,)](grad_out, x, weight, rstd, dx, dw_partial, m, n, **meta)
    return dw_partial


def launch_row_parts(
    kernel, grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor,
    dx: torch.Tensor, block_n: int, num_warps: int,
) -> torch.Tensor:
    """Run a row-parts ``kernel`` (the arguments and constexprs of
    :func:`_rms_norm_bwd_row_split_kernel`) into ``dx``; returns the partial ``dw`` rows, one
    per group of ``cdiv(N, block_n)`` programs.

    The grid is persistent and holds whole groups only, sized so that every part of a row is
    resident while it waits for the others on an otherwise idle GPU; CUDA does not promise
    it, so concurrent launches on other streams can deadlock it (see "Known limit of the row
    split" in ``results/h200/rms_norm/NOTES.md``).  Under the CPU interpreter, whose programs
    run one after another, a part would wait forever for a later program, so each row is one
    part there.
    """
    m, n = x.shape
    block_n = block_n if x.device.type == "cuda" else triton.next_power_of_2(n)
    parts = triton.cdiv(n, block_n)
    meta = dict(PARTS=parts, SLOTS=triton.next_power_of_2(parts), BLOCK_N=block_n, num_warps=num_warps)
    slots = torch.zeros(m * parts, dtype=torch.int64, device=x.device)
    probe_args = (grad_out, x, weight, rstd, dx, rstd, slots, m, n)  # ``rstd`` stands in for dw_partial
    resident = _persistent_grid(kernel, probe_args, meta, x.device, m * parts)
    if resident < parts:
        raise RuntimeError(f"a row split into {parts} parts needs {parts} resident programs, "
                           f"the GPU holds {resident}")
    groups = resident // parts
    dw_partial = torch.empty(groups, n, dtype=torch.float32, device=x.device)
    kernel[(groups * parts,)](grad_out, x, weight, rstd, dx, dw_partial, slots, m, n, **meta)
    return dw_partial


def _launch_row_split_bwd(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor,
    dx: torch.Tensor, plan: BwdPlan,
) -> torch.Tensor:
    """Run the row-split backward into ``dx``; returns the partial ``dw`` rows, one per group."""
    return launch_row_parts(_rms_norm_bwd_row_split_kernel, grad_out, x, weight, rstd, dx,
                            plan.block_n, plan.num_warps)


_BWD_LAUNCHERS = {"one_pass": _launch_one_pass_bwd, "one_pass_prefetch": _launch_one_pass_bwd,
                  "one_pass_kept": _launch_one_pass_bwd, "row_split": _launch_row_split_bwd,
                  "split": _launch_split_bwd}
"""The host launcher of each ``BwdPlan.kernel``."""


def launch_bwd_partials(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor, plan: BwdPlan
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the backward's main kernels as ``plan`` says; returns ``dx`` and the fp32 partial ``dw`` rows."""
    if plan.kernel not in _BWD_LAUNCHERS:
        raise ValueError(f"unknown backward kernel {plan.kernel!r} (valid: {', '.join(_BWD_LAUNCHERS)})")
    dx = torch.empty_like(x)
    launch = _BWD_LAUNCHERS[plan.kernel]
    return dx, launch(grad_out, x, weight, rstd, dx, plan)


def launch_bwd(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor, plan: BwdPlan
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the backward on contiguous 2-D tensors as ``plan`` says; returns ``dx`` and ``dw``."""
    dx, dw_partial = launch_bwd_partials(grad_out, x, weight, rstd, plan)
    return dx, sum_partial_rows(dw_partial, weight)


@torch.library.custom_op("opbench::rms_norm_fwd", mutates_args=())
def rms_norm_fwd(
    x: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """RMS-normalize the rows of 2-D ``x``; returns ``y`` and the fp32 ``rstd`` of shape (M,)."""
    x, weight = x.contiguous(), weight.contiguous()
    return launch_fwd(x, weight, eps, fwd_plan(*x.shape))


@rms_norm_fwd.register_fake
def _(x: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.empty_like(x), x.new_empty(x.shape[:1], dtype=torch.float32)


@torch.library.custom_op("opbench::rms_norm_bwd", mutates_args=())
def rms_norm_bwd(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradients ``(dx, dw)`` of :func:`rms_norm_fwd` given ``grad_out`` and the saved ``rstd``."""
    grad_out, x, weight = grad_out.contiguous(), x.contiguous(), weight.contiguous()
    return launch_bwd(grad_out, x, weight, rstd, bwd_plan(*x.shape, x.dtype))


@rms_norm_bwd.register_fake
def _(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.empty_like(x), torch.empty_like(weight)


def _setup_context(ctx, inputs: tuple, output: tuple) -> None:
    x, weight, _ = inputs
    _, rstd = output
    ctx.mark_non_differentiable(rstd)
    # No zero-filled gradient for rstd: that fill was a kernel launch in every backward.
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(x, weight, rstd)


def _backward(ctx, grad_y: torch.Tensor | None, _grad_rstd: None) -> tuple:
    if grad_y is None:
        return None, None, None
    x, weight, rstd = ctx.saved_tensors
    dx, dw = rms_norm_bwd(grad_y, x, weight, rstd)
    return dx, dw, None


rms_norm_fwd.register_autograd(_backward, setup_context=_setup_context)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Llama-style RMS norm of the rows of 2-D ``x`` scaled by ``weight``; differentiable."""
    if x.dim() != 2:
        raise ValueError(f"rms_norm expects a 2-D input (M, N), got shape {tuple(x.shape)}")
    if weight.shape != x.shape[1:]:
        raise ValueError(f"weight shape {tuple(weight.shape)} does not match N={x.shape[1]}")
    y, _ = rms_norm_fwd(x.contiguous(), weight, eps)
    return y
