"""Triton's forward in two loops over column chunks (``FwdPlan(..., chunk=...)``) against the
default plans, ``torch_compile`` and a copy of the same bytes (probes 29-30, at 1028b93 and
42444e6, also timed the prefetching persistent plans of prediction 21, since removed).

Prediction 22 (``NOTES.md``): the looped kernel, which keeps only a chunk of a row live and
reads ``x`` a second time mostly from L2, runs ahead of the whole-row kernels at 4096 rows, as
inductor's code of the same structure does.  Each variant's ``y`` and ``rstd`` are checked
against float64, then timed against the copy bandwidth measured at the start::

    python results/h200/rms_norm/probe_fwd_looped.py --out fwd_looped.json [--shape M,N]
"""

from __future__ import annotations

import functools

import torch
import triton
from probe_common import DTYPE, max_rel_err, probe_parser, shapes_from, start_gpu_timing, write_records

from operators.compile_support import compiled
from operators.rms_norm import triton_impl
from operators.rms_norm.operator import EPS, llama_rms_norm

SHAPES = ((4096, 16384), (4096, 8192), (4096, 32768), (16384, 8192), (32768, 4096), (4096, 4096),
          (4096, 5120), (4096, 2048), (4096, 1024))

def looped_plans(width: int) -> list[triton_impl.FwdPlan]:
    """One-stage loops over chunks of 512-8192 values, at most half a row, 4-32 warps holding
    4-16 values a thread (probe 29: two-stage loops lost everywhere)."""
    return [
        triton_impl.FwdPlan(1, warps, chunk=chunk)
        for chunk in (512, 1024, 2048, 4096, 8192) if chunk <= width // 2
        for warps in (4, 8, 16, 32) if 4 <= chunk // (32 * warps) <= 16
    ]


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

        width = triton.next_power_of_2(n)
        variants = {"torch_compile": _compiled_call(x, weight)}
        plans = [triton_impl.fwd_plan(m, n), *looped_plans(width)]
        variants.update({repr(plan): functools.partial(triton_impl.launch_fwd, x, weight, EPS, plan)
                         for plan in plans})
        for variant, call in variants.items():
            record = {"shape": [m, n], "variant": variant, "copy_gbps": copy_gbps}
            try:
                y, rstd = call()
                record["y_max_rel_err"] = max_rel_err(y, y_ref)
                if rstd is not None:
                    record["rstd_max_rel_err"] = max_rel_err(rstd, rstd_ref)
                ms = timer.measure(call).p50
                record.update(ms=ms, pct_copy=100 * nbytes / ms / 1e6 / copy_gbps)
                summary = (f"{1000 * ms:.1f} us, {record['pct_copy']:.1f}% "
                           f"(errors {record['y_max_rel_err']:.1e}, {record.get('rstd_max_rel_err', 0):.1e})")
            except Exception as exc:  # recorded, so the other variants still run
                record["error"] = summary = f"{type(exc).__name__}: {exc}"[:300]
            records.append(record)
            print(f"{m}x{n} {variant}: {summary}", flush=True)
        write_records(args.out, records)


def _compiled_call(x: torch.Tensor, weight: torch.Tensor):
    """``torch.compile`` of the eager forward, with ``x`` and ``weight`` requiring grad as in the
    sweep's ``fwd`` mode; returns ``(y, None)`` (the saved ``rstd`` is not an output)."""
    fn = compiled(llama_rms_norm)
    x, weight = x.detach().requires_grad_(), weight.detach().requires_grad_()
    return lambda: (fn(x, weight, EPS), None)


if __name__ == "__main__":
    main()
