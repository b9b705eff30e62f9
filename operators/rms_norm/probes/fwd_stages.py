"""Triton's forward on a persistent grid with its row loop pipelined three and four stages deep,
against the default plans and a copy of the same bytes (probe 25, at 9640496, timed them
against the fixed-width forward, one row a program, since replaced by the looped one).

The backward's row loop ran 2.4-2.9 points of copy bandwidth faster four stages deep than
with a register prefetch (probe 23); the forward's persistent plans had been timed only two
stages deep (probes 7-8).  For each shape this times every candidate :class:`FwdPlan`, with
``y`` and ``rstd`` checked against float64, against the copy bandwidth measured at the start::

    python -m operators.rms_norm.probes.fwd_stages --out fwd_stages.json [--shape M,N]
"""

from __future__ import annotations

import functools

import triton

from operators.rms_norm import triton_impl
from operators.rms_norm.operator import EPS
from operators.rms_norm.probes.common import (
    check_and_time_fwd,
    fwd_inputs,
    probe_parser,
    shapes_from,
    start_gpu_timing,
    time_same_bytes_copy,
    write_records,
)

SHAPES = ((4096, 16384), (4096, 8192), (4096, 32768), (16384, 8192), (32768, 4096))

CANDIDATES = {
    4096: [(8, 3), (8, 4), (16, 3)],
    8192: [(8, 3), (16, 3), (16, 4)],
    16384: [(16, 3), (32, 3), (16, 4), (32, 4)],
    32768: [(16, 2), (32, 2), (32, 3)],
}
"""``(num_warps, num_stages)`` of the persistent one-row plans, by padded width."""


def main() -> None:
    args = probe_parser(__doc__, ", ".join(f"{m}x{n}" for m, n in SHAPES)).parse_args()
    timer, copy_gbps = start_gpu_timing()
    records = []
    for m, n in shapes_from(args.shape, SHAPES):
        x, weight, *refs = fwd_inputs(m, n)
        nbytes = 2 * m * n * 2
        record = {"shape": [m, n], "copy_gbps": copy_gbps}
        records.append(time_same_bytes_copy(timer, record, nbytes))
        plans = [triton_impl.fwd_plan(m, n)] + [
            triton_impl.FwdPlan(1, warps, stages, persistent=True)
            for warps, stages in CANDIDATES[triton.next_power_of_2(n)]
        ]
        for plan in plans:
            call = functools.partial(triton_impl.launch_fwd, x, weight, EPS, plan)
            records.append(check_and_time_fwd(timer, call, {**record, "variant": repr(plan)}, refs, nbytes))
        write_records(args.out, records)


if __name__ == "__main__":
    main()
