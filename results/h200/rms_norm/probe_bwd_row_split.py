"""Time rms_norm backwards that give the parts of each row to several programs.

At M = 4096 the one-pass backward keeps whole rows in registers, one program per SM: at
32768 wide the row and the ``dw`` accumulator do not fit, so the split backward reads
``x`` and ``dy`` twice.  Two ways to share a row, each program keeping ``dw`` for its own
columns only:

* ``slots`` (probe 12): each program loads its part of the row and publishes its share of
  the row sum in a 64-bit slot in global memory (fp32 bits and a ready flag, one store),
  then waits for the other parts' slots.  The next row's ``x`` and ``dy`` load during the wait.
* ``shared_rows`` (probe 13; now ``triton_impl``'s plan at 32768 wide): the programs of a
  group all load the whole row for its sum and reload only their own columns (from L1) for
  ``dx`` and ``dw``.  No program waits for another: the partners run the same rows at the
  same pace, so the second read of a row should come from L2, and DRAM traffic stays one pass.

For each shape this times, main kernels alone and whole (with the partial-``dw`` sum), the
default plan and each variant, beside a copy of the same bytes; ``dx`` and ``dw`` are
checked against float64::

    python results/h200/rms_norm/probe_bwd_row_split.py --out row_split.json [--shape M,N] [--family F]
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from probe_common import (
    DTYPE,
    bwd_inputs,
    check_and_time,
    probe_parser,
    shapes_from,
    start_gpu_timing,
    write_records,
)

from operators.rms_norm import triton_impl as impl
from operators.rms_norm.triton_impl import _fp32_again

SHAPES = ((4096, 16384), (4096, 32768), (4096, 8192), (16384, 8192))
SLOT_READY: tl.constexpr = tl.constexpr(1 << 32)
FAMILIES = {
    "slots": ((8192, 16), (4096, 16), (4096, 8)),
    "shared_rows": ((16384, 32), (16384, 16), (8192, 32), (8192, 16)),
    "slots_ahead": ((8192, 16), (4096, 8)),
}
"""(columns a program owns, warps) of each family, tried wherever a row has at least two parts."""


@triton.jit
def slots_bwd(
    dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, dw_partial_ptr, slot_ptr, M, N,
    PARTS: tl.constexpr, SLOTS: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """Each row in ``PARTS`` parts of ``BLOCK_N`` columns, one program each, meeting in slots.

    Program ``pid`` owns columns ``[part * BLOCK_N, (part + 1) * BLOCK_N)``, ``part = pid % PARTS``,
    of the rows of group ``pid // PARTS``.  Per row it stores its share of
    ``s = sum(g * xhat)`` (``xhat = x * rstd``, ``g = dy * w``) in slot ``(row, part)`` (fp32
    bits low, ready flag high), waits for all the row's slots, and writes
    ``dx = rstd * (g - xhat * s / N)``; its ``sum(dy * xhat)`` goes to row ``group`` of
    ``dw_partial``.  All programs of a group must be resident; ``slot`` starts at zero.
    """
    pid = tl.program_id(0)
    part = pid % PARTS
    group = pid // PARTS
    groups = tl.num_programs(0) // PARTS
    cols = part * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    dw = tl.zeros([BLOCK_N], dtype=tl.float32)
    step_elements = groups.to(tl.int64) * N
    slots = tl.arange(0, SLOTS)
    offsets = group.to(tl.int64) * N + cols
    x_next = tl.load(x_ptr + offsets, mask=col_mask & (group < M), other=0.0)
    dy_next = tl.load(dy_ptr + offsets, mask=col_mask & (group < M), other=0.0)
    for row in tl.range(group, M, groups, num_stages=1):
        x = x_next.to(tl.float32)
        dy = dy_next.to(tl.float32)
        next_mask = col_mask & (row + groups < M)
        x_next = tl.load(x_ptr + offsets + step_elements, mask=next_mask, other=0.0)
        dy_next = tl.load(dy_ptr + offsets + step_elements, mask=next_mask, other=0.0)
        rstd = tl.load(rstd_ptr + row)
        xhat = x * rstd
        g = dy * w
        share = tl.sum(g * xhat, axis=0)
        row_slots = slot_ptr + tl.cast(row, tl.int64) * PARTS
        tl.store(row_slots + part, share.to(tl.uint32, bitcast=True).to(tl.int64) | SLOT_READY)
        published = tl.load(row_slots + slots, mask=slots < PARTS, other=SLOT_READY, volatile=True)
        while tl.min(published >> 32, axis=0) == 0:
            published = tl.load(row_slots + slots, mask=slots < PARTS, other=SLOT_READY, volatile=True)
        shares = (published & 0xFFFFFFFF).to(tl.uint32).to(tl.float32, bitcast=True)
        c = tl.sum(shares, axis=0) / N
        tl.store(dx_ptr + offsets, (rstd * (g - xhat * c)).to(dx_ptr.dtype.element_ty), mask=col_mask)
        dw += dy * xhat
        offsets += step_elements
    tl.store(dw_partial_ptr + group.to(tl.int64) * N + cols, dw, mask=col_mask)


@triton.jit
def _publish(slot_ptr, row, part, share, PARTS: tl.constexpr):
    """Store a part's share of a row sum in its slot: fp32 bits low, ready flag high, one store."""
    tl.store(slot_ptr + tl.cast(row, tl.int64) * PARTS + part,
             share.to(tl.uint32, bitcast=True).to(tl.int64) | SLOT_READY)


