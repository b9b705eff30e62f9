"""The timer ``triton.autotune`` times the gemm kernels' configs with: the benchmark's own
(device time after a clean L2 flush, :mod:`harness.timing`), so that the config it picks
is the one the benchmark then finds fastest.

Triton's default, ``triton.testing.do_bench``, flushes L2 by writing a buffer, whose write-back
then lands in each timed call; at 1000^3 its pick ran 21% slower than the best listed config on
the benchmark's timer (probe ``matmul_configs``, ``results/h200/gemm/NOTES.md``, session 22).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from harness.settings import TimerSettings
from harness.timing import CudaTimer

AUTOTUNE_TIMER_SETTINGS = TimerSettings(warmup_ms=5, rep_ms=25)
"""A config's budgets, wall time: about 30 ms each, 13 configs at most a key."""


@functools.cache
def _timer() -> CudaTimer:
    return CudaTimer(AUTOTUNE_TIMER_SETTINGS)


def flushed_bench(kernel_call: Callable[[], object], quantiles: tuple[float, ...]) -> list[float]:
    """``do_bench`` for ``triton.autotune``: the p50, p20 and p80 device times, ms, of
    ``kernel_call`` (the autotuner asks for those three ``quantiles``)."""
    stats = _timer().measure(kernel_call)
    by_quantile = {0.5: stats.p50, 0.2: stats.p20, 0.8: stats.p80}
    return [by_quantile[q] for q in quantiles]
