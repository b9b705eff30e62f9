"""Every timer is built by ``make_timer`` from the run's TimerSettings, whose defaults are the
only ones: 25/100 ms on CUDA, 5/50 ms on the CPU, shown by ``--help``."""

from __future__ import annotations

import dataclasses
import time

import pytest
import torch

from harness import timing
from harness.cli.main import main
from harness.cli.run.parser import build_parser
from harness.metrics.cell_data import DEFAULT_TIMER
from harness.metrics.table import METRICS, Metric
from harness.settings import TimerSettings
from harness.timing import TIMER_KINDS, CpuTimer, WallTimer, make_timer


def test_the_default_budgets_are_per_device_and_overridable() -> None:
    assert TimerSettings.default("cuda") == TimerSettings(warmup_ms=25.0, rep_ms=100.0)
    assert TimerSettings.default("cpu") == TimerSettings(warmup_ms=5.0, rep_ms=50.0)
    assert TimerSettings.default("cpu", rep_ms=7.0) == TimerSettings(warmup_ms=5.0, rep_ms=7.0)


def test_make_timer_builds_every_timer_from_the_settings() -> None:
    settings = TimerSettings(warmup_ms=1.0, rep_ms=2.0)
    device, wall = make_timer("cpu", settings), make_timer("cpu", settings, "wall")
    assert isinstance(device, CpuTimer) and device.settings is settings
    assert isinstance(wall, WallTimer) and wall.settings is settings and wall.device == "cpu"
    with pytest.raises(ValueError, match="unknown timer 'host'"):
        make_timer("cpu", settings, "host")


def test_every_timed_metric_names_a_timer_make_timer_builds() -> None:
    assert {m.timer for m in METRICS.values()} - {None} <= set(TIMER_KINDS)
    assert next(f.default for f in dataclasses.fields(Metric) if f.name == "timer") == DEFAULT_TIMER


def test_the_help_and_the_metric_list_name_each_timer_kind_s_metrics(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(TIMER_KINDS, "clock", "SM cycles per call")
    monkeypatch.setitem(METRICS, "cycles", Metric("cycles", "count", "SM cycles per call", lambda ctx: 0.0,
                                                  timer="clock"))
    helps = {action.dest: action.help for action in build_parser()._actions}
    assert helps["metrics"].endswith("walltime only the wall timer (host time per call, no L2 flush); "
                                      "cycles only the clock timer (SM cycles per call); the others the "
                                      "device timer")
    assert main(["--list-metrics"]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert listing[-1].endswith("SM cycles per call (clock timer)")
    assert "timer)" not in next(line for line in listing if line.startswith("latency"))


def test_the_help_shows_the_default_budgets() -> None:
    helps = {action.dest: action.help for action in build_parser()._actions}
    per_repeat = "in ms a repeat, wall time on CUDA"
    assert helps["warmup"] == f"warm-up budget {per_repeat} (default 25 on CUDA, 5 on CPU)"
    assert helps["rep"] == f"measurement budget {per_repeat} (default 100 on CUDA, 50 on CPU)"


def test_sample_counts_are_the_budgets_over_what_a_sample_costs_within_their_bounds() -> None:
    settings = TimerSettings.default("cuda")
    assert timing.sample_counts(0.6, settings) == (41, 166)
    assert timing.sample_counts(1.3, settings) == (19, 76)
    assert timing.sample_counts(500.0, settings) == (1, timing.MIN_SAMPLES)
    assert timing.sample_counts(1e-4, settings) == (timing.MAX_SAMPLES, timing.MAX_SAMPLES)


class _FakeEvent:
    """A CUDA event whose every timed call took 5 us of device time."""

    def __init__(self, enable_timing: bool = False):
        pass

    def record(self) -> None:
        pass

    def elapsed_time(self, end: _FakeEvent) -> float:
        return 0.005


def test_a_cuda_repeat_takes_as_many_samples_as_its_wall_budgets_hold(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The CUDA configuration on a CPU: each sample's synchronize waits 1 ms (its flush and spin),
    the call itself 5 us of device time, and one of the first samples 200 ms (a one-off cost):
    the repeat takes about its 5 + 40 ms of budgets in samples (by device time it took 1,000 of
    each), and the one-off does not cut the count to the least (a median sample is the cost)."""
    waits = iter([0.001, 0.2])
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: time.sleep(next(waits, 0.001)))
    monkeypatch.setattr(torch.cuda, "Event", _FakeEvent)
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: None)
    monkeypatch.setattr(timing, "_spin_cycles", lambda fn, setup, audit: 0)
    monkeypatch.setattr(timing.CudaTimer, "_flusher", lambda self: lambda: None)
    calls = []
    started = time.perf_counter()
    stats = timing.CudaTimer(TimerSettings(warmup_ms=5.0, rep_ms=40.0)).measure(lambda: calls.append(1))
    elapsed_ms = (time.perf_counter() - started) * 1e3
    assert stats.p50 == pytest.approx(0.005)
    assert 15 <= stats.n <= 40, "40 ms of 1 ms samples, whatever the call's 5 us"
    assert 1 <= len(calls) - timing.ESTIMATE_SAMPLES - stats.n <= 5, "5 ms of warm-up"
    assert elapsed_ms < 2000.0


@pytest.mark.parametrize(("argv", "writes"), [([], False), (["--l2-flush", "clean"], False),
                                              (["--l2-flush", "dirty"], True)])
def test_the_default_flush_reads_its_buffer_and_leaves_l2_clean(monkeypatch: pytest.MonkeyPatch,
                                                                 argv: list[str], writes: bool) -> None:
    """Issue 16: a flush that writes leaves dirty lines whose write-back lands in the timed call."""
    made: list[bool] = []
    monkeypatch.setattr(timing, "L2Flusher", lambda device, write: made.append(write))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    flush = build_parser().parse_args(["--op", "exp", *argv]).l2_flush
    timing.CudaTimer(TimerSettings.default("cuda", flush=flush))._flusher()
    assert made == [writes]


@pytest.mark.parametrize("write", [False, True])
def test_the_clean_flush_only_reads_its_buffer_and_the_dirty_one_writes_it(
        monkeypatch: pytest.MonkeyPatch, write: bool) -> None:
    """What each flush does to its buffer (here on the CPU, sized as for a 128 MiB L2)."""
    props = type("Props", (), {"L2_cache_size": 128 * 2**20})()
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: props)
    flush = timing.L2Flusher(torch.device("cpu"), write=write)
    assert flush.buffer.numel() * 4 == 256 * 2**20, "twice the L2"
    flush.buffer.fill_(1)
    flush()
    assert flush.buffer.any().item() is not write
    assert write or flush.sink.item() == flush.buffer.numel(), "a read pass sums the buffer"
