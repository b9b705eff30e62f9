"""Timers; each summarizes its samples as a :class:`~harness.metrics.cell_data.SampleStats`.

CUDA: device time from CUDA events.  Before every timed call the device is synchronized
(work left on any stream never overlaps the next sample), the L2 cache is flushed by
reading a buffer at least twice its size (:class:`L2Flusher`), and the GPU is kept busy with a spin kernel for
longer than the host needs to launch the timed call.  Both are enqueued before the start
event, so their time is excluded, and the call's kernels reach the GPU before it is free:
the events measure device time, not Python and launch overhead.  With ``cudagraph=True``
the call is captured once in a CUDA graph and replayed, which removes the launch gaps
between its kernels.

CPU: ``time.perf_counter`` around each call.

The CUDA and CPU timers pass every call they make (samples and untimed calls alike) through an
audit (:class:`~harness.audit.SampleAudit`; by default :data:`~harness.audit.NO_AUDIT`, which
does nothing), outside the timed windows, and arm it for their measured samples; the wall timer
makes one more audited batch of two calls after its measured ones, untimed (its own batches would
time the audit's host work).

:class:`WallTimer` (the ``walltime`` metric) measures host time instead: batches of calls back to
back, the device synchronized once at the end of each batch, no flush and no spin kernel.

Every timer is built by :func:`make_timer` from the run's :class:`~harness.settings.TimerSettings`
(warm-up and measurement budgets in milliseconds, as in ``triton.testing.do_bench``; their
defaults are there).  The CUDA timer spends its budgets in wall time: a sample costs its
synchronize, flush and spin besides the call (0.6 ms a sample of our gemm backends on the H200,
``results/h200/trust/NOTES.md``, "What a sweep costs"), so a repeat of a call up to ~10 ms takes
about ``warmup_ms + rep_ms``, with fewer samples of a short call than its device time would allow.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import torch

from harness.audit import NO_AUDIT, CallAudit
from harness.metrics.cell_data import DEFAULT_TIMER, SampleStats
from harness.settings import FLUSHES, TimerSettings

MIN_SAMPLES = 10
MAX_SAMPLES = 1000
SPIN_CYCLES_PER_US = 2000  # H100/H200 boost clock ~1.98 GHz; a slower clock only spins longer


class CapturedCall:
    """``fn`` captured in a CUDA graph after three warm-up calls on a side stream (``setup`` before
    each); calling it replays the graph and returns the capture's ``outputs``, which each replay
    rewrites in place."""

    def __init__(self, fn: Callable[[], object], setup: Callable[[], None]):
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                setup()
                fn()
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        setup()
        with torch.cuda.graph(self.graph):
            self.outputs = fn()
        torch.cuda.synchronize()

    def __call__(self) -> object:
        self.graph.replay()
        return self.outputs


class L2Flusher:
    """Evicts the L2 cache by reading a buffer at least twice its size, leaving it clean.

    A read pass writes back whatever the previous call left dirty, during the flush, and leaves
    L2 holding clean lines that the timed call can drop for free.  Writing the buffer instead
    (``write=True``, what ``triton.testing.do_bench`` does) leaves L2 full of dirty lines whose
    write-back lands inside the next call's timed window: 2-4 us on the H200 (probe 31 in
    ``results/h200/rms_norm/NOTES.md``).
    """

    def __init__(self, device: torch.device, write: bool = False):
        l2_bytes = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)
        size = max(2 * l2_bytes, 256 * 2**20)
        self.buffer = torch.zeros(size // 4, dtype=torch.int32, device=device)
        self.sink = torch.empty((), dtype=torch.int64, device=device)
        self.write = write

    def __call__(self) -> None:
        if self.write:
            self.buffer.zero_()
        else:
            torch.sum(self.buffer, dim=0, out=self.sink)


ESTIMATE_SAMPLES = 5
"""Samples taken first to learn what one sample costs, before the warm-up."""


def _sample_count(estimate_ms: float, rep_ms: float) -> int:
    return int(min(MAX_SAMPLES, max(MIN_SAMPLES, rep_ms / max(estimate_ms, 1e-6))))


def sample_counts(sample_ms: float, settings: TimerSettings) -> tuple[int, int]:
    """The warm-up and measured sample counts of a repeat whose samples cost ``sample_ms`` each:
    the budgets over it, the warm-up at least one sample and the measurement ``MIN_SAMPLES``,
    both at most ``MAX_SAMPLES``."""
    warmup = int(min(MAX_SAMPLES, max(1, settings.warmup_ms / max(sample_ms, 1e-6))))
    return warmup, _sample_count(sample_ms, settings.rep_ms)


class CudaTimer:
    """Event timing with L2 flushing, optionally replaying a captured CUDA graph; the budgets are
    spent in wall time (:func:`sample_counts` of what a sample costs)."""

    def __init__(self, settings: TimerSettings):
        if settings.flush not in FLUSHES:
            raise ValueError(f"unknown L2 flush {settings.flush!r} (valid: {', '.join(FLUSHES)})")
        self.settings = settings
        self._flush: L2Flusher | None = None

    def _flusher(self) -> L2Flusher:
        """The L2 flush run before every sample: a read pass (``clean``) or a write (``dirty``)."""
        if self._flush is None:
            device = torch.device("cuda", torch.cuda.current_device())
            self._flush = L2Flusher(device, write=self.settings.flush == "dirty")
        return self._flush

    def measure(self, fn: Callable[[], object], setup: Callable[[], None] = lambda: None,
                audit: CallAudit = NO_AUDIT) -> SampleStats:
        """Time ``fn``; ``setup`` runs before every call, outside the timed region (under
        ``cudagraph`` before the capture only: a replay reads nothing it resets)."""
        run, each = (CapturedCall(fn, setup), _nothing) if self.settings.cudagraph else (fn, setup)
        flush = self._flusher()
        spin = _spin_cycles(run, each, audit)
        synced: list[float] = []
        self._time_calls(run, each, flush, spin, ESTIMATE_SAMPLES, audit, synced)
        warmup, count = sample_counts(float(np.median(np.diff(synced))) * 1e3, self.settings)
        self._time_calls(run, each, flush, spin, warmup, audit)
        audit.arm(count)
        return SampleStats.of(self._time_calls(run, each, flush, spin, count, audit))

    @staticmethod
    def _time_calls(fn: Callable[[], object], setup: Callable[[], None], flush: L2Flusher,
                    spin: int, count: int, audit: CallAudit,
                    synced: list[float] | None = None) -> list[float]:
        """``count`` samples' device times in ms; ``synced`` gets the host clock after each
        synchronize, so that its differences are what each whole sample cost in wall time."""
        events = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(count)
        ]
        stamps = [] if synced is None else synced
        for start, end in events:
            setup()
            audit.before()
            torch.cuda.synchronize()
            stamps.append(time.perf_counter())
            flush()
            torch.cuda._sleep(spin)
            start.record()
            result = fn()
            end.record()
            audit.after(result)
            del result
        torch.cuda.synchronize()
        stamps.append(time.perf_counter())
        return [start.elapsed_time(end) for start, end in events]


def _spin_cycles(fn: Callable[[], object], setup: Callable[[], None], audit: CallAudit) -> int:
    """GPU spin long enough to cover the host's time to launch ``fn`` (1.5x its median + 20 us);
    its calls go through ``audit`` as the samples' do."""
    host_us = []
    for _ in range(5):
        setup()
        audit.before()
        torch.cuda.synchronize()
        start = time.perf_counter()
        result = fn()
        host_us.append((time.perf_counter() - start) * 1e6)
        audit.after(result)
        del result
    torch.cuda.synchronize()
    return int((1.5 * float(np.median(host_us)) + 20.0) * SPIN_CYCLES_PER_US)


