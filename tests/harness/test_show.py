"""``run.py show``: a result file's tables, filtered by mode, with its note, refusing corrupt files.
"""

from __future__ import annotations

import pytest

from harness.report.results import read_json, write_json
from tests.helpers import BF16_CPU_COLUMNS, bf16_cpu_exp_records, run_cli, sample_exp_records


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
    digest = read_json(path)[0]["source_digest"]
    assert f"source: {digest[:12]}" in shown.stdout  # the code the run imported


def test_show_marks_a_partial_file_and_prints_its_note(tmp_path, capsys):
    from harness.cli import main as cli

    path = tmp_path / "partial.json"
    header = {"device_name": "NVIDIA H200", "complete": False, "note": "stopped before its last shape"}
    write_json(path, header, sample_exp_records())
    assert cli.main(["show", str(path)]) == 0
    assert capsys.readouterr().out.rstrip().splitlines()[-2:] == [
        "partial: the run had not finished when this file was written; the tables hold the cells it had",
        "note: stopped before its last shape"]
    write_json(path, {**header, "complete": True}, sample_exp_records())
    assert cli.main(["show", str(path)]) == 0
    assert "partial" not in capsys.readouterr().out


def test_show_mode_takes_a_comma_list_and_names_the_valid_and_present_modes(tmp_path, capsys):
    from harness.cli import main as cli

    path = tmp_path / "run.json"
    write_json(path, {"device_name": "cpu"}, sample_exp_records())
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



def test_show_orders_the_columns_as_the_run_did_with_skipped_backends_in_place(tmp_path, capsys):
    from harness.cli import main as cli

    path = tmp_path / "bf16.json"
    write_json(path, {"device_name": "AMD EPYC"}, bf16_cpu_exp_records())
    assert cli.main(["show", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[1].split() == ["numel", *BF16_CPU_COLUMNS]
