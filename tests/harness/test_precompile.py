"""``run.py --parallel-compile N``: every cell called once, accuracy only, in N worker processes
before the timed run (so the compilers' on-disk caches are full), leaving the run's own records
as they were; a worker's crash or hang costs the precompile, never the run; refused in one line
where it cannot work."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from harness.report.results import read_json
from tests.helpers import ROOT, run_cli

COUNTING_PLUGIN = "examples/plugins/counting_exp.py"
FAULTY_PLUGIN = "examples/plugins/faulty_exp_backends.py"
SHAPES = ("--shape", "1000", "--shape", "2000", "--shape", "3001")


def _counted_run(tmp_path: Path, name: str, *args: str) -> tuple[int, list, str]:
    """Calls of the counting backend, the result file's records and stderr of one run."""
    count, out = tmp_path / f"{name}.count", tmp_path / f"{name}.json"
    result = run_cli("--plugin", COUNTING_PLUGIN, "--op", "exp", "--mode", "fwd,bwd", *SHAPES,
                     "--only", "eager,counted", "--output-json", str(out), *args,
                     env={**os.environ, "OPBENCH_COUNT_FILE": str(count)})
    assert result.returncode == 0, result.stderr
    return len(count.read_text()), read_json(out)[1], result.stderr


def _cells(records: list) -> list[tuple]:
    return [(r.mode, r.x_val, r.backend, r.metric, r.status, r.value) for r in records]


def test_workers_call_every_cell_once_more_and_the_runs_records_stay_its_own(tmp_path: Path) -> None:
    plain_calls, plain, plain_err = _counted_run(tmp_path, "plain", "--metrics", "accuracy")
    calls, records, stderr = _counted_run(tmp_path, "pre", "--metrics", "accuracy", "--parallel-compile", "2")
    # 2 modes x 3 shapes, 2 checks a cell: the workers' calls, then the run's own.
    assert plain_calls == 12 and calls == 24
    assert _cells(records) == _cells(plain)
    lines = stderr.splitlines()
    assert "precompile: calling each of 12 cells once, 2 at a time" in lines
    assert any(line.startswith("precompile: 12 of 12 cells called in ") for line in lines), stderr
    assert "precompile" not in plain_err


def test_a_shard_precompiles_only_its_own_cells(tmp_path: Path) -> None:
    calls, records, _ = _counted_run(tmp_path, "shard", "--metrics", "accuracy", "--parallel-compile", "3",
                                     "--shard", "1/2")
    run_calls = 2 * len({(r.mode, r.x_val) for r in records if r.backend == "counted"})
    assert 0 < run_calls < 12 and calls == 2 * run_calls


def test_a_timed_run_after_it_times_every_cell(tmp_path: Path) -> None:
    _, records, _ = _counted_run(tmp_path, "timed", "--metrics", "accuracy,latency", "--parallel-compile",
                                 "4", "--warmup", "1", "--rep", "2")
    latency = [r for r in records if r.metric == "latency"]
    assert len(latency) == 12 and all(r.status == "ok" and r.value > 0 for r in latency)
    assert read_json(tmp_path / "timed.json")[0]["parallel_compile"] == 4


def test_a_crash_or_a_hang_costs_the_precompile_and_the_run_times_every_cell(tmp_path: Path) -> None:
    out = tmp_path / "faulty.json"
    result = run_cli("--plugin", FAULTY_PLUGIN, "--op", "exp", "--shape", "1000", "--only",
                     "eager,kills_itself,hangs", "--metrics", "accuracy", "--isolate", "--timeout", "5",
                     "--startup-timeout", "20", "--parallel-compile", "3", "--output-json", str(out))
    assert result.returncode == 1, result.stderr  # the run's own cells fail: kills_itself, hangs
    lines = result.stderr.splitlines()
    died = "precompile: exp fwd 1000 kills_itself: worker process died"
    assert any(line.startswith(died) for line in lines), result.stderr
    assert any("a worker was silent for 20 s and was ended" in line for line in lines), result.stderr
    statuses = {r.backend: r.status for r in read_json(out)[1]}
    assert statuses == {"eager": "ok", "kills_itself": "error", "hangs": "error"}


def _processes_marked(mark: str) -> list[int]:
    """Processes whose environment holds ``OPBENCH_TEST_MARK=mark``."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if f"OPBENCH_TEST_MARK={mark}".encode() in environ.read_bytes():
                found.append(int(environ.parent.name))
        except OSError:
            continue
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_sigterm_during_it_ends_the_run_as_sigterm_does_and_leaves_no_worker(tmp_path: Path) -> None:
    mark = uuid.uuid4().hex
    proc = subprocess.Popen(
        [sys.executable, "run.py", "--plugin", FAULTY_PLUGIN, "--op", "exp", "--shape", "1000", "--shape",
         "2000", "--only", "eager,hangs", "--metrics", "accuracy", "--parallel-compile", "2", "--no-save"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "OPBENCH_TEST_MARK": mark})
    deadline = time.monotonic() + 120
    while len(_processes_marked(mark)) < 3 and time.monotonic() < deadline:  # the run and 2 workers
        time.sleep(0.2)
    time.sleep(2)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr
    assert "terminated" in stderr
    time.sleep(1)
    assert _processes_marked(mark) == []


@pytest.mark.parametrize(("args", "env", "message"), [
    (["--parallel-compile", "-1"], {}, "--parallel-compile"),
    (["--parallel-compile", "2"], {"RANK": "0", "WORLD_SIZE": "1"},
     "--parallel-compile cannot run under torchrun"),
])
def test_it_is_refused_in_one_line(args: list[str], env: dict[str, str], message: str) -> None:
    result = run_cli("--op", "exp", "--shape", "1000", "--metrics", "accuracy", "--no-save", *args,
                     env={**os.environ, **env})
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("run.py: error: ") and message in lines[0], result.stderr


INDUCTOR_PROBE = '''
import os
from pathlib import Path

import torch
import torch._functorch.config as functorch_config
import torch._inductor.config as inductor_config

from harness.operator import register_benchmark


@register_benchmark(operator="exp")
def caches(self, x):
    def call():
        seen = (inductor_config.fx_graph_cache, inductor_config.autotune_local_cache,
                functorch_config.enable_autograd_cache)
        with Path(os.environ["OPBENCH_CACHES_FILE"]).open("a") as f:
            f.write(f"{os.getpid()} {seen}\\n")
        return torch.exp(x)
    return call
'''


def test_workers_keep_no_inductor_graphs_or_timings_and_the_run_keeps_its_settings(tmp_path: Path) -> None:
    plugin, seen = tmp_path / "caches.py", tmp_path / "caches.txt"
    plugin.write_text(INDUCTOR_PROBE)
    result = run_cli("--plugin", str(plugin), "--op", "exp", "--shape", "1000", "--only", "caches",
                     "--metrics", "accuracy", "--no-save", "--parallel-compile", "1",
                     env={**os.environ, "OPBENCH_CACHES_FILE": str(seen)})
    assert result.returncode == 0, result.stderr
    by_process: dict[str, set[str]] = {}
    for line in seen.read_text().splitlines():
        pid, settings = line.split(" ", 1)
        by_process.setdefault(pid, set()).add(settings)
    assert sorted(map(frozenset, by_process.values()), key=str) == sorted(
        [frozenset({"(False, False, False)"}), frozenset({"(True, True, True)"})], key=str)