def _nothing() -> None:
    pass


class CpuTimer:
    """Wall-clock timing with ``time.perf_counter``."""

    def __init__(self, settings: TimerSettings):
        self.settings = settings

    def measure(self, fn: Callable[[], object], setup: Callable[[], None] = lambda: None,
                audit: CallAudit = NO_AUDIT) -> SampleStats:
        """Time ``fn``; ``setup`` runs before every call, outside the timed region.  One untimed call
        first, so that the estimate's call, like every later one, follows a call whose results the
        audit poisons."""
        self._time_calls(fn, setup, 1, audit)
        estimate = self._time_calls(fn, setup, 1, audit)
        warmup = int(min(MAX_SAMPLES, self.settings.warmup_ms / max(estimate[0], 1e-6)))
        self._time_calls(fn, setup, warmup, audit)
        count = _sample_count(estimate[0], self.settings.rep_ms)
        audit.arm(count)
        return SampleStats.of(self._time_calls(fn, setup, count, audit))

    @staticmethod
    def _time_calls(fn: Callable[[], object], setup: Callable[[], None], count: int,
                    audit: CallAudit) -> list[float]:
        samples = []
        for _ in range(count):
            setup()
            audit.before()
            start = time.perf_counter()
            result = fn()
            samples.append((time.perf_counter() - start) * 1e3)
            audit.after(result)
            del result
        return samples