@triton.jit
def _row_sum(slot_ptr, row, PARTS: tl.constexpr, SLOTS: tl.constexpr):
    """Wait until every part of ``row`` has published its share, then add the shares in slot order."""
    row_slots = slot_ptr + tl.cast(row, tl.int64) * PARTS
    slots = tl.arange(0, SLOTS)
    published = tl.load(row_slots + slots, mask=slots < PARTS, other=SLOT_READY, volatile=True)
    while tl.min(published >> 32, axis=0) == 0:
        published = tl.load(row_slots + slots, mask=slots < PARTS, other=SLOT_READY, volatile=True)
    return tl.sum((published & 0xFFFFFFFF).to(tl.uint32).to(tl.float32, bitcast=True), axis=0)


@triton.jit
def slots_ahead_bwd(
    dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, dw_partial_ptr, slot_ptr, M, N,
    PARTS: tl.constexpr, SLOTS: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """:func:`slots_bwd` with each share published a row ahead of its use.

    Per step, for rows ``r`` (its share published last step), ``r'`` (loaded last step) and
    ``r''``: load ``r''``; publish the share ``sum(dy * w * x)`` of ``r'``; wait for the row
    sum ``S`` of ``r``, which the other parts published a step ago; write
    ``dx = rstd * (dy * w - xhat * rstd * S / N)`` and add ``dy * xhat`` to ``dw``.  The rows
    stay in their input dtype and are converted again for ``dx`` (:func:`_fp32_again`).
    """
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
        _publish(slot_ptr, group, part, tl.sum(dy.to(tl.float32) * w * x.to(tl.float32), axis=0), PARTS)
    x_next = tl.load(x_ptr + offsets + step, mask=col_mask & (group + groups < M), other=0.0)
    dy_next = tl.load(dy_ptr + offsets + step, mask=col_mask & (group + groups < M), other=0.0)
    for row in tl.range(group, M, groups, num_stages=1):
        after_mask = col_mask & (row + 2 * groups < M)
        x_after = tl.load(x_ptr + offsets + 2 * step, mask=after_mask, other=0.0)
        dy_after = tl.load(dy_ptr + offsets + 2 * step, mask=after_mask, other=0.0)
        if row + groups < M:
            share = tl.sum(dy_next.to(tl.float32) * w * x_next.to(tl.float32), axis=0)
            _publish(slot_ptr, row + groups, part, share, PARTS)
        rstd = tl.load(rstd_ptr + row)
        c = _row_sum(slot_ptr, row, PARTS, SLOTS) * rstd / N
        xhat = _fp32_again(x) * rstd
        dy32 = _fp32_again(dy)
        tl.store(dx_ptr + offsets, (rstd * (dy32 * w - xhat * c)).to(dx_ptr.dtype.element_ty), mask=col_mask)
        dw += dy32 * xhat
        x, dy, x_next, dy_next = x_next, dy_next, x_after, dy_after
        offsets += step
    tl.store(dw_partial_ptr + group.to(tl.int64) * N + cols, dw, mask=col_mask)


def launch_family(
    family: str, dy, x, weight, rstd, owned: int, warps: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``dx`` and the partial ``dw`` rows of one variant, on a persistent grid of whole groups."""
    if family == "shared_rows":
        return impl.launch_bwd_partials(dy, x, weight, rstd, impl.BwdPlan("shared_rows", 1, owned, warps))
    kernel = slots_bwd if family == "slots" else slots_ahead_bwd
    m, n = x.shape
    parts = triton.cdiv(n, owned)
    dx = torch.empty_like(x)
    slots = torch.zeros(m * parts, dtype=torch.int64, device=x.device)
    meta = dict(PARTS=parts, SLOTS=triton.next_power_of_2(parts), BLOCK_N=owned, num_warps=warps)
    args = [dy, x, weight, rstd, dx, rstd, slots, m, n]
    groups = impl._persistent_grid(kernel, tuple(args), meta, x.device, m * parts) // parts
    args[5] = dw_partial = torch.empty(groups, n, dtype=torch.float32, device=x.device)
    kernel[(groups * parts,)](*args, **meta)
    return dx, dw_partial


def launch_family_whole(
    family: str, dy, x, weight, rstd, owned: int, warps: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The variant's ``dx`` and summed ``dw``."""
    dx, dw_partial = launch_family(family, dy, x, weight, rstd, owned, warps)
    return dx, impl.sum_partial_rows(dw_partial, weight)


def main() -> None:
    parser = probe_parser(__doc__, "4096x16384, 4096x32768, 4096x8192, 16384x8192")
    parser.add_argument("--family", action="append", choices=FAMILIES, help="variant families (default: all)")
    args = parser.parse_args()
    timer, copy_gbps = start_gpu_timing()
    records = []
    for m, n in shapes_from(args.shape, SHAPES):
        x, weight, dy, rstd, dx_ref, dw_ref = bwd_inputs(m, n)
        nbytes = 3 * m * n * 2
        src = torch.randn(nbytes // 4, device="cuda", dtype=DTYPE)  # read + write = nbytes
        dst = torch.empty_like(src)
        plan = impl.bwd_plan(m, n, DTYPE)
        calls = {("default", "main"): functools.partial(impl.launch_bwd_partials, dy, x, weight, rstd, plan),
                 ("default", "whole"): functools.partial(impl.launch_bwd, dy, x, weight, rstd, plan)}
        for family in args.family or FAMILIES:
            for owned, warps in FAMILIES[family]:
                if owned < n:
                    label = f"{family} owned={owned} warps={warps}"
                    variant = (family, dy, x, weight, rstd, owned, warps)
                    calls[label, "main"] = functools.partial(launch_family, *variant)
                    calls[label, "whole"] = functools.partial(launch_family_whole, *variant)
        records.append({"shape": [m, n], "variant": "copy_same_bytes", "copy_gbps": copy_gbps,
                        "ms": timer.measure(functools.partial(dst.copy_, src)).p50})
        for (label, scope), call in calls.items():
            record = {"shape": [m, n], "variant": label, "scope": scope, "copy_gbps": copy_gbps}
            records.append(check_and_time(timer, call, record, (dx_ref, dw_ref), nbytes))
        write_records(args.out, records)


if __name__ == "__main__":
    main()
