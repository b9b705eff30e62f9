"""``--profile DIR`` and the ``kernels`` metric: a loadable trace per cell, and what each call launched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from harness.measure.cell import Cell
from harness.measure.profile import CALLS, exposed_times, kernel_times, profile_cell, with_work
from harness.operator import Mode
from harness.report.results import Record, read_json
from harness.report.table import kernel_tables
from harness.sweep.spec import Sweep
from operators.exp.operator import ExpOperator
from tests.helpers import cpu_settings, run_cells, run_cli

PDL_TRACE = Path(__file__).parents[2] / "results/h200/rms_norm/profile/rms_norm_bwd_16384x8192_triton.json"
"""An H200 trace of 3 calls whose second kernel, rms_norm's ``dw`` sum, is a programmatic
dependent launch of the first: it starts while that one runs and waits."""


def test_a_trace_is_written_per_cell_and_loads_as_json(tmp_path: Path) -> None:
    result = run_cli("--op", "exp", "--mode", "fwd,bwd", "--shape", "1000", "--only", "eager,triton",
                     "--metrics", "accuracy,latency", "--rep", "1", "--warmup", "0",
                     "--profile", str(tmp_path), "--no-save")
    assert result.returncode == 0, result.stderr
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(f"exp_{mode}_1000_{backend}.json"
                           for mode in ("fwd", "bwd") for backend in ("eager", "triton"))
    for name in names:
        events = json.loads((tmp_path / name).read_text())["traceEvents"]
        calls = [e for e in events if e.get("name") == "opbench.call"]
        assert len(calls) == 3, name
        ops = [e for e in events if e.get("cat") == "cpu_op" and e["name"] != "opbench.call"]
        assert ops and all(any(c["ts"] <= e["ts"] <= c["ts"] + c["dur"] for c in calls) for e in ops), \
            f"{name}: the trace holds the calls' own work only, no flush, spin or set-up between them"


def test_a_trace_that_cannot_be_written_fails_its_cell(tmp_path: Path) -> None:
    """A folder where the trace goes: the cell's kernels record carries the error, the run exits 1."""
    (tmp_path / "exp_fwd_1000_eager.json" / "taken").mkdir(parents=True)
    out = tmp_path / "r.json"
    result = run_cli("--op", "exp", "--shape", "1000", "--only", "eager", "--metrics", "accuracy,latency",
                     "--rep", "1", "--warmup", "0", "--profile", str(tmp_path), "--output-json", str(out))
    assert result.returncode == 1 and "1 cell(s) failed: exp/fwd/eager/1000" in result.stderr
    kernels = next(r for r in read_json(out)[1] if r.metric == "kernels")
    assert kernels.status == "error" and "profiling failed" in kernels.error


