"""Time rms_norm backwards that give the parts of each row to several programs.

At M = 4096 the one-pass backward keeps whole rows in registers, one program per SM: at
32768 wide the row and the ``dw`` accumulator do not fit, so the split backward reads
``x`` and ``dy`` twice.  Three ways to share a row, each program keeping ``dw`` for its own
columns only:

* ``slots`` (probe 12): each program loads its part of the row and publishes its share of
  the row sum in a 64-bit slot in global memory (fp32 bits and a ready flag, one store),
  then waits for the other parts' slots.  The next row's ``x`` and ``dy`` load during the wait.
* ``shared_rows`` (probe 13): the programs of a group all load the whole row for its sum and
  reload only their own columns (from L1) for ``dx`` and ``dw``.  No program waits for
  another: the partners run the same rows at the same pace, so the second read of a row
  should come from L2, and DRAM traffic stays one pass.
* ``slots_ahead`` (probe 18; ``triton_impl``'s ``row_split`` plan from 32768 wide): the slot
  exchange with each share published a row before it is needed.

Rows wider than 16384 also time the split backward.

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
from operators.rms_norm.triton_impl import _publish_share, _row_sum_of_shares

SHAPES = ((4096, 16384), (4096, 32768), (4096, 8192), (16384, 8192))
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
        _publish_share(slot_ptr, row, part, tl.sum(g * xhat, axis=0), PARTS)
        c = _row_sum_of_shares(slot_ptr, row, PARTS, SLOTS) / N
        tl.store(dx_ptr + offsets, (rstd * (g - xhat * c)).to(dx_ptr.dtype.element_ty), mask=col_mask)
        dw += dy * xhat
        offsets += step_elements
    tl.store(dw_partial_ptr + group.to(tl.int64) * N + cols, dw, mask=col_mask)


@triton.jit
def shared_rows_bwd(
    dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, dw_partial_ptr, M, N,
    BLOCK_N: tl.constexpr, OWNED: tl.constexpr,
):
    """One-pass backward for rows too wide for one program: ``BLOCK_N // OWNED`` programs per row.

    The programs of group ``pid // parts`` stride over the rows together; each computes
    ``c = rstd * sum(dy * w * x) / N`` over the whole row, then reloads its own ``OWNED``
    columns (from L1) for ``dx = rstd * (dy * w - x * rstd * c)`` and ``dw += dy * x * rstd``,
    and stores its columns of ``dw`` in row ``group`` of ``dw_partial``.  No program waits for
    another; partners read the same rows at about the same time, so one of them mostly
    reads from L2 and DRAM sees one pass.
    """
    parts: tl.constexpr = BLOCK_N // OWNED
    pid = tl.program_id(0)
    part = pid % parts
    group = pid // parts
    groups = tl.num_programs(0) // parts
    cols = tl.arange(0, BLOCK_N)
    own = part * OWNED + tl.arange(0, OWNED)
    w_own = tl.load(w_ptr + own, mask=own < N, other=0.0).to(tl.float32)
    dw = tl.zeros([OWNED], dtype=tl.float32)
    for row in tl.range(group, M, groups, num_stages=1):
        base = tl.cast(row, tl.int64) * N
        x = tl.load(x_ptr + base + cols, mask=cols < N, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + base + cols, mask=cols < N, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + row)
        c = tl.sum(dy * w * x, axis=0) * rstd / N
        xhat = tl.load(x_ptr + base + own, mask=own < N, other=0.0).to(tl.float32) * rstd
        dy_own = tl.load(dy_ptr + base + own, mask=own < N, other=0.0).to(tl.float32)
        tl.store(dx_ptr + base + own, (rstd * (dy_own * w_own - xhat * c)).to(dx_ptr.dtype.element_ty),
                 mask=own < N)
        dw += dy_own * xhat
    tl.store(dw_partial_ptr + group.to(tl.int64) * N + own, dw, mask=own < N)


def launch_family(
    family: str, dy, x, weight, rstd, owned: int, warps: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``dx`` and the partial ``dw`` rows of one variant, on a persistent grid of whole groups."""
    if family == "slots_ahead":
        return impl.launch_bwd_partials(dy, x, weight, rstd, impl.BwdPlan("row_split", 1, owned, warps))
    dx = torch.empty_like(x)
    if family == "slots":
        return dx, impl.launch_row_parts(slots_bwd, dy, x, weight, rstd, dx, owned, warps)
    m, n = x.shape
    parts = triton.next_power_of_2(n) // owned
    meta = dict(BLOCK_N=triton.next_power_of_2(n), OWNED=owned, num_warps=warps)
    args = [dy, x, weight, rstd, dx, rstd, m, n]
    groups = impl._persistent_grid(shared_rows_bwd, tuple(args), meta, x.device, m * parts) // parts
    args[5] = dw_partial = torch.empty(groups, n, dtype=torch.float32, device=x.device)
    shared_rows_bwd[(groups * parts,)](*args, **meta)
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
        if n > 16384:
            split = impl._SPLIT_STRIPE
            calls["split", "whole"] = functools.partial(impl.launch_bwd, dy, x, weight, rstd, split)
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
