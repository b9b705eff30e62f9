"""What the L2 lines left dirty by the timer's flush cost a short forward, and whether a
streaming hint on the ``y`` stores avoids paying for them (prediction 25 in ``NOTES.md``).

The timer flushes L2 by zeroing a buffer of at least twice its size (256 MiB on the H200),
which leaves L2 full of dirty lines that the timed kernel's own lines evict, and so write
back inside its timed window.  For each shape this times, with that flush and with a clean
one (the zeroing followed by a read-only pass over another buffer, so the write-back
happens before the timed window), a copy of the same bytes and Triton's default forward;
and, with the usual flush, the looped forward with its ``y`` stores marked ``evict_first``
or cache-streaming (``.cs``).  ``y`` and ``rstd`` are checked against float64::

    python results/h200/rms_norm/probe_fwd_hints.py --out fwd_hints.json [--shape M,N]
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from probe_common import (
    check_and_time_fwd,
    fwd_inputs,
    probe_parser,
    shapes_from,
    start_gpu_timing,
    time_same_bytes_copy,
    write_records,
)

from harness.timing import CudaTimer, L2Flusher
from operators.rms_norm import triton_impl
from operators.rms_norm.operator import EPS

SHAPES = ((4096, 8192), (4096, 5120), (4096, 4096), (4096, 16384), (16384, 8192))

STORE_HINTS = {"evict_first": dict(EVICTION="evict_first", CACHE=""), "cs": dict(EVICTION="", CACHE=".cs")}
"""The ``y`` store hints timed, as keywords of :func:`looped_fwd_with_store_hint`."""


class CleanL2Flusher(L2Flusher):
    """The timer's flush followed by a read-only pass over a second buffer of the same size,
    which leaves L2 holding clean lines (the zeroed ones written back before the timed call)."""

    def __init__(self, device: torch.device):
        super().__init__(device)
        self.clean = torch.ones_like(self.buffer)

    def __call__(self) -> None:
        super().__call__()
        self.clean.max()


class CleanFlushTimer(CudaTimer):
    """:class:`CudaTimer` with :class:`CleanL2Flusher` as its flush."""

    def _flusher(self) -> L2Flusher:
        if self._flush is None:
            self._flush = CleanL2Flusher(torch.device("cuda", torch.cuda.current_device()))
        return self._flush


@triton.jit
def looped_fwd_with_store_hint(x_ptr, w_ptr, y_ptr, rstd_ptr, eps, N: tl.constexpr, CHUNK: tl.constexpr,
                               EVICTION: tl.constexpr, CACHE: tl.constexpr):
    """The library's looped forward (``rstd = rsqrt(sum(x^2) / N + eps)``, ``y = x * rstd * w``)
    with ``EVICTION`` and ``CACHE`` on its ``y`` stores."""
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([CHUNK], dtype=tl.float32)
    for start in tl.range(0, N, CHUNK, num_stages=1):
        cols = start + tl.arange(0, CHUNK)
        x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0, eviction_policy="evict_last")
        acc += x.to(tl.float32) * x.to(tl.float32)
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
    for start in tl.range(0, N, CHUNK, num_stages=1):
        cols = start + tl.arange(0, CHUNK)
        x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0, eviction_policy="evict_first")
        x = x.to(tl.float32)
        w = tl.load(w_ptr + cols, mask=cols < N, other=0.0, eviction_policy="evict_last").to(tl.float32)
        tl.store(y_ptr + row * N + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=cols < N,
                 eviction_policy=EVICTION, cache_modifier=CACHE)
    tl.store(rstd_ptr + row, rstd)


def hinted_call(x: torch.Tensor, weight: torch.Tensor, plan: triton_impl.FwdPlan, hint: dict):
    """A call of :func:`looped_fwd_with_store_hint` under ``plan``'s chunk and warps."""
    m, n = x.shape

    def call():
        y, rstd = torch.empty_like(x), torch.empty(m, dtype=torch.float32, device=x.device)
        looped_fwd_with_store_hint[(m,)](x, weight, y, rstd, EPS, N=n, CHUNK=plan.chunk,
                                         num_warps=plan.num_warps, **hint)
        return y, rstd

    return call


def main() -> None:
    args = probe_parser(__doc__, ", ".join(f"{m}x{n}" for m, n in SHAPES)).parse_args()
    timer, copy_gbps = start_gpu_timing()
    clean_timer = CleanFlushTimer(timer.warmup_ms, timer.rep_ms)
    records = []
    for m, n in shapes_from(args.shape, SHAPES):
        x, weight, *refs = fwd_inputs(m, n)
        nbytes = 2 * m * n * 2
        plan = triton_impl.fwd_plan(m, n)
        library = functools.partial(triton_impl.launch_fwd, x, weight, EPS, plan)
        variants = [(repr(plan), "zeroed", timer, library), (repr(plan), "clean", clean_timer, library)]
        variants += [(f"store {name}", "zeroed", timer, hinted_call(x, weight, plan, hint))
                     for name, hint in STORE_HINTS.items()]
        base = {"shape": [m, n], "copy_gbps": copy_gbps}
        for flush, flush_timer in (("zeroed", timer), ("clean", clean_timer)):
            records.append(time_same_bytes_copy(flush_timer, {**base, "flush": flush}, nbytes))
        for variant, flush, variant_timer, call in variants:
            record = {**base, "variant": variant, "flush": flush}
            records.append(check_and_time_fwd(variant_timer, call, record, refs, nbytes))
        write_records(args.out, records)


if __name__ == "__main__":
    main()
