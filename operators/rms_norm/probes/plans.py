"""Time the rms_norm Triton launch plans on a GPU against copies of the same byte counts.

For each shape of the rms_norm CUDA sweep this times every candidate :class:`FwdPlan` and
:class:`BwdPlan` (block rows, warps, pipelining stages, persistent or fixed grids, one-pass
or two-pass backward), checks each result against a float32 reference, and times
``dst.copy_(src)`` over the bytes the operator's model counts, so each plan is read against
the copy at its own size as well as against large-copy bandwidth.  The forward also times
Helion's kernel with its stored config, the same-run reference for the Triton plans.  Writes
one JSON record per timing and prints the best plans (the one-row candidates are looped plans,
probe 30)::

    python -m operators.rms_norm.probes.plans --out probe.json --budget-s 200 [--shape M,N] [--mode bwd]
"""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Iterator

import torch
import triton

from harness.timing import Timer
from operators.rms_norm import helion_impl
from operators.rms_norm import triton_impl as impl
from operators.rms_norm.operator import CUDA_SHAPES, EPS
from operators.rms_norm.probes.common import probe_parser, shapes_from, start_gpu_timing, write_records
from operators.rms_norm.triton_plans import BwdKernel, BwdPlan, FwdPlan

DTYPE = torch.bfloat16
HELION = "helion (stored config)"


def values_per_thread(block_m: int, block_n: int, warps: int) -> float:
    return block_m * block_n / (32 * warps)


def fwd_candidates(n: int) -> Iterator[FwdPlan]:
    block_n = triton.next_power_of_2(n)
    for block_m, warps in itertools.product((1, 2, 4), (4, 8, 16, 32)):
        if not 8 <= values_per_thread(block_m, block_n, warps) <= 64:
            continue
        yield FwdPlan(block_m, warps)
        if block_m == 1 and block_n >= 2048:
            yield FwdPlan(1, warps, chunk=min(block_n // 2, 32 * warps * 8))


def bwd_candidates(n: int) -> Iterator[BwdPlan]:
    block_n = triton.next_power_of_2(n)
    if block_n <= 16384:
        for block_m, warps in itertools.product((1, 2), (4, 8, 16, 32)):
            if not 4 <= values_per_thread(block_m, block_n, warps) <= 32:
                continue
            for stages, rows in ((2, None), (1, None), (2, 16), (1, 16), (1, 32)):
                yield BwdPlan(BwdKernel.ONE_PASS, block_m, block_n, warps, stages, rows_per_program=rows)
            for rows in (None, 32):
                yield BwdPlan(BwdKernel.ONE_PASS_PREFETCH, block_m, block_n, warps, rows_per_program=rows)
    if block_n >= 16384:
        for (block_m, stripe, warps), rows in itertools.product(
            ((8, 1024, 8), (4, 1024, 4), (4, 2048, 8), (16, 512, 8), (8, 512, 4)), (128, 256, 512)
        ):
            yield BwdPlan(BwdKernel.TWO_PASS, block_m, stripe, warps, rows_per_program=rows)


def helion_fwd(x: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor]:
    """Helion's forward with its stored config, as a one-output tuple like the Triton launches'."""
    return (helion_impl.rms_norm(x, weight, EPS),)


def copy_ms(timer: Timer, nbytes: int) -> float:
    src = torch.randn(nbytes // 4, device="cuda", dtype=DTYPE)
    dst = torch.empty_like(src)
    return timer.measure(lambda: dst.copy_(src)).p50


def main() -> None:
    parser = probe_parser(__doc__, "the sweep's, M*N >= 2^24")
    parser.add_argument("--budget-s", type=float, default=200.0)
    parser.add_argument("--mode", action="append", choices=("fwd", "bwd"), help="default: both")
    args = parser.parse_args()
    timer, copy_gbps = start_gpu_timing()
    deadline = time.monotonic() + args.budget_s
    records = []
    shapes = shapes_from(args.shape, [shape for shape in CUDA_SHAPES if shape[0] * shape[1] >= 2**24])
    for (m, n), mode in itertools.product(shapes, args.mode or ("fwd", "bwd")):
        x = torch.randn(m, n, device="cuda", dtype=DTYPE)
        weight = (1 + 0.1 * torch.randn(n, device="cuda")).to(DTYPE)
        dy = torch.randn_like(x)
        xf, wf, dyf = x.float(), weight.float(), dy.float()
        rstd_ref = torch.rsqrt(xf.pow(2).mean(-1) + EPS)
        xhat = xf * rstd_ref[:, None]
        g = dyf * wf
        want = {
            "fwd": (xhat * wf,),
            "bwd": (rstd_ref[:, None] * (g - xhat * (g * xhat).mean(-1, keepdim=True)),
                    (dyf * xhat).sum(0)),
        }[mode]
        _, rstd = impl.launch_fwd(x, weight, EPS, impl.fwd_plan(m, n))
        nbytes = {"fwd": 2 * m * n * 2, "bwd": 3 * m * n * 2}[mode]
        ceiling_ms = copy_ms(timer, nbytes)
        default = impl.fwd_plan(m, n) if mode == "fwd" else impl.bwd_plan(m, n, DTYPE)
        plans = fwd_candidates(n) if mode == "fwd" else bwd_candidates(n)
        calls = {repr(plan): (functools.partial(impl.launch_fwd, x, weight, EPS, plan) if mode == "fwd"
                              else functools.partial(impl.launch_bwd, dy, x, weight, rstd, plan))
                 for plan in dict.fromkeys([default, *plans])}
        if mode == "fwd":
            calls[HELION] = functools.partial(helion_fwd, x, weight)
        for label, call in calls.items():
            if time.monotonic() > deadline:
                break
            record = {"mode": mode, "shape": [m, n], "plan": label, "default": label == repr(default),
                      "copy_ms_same_bytes": ceiling_ms, "copy_gbps": copy_gbps}
            try:
                got = call()
                errors = [((a.float() - b).abs().max() / b.abs().max()).item()
                          for a, b in zip(got, want, strict=False)]
                ms = timer.measure(call).p50
                record.update(ms=ms, max_rel_err=max(errors), gbps=nbytes / ms / 1e6,
                              pct_copy=100 * nbytes / ms / 1e6 / copy_gbps,
                              pct_same_bytes_copy=100 * ceiling_ms / ms)
            except Exception as exc:  # a plan that fails to compile or launch is recorded
                record["error"] = f"{type(exc).__name__}: {exc}"[:300]
            records.append(record)
        timed = [r for r in records if r["mode"] == mode and r["shape"] == [m, n] and "ms" in r]
        done = [r for r in timed if not r["plan"].startswith("helion")]
        if done:
            best = min(done, key=lambda r: r["ms"])
            base = next((r for r in done if r["default"]), best)
            others = "".join(f" | {r['plan']} {r['pct_copy']:.1f}%" for r in timed if r not in done)
            print(f"{mode} {m}x{n}: copy(same bytes) {100 * nbytes / ceiling_ms / 1e6 / copy_gbps:.1f}% | "
                  f"default {base['pct_copy']:.1f}% | best {best['pct_copy']:.1f}% {best['plan']}{others}",
                  flush=True)
        write_records(args.out, records)


if __name__ == "__main__":
    main()
