"""Result files round-trip; tables show x_val, baseline-first columns and a correct average row."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from harness.results import Record, ResultFileError, read_json, write_json
from harness.table import AVERAGE_NOTE, TableData, render
from tests.helpers import run_cli


def _records() -> list[Record]:
    rows = []
    for x, (base, fast) in {1024: (2.0, 1.0), 4096: (8.0, 2.0)}.items():
        for backend, latency in (("eager", base), ("triton", fast)):
            rows.append(Record("exp", "fwd", "float32", x, backend, "latency", latency, "ms",
                               p20=latency * 0.99, p50=latency, p80=latency * 1.01, n_samples=50,
                               extra={"spread": 0.01}))
            rows.append(Record("exp", "fwd", "float32", x, backend, "speedup", base / latency, "x"))
    rows.append(Record("exp", "fwd", "float32", 8192, "eager", "latency", None, "ms",
                       status="error", error="RuntimeError: out of memory"))
    return rows


def test_average_row_uses_geometric_mean_for_speedup_and_arithmetic_otherwise() -> None:
    data = TableData(_records(), "numel")
    averages = dict(zip(data.header()[1:], data.averages(), strict=True))
    assert averages["triton-speedup"] == pytest.approx(math.sqrt(2.0 * 4.0))
    assert averages["eager-latency"] == pytest.approx((2.0 + 8.0) / 2)
    assert averages["triton-latency"] == pytest.approx(1.5)


def test_table_has_xval_column_baseline_first_spread_and_error_footnote() -> None:
    text = render(_records(), "numel")
    lines = text.splitlines()
    header = lines[1].split()
    assert header[:3] == ["numel", "eager-latency", "eager-speedup"]
    assert "triton-latency" in header
    assert "2 (±1.0%)" in text
    assert any(line.startswith("average") for line in lines)
    assert AVERAGE_NOTE in text
    assert "ERR[1]" in text and "[1] eager: RuntimeError: out of memory" in text


def test_json_round_trip_keeps_numbers_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    header = {"device": "cpu", "command": "run.py --op exp"}
    records = _records()
    write_json(path, header, records)
    raw = json.loads(path.read_text())
    assert all(isinstance(r["value"], (float, int)) or r["value"] is None for r in raw["records"])
    loaded_header, loaded = read_json(path)
    assert loaded_header == header
    assert loaded == records
    assert not list(tmp_path.glob(".*tmp"))


def test_reader_rejects_truncated_and_foreign_files(tmp_path: Path) -> None:
    truncated = tmp_path / "truncated.json"
    write_json(truncated, {}, _records())
    truncated.write_text(truncated.read_text()[:200])
    with pytest.raises(ResultFileError, match="truncated"):
        read_json(truncated)
    foreign = tmp_path / "foreign.json"
    foreign.write_text('{"hello": 1}')
    with pytest.raises(ResultFileError, match="schema"):
        read_json(foreign)


def test_show_prints_the_tables_of_a_result_file_and_filters_modes(tmp_path):
    path = tmp_path / "run.json"
    run = run_cli("--op", "exp", "--mode", "fwd,bwd", "--shape", "1000", "--only", "eager,triton",
                  "--metrics", "accuracy,latency", "--output-json", str(path))
    assert run.returncode == 0, run.stderr
    shown = run_cli("show", str(path), "--mode", "bwd")
    assert shown.returncode == 0, shown.stderr
    assert "exp bwd float32" in shown.stdout and "exp fwd" not in shown.stdout
    assert "eager-latency" in shown.stdout and "triton-accuracy" in shown.stdout
    assert shown.stdout.splitlines()[3].split()[0] == "1000"


def test_show_prints_the_note_a_partial_file_carries(tmp_path, capsys):
    from harness import cli

    path = tmp_path / "partial.json"
    write_json(path, {"device_name": "NVIDIA H200", "note": "stopped before its last shape"}, _records())
    assert cli.main(["show", str(path)]) == 0
    assert capsys.readouterr().out.rstrip().splitlines()[-1] == "note: stopped before its last shape"


def test_show_mode_takes_a_comma_list_and_names_the_valid_and_present_modes(tmp_path, capsys):
    from harness import cli

    path = tmp_path / "run.json"
    write_json(path, {"device_name": "cpu"}, _records())
    assert cli.main(["show", str(path), "--mode", "fwd,bwd"]) == 0
    assert capsys.readouterr().out.startswith("exp fwd float32")
    for mode, message in (("nope", "unknown mode 'nope' (valid: fwd, fwd_no_grad, bwd, fwd_bwd)"),
                          ("bwd", f"{path}: no records for mode bwd (it has: fwd)")):
        with pytest.raises(SystemExit) as exit_info:
            cli.main(["show", str(path), "--mode", mode])
        assert exit_info.value.code == 2
        assert capsys.readouterr().err.strip() == f"run.py: error: {message}"


def test_show_into_a_closed_pipe_stops_without_a_traceback() -> None:
    import subprocess
    import sys

    from tests.helpers import ROOT

    baseline = ROOT / "results" / "baselines" / "h200" / "gemm_bwd.json"
    shown = subprocess.run(f"{sys.executable} run.py show {baseline} | head -1", shell=True, cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert shown.stdout == "gemm bwd bfloat16\n"
    assert "Traceback" not in shown.stderr and "BrokenPipe" not in shown.stderr


def test_show_refuses_a_corrupt_file_in_one_line(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"header": {')
    shown = run_cli("show", str(path))
    assert shown.returncode == 2
    assert len(shown.stderr.strip().splitlines()) == 1 and "broken.json" in shown.stderr


def test_result_files_get_the_modes_of_ordinary_files(tmp_path):
    import harness.results

    path = tmp_path / "out.json"
    write_json(path, {"device": "cpu"}, [])
    assert path.stat().st_mode & 0o777 == 0o666 & ~harness.results._UMASK


def test_a_write_that_fails_midway_leaves_the_previous_file_whole(tmp_path, monkeypatch):
    import os

    path = tmp_path / "run.json"
    write_json(path, {"device_name": "cpu"}, _records())
    before = path.read_text()

    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space"):
        write_json(path, {"device_name": "cpu", "note": "second write"}, _records()[:1])
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]
