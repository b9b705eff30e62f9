"""What the L2 lines left dirty by the timer's flush cost a short forward (prediction 25 in ``NOTES.md``).

A flush that zeroes a buffer of at least twice L2's size (256 MiB on the H200; the timer's
flush until issue 16, and ``triton.testing.do_bench``'s) leaves L2 full of dirty lines that
the timed kernel's own lines evict, and so write back inside its timed window.  For each shape
this times, with that flush and with the timer's clean one (a read-only pass, so the
write-back happens before the timed window), a copy of the same bytes and Triton's default
forward; ``y`` and ``rstd`` are checked against float64 (probe 31 also timed a copy of the
looped kernel with hints on its ``y`` stores, since removed: NOTES, "Probe scripts moved next to
the kernels")::

    python -m operators.rms_norm.probes.fwd_hints --out fwd_hints.json [--shape M,N]
"""

from __future__ import annotations

import dataclasses
import functools

from harness.timing import make_timer
from operators.rms_norm import triton_impl
from operators.rms_norm.operator import EPS
from operators.rms_norm.probes.common import (
    PROBE_TIMER,
    check_and_time_fwd,
    fwd_inputs,
    probe_parser,
    shapes_from,
    start_gpu_timing,
    time_same_bytes_copy,
    write_records,
)

SHAPES = ((4096, 8192), (4096, 5120), (4096, 4096), (4096, 16384), (16384, 8192))


def main() -> None:
    args = probe_parser(__doc__, ", ".join(f"{m}x{n}" for m, n in SHAPES)).parse_args()
    clean_timer, copy_gbps = start_gpu_timing()
    timer = make_timer("cuda", dataclasses.replace(PROBE_TIMER, flush="dirty"))
    records = []
    for m, n in shapes_from(args.shape, SHAPES):
        x, weight, *refs = fwd_inputs(m, n)
        nbytes = 2 * m * n * 2
        plan = triton_impl.fwd_plan(m, n)
        library = functools.partial(triton_impl.launch_fwd, x, weight, EPS, plan)
        variants = [(repr(plan), "zeroed", timer, library), (repr(plan), "clean", clean_timer, library)]
        base = {"shape": [m, n], "copy_gbps": copy_gbps}
        for flush, flush_timer in (("zeroed", timer), ("clean", clean_timer)):
            records.append(time_same_bytes_copy(flush_timer, {**base, "flush": flush}, nbytes))
        for variant, flush, variant_timer, call in variants:
            record = {**base, "variant": variant, "flush": flush}
            records.append(check_and_time_fwd(variant_timer, call, record, refs, nbytes))
        write_records(args.out, records)


if __name__ == "__main__":
    main()
