"""What the rms_norm backward costs beyond its main kernel: the ``dw`` sum's launch and autograd.

For each shape this times, in one run and against the copy bandwidth measured at its start:
the Triton main kernels alone, the whole Triton backward (the partial-``dw`` sum a
programmatic dependent launch on sm_90+; probe 21 also timed it as a plain launch), and the
backward of each backend as the benchmark times it
(``torch.autograd.backward`` on a retained graph, the gradients reset before each call).
Gradients are checked against float64 in every variant.
With ``--timeline`` it also prints each kernel of three autograd backwards at the first
shape, with the device gap before it, from ``torch.profiler``::

    python -m operators.rms_norm.probes.bwd_launches --out launches.json --timeline
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from harness.timing import L2Flusher, Timer
from operators.rms_norm import helion_impl, triton_impl
from operators.rms_norm.operator import EPS
from operators.rms_norm.probes.common import (
    DTYPE,
    bwd_inputs,
    check_and_time,
    probe_parser,
    shapes_from,
    start_gpu_timing,
    write_records,
)

RmsNorm = Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor]
"""A backend's differentiable ``rms_norm(x, weight, eps)``."""
SHAPES = ((4096, 8192), (16384, 8192), (32768, 4096), (4096, 4096), (4096, 16384), (4096, 32768))


def autograd_backward(rms_norm: RmsNorm, x: torch.Tensor, weight: torch.Tensor, dy: torch.Tensor,
                      ) -> tuple[Callable[[], None], Callable[[], None], Callable[[], tuple]]:
    """``(backward, setup, grads)`` for ``rms_norm``'s backward run as the benchmark runs it."""
    leaves = (x.detach().requires_grad_(), weight.detach().requires_grad_())
    y = rms_norm(*leaves, EPS)

    def setup() -> None:
        for leaf in leaves:
            leaf.grad = None

    def backward() -> None:
        torch.autograd.backward((y,), (dy,), retain_graph=True)

    return backward, setup, lambda: (leaves[0].grad, leaves[1].grad)


def time_autograd(timer: Timer, rms_norm: RmsNorm, inputs: tuple[torch.Tensor, ...], record: dict,
                  nbytes: int) -> dict:
    """Check and time one backend's autograd backward; a failure is recorded, not raised."""
    x, weight, dy, _, dx_ref, dw_ref = inputs
    try:
        backward, setup, grads = autograd_backward(rms_norm, x, weight, dy)
        setup()
        backward()
        dx, dw = grads()
        record["dx_max_rel_err"] = ((dx.double() - dx_ref).abs().max() / dx_ref.abs().max()).item()
        record["dw_max_rel_err"] = ((dw.double() - dw_ref).abs().max() / dw_ref.abs().max()).item()
        ms = timer.measure(backward, setup).p50
        record.update(ms=ms, pct_copy=100 * nbytes / ms / 1e6 / record["copy_gbps"])
        summary = f"{1000 * ms:.1f} us, {record['pct_copy']:.1f}%"
    except Exception as exc:  # recorded, so the other variants still run
        record["error"] = summary = f"{type(exc).__name__}: {exc}"[:300]
    m, n = record["shape"]
    print(f"{m}x{n} {record['variant']} {record['scope']}: {summary}", flush=True)
    return record


def print_timeline(inputs: tuple[torch.Tensor, ...], flush: Callable[[], None]) -> None:
    """Each kernel of three autograd backwards per backend, its duration and the gap before it."""
    x, weight, dy = inputs[0], inputs[1], inputs[2]
    for name, module in (("triton", triton_impl), ("helion", helion_impl)):
        backward, setup, _ = autograd_backward(module.rms_norm, x, weight, dy)
        for _ in range(3):
            setup()
            backward()
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                setup()
                flush()
                torch.cuda._sleep(200_000)
                backward()
            torch.cuda.synchronize()
        kernels = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                         key=lambda e: e.time_range.start)
        previous_end = None
        for event in kernels:
            gap = "" if previous_end is None else f" gap {event.time_range.start - previous_end:.1f} us"
            duration = event.time_range.elapsed_us()
            print(f"timeline {name}: {event.name[:60]} {duration:.1f} us{gap}", flush=True)
            previous_end = event.time_range.end


def main() -> None:
    parser = probe_parser(__doc__, ", ".join(f"{m}x{n}" for m, n in SHAPES))
    parser.add_argument("--timeline", action="store_true",
                        help="print a profiler timeline at the first shape")
    args = parser.parse_args()
    timer, copy_gbps = start_gpu_timing()
    shapes = shapes_from(args.shape, SHAPES)
    records = []
    for index, (m, n) in enumerate(shapes):
        inputs = bwd_inputs(m, n)
        x, weight, dy, rstd, dx_ref, dw_ref = inputs
        plan = triton_impl.bwd_plan(m, n, DTYPE)
        nbytes = 3 * m * n * 2

        record = functools.partial(dict, shape=[m, n], copy_gbps=copy_gbps)
        calls = {
            ("triton", "main"): functools.partial(triton_impl.launch_bwd_partials, dy, x, weight, rstd, plan),
            ("triton", "whole"): functools.partial(triton_impl.launch_bwd, dy, x, weight, rstd, plan),
        }
        for (variant, scope), call in calls.items():
            base = record(variant=variant, scope=scope)
            records.append(check_and_time(timer, call, base, (dx_ref, dw_ref), nbytes))
        for variant, module in (("triton", triton_impl), ("helion", helion_impl)):
            base = record(variant=variant, scope="autograd")
            records.append(time_autograd(timer, module.rms_norm, inputs, base, nbytes))
        write_records(args.out, records)
        if args.timeline and index == 0:
            print_timeline(inputs, L2Flusher(torch.device("cuda")))


if __name__ == "__main__":
    main()
