"""Triton's one-pass backward with its row loop pipelined three and four stages deep, against
the default plans at 4096 and 8192 wide, and the kept-input kernel at 16384 wide on a
persistent grid, pipelined (added after probe 26, where Helion's kernel of that shape ran
ahead of it); with ``--narrow``, one row a step against blocks of rows at 1024 and 2048
wide (prediction 27).

Helion's 8192-wide backward ran faster with one row a step and a three-stage inner loop
(probe 22), a depth the Triton plans had never been timed at (probe 7 stopped at two).  For
each shape this times every candidate :class:`BwdPlan`'s main kernel alone and whole (with
the partial-``dw`` sum), against the copy bandwidth measured at the start, with ``dx`` and
``dw`` checked against float64::

    python -m operators.rms_norm.probes.bwd_stages --out stages.json [--shape M,N]
"""

from __future__ import annotations

import triton

from operators.rms_norm import triton_impl
from operators.rms_norm.probes.common import (
    DTYPE,
    bwd_inputs,
    probe_parser,
    shapes_from,
    start_gpu_timing,
    time_main_and_whole,
    write_records,
)
from operators.rms_norm.triton_plans import BwdKernel, BwdPlan

SHAPES = ((4096, 8192), (16384, 8192), (4096, 5120), (4096, 4096), (32768, 4096), (4096, 16384))
NARROW_SHAPES = ((4096, 1024), (2048, 1024), (4096, 2048), (16384, 1024))

CANDIDATES = {
    8192: [
        BwdPlan(BwdKernel.ONE_PASS, 1, 8192, 16, num_stages=3),
        BwdPlan(BwdKernel.ONE_PASS, 1, 8192, 16, num_stages=4),
        BwdPlan(BwdKernel.ONE_PASS, 1, 8192, 16, num_stages=3, rows_per_program=32),
        BwdPlan(BwdKernel.ONE_PASS, 1, 8192, 32, num_stages=3),
    ],
    16384: [
        BwdPlan(BwdKernel.ONE_PASS_KEPT, 1, 16384, 32, rows_per_program=32),
        BwdPlan(BwdKernel.ONE_PASS_KEPT, 1, 16384, 16, num_stages=3),
        BwdPlan(BwdKernel.ONE_PASS_KEPT, 1, 16384, 32, num_stages=3),
        BwdPlan(BwdKernel.ONE_PASS_KEPT, 1, 16384, 16, num_stages=2),
    ],
    1024: [
        BwdPlan(BwdKernel.ONE_PASS, 2, 1024, 8, num_stages=2),
        BwdPlan(BwdKernel.ONE_PASS, 1, 1024, 4, num_stages=2),
        BwdPlan(BwdKernel.ONE_PASS, 1, 1024, 4, num_stages=3),
        BwdPlan(BwdKernel.ONE_PASS, 1, 1024, 4, rows_per_program=4),
        BwdPlan(BwdKernel.ONE_PASS, 1, 1024, 4, rows_per_program=8),
        BwdPlan(BwdKernel.ONE_PASS, 1, 1024, 2),
        BwdPlan(BwdKernel.ONE_PASS_PREFETCH, 1, 1024, 4),
    ],
    2048: [
        BwdPlan(BwdKernel.ONE_PASS, 1, 2048, 8, num_stages=2),
        BwdPlan(BwdKernel.ONE_PASS, 1, 2048, 4),
        BwdPlan(BwdKernel.ONE_PASS, 1, 2048, 4, num_stages=2),
        BwdPlan(BwdKernel.ONE_PASS, 1, 2048, 4, rows_per_program=8),
        BwdPlan(BwdKernel.ONE_PASS, 1, 2048, 8, num_stages=3),
        BwdPlan(BwdKernel.ONE_PASS_PREFETCH, 1, 2048, 4),
    ],
    4096: [
        BwdPlan(BwdKernel.ONE_PASS, 1, 4096, 16, num_stages=3),
        BwdPlan(BwdKernel.ONE_PASS, 1, 4096, 8, num_stages=3),
        BwdPlan(BwdKernel.ONE_PASS, 1, 4096, 16, num_stages=4),
        BwdPlan(BwdKernel.ONE_PASS, 2, 4096, 16, num_stages=3),
    ],
}
"""Plans by padded width, timed after the default plan of each shape."""


def main() -> None:
    parser = probe_parser(__doc__, ", ".join(f"{m}x{n}" for m, n in SHAPES))
    parser.add_argument("--narrow", action="store_true", help="the rows 1024 and 2048 wide instead")
    args = parser.parse_args()
    timer, copy_gbps = start_gpu_timing()
    records = []
    for m, n in shapes_from(args.shape, NARROW_SHAPES if args.narrow else SHAPES):
        inputs = bwd_inputs(m, n)
        default = triton_impl.bwd_plan(m, n, DTYPE)
        for label, plan in [("default", default)] + [
            (f"{p.kernel.value} stages{p.num_stages} w{p.num_warps} m{p.block_m} rows{p.rows_per_program}", p)
            for p in CANDIDATES[triton.next_power_of_2(n)]
        ]:
            record = {"shape": [m, n], "variant": label, "plan": repr(plan), "copy_gbps": copy_gbps}
            records += time_main_and_whole(timer, triton_impl, inputs, plan, record)
            write_records(args.out, records)


if __name__ == "__main__":
    main()
