"""``--isolate`` and Ctrl-C: a crash, a hang or an interrupt costs only its own cell, never the file.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from harness.report.results import read_json
from tests.helpers import ROOT, run_cli

PLUGIN = "examples/plugins/faulty_exp_backends.py"


def _cells(path: Path) -> dict:
    _, records = read_json(path)
    return {(r.backend, r.metric): r for r in records}


def test_isolate_turns_crash_exception_and_wrong_result_into_cell_results(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = run_cli(
        "--plugin", PLUGIN, "--op", "exp", "--isolate", "--shape", "1000",
        "--only", "eager,kills_itself,raises,wrong_result,modifies_input,exp_via_exp2",
        "--metrics", "accuracy,latency,speedup", "--rep", "1", "--warmup", "0",
        "--output-json", str(out),
    )
    assert result.returncode == 1
    cells = _cells(out)
    killed = cells[("kills_itself", "latency")]
    assert killed.status == "error" and "killed by SIGKILL" in killed.error
    assert "illegal memory access (simulated)" in cells[("raises", "accuracy")].error
    assert cells[("wrong_result", "accuracy")].value == 0.0
    assert "input[0] was modified" in cells[("modifies_input", "accuracy")].note
    assert cells[("exp_via_exp2", "accuracy")].value == 1.0
    assert cells[("exp_via_exp2", "speedup")].value > 0
    assert cells[("eager", "latency")].value > 0


def test_the_startup_allowance_bounds_a_cell_that_hangs_in_its_first_call(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    started = time.monotonic()
    result = run_cli("--plugin", PLUGIN, "--op", "exp", "--isolate", "--startup-timeout", "20",
                     "--shape", "100", "--only", "eager,hangs", "--metrics", "accuracy",
                     "--rep", "1", "--warmup", "0", "--output-json", str(out))
    assert time.monotonic() - started < 120
    assert result.returncode == 1
    cells = _cells(out)
    assert "did not finish its start-up within 20 s (--startup-timeout" in cells[("hangs", "accuracy")].error
    assert cells[("eager", "accuracy")].value == 1.0


def test_the_timeout_bounds_a_cell_that_hangs_while_timing(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    started = time.monotonic()
    result = run_cli("--plugin", PLUGIN, "--op", "exp", "--isolate", "--timeout", "5", "--shape", "100",
                     "--only", "eager,hangs_after_first_call", "--metrics", "accuracy,latency",
                     "--rep", "1", "--warmup", "0", "--output-json", str(out))
    assert time.monotonic() - started < 120
    assert result.returncode == 1
    error = _cells(out)[("hangs_after_first_call", "latency")].error
    assert "timed out after 5 s of timing (--timeout)" in error


def test_a_timeout_shorter_than_the_setup_does_not_fail_a_healthy_cell(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = run_cli("--plugin", PLUGIN, "--op", "exp", "--isolate", "--timeout", "5",
                     "--shape", "100", "--only", "eager,slow_setup", "--metrics", "accuracy,latency",
                     "--rep", "1", "--warmup", "0", "--output-json", str(out))
    assert result.returncode == 0, result.stderr
    cells = _cells(out)
    assert cells[("slow_setup", "accuracy")].value == 1.0 and cells[("slow_setup", "latency")].value > 0


@pytest.mark.parametrize("flag", ["--timeout", "--startup-timeout"])
def test_a_worker_timeout_without_workers_is_bad_input(flag: str) -> None:
    result = run_cli("--op", "exp", flag, "5")
    assert result.returncode == 2 and "--isolate" in result.stderr


def test_ctrl_c_mid_sweep_leaves_a_valid_partial_file(tmp_path: Path) -> None:
    out = tmp_path / "partial.json"
    shapes = [arg for n in range(1000, 1030) for arg in ("--shape", str(n))]
    proc = subprocess.Popen(
        [sys.executable, "run.py", "--op", "exp", "--only", "eager", *shapes, "--rep", "200",
         "--warmup", "0", "--output-json", str(out)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # A shell that started the tests in the background ignores SIGINT in its children.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert out.exists(), "no cell finished in time"
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr
    payload = json.loads(out.read_text())
    shapes_done = {r["x_val"] for r in payload["records"]}
    assert 1 <= len(shapes_done) < 30


def _isolate_workers(parent: int) -> list[int]:
    """Pids of the ``harness.sweep.isolate`` workers started by process ``parent``."""
    workers = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines() if ":\t" in line)
            cmdline = (status.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if fields.get("PPid", "").strip() == str(parent) and b"harness.sweep.isolate" in cmdline:
            workers.append(int(status.parent.name))
    return workers


def test_ctrl_c_during_an_isolated_cell_ends_its_worker_too(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "run.py", "--plugin", PLUGIN, "--op", "exp", "--isolate", "--shape", "100",
         "--only", "hangs", "--metrics", "accuracy", "--rep", "1", "--warmup", "0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    while not (workers := _isolate_workers(proc.pid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert workers, "the isolated worker did not start"
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert not any(Path(f"/proc/{pid}").exists() for pid in workers)


def test_isolate_works_from_outside_the_repository(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "--plugin", str(ROOT / PLUGIN), "--op", "exp", "--isolate",
         "--shape", "100", "--only", "eager,exp_via_exp2", "--metrics", "accuracy", "--rep", "1",
         "--warmup", "0", "--output-json", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert _cells(out)[("exp_via_exp2", "accuracy")].value == 1.0


def test_every_field_of_a_measurement_comes_back_from_the_worker() -> None:
    from harness.metrics.cell_data import AccuracyResult, Measurement, SampleStats
    from harness.sweep.isolate import measurement_from_json, measurement_to_json

    measured = Measurement(
        timings={"device": [SampleStats(1.0, 1.1, 1.2, 30)], "wall": [SampleStats(2.0, 2.1, 2.2, 40)]},
        accuracy=AccuracyResult(True, 1e-7, 1e-6, None),
        first_call_ms=80.0, peak_mem_bytes=4096,
        kernels=[{"name": "aten::exp", "calls": 1.0, "us_per_call": 3.5, "share": 1.0}],
        notes=["helion config: Helion's default for exp_fwd|float32|small"],
    )
    unset = Measurement()
    assert all(getattr(measured, f.name) != getattr(unset, f.name) for f in dataclasses.fields(Measurement))
    payload = json.loads(json.dumps(measurement_to_json(measured, "an error")))
    assert measurement_from_json(payload) == (measured, "an error")


def test_isolate_startup_limit_kills_the_whole_session(monkeypatch) -> None:
    import harness.sweep.isolate
    import harness.sweep.worker
    from harness.operator import Mode
    from harness.sweep.spec import Sweep
    from operators.exp.operator import ExpOperator
    from tests.helpers import cpu_settings

    killed = []

    class HangingWorker:
        pid = 4242

        def __init__(self, *args, **kwargs) -> None:
            assert kwargs["start_new_session"]

        def poll(self) -> None:
            return None

        def communicate(self, timeout=None) -> tuple[str, str]:
            return "", ""

    monkeypatch.setattr(harness.sweep.isolate.subprocess, "Popen", HangingWorker)
    monkeypatch.setattr(harness.sweep.worker.os, "killpg", lambda pid, sig: killed.append((pid, sig)))
    settings = cpu_settings(["accuracy"], isolate=True, timeout_s=20.0, startup_timeout_s=0.3)
    sweep = Sweep(ExpOperator("cpu", torch.float32), Mode.FWD, [(100,)], ["eager"], "eager", settings)
    started = time.monotonic()
    measurement, error = harness.sweep.isolate.measure_isolated(sweep, (100,), "eager")
    assert 0.3 <= time.monotonic() - started < 5
    assert error.startswith("did not finish its start-up within 0.3 s") and not measurement.repeats
    assert killed == [(4242, signal.SIGKILL)]


def test_the_timeout_ends_with_the_cells_result_not_its_workers_exit(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    started = time.monotonic()
    result = run_cli("--plugin", PLUGIN, "--op", "exp", "--isolate", "--timeout", "5", "--shape", "100",
                     "--only", "eager,slow_to_exit", "--metrics", "accuracy,latency",
                     "--rep", "1", "--warmup", "0", "--output-json", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    assert _cells(out)[("slow_to_exit", "latency")].value > 0
    assert time.monotonic() - started < 25, "the worker's 30 s exit was not waited for"


def test_the_timeout_bounds_an_accuracy_only_cell_that_hangs_after_its_first_call(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    started = time.monotonic()
    result = run_cli("--plugin", PLUGIN, "--op", "exp", "--isolate", "--timeout", "5",
                     "--startup-timeout", "300", "--shape", "100", "--only", "eager,hangs_after_first_call",
                     "--metrics", "accuracy", "--output-json", str(out))
    assert time.monotonic() - started < 120, "the 300 s start-up allowance was waited out"
    assert result.returncode == 1
    error = _cells(out)[("hangs_after_first_call", "accuracy")].error
    assert "timed out after 5 s of checking (--timeout)" in error


def test_an_isolated_helion_cell_on_a_stand_in_config_says_so_in_its_records(tmp_path: Path) -> None:
    # The worker reads a copy of exp's store lacking the small bucket (a plugin points it there).
    configs = json.loads((ROOT / "operators/exp/helion_configs.json").read_text())["configs"]
    del configs["exp_fwd|float32|small"]
    store = tmp_path / "helion_configs.json"
    store.write_text(json.dumps({"configs": configs}))
    plugin = tmp_path / "store_copy.py"
    plugin.write_text("import dataclasses\nfrom pathlib import Path\n\n"
                      "from operators.exp import helion_impl\n\n"
                      "helion_impl.CONFIG_STORE = dataclasses.replace(\n"
                      f"    helion_impl.CONFIG_STORE, path=Path({str(store)!r}))\n")
    out = tmp_path / "r.json"
    result = run_cli("--plugin", str(plugin), "--op", "exp", "--isolate", "--precision", "fp32",
                     "--shape", "1000", "--only", "eager,helion", "--metrics", "accuracy,latency",
                     "--rep", "1", "--warmup", "0", "--output-json", str(out))
    assert result.returncode == 0, result.stderr
    note = "helion config: nearest stored bucket exp_fwd|float32|large for exp_fwd|float32|small"
    cells = _cells(out)
    assert cells[("helion", "accuracy")].value == 1.0
    assert cells[("helion", "accuracy")].note == cells[("helion", "latency")].note == note
    assert cells[("eager", "latency")].note is None
    assert f"helion: {note}" in result.stdout
