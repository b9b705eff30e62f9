"""Triton's forward on a persistent grid with its row loop pipelined three and four stages deep,
against the default (fixed-width, one row a program) plans and a copy of the same bytes.

The backward's row loop ran 2.4-2.9 points of copy bandwidth faster four stages deep than
with a register prefetch (probe 23); the forward's persistent plans had been timed only two
stages deep (probes 7-8).  For each shape this times every candidate :class:`FwdPlan`, with
``y`` and ``rstd`` checked against float64, against the copy bandwidth measured at the start::

    python results/h200/rms_norm/probe_fwd_stages.py --out fwd_stages.json [--shape M,N]
"""

from __future__ import annotations

import functools

import torch
import triton
from probe_common import DTYPE, max_rel_err, probe_parser, shapes_from, start_gpu_timing, write_records

from operators.rms_norm import triton_impl
from operators.rms_norm.operator import EPS

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
        x = torch.randn(m, n, device="cuda", dtype=DTYPE)
        weight = (1 + 0.1 * torch.randn(n, device="cuda")).to(DTYPE)
        rstd_ref = torch.rsqrt(x.double().pow(2).mean(-1) + EPS)
        y_ref = x.double() * rstd_ref[:, None] * weight.double()
        nbytes = 2 * m * n * 2
        src = torch.randn(nbytes // 4, device="cuda", dtype=DTYPE)
        dst = torch.empty_like(src)
        ms = timer.measure(functools.partial(dst.copy_, src)).p50
        records.append({"shape": [m, n], "variant": "copy_same_bytes", "ms": ms, "copy_gbps": copy_gbps,
                        "pct_copy": 100 * nbytes / ms / 1e6 / copy_gbps})
        print(f"{m}x{n} copy_same_bytes: {1000 * ms:.1f} us, {records[-1]['pct_copy']:.1f}%", flush=True)
        plans = [triton_impl.fwd_plan(m, n)] + [
            triton_impl.FwdPlan(1, warps, stages, persistent=True)
            for warps, stages in CANDIDATES[triton.next_power_of_2(n)]
        ]
        for plan in plans:
            record = {"shape": [m, n], "variant": repr(plan), "copy_gbps": copy_gbps}
            try:
                call = functools.partial(triton_impl.launch_fwd, x, weight, EPS, plan)
                y, rstd = call()
                record["y_max_rel_err"] = max_rel_err(y, y_ref)
                record["rstd_max_rel_err"] = max_rel_err(rstd, rstd_ref)
                ms = timer.measure(call).p50
                record.update(ms=ms, pct_copy=100 * nbytes / ms / 1e6 / copy_gbps)
                summary = (f"{1000 * ms:.1f} us, {record['pct_copy']:.1f}% "
                           f"(errors {record['y_max_rel_err']:.1e}, {record['rstd_max_rel_err']:.1e})")
            except Exception as exc:  # recorded, so the other plans still run
                record["error"] = summary = f"{type(exc).__name__}: {exc}"[:300]
            records.append(record)
            print(f"{m}x{n} {record['variant']}: {summary}", flush=True)
        write_records(args.out, records)


if __name__ == "__main__":
    main()
