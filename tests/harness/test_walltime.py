"""The ``walltime`` metric: host time per call from batches of back-to-back calls, one device
synchronize per batch, never the device timer's L2 flush or spin, and apart from its samples."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from harness import timing
from harness.audit import NO_AUDIT, CallAudit
from harness.metrics.cell_data import Measurement, SampleStats
from harness.operator import Mode
from harness.report.results import read_json
from harness.settings import TimerSettings
from harness.sweep import isolate, spec
from harness.timing import make_timer
from operators.exp.operator import ExpOperator
from tests.helpers import run_cells, run_cli


def _refuse(*args: object, **kwargs: object) -> None:
    raise AssertionError("the wall timer must not flush L2 or spin the GPU")


def _with_device_timer(factory: Callable[[], object]) -> Callable[..., object]:
    """:func:`~harness.timing.make_timer` with ``factory()`` for the device timer; the wall
    timer stays the real one."""
    def make(device: str, settings: TimerSettings, kind: str = "device") -> object:
        return factory() if kind == "device" else make_timer(device, settings, kind)
    return make


def test_wall_timer_syncs_once_per_batch_and_never_flushes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CUDA configuration on a CPU: the device synchronize is counted, the flush and spin refuse."""
    syncs: list[str] = []
    monkeypatch.setattr(timing, "synchronize", syncs.append)
    monkeypatch.setattr(timing.L2Flusher, "__init__", _refuse)
    monkeypatch.setattr(timing.L2Flusher, "__call__", _refuse)
    monkeypatch.setattr(torch.cuda, "_sleep", _refuse)
    calls, setups = [], []
    stats = make_timer("cuda", TimerSettings(warmup_ms=1.0, rep_ms=5.0), "wall").measure(
        lambda: calls.append(len(syncs)), lambda: setups.append(len(calls)))
    assert 0 < stats.p20 <= stats.p50 <= stats.p80 and math.isfinite(stats.p80)
    assert stats.n >= timing.MIN_SAMPLES
    assert setups == list(range(len(calls))), "setup runs before every call"
    assert set(syncs) == {"cuda"} and len(calls) >= 10 * len(syncs), "one sync per batch of calls"


def test_wall_timer_measures_host_time_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of about 20 calls of 0.5 ms: each sample is a batch's time over its calls."""
    monkeypatch.setattr(timing, "WALL_BATCH_MS", 10.0)
    timer = make_timer("cpu", TimerSettings(warmup_ms=0.0, rep_ms=50.0), "wall")
    stats = timer.measure(lambda: time.sleep(0.0005))
    assert 0.5 <= stats.p50 < 1.5


class _FlushingTimer:
    """A device timer that spends 5 ms "flushing" before every call, outside its samples."""

    def measure(self, fn: Callable[[], object], setup: Callable[[], None] = lambda: None,
                audit: CallAudit = NO_AUDIT) -> SampleStats:
        samples = []
        audit.arm(10)
        for _ in range(10):
            setup()
            audit.before()
            time.sleep(0.005)
            start = time.perf_counter()
            result = fn()
            samples.append((time.perf_counter() - start) * 1e3)
            audit.after(result)
        return SampleStats.of(samples)


def test_walltime_is_measured_apart_from_the_device_timers_flush(monkeypatch: pytest.MonkeyPatch) -> None:
    spec._timer.cache_clear()
    monkeypatch.setattr(spec, "make_timer", _with_device_timer(_FlushingTimer))
    try:
        cells = run_cells(ExpOperator("cpu", torch.float32), Mode.FWD, (1000,), ["latency", "walltime"],
                          ["eager"])
    finally:
        spec._timer.cache_clear()
    latency, walltime = cells[("eager", "latency")], cells[("eager", "walltime")]
    assert latency.status == walltime.status == "ok"
    assert 0 < walltime.value < 1.0, "no flush inside the wall timer's samples"
    assert walltime.p20 <= walltime.p50 <= walltime.p80 and walltime.extra["spread"] >= 0


@pytest.mark.parametrize("mode", [Mode.FWD_NO_GRAD, Mode.BWD], ids=lambda m: m.value)
def test_walltime_alone_never_builds_the_device_timer(monkeypatch: pytest.MonkeyPatch, mode: Mode) -> None:
    spec._timer.cache_clear()
    monkeypatch.setattr(spec, "make_timer", _with_device_timer(_refuse))
    cells = run_cells(ExpOperator("cpu", torch.float32), mode, (1000,), ["walltime", "accuracy"],
                      ["eager", "torch_compile"])
    for backend in ("eager", "torch_compile"):
        record = cells[(backend, "walltime")]
        assert record.status == "ok", record.error
        assert record.value > 0 and math.isfinite(record.value) and record.unit == "ms"
        assert cells[(backend, "accuracy")].value == 1.0


def test_isolated_worker_hands_back_walltime() -> None:
    sent = Measurement(timings={"wall": [SampleStats(0.1, 0.2, 0.3, 12), SampleStats(0.2, 0.25, 0.3, 11)]})
    received, error = isolate.measurement_from_json(isolate.measurement_to_json(sent, None))
    assert received.timings == sent.timings and error is None
    assert received.stats_of("wall") is not None and received.stats_of("wall").n == 23


def test_walltime_table_shows_dispatch_against_the_direct_call(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = run_cli("--op", "exp", "--shape", "1000", "--only", "eager,triton,triton_direct",
                     "--metrics", "walltime", "--rep", "5", "--warmup", "0", "--output-json", str(out))
    assert result.returncode == 0, result.stderr
    header = next(line for line in result.stdout.splitlines() if line.startswith("numel"))
    assert header.split() == ["numel", "eager-walltime", "triton-walltime", "triton_direct-walltime"]
    _, records = read_json(out)
    assert {r.backend for r in records} == {"eager", "triton", "triton_direct"}
    assert all(r.metric == "walltime" and r.value > 0 and math.isfinite(r.value) for r in records)
