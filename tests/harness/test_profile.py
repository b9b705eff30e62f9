"""``--profile DIR`` and the ``kernels`` metric: a loadable trace per cell, and what each call launched."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from harness.operator import Mode
from harness.report.results import read_json
from harness.sweep.spec import Sweep
from operators.exp.operator import ExpOperator
from tests.helpers import cpu_settings, run_cells, run_cli


def test_a_trace_is_written_per_cell_and_loads_as_json(tmp_path: Path) -> None:
    result = run_cli("--op", "exp", "--mode", "fwd,bwd", "--shape", "1000", "--only", "eager,triton",
                     "--metrics", "accuracy,latency", "--rep", "1", "--warmup", "0",
                     "--profile", str(tmp_path), "--no-save")
    assert result.returncode == 0, result.stderr
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(f"exp_{mode}_1000_{backend}.json"
                           for mode in ("fwd", "bwd") for backend in ("eager", "triton"))
    events = json.loads((tmp_path / "exp_bwd_1000_eager.json").read_text())["traceEvents"]
    calls = [e for e in events if e.get("name") == "opbench.call"]
    assert len(calls) == 3 and not any("zero_" in e.get("name", "") for e in events), "no flush in the trace"


def test_the_kernels_metric_lists_what_a_call_launched_with_its_share() -> None:
    operator = ExpOperator("cpu", torch.float32)
    cells = run_cells(operator, Mode.FWD, (1000,), ["accuracy", "kernels"], ["eager"])
    record = cells[("eager", "kernels")]
    kernels = record.extra["kernels"]
    assert record.value == len(kernels) >= 1
    assert any("exp" in k["name"] for k in kernels)
    assert abs(sum(k["share"] for k in kernels) - 1.0) < 1e-9 and kernels[0]["us_per_call"] > 0


def test_the_run_prints_a_kernel_table_per_profiled_cell() -> None:
    result = run_cli("--op", "exp", "--shape", "1000", "--only", "eager", "--metrics", "accuracy,kernels",
                     "--no-save")
    assert result.returncode == 0, result.stderr
    assert "kernels of exp fwd 1000 eager" in result.stdout and "aten::exp" in result.stdout


def test_cell_names_are_safe_file_names() -> None:
    sweep = Sweep(ExpOperator("cpu", torch.float32), Mode.BWD, [(4096, 8192)], ["eager"], "eager",
                  cpu_settings(["accuracy"]))
    assert sweep.cell_name((4096, 8192), "triton") == "exp_bwd_4096x8192_triton"
    assert sweep.cell_name((1,), "a b/c") == "exp_bwd_1_a_b_c"


def test_isolated_cells_carry_their_kernels_back_and_write_their_traces(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = run_cli("--op", "exp", "--shape", "1000", "--only", "eager", "--metrics", "kernels", "--isolate",
                     "--profile", str(tmp_path / "traces"), "--output-json", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "kernels of exp fwd 1000 eager" in result.stdout and "aten::exp" in result.stdout
    (record,) = read_json(out)[1]
    assert record.value == len(record.extra["kernels"]) >= 1
    events = json.loads((tmp_path / "traces" / "exp_fwd_1000_eager.json").read_text())["traceEvents"]
    assert len([e for e in events if e.get("name") == "opbench.call"]) == 3
