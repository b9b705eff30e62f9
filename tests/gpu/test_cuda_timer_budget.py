"""The CUDA timer on a GPU: a repeat of a short call costs about its warm-up and measurement
budgets in wall time, however much each sample's synchronize, flush and spin add to the call."""

from __future__ import annotations

import time

import torch

from harness.settings import TimerSettings
from harness.timing import CudaTimer


def test_a_repeat_of_a_microsecond_call_takes_about_its_budgets() -> None:
    x = torch.randn(4096, device="cuda")
    y = torch.empty_like(x)
    timer = CudaTimer(TimerSettings(warmup_ms=10.0, rep_ms=40.0))
    timer.measure(lambda: torch.exp(x, out=y))  # the flush buffer's allocation stays out
    started = time.perf_counter()
    stats = timer.measure(lambda: torch.exp(x, out=y))
    elapsed_ms = (time.perf_counter() - started) * 1e3
    assert 0 < stats.p50 < 0.1, "a 4096-element exp runs in microseconds"
    assert stats.n < 40.0 / 0.05, "a sample costs over 50 us of wall time: fewer samples than calls"
    assert 15.0 < elapsed_ms < 150.0, f"a repeat took {elapsed_ms:.0f} ms for 50 ms of budgets"
