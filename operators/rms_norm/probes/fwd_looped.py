"""Triton's forward in two loops over column chunks (``FwdPlan(..., chunk=...)``) against the
default plans, ``torch_compile`` and a copy of the same bytes (probes 29-30, at 1028b93 and
42444e6, also timed the prefetching persistent plans of prediction 21, since removed).

Prediction 22 (``NOTES.md``): the looped kernel, which keeps only a chunk of a row live and
reads ``x`` a second time mostly from L2, runs ahead of the whole-row kernels at 4096 rows, as
inductor's code of the same structure does.  Each variant's ``y`` and ``rstd`` are checked
against float64, then timed against the copy bandwidth measured at the start::

    python -m operators.rms_norm.probes.fwd_looped --out fwd_looped.json [--shape M,N]
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import triton

from operators.compile_support import compiled
from operators.rms_norm import triton_impl
from operators.rms_norm.operator import EPS, llama_rms_norm
from operators.rms_norm.probes.common import (
    check_and_time_fwd,
    fwd_inputs,
    probe_parser,
    shapes_from,
    start_gpu_timing,
    time_same_bytes_copy,
    write_records,
)

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
        x, weight, *refs = fwd_inputs(m, n)
        nbytes = 2 * m * n * 2
        record = {"shape": [m, n], "copy_gbps": copy_gbps}
        records.append(time_same_bytes_copy(timer, record, nbytes))
        variants = {"torch_compile": _compiled_call(x, weight)}
        plans = [triton_impl.fwd_plan(m, n), *looped_plans(triton.next_power_of_2(n))]
        variants.update({repr(plan): functools.partial(triton_impl.launch_fwd, x, weight, EPS, plan)
                         for plan in plans})
        for variant, call in variants.items():
            records.append(check_and_time_fwd(timer, call, {**record, "variant": variant}, refs, nbytes))
        write_records(args.out, records)


def _compiled_call(x: torch.Tensor, weight: torch.Tensor) -> Callable[[], tuple]:
    """``torch.compile`` of the eager forward, with ``x`` and ``weight`` requiring grad as in the
    sweep's ``fwd`` mode; returns ``(y, None)`` (the saved ``rstd`` is not an output)."""
    fn = compiled(llama_rms_norm)
    x, weight = x.detach().requires_grad_(), weight.detach().requires_grad_()
    return lambda: (fn(x, weight, EPS), None)


if __name__ == "__main__":
    main()
