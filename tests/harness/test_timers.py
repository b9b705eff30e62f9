"""Every timer is built by ``make_timer`` from the run's TimerSettings, whose defaults are the
only ones: 25/100 ms on CUDA, 5/50 ms on the CPU, shown by ``--help``."""

from __future__ import annotations

import dataclasses

import pytest

from harness.cli.main import main
from harness.cli.run.parser import build_parser
from harness.measure import timing
from harness.measure.timing import TIMER_KINDS, CpuTimer, WallTimer, make_timer
from harness.metrics.cell_data import DEFAULT_TIMER
from harness.metrics.table import METRICS, Metric
from harness.settings import TimerSettings


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
    assert helps["warmup"] == "warm-up budget in ms (default 25 on CUDA, 5 on CPU)"
    assert helps["rep"] == "measurement budget in ms (default 100 on CUDA, 50 on CPU)"


def test_a_cuda_repeat_spends_its_budgets_in_wall_time_whatever_a_sample_costs() -> None:
    """A sample's synchronize, flush and spin cost far more than a short call: the counts come
    from what a whole sample costs, so a repeat takes about warm-up + measurement budget."""
    settings = TimerSettings.default("cuda")
    for sample_ms in (0.01, 0.6, 1.3, 7.0):
        warmup, count = timing.sample_counts(sample_ms, settings)
        assert warmup == min(timing.MAX_SAMPLES, max(1, int(25.0 / sample_ms)))
        assert count == min(timing.MAX_SAMPLES, max(timing.MIN_SAMPLES, int(100.0 / sample_ms)))
        if timing.MIN_SAMPLES * sample_ms <= 100.0 and 100.0 / sample_ms <= timing.MAX_SAMPLES:
            assert (warmup + count) * sample_ms == pytest.approx(125.0, abs=2 * sample_ms)
    assert timing.sample_counts(0.6, settings) == (41, 166)
    assert timing.sample_counts(500.0, settings) == (1, timing.MIN_SAMPLES)
    assert timing.sample_counts(1e-4, settings) == (timing.MAX_SAMPLES, timing.MAX_SAMPLES)
