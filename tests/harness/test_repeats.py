"""``--repeats``: every repeat's median is kept, backends are interleaved, a failed repeat fails the cell.
"""

from __future__ import annotations

from pathlib import Path

import torch

from harness.operator import Mode
from harness.report.results import read_json
from harness.sweep.spec import CellEvent
from operators.exp.operator import ExpOperator
from tests.helpers import run_cli


def test_repeats_store_each_repeat_median_and_interleave_backends(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = run_cli("--op", "exp", "--only", "eager,triton", "--shape", "2000", "--repeats", "3",
                     "--rep", "2", "--warmup", "0", "--metrics", "latency,accuracy",
                     "--output-json", str(out))
    assert result.returncode == 0, result.stderr
    header, records = read_json(out)
    assert header["repeats"] == 3
    latencies = [r for r in records if r.metric == "latency"]
    assert len(latencies) == 2
    for r in latencies:
        assert len(r.repeats) == 3
        assert r.value == sorted(r.repeats)[1]


def test_a_failure_in_a_later_repeat_fails_the_cell(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = run_cli("--plugin", "examples/plugins/faulty_exp_backends.py", "--op", "exp", "--shape", "2000",
                     "--only", "eager,fails_in_second_repeat", "--repeats", "3", "--rep", "0",
                     "--warmup", "0", "--metrics", "latency,speedup,accuracy", "--output-json", str(out))
    assert result.returncode == 1
    _, records = read_json(out)
    cells = {(r.backend, r.metric): r for r in records}
    for metric in ("latency", "speedup"):
        failed = cells[("fails_in_second_repeat", metric)]
        assert failed.status == "error" and "device lost (simulated)" in failed.error
    accuracy = cells[("fails_in_second_repeat", "accuracy")]
    assert accuracy.value == 0.0 and "a timed call failed" in accuracy.note, "a raising call gave no result"
    assert len(cells[("eager", "latency")].repeats) == 3


def test_repeats_interleave_the_backends_and_rotate_which_goes_first() -> None:
    from tests.helpers import run_cells

    timed = []

    def note(event: CellEvent) -> None:
        if event.phase.startswith("repeat"):
            timed.append(event.backend)

    run_cells(ExpOperator("cpu", torch.float32), Mode.FWD, (2000,), ["latency"], ["eager", "triton"],
              repeats=3, progress=note)
    assert timed == ["eager", "triton", "triton", "eager", "eager", "triton"]

