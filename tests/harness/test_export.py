"""``run.py export``: each format against its documented layout, failed and skipped cells never
written as 0, every value exported once and unchanged, the command line's output and errors."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from harness.report.exporters import FORMATS
from harness.report.exporters.common import ExportError
from harness.report.results import Record, read_json, write_json
from tests.helpers import BF16_CPU_COLUMNS, ROOT, bf16_cpu_exp_records

HEADER = {
    "date_utc": "2026-12-01T09:37:35+00:00", "git_commit": "14b091c", "device": "cuda",
    "device_name": "NVIDIA H200", "driver": "580.159.04", "cuda": "13.0", "torch": "2.11.0+cu130",
    "triton": "3.6.0", "helion": None, "python": "3.12.3", "command": "run.py --op exp",
    "precision": "bf16", "repeats": 3, "options": {"bias": "2d", "alpha": 0.5},
    "timer": {"warmup_ms": 25.0, "rep_ms": 100.0, "cudagraph": False}, "seed": 0,
}

KEY = re.compile(
    r"tritonbench_(?P<op>[0-9a-z_]+?)_(?P<mode>fwd|bwd|fwd_bwd|fwd_no_grad)"
    r"(?:\[x_(?P<x_val>[^\]]+)-(?P<backend>[0-9a-z_]+)\]_(?P<metric>[a-z_]+)"
    r"|\[(?P<avg_backend>[0-9a-z_]+)\]-(?P<avg_metric>[a-z_]+)-avg)"
)
"""tritonbench's ``userbenchmark_dict`` keys: a value per x_val and backend, or a backend's average."""


def _records() -> list[Record]:
    """Two tables (exp with int x_vals, rms_norm with shapes), a failed and a skipped cell; the
    triton backend comes first in the file, the baseline (eager) must still lead the columns."""
    rows = []
    for x, (base, fast) in {4096: (0.0123, 0.0071), 65536: (0.0412, 0.0219)}.items():
        rows.append(Record("exp", "fwd", "bfloat16", x, "triton", "latency", fast, "ms",
                           p20=fast * 0.99, p50=fast, p80=fast * 1.01, n_samples=30,
                           repeats=[fast * 0.98, fast, fast * 1.02], extra={"spread": 0.01}))
        rows.append(Record("exp", "fwd", "bfloat16", x, "triton", "speedup", base / fast, "x"))
        rows.append(Record("exp", "fwd", "bfloat16", x, "eager", "latency", base, "ms", p50=base))
    rows.append(Record("exp", "fwd", "bfloat16", 262144, "triton", "latency", None, "ms",
                       status="error", error="RuntimeError: out of memory"))
    rows.append(Record("exp", "fwd", "bfloat16", 262144, "eager", "latency", 0.131, "ms", p50=0.131))
    rows.append(Record("rms_norm", "bwd", "bfloat16", [4096, 1024], "eager", "latency", 0.0333, "ms"))
    rows.append(Record("rms_norm", "bwd", "bfloat16", [4096, 1024], "helion", "latency", None, "ms",
                       status="skipped", error="helion needs a GPU"))
    rows.append(Record("rms_norm", "bwd", "bfloat16", [4096, 1024], "helion", "accuracy", 1.0, "bool"))
    return rows


def _ok(records: list[Record]) -> list[Record]:
    return [r for r in records if r.status == "ok"]


def _tables(text: str) -> list[list[list[str]]]:
    return [list(csv.reader(block.splitlines(), delimiter=";")) for block in text.strip().split("\n\n")]


def test_tritonbench_csv_has_its_table_layout_per_op_mode_dtype() -> None:
    exp, rms = _tables(FORMATS["tritonbench-csv"](HEADER, _records()))
    assert exp[0] == ["numel", "eager-latency", "triton-latency", "triton-speedup"]
    assert [row[0] for row in exp[1:]] == ["4096", "65536", "262144", "average"]
    averages = [float(cell) for cell in exp[-1][1:]]
    assert averages == pytest.approx([(0.0123 + 0.0412 + 0.131) / 3, (0.0071 + 0.0219) / 2,
                                      ((0.0123 / 0.0071) * (0.0412 / 0.0219)) ** 0.5])
    assert rms[0] == ["MxN", "eager-latency", "helion-latency", "helion-accuracy"]
    assert rms[1][0] == "(4096, 1024)" and rms[-1][0] == "average"


def test_tritonbench_csv_orders_the_columns_as_the_run_did_with_skipped_backends_in_place() -> None:
    (table,) = _tables(FORMATS["tritonbench-csv"](HEADER, bf16_cpu_exp_records()))
    assert table[0] == ["numel", *BF16_CPU_COLUMNS]
    assert table[1] == ["1000", "0.01", "", "", "0.02"]


def test_tritonbench_json_keys_follow_its_grammar_and_values_are_numbers() -> None:
    metrics = json.loads(FORMATS["tritonbench-json"](HEADER, _records()))
    assert all(KEY.fullmatch(key) for key in metrics), [k for k in metrics if not KEY.fullmatch(k)]
    assert all(isinstance(v, float) for v in metrics.values())
    assert metrics["tritonbench_rms_norm_bwd[x_(4096, 1024)-eager]_latency"] == 0.0333
    assert metrics["tritonbench_exp_fwd[x_4096-triton]_speedup"] == 0.0123 / 0.0071
    average = (0.0071 + 0.0219) / 2
    assert metrics["tritonbench_exp_fwd[triton]-latency-avg"] == average
    assert metrics["tritonbench_exp_fwd[x_average-triton]_latency"] == average


def test_hud_v3_records_have_the_schema_fields_with_string_only_extra_info() -> None:
    records = json.loads(FORMATS["hud-v3"](HEADER, _records()))
    assert isinstance(records, list) and len(records) == len(_ok(_records()))
    for record in records:
        assert set(record) == {"benchmark", "model", "metric", "runners", "dependencies"}
        assert record["benchmark"]["name"] == "opbench" and record["benchmark"]["dtype"] == "bfloat16"
        assert {"name", "type", "backend", "origins"} <= set(record["model"])
        metric = record["metric"]
        assert isinstance(metric["name"], str) and metric["name"]
        assert all(isinstance(v, float) for v in metric["benchmark_values"])
        assert record["runners"] == [{"name": "cuda", "type": "NVIDIA H200", "gpu_info": "NVIDIA H200",
                                      "extra_info": {"driver": "580.159.04", "cuda_version": "13.0"}}]
        assert record["dependencies"] == {"torch": {"repo": "pytorch/pytorch", "version": "2.11.0+cu130"},
                                          "triton": {"repo": "triton-lang/triton", "version": "3.6.0"},
                                          "opbench": {"sha": "14b091c"}}
        maps = [record["benchmark"], record["model"], metric, *record["runners"],
                *record["dependencies"].values()]
        for info in (part.get("extra_info", {}) for part in maps):
            assert all(isinstance(k, str) and isinstance(v, str) for k, v in info.items())
    latency = next(r for r in records
                   if r["metric"]["name"] == "latency" and r["model"]["backend"] == "triton")
    assert latency["metric"]["extra_info"]["aggregation"] == "p50"
    assert json.loads(latency["metric"]["extra_info"]["repeats"]) == [0.0071 * 0.98, 0.0071, 0.0071 * 1.02]
    assert latency["model"]["extra_info"] == {"alpha": "0.5", "bias": "2d"}
    assert json.loads(latency["benchmark"]["extra_info"]["timer"])["rep_ms"] == 100.0


Cell = tuple[str, str, str, str, str]
GROUPS = (("exp", "fwd"), ("rms_norm", "bwd"))
"""The (op, mode) of each CSV table of the synthetic records, in order."""


def _exported_values(fmt: str, text: str, groups: tuple[tuple[str, str], ...] = GROUPS) -> dict[Cell, float]:
    """Every per-cell value a format holds, keyed by (op, mode, x_val, backend, metric), checking
    that none appears twice; ``groups`` names the (op, mode) of each CSV table, in order."""
    found: list[tuple[Cell, float]] = []
    if fmt == "tritonbench-csv":
        tables = _tables(text)
        assert len(tables) == len(groups)
        for (op, mode), table in zip(groups, tables, strict=True):
            columns = [column.split("-") for column in table[0][1:]]
            for row in table[1:-1]:
                found += [((op, mode, row[0], b, m), float(cell))
                          for (b, m), cell in zip(columns, row[1:], strict=True) if cell != ""]
    elif fmt == "tritonbench-json":
        for key, value in json.loads(text).items():
            match = KEY.fullmatch(key)
            if match["x_val"] not in (None, "average"):
                found.append((match.group("op", "mode", "x_val", "backend", "metric"), value))
    else:
        for record in json.loads(text):
            cell = (record["model"]["name"], record["benchmark"]["mode"],
                    record["metric"]["extra_info"]["input_shape"], record["model"]["backend"],
                    record["metric"]["name"])
            found += [(cell, value) for value in record["metric"]["benchmark_values"]]
    values = dict(found)
    assert len(values) == len(found), "a cell exported twice"
    return values


def _expected_values(records: list[Record]) -> dict[Cell, float]:
    return {(r.op, r.mode, str(r.x_val) if isinstance(r.x_val, int) else str(tuple(r.x_val)),
             r.backend, r.metric): r.value for r in _ok(records)}


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_ok_value_is_exported_once_unchanged(fmt: str) -> None:
    records = _records()
    assert _exported_values(fmt, FORMATS[fmt](HEADER, records)) == _expected_values(records)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_failed_and_skipped_cells_are_left_out_never_zero(fmt: str) -> None:
    text = FORMATS[fmt](HEADER, _records())
    values = _exported_values(fmt, text)
    assert ("exp", "fwd", "262144", "triton", "latency") not in values
    assert ("rms_norm", "bwd", "(4096, 1024)", "helion", "latency") not in values
    if fmt == "tritonbench-csv":
        exp, rms = _tables(text)
        assert exp[3][exp[0].index("triton-latency")] == "" and rms[1][rms[0].index("helion-latency")] == ""
    assert 0.0 not in values.values()


@pytest.mark.parametrize("fmt", ["tritonbench-json", "hud-v3"])
def test_a_wrong_cell_exports_its_accuracy_but_no_time_for_a_dashboard(fmt: str) -> None:
    records = _records() + [
        Record("exp", "fwd", "bfloat16", 4096, "helion", "accuracy", 0.0, "bool"),
        Record("exp", "fwd", "bfloat16", 4096, "helion", "latency", 0.001, "ms", p50=0.001),
        Record("exp", "fwd", "bfloat16", 4096, "helion", "speedup", 12.3, "x"),
    ]
    values = _exported_values(fmt, FORMATS[fmt](HEADER, records))
    assert values[("exp", "fwd", "4096", "helion", "accuracy")] == 0.0
    assert ("exp", "fwd", "4096", "helion", "latency") not in values
    assert ("exp", "fwd", "4096", "helion", "speedup") not in values


def test_tritonbench_json_refuses_two_dtypes_of_one_op_and_mode() -> None:
    records = _records() + [Record("exp", "fwd", "float32", 4096, "eager", "latency", 0.02, "ms")]
    with pytest.raises(ExportError, match="several dtypes"):
        FORMATS["tritonbench-json"](HEADER, records)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_a_committed_gpu_result_file_exports_in_every_format(fmt: str) -> None:
    header, records = read_json(ROOT / "results/h200/restructure_ab/lease1_rms_norm_exp/rms_new.json")
    values = _exported_values(fmt, FORMATS[fmt](header, records), (("rms_norm", "fwd"), ("rms_norm", "bwd")))
    assert values == _expected_values(records) and len(values) == 72


def _export(argv: list[str], capsys) -> tuple[int | str | None, str, str]:
    """``run.py export ARGV`` in-process: its exit status, stdout and stderr."""
    from harness.cli import main as cli

    try:
        status = cli.main(["export", *argv])
    except SystemExit as exc:
        status = exc.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_export_writes_to_stdout_and_to_a_file(tmp_path: Path, capsys) -> None:
    path = tmp_path / "run.json"
    write_json(path, HEADER, _records())
    status, out, _ = _export([str(path), "--format", "tritonbench-csv", "--mode", "bwd"], capsys)
    assert status == 0 and out.splitlines()[0] == "MxN;eager-latency;helion-latency;helion-accuracy"
    written = tmp_path / "out" / "hud.json"
    status, out, _ = _export([str(path), "--format", "hud-v3", "-o", str(written)], capsys)
    assert status == 0 and out == ""
    assert written.read_text() == FORMATS["hud-v3"](*read_json(path))


@pytest.mark.parametrize(
    "args, message",
    [
        (["--format", "csv"], "unknown format 'csv' (valid: tritonbench-json, tritonbench-csv, hud-v3)"),
        ([], "give --format (valid: tritonbench-json, tritonbench-csv, hud-v3)"),
        (["--format", "hud-v3", "--mode", "bwd_fwd"],
         "unknown mode 'bwd_fwd' (valid: fwd, fwd_no_grad, bwd, fwd_bwd)"),
    ],
)
def test_bad_export_input_is_one_line_exit_2(tmp_path: Path, capsys, args: list[str], message: str) -> None:
    path = tmp_path / "run.json"
    write_json(path, HEADER, _records())
    status, _, err = _export([str(path), *args], capsys)
    assert status == 2 and err == f"run.py: error: {message}\n"


def test_export_of_a_mode_the_file_lacks_names_the_modes_it_has(tmp_path: Path, capsys) -> None:
    path = tmp_path / "run.json"
    write_json(path, HEADER, [r for r in _records() if r.mode == "bwd"])
    status, _, err = _export([str(path), "--format", "hud-v3", "--mode", "fwd"], capsys)
    assert status == 2 and err == f"run.py: error: {path}: no records for mode fwd (it has: bwd)\n"


def test_export_of_a_missing_or_corrupt_file_is_one_line_exit_2(tmp_path: Path, capsys) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"header": {')
    for path in (broken, tmp_path / "absent.json"):
        status, _, err = _export([str(path), "--format", "tritonbench-json"], capsys)
        assert status == 2 and len(err.splitlines()) == 1 and path.name in err


def test_the_run_s_csv_is_the_tritonbench_export_of_its_result_file(tmp_path: Path) -> None:
    """Both are tritonbench's layout: the same rows, a shape spelled as a tuple, so a dashboard
    joins them on one key."""
    from tests.helpers import run_cli

    out, tables = tmp_path / "r.json", tmp_path / "t.csv"
    assert run_cli("--op", "addmm", "--shape", "32,48,16", "--only", "eager", "--metrics", "accuracy",
                   "--csv", str(tables), "--output-json", str(out)).returncode == 0
    exported = run_cli("export", str(out), "--format", "tritonbench-csv")
    assert exported.returncode == 0, exported.stderr
    run_csv = tables.read_text()
    assert run_csv.splitlines()[1].startswith("(32, 48, 16);")
    assert exported.stdout.strip() == run_csv.strip()