WALL_BATCH_MS = 2.0
"""How long one batch of the wall timer lasts (at least one call, at most ``MAX_SAMPLES``)."""


class WallTimer:
    """Host time per call: each sample is one batch of back-to-back calls, timed with
    ``time.perf_counter`` from its first call until the device is synchronized after its last,
    divided by its calls.

    Python, dispatcher, autograd and launch overhead are all included, and the host runs ahead of
    the device as in a training loop: a host-bound call shows its host time, a device-bound one its
    device time with warm caches.  Nothing here flushes L2 or spins the GPU.  ``setup`` (clearing
    the grads in ``bwd``) runs before each call inside the batch, and its time is included.
    """

    def __init__(self, device: str, settings: TimerSettings):
        self.device = device
        self.settings = settings

    def measure(self, fn: Callable[[], object], setup: Callable[[], None] = lambda: None,
                audit: CallAudit = NO_AUDIT) -> SampleStats:
        """Time batches of calls of ``fn``; the statistics are of milliseconds per call."""
        synchronize(self.device)
        estimate = self._batch(fn, setup, 3)
        calls = int(min(MAX_SAMPLES, max(1, WALL_BATCH_MS / max(estimate, 1e-6))))
        self._batch(fn, setup, int(min(MAX_SAMPLES, max(1, self.settings.warmup_ms / max(estimate, 1e-6)))))
        count = _sample_count(estimate * calls, self.settings.rep_ms)
        stats = SampleStats.of([self._batch(fn, setup, calls) for _ in range(count)])
        audit.arm(2)
        self._batch(fn, setup, 2, audit)
        return stats

    def _batch(self, fn: Callable[[], object], setup: Callable[[], None], calls: int,
               audit: CallAudit = NO_AUDIT) -> float:
        """Milliseconds per call of ``calls`` calls, synchronized once after the last."""
        start = time.perf_counter()
        for _ in range(calls):
            setup()
            audit.before()
            result = fn()
            audit.after(result)
            del result
        synchronize(self.device)
        return (time.perf_counter() - start) * 1e3 / calls


Timer = CudaTimer | CpuTimer | WallTimer
TIMER_KINDS = {
    "device": "CUDA events after an L2 flush, perf_counter on the CPU",
    "wall": "host time per call, no L2 flush",
}
"""What a metric can be timed by (:attr:`harness.metrics.table.Metric.timer`), in the order each
repeat runs them, with what each measures (``--help`` says it of each kind but the default,
:data:`~harness.metrics.cell_data.DEFAULT_TIMER`)."""


def make_timer(device: str, settings: TimerSettings, kind: str = DEFAULT_TIMER) -> Timer:
    """The timer of ``kind`` for ``device``: ``device`` (CUDA events, or perf_counter on the CPU;
    ``cudagraph`` applies to CUDA, the command line refuses it elsewhere) or ``wall``."""
    if kind not in TIMER_KINDS:
        raise ValueError(f"unknown timer {kind!r} (valid: {', '.join(TIMER_KINDS)})")
    if kind == "wall":
        return WallTimer(device, settings)
    return CudaTimer(settings) if device == "cuda" else CpuTimer(settings)


def synchronize(device: str) -> None:
    """Wait for the device's queued work (nothing to wait for on the CPU)."""
    if device == "cuda":
        torch.cuda.synchronize()
