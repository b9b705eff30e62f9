"""``run.py`` in CI jobs and scripts: accuracy runs that only check, progress in a redirected log,
nothing lost on SIGTERM, CSV on stdout, a result file always kept, and a sweep that goes on in a
fresh process after a cell loses the CUDA context."""

from __future__ import annotations

import csv
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cli.run.output import failed_cells
from harness.report.results import Record, read_json
from tests.helpers import ROOT, run_cli

PLUGIN = "examples/plugins/faulty_exp_backends.py"

COUNTING_PLUGIN = "examples/plugins/counting_exp.py"


def _records(path: Path) -> dict:
    _, records = read_json(path)
    return {(r.mode, r.backend, r.metric): r for r in records}


@pytest.mark.parametrize("mode", ["fwd", "bwd", "fwd_bwd", "fwd_no_grad"])
def test_an_accuracy_run_calls_a_backend_only_for_its_two_checks(tmp_path: Path, mode: str) -> None:
    count = tmp_path / "count"
    result = subprocess.run(
        [
            sys.executable,
            "run.py",
            "--plugin",
            COUNTING_PLUGIN,
            "--op",
            "exp",
            "--mode",
            mode,
            "--shape",
            "4096",
            "--only",
            "counted",
            "--metrics",
            "accuracy",
            "--no-save",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OPBENCH_COUNT_FILE": str(count)},
    )
    assert result.returncode == 0, result.stderr
    assert len(count.read_text()) == 2, "the first call and the call on fresh inputs after it"


def test_an_accuracy_run_measures_no_bandwidth_ceilings(tmp_path: Path) -> None:
    """Ceilings only serve timed metrics: an accuracy-only run skips their copy kernels."""
    out = tmp_path / "acc.json"
    result = run_cli("--op", "exp", "--shape", "4096", "--metrics", "accuracy", "--output-json", str(out))
    assert result.returncode == 0, result.stderr
    header, _ = read_json(out)
    assert header["copy_gbps"] is None and not header["ceilings_gbps"]
    assert "bandwidth: not measured (no cell was timed)" in result.stdout


def test_help_says_which_metrics_need_timing() -> None:
    listing = run_cli("--list-metrics").stdout
    assert (
        "accuracy" in listing
        and "(no timing)"
        in listing.splitlines()[
            next(i for i, line in enumerate(listing.splitlines()) if line.startswith("accuracy"))
        ]
    )
    assert "(no timing)" not in next(line for line in listing.splitlines() if line.startswith("latency"))
    assert next(line for line in listing.splitlines() if line.startswith("walltime")).endswith("(wall timer)")
    shown = " ".join(run_cli("--help").stdout.split())
    assert "walltime only the wall timer (host time per call, no L2 flush)" in shown


def test_a_redirected_run_logs_one_line_per_finished_cell(tmp_path: Path) -> None:
    result = run_cli(
        "--op",
        "exp",
        "--shape",
        "1000",
        "--shape",
        "2000",
        "--only",
        "eager,triton",
        "--metrics",
        "accuracy",
        "--output-dir",
        str(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("[")]
    assert [line.split()[0] for line in lines] == ["[1/4]", "[2/4]", "[3/4]", "[4/4]"]
    assert lines[0].endswith("exp fwd 1000 eager") and lines[-1].endswith("exp fwd 2000 triton")


def test_sigterm_keeps_the_finished_cells_prints_their_tables_and_exits_143(tmp_path: Path) -> None:
    out = tmp_path / "partial.json"
    shapes = [arg for n in range(1000, 1030) for arg in ("--shape", str(n))]
    proc = subprocess.Popen(
        [
            sys.executable,
            "run.py",
            "--op",
            "exp",
            "--only",
            "eager",
            *shapes,
            "--rep",
            "200",
            "--warmup",
            "0",
            "--metrics",
            "accuracy,latency",
            "--output-json",
            str(out),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert out.exists(), "no cell finished in time"
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr
    assert "terminated: finished cells were kept" in stderr
    assert "exp fwd float32" in stdout and stdout.strip().splitlines()[-1] == f"results: {out}"
    _, records = read_json(out)
    assert records and len(records) % 2 == 0 and len(records) < 60


def test_a_stopped_run_names_its_csv_as_its_whole_run_would(tmp_path: Path) -> None:
    """``--mode fwd,bwd --csv PATH`` stopped during fwd still writes ``PATH``'s per-table name."""
    out, tables = tmp_path / "partial.json", tmp_path / "tables.csv"
    proc = subprocess.Popen(
        [sys.executable, "run.py", "--op", "exp", "--mode", "fwd,bwd", "--shape", "1000",
         "--plugin", "examples/plugins/faulty_exp_backends.py", "--only", "eager,hangs",
         "--metrics", "accuracy", "--csv", str(tables), "--output-json", str(out)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 120
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert out.exists(), "eager's cell did not finish in time"
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=120)
    assert proc.returncode == 143
    assert (tmp_path / "tables_exp_fwd_fp32.csv").exists() and not tables.exists()


def test_a_run_without_output_json_still_keeps_its_results_and_names_them_last(tmp_path: Path) -> None:
    result = run_cli(
        "--op",
        "exp",
        "--shape",
        "1000",
        "--only",
        "eager",
        "--metrics",
        "accuracy",
        "--output-dir",
        str(tmp_path / "runs"),
    )
    assert result.returncode == 0, result.stderr
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith(f"results: {tmp_path / 'runs'}/exp_fwd_fp32_") and last.endswith(".json")
    assert read_json(Path(last.removeprefix("results: ")))[1]
    quiet = run_cli(
        "--op",
        "exp",
        "--shape",
        "1000",
        "--only",
        "eager",
        "--metrics",
        "accuracy",
        "--output-dir",
        str(tmp_path / "none"),
        "--no-save",
    )
    assert quiet.returncode == 0 and not (tmp_path / "none").exists() and "results:" not in quiet.stdout


def test_csv_to_stdout_is_one_parseable_table_after_another(tmp_path: Path) -> None:
    result = run_cli(
        "--op",
        "exp",
        "--mode",
        "fwd,bwd",
        "--shape",
        "1000",
        "--only",
        "eager,triton",
        "--metrics",
        "accuracy,latency",
        "--csv",
        "-",
        "--output-dir",
        str(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    tables = [
        list(csv.reader(io.StringIO(block), delimiter=";")) for block in result.stdout.strip().split("\n\n")
    ]
    assert len(tables) == 2
    for rows in tables:
        assert rows[0] == ["numel", "eager-accuracy", "eager-latency", "triton-accuracy", "triton-latency"]
        assert rows[1][0] == "1000" and float(rows[1][2]) > 0 and rows[-1][0] == "average"
    assert "exp fwd float32" in result.stderr


def test_csv_files_of_several_tables_are_named_from_the_path_and_share_the_runs_stamp(tmp_path: Path) -> None:
    result = run_cli(
        "--op",
        "exp",
        "--mode",
        "fwd,bwd",
        "--shape",
        "1000",
        "--only",
        "eager",
        "--metrics",
        "accuracy",
        "--csv",
        str(tmp_path / "tables.csv"),
        "--output-dir",
        str(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "tables_exp_fwd_fp32.csv").exists() and (tmp_path / "tables_exp_bwd_fp32.csv").exists()
    unnamed = run_cli(
        "--op",
        "exp",
        "--mode",
        "fwd",
        "--shape",
        "1000",
        "--only",
        "eager",
        "--metrics",
        "accuracy",
        "--csv",
        "--output-dir",
        str(tmp_path / "runs"),
    )
    names = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert unnamed.returncode == 0 and len(names) == 2
    assert names[0].removesuffix(".csv") == names[1].removesuffix(".json")


def test_the_failed_cell_summary_counts_what_it_leaves_out_and_spells_shapes_as_the_table(
    tmp_path: Path,
) -> None:
    shapes = [arg for n in range(100, 110) for arg in ("--shape", str(n))]
    result = run_cli(
        "--plugin",
        PLUGIN,
        "--op",
        "exp",
        "--only",
        "raises",
        *shapes,
        "--metrics",
        "accuracy",
        "--output-dir",
        str(tmp_path),
    )
    assert result.returncode == 1
    summary = next(line for line in result.stderr.splitlines() if "cell(s) failed" in line)
    assert summary.startswith("10 cell(s) failed: exp/fwd/raises/100, ") and summary.endswith(" and 2 more")
    failed = Record("gemm", "fwd", "float32", [5, 6, 7], "triton", "latency", None, "ms", status="error")
    assert failed_cells([failed]) == ["gemm/fwd/triton/5x6x7"]


def test_a_result_file_under_a_file_is_refused_in_one_line() -> None:
    result = run_cli("--op", "exp", "--output-json", "/etc/passwd/x.json")
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        == "run.py: error: cannot write /etc/passwd/x.json (/etc/passwd is not a folder)"
    )


def test_skipped_backends_keep_their_place_in_the_table(tmp_path: Path) -> None:
    result = run_cli(
        "--op",
        "exp",
        "--dtype",
        "bf16",
        "--shape",
        "1000",
        "--metrics",
        "accuracy",
        "--output-dir",
        str(tmp_path),
    )
    header = next(line for line in result.stdout.splitlines() if line.startswith("numel"))
    assert header.split() == [
        "numel",
        "eager-accuracy",
        "triton-accuracy",
        "helion-accuracy",
        "torch_compile-accuracy",
    ]


def test_a_cell_that_loses_the_cuda_context_costs_only_that_cell(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = run_cli(
        "--plugin",
        PLUGIN,
        "--op",
        "exp",
        "--mode",
        "fwd,bwd",
        "--shape",
        "1000",
        "--shape",
        "2000",
        "--only",
        "eager,poisons_context,exp_via_exp2",
        "--metrics",
        "accuracy,latency,speedup",
        "--rep",
        "1",
        "--warmup",
        "0",
        "--output-json",
        str(out),
    )
    assert result.returncode == 1, result.stderr
    _, records = read_json(out)
    by_cell = {(r.mode, r.x_val, r.backend, r.metric): r for r in records}
    for mode in ("fwd", "bwd"):
        for x_val in (1000, 2000):
            culprit = by_cell[(mode, x_val, "poisons_context", "latency")]
            assert culprit.status == "error" and "the CUDA context was lost" in culprit.error
            assert by_cell[(mode, x_val, "exp_via_exp2", "accuracy")].value == 1.0
            assert by_cell[(mode, x_val, "exp_via_exp2", "speedup")].value > 0
            assert by_cell[(mode, x_val, "eager", "latency")].value > 0
    assert len(records) == 2 * 2 * 3 * 3
    assert "exp fwd float32" in result.stdout and "exp bwd float32" in result.stdout
