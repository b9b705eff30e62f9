"""Time Triton's row-split rms_norm backward, whose parts of each row meet in global memory.

Each program owns a part of each row of its group and publishes its share of the row sum in
a 64-bit share cell a row before its partners need it (probe 18; ``row_split`` plans).  For
each shape this times, main kernels alone and whole (with the partial-``dw`` sum), the
default plan, row-split plans of each part width and warps, and for rows wider than 16384
the two-pass backward, beside a copy of the same bytes; ``dx`` and ``dw`` are checked
against float64 (its variants of removed kernels: NOTES, "Probe scripts moved next to the kernels")::

    python -m operators.rms_norm.probes.bwd_row_split --out row_split.json [--shape M,N]
"""

from __future__ import annotations

import functools

import torch
import triton

from operators.rms_norm import triton_impl
from operators.rms_norm.probes.common import (
    DTYPE,
    bwd_inputs,
    check_and_time,
    probe_parser,
    shapes_from,
    start_gpu_timing,
    write_records,
)
from operators.rms_norm.strategy import BwdStrategy
from operators.rms_norm.triton_plans import BWD_PLANS, BwdKernel, BwdPlan

SHAPES = ((4096, 16384), (4096, 32768), (4096, 8192), (16384, 8192))
PARTS = ((8192, 16), (4096, 8))
"""(columns a program owns, warps) of the row-split plans, tried wherever a row has at least two parts."""


def main() -> None:
    parser = probe_parser(__doc__, "4096x16384, 4096x32768, 4096x8192, 16384x8192")
    args = parser.parse_args()
    timer, copy_gbps = start_gpu_timing()
    records = []
    for m, n in shapes_from(args.shape, SHAPES):
        x, weight, dy, rstd, dx_ref, dw_ref = bwd_inputs(m, n)
        nbytes = 3 * m * n * 2
        src = torch.randn(nbytes // 4, device="cuda", dtype=DTYPE)  # read + write = nbytes
        dst = torch.empty_like(src)
        plans = {"default": triton_impl.bwd_plan(m, n, DTYPE)}
        if n > 16384:
            plans["two_pass"] = BWD_PLANS[BwdStrategy.TWO_PASS](triton.next_power_of_2(n))
        plans.update({f"row_split owned={owned} warps={warps}": BwdPlan(BwdKernel.ROW_SPLIT, 1, owned, warps)
                      for owned, warps in PARTS if owned < n})
        scopes = {"main": triton_impl.launch_bwd_partials, "whole": triton_impl.launch_bwd}
        calls = {(label, scope): functools.partial(launch, dy, x, weight, rstd, plan)
                 for label, plan in plans.items() for scope, launch in scopes.items()}
        records.append({"shape": [m, n], "variant": "copy_same_bytes", "copy_gbps": copy_gbps,
                        "ms": timer.measure(functools.partial(dst.copy_, src)).p50})
        for (label, scope), call in calls.items():
            record = {"shape": [m, n], "variant": label, "scope": scope, "copy_gbps": copy_gbps}
            records.append(check_and_time(timer, call, record, (dx_ref, dw_ref), nbytes))
        write_records(args.out, records)


if __name__ == "__main__":
    main()