def test_an_export_torch_profiler_drops_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.profiler reports a failed export only as a log line: a missing trace is an error."""
    monkeypatch.setattr(torch.profiler.profile, "export_chrome_trace", lambda self, path: None)
    x = torch.rand(100)
    cell = Cell(lambda: torch.exp(x), lambda: None, lambda dys: (torch.exp(x),), [x], (), [])
    with pytest.raises(OSError, match="was not written"):
        profile_cell(cell, "cpu", tmp_path / "trace.json")


def test_the_kernels_metric_lists_what_a_call_launched_with_its_share() -> None:
    operator = ExpOperator("cpu", torch.float32)
    cells = run_cells(operator, Mode.FWD, (1000,), ["accuracy", "kernels"], ["eager"])
    record = cells[("eager", "kernels")]
    kernels = record.extra["kernels"]
    assert record.value == len(kernels) >= 1
    assert any("exp" in k["name"] for k in kernels)
    assert abs(sum(k["share"] for k in kernels) - 1.0) < 1e-9 and kernels[0]["us_per_call"] > 0
    assert all(k["bytes_moved"] is None and k["flops"] is None for k in kernels), \
        "on the CPU the kernels are operators, whose self time does no modelled work"


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


def _kernel(name: str, calls: float = 1.0, us: float = 10.0) -> dict:
    return {"name": name, "calls": calls, "us_per_call": us, "share": 1.0}


def test_a_kernel_gets_its_work_from_the_operator_or_as_a_call_s_only_kernel() -> None:
    """The rule of a GPU run's kernels (an operator made for ``cuda``; nothing runs on it)."""
    op = ExpOperator("cuda", torch.bfloat16)
    fwd = op.bytes_moved((1024,), Mode.FWD), op.flops((1024,), Mode.FWD)
    bwd = op.bytes_moved((1024,), Mode.BWD), op.flops((1024,), Mode.BWD)
    named = with_work([_kernel("_exp_fwd_kernel"), _kernel("_helion_exp_bwd")], op, (1024,), Mode.FWD_BWD)
    assert [(k["bytes_moved"], k["flops"]) for k in named] == [fwd, bwd]
    (alone,) = with_work([_kernel("vectorized_elementwise_kernel")], op, (1024,), Mode.FWD)
    assert (alone["bytes_moved"], alone["flops"]) == fwd, "a call of one kernel does the call's work"
    unknown = with_work([_kernel("a"), _kernel("b")], op, (1024,), Mode.FWD)
    unknown += with_work([_kernel("a", calls=2)], op, (1024,), Mode.FWD)
    assert all(k["bytes_moved"] is None and k["flops"] is None for k in unknown)


def _kernels_record(kernels: list[dict]) -> Record:
    return Record("gemm", "bwd", "bfloat16", [256, 256, 256], "triton", "kernels", float(len(kernels)),
                  "count", extra={"kernels": kernels})


def test_kernel_tables_give_the_rates_of_kernels_whose_work_is_known() -> None:
    known = {**_kernel("_matmul_tma_kernel", calls=2, us=20.0), "bytes_moved": 4_000_000,
             "flops": 6_000_000_000}
    unknown = {**_kernel("_split_k_reduce_kernel"), "bytes_moved": None, "flops": None}
    (table,) = kernel_tables([_kernels_record([known, unknown])])
    header, _, first, second = table.splitlines()[1:5]
    assert header.split()[-2:] == ["GB/s", "TFLOP/s"]
    assert first.split()[-2:] == ["400", "600"], "2 launches of 4 MB and 6 GFLOP in 20 us"
    assert second.split()[-2:] == ["-", "-"]
    (plain,) = kernel_tables([_kernels_record([unknown])])
    assert "GB/s" not in plain and "TFLOP/s" not in plain and "span" not in plain


def test_a_kernel_counts_only_the_time_it_adds_to_the_device_s_busy_time() -> None:
    assert exposed_times([("c", 20.0, 21.0), ("a", 0.0, 10.0), ("b", 4.0, 12.0), ("d", 20.5, 20.75)]) == [
        ("a", 10.0, 10.0), ("b", 8.0, 2.0), ("c", 1.0, 1.0), ("d", 0.25, 0.0)]


def test_a_programmatic_dependent_launch_is_not_charged_for_its_wait() -> None:
    events = json.loads(PDL_TRACE.read_text())["traceEvents"]
    intervals = [(e["name"], e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "kernel"]
    assert len(intervals) == 2 * CALLS
    main, dw_sum = kernel_times(intervals)
    assert (main["name"], dw_sum["name"]) == ("_rms_norm_bwd_kernel", "_sum_rows_kernel")
    assert dw_sum["span_us_per_call"] > 70, "its spans include the wait (3, 82 and 142 us)"
    assert 3 < dw_sum["us_per_call"] < 5 and dw_sum["share"] < 0.02, "it ends 3-4.3 us after the main kernel"
    assert main["us_per_call"] == main["span_us_per_call"]
    (table,) = kernel_tables([_kernels_record([main, dw_sum])])
    assert table.splitlines()[1].split()[:5] == ["kernel", "calls", "us/call", "span", "share"]
    assert "programmatic dependent launch" in table.splitlines()[-1]
