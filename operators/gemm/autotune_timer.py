"""The timer ``triton.autotune`` times the gemm kernels' configs with: the benchmark's own
(device time after a clean L2 flush, :mod:`harness.timing`), so that the config it picks
is the one the benchmark then finds fastest.

Triton's default, ``triton.testing.do_bench``, flushes L2 by writing a buffer, whose write-back
then lands in each timed call, and picked configs the benchmark's timer finds slower than the best
listed one (probe ``matmul_configs`` in ``results/h200/gemm/NOTES.md``).
It times as a default run does (clean flush, no CUDA graph), whatever the run's own settings.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from harness.settings import TimerSettings
from harness.timing import CudaTimer

AUTOTUNE_TIMER_SETTINGS = TimerSettings(warmup_ms=5, rep_ms=25)
"""A config's budgets, wall time: about 30 ms each, ``len(TMA_CONFIGS)`` configs at most a key."""


@functools.cache
def _timer() -> CudaTimer:
    return CudaTimer(AUTOTUNE_TIMER_SETTINGS)


def flushed_bench(kernel_call: Callable[[], object], quantiles: Sequence[float] | None = None,
                  **_: object) -> float | list[float]:
    """``do_bench`` for ``triton.autotune``: the median device time, ms, of ``kernel_call``, or
    its p20, p50 and p80 in the order ``quantiles`` asks (the autotuner asks for 0.5, 0.2, 0.8)."""
    stats = _timer().measure(kernel_call)
    if quantiles is None:
        return stats.p50
    by_quantile = {0.5: stats.p50, 0.2: stats.p20, 0.8: stats.p80}
    if not set(quantiles) <= set(by_quantile):
        raise ValueError(f"flushed_bench measures the quantiles 0.2, 0.5 and 0.8, not {list(quantiles)}")
    return [by_quantile[q] for q in quantiles]
