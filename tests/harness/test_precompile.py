"""``run.py --precompile N``: every cell called once, accuracy only, in N processes before the timed run
(so the compilers' on-disk caches are full), leaving the run's own records and choices as they
were; refused where it cannot work, in one line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.report.results import read_json
from tests.helpers import run_cli

COUNTING_PLUGIN = "examples/plugins/counting_exp.py"
SHAPES = ("--shape", "1000", "--shape", "2000", "--shape", "3001")


def _counted_run(tmp_path: Path, name: str, *args: str) -> tuple[int, list, str]:
    """Calls of the counting backend, the result file's records and stderr of one run."""
    count, out = tmp_path / f"{name}.count", tmp_path / f"{name}.json"
    result = run_cli("--plugin", COUNTING_PLUGIN, "--op", "exp", "--mode", "fwd,bwd", *SHAPES,
                     "--only", "eager,counted", "--output-json", str(out), *args,
                     env={**os.environ, "OPBENCH_COUNT_FILE": str(count)})
    assert result.returncode == 0, result.stderr
    return len(count.read_text()), read_json(out)[1], result.stderr


def test_precompile_calls_every_cell_once_more_in_workers_and_keeps_the_runs_records(tmp_path: Path) -> None:
    plain_calls, plain, _ = _counted_run(tmp_path, "plain", "--metrics", "accuracy")
    warm_calls, warm, stderr = _counted_run(tmp_path, "warm", "--metrics", "accuracy", "--precompile", "2")
    # 2 modes x 3 shapes, 2 checks a cell: the workers' calls, then the run's own.
    assert plain_calls == 12 and warm_calls == 24
    assert [(r.mode, r.x_val, r.backend, r.metric, r.status, r.value) for r in warm] == \
        [(r.mode, r.x_val, r.backend, r.metric, r.status, r.value) for r in plain]
    lines = stderr.splitlines()
    assert "precompile: calling every cell once in 2 processes" in lines
    assert any(line.startswith("precompile: done in ") and "failed" not in line for line in lines), stderr


def test_precompile_before_a_timed_run_times_every_cell_as_without_it(tmp_path: Path) -> None:
    _, records, _ = _counted_run(tmp_path, "timed", "--metrics", "accuracy,latency", "--precompile", "4",
                                 "--warmup", "1", "--rep", "2")
    latency = [r for r in records if r.metric == "latency"]
    assert len(latency) == 12 and all(r.status == "ok" and r.value > 0 for r in latency)


@pytest.mark.parametrize(("args", "env", "message"), [
    (["--precompile", "-1"], {}, "--precompile"),
    (["--precompile", "2"], {"RANK": "0", "WORLD_SIZE": "1"}, "--precompile cannot run under torchrun"),
])
def test_precompile_is_refused_in_one_line(args: list[str], env: dict[str, str], message: str) -> None:
    result = run_cli("--op", "exp", "--shape", "1000", "--metrics", "accuracy", "--no-save", *args,
                     env={**os.environ, **env})
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("run.py: error: ") and message in lines[0], result.stderr
