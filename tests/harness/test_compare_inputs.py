"""``run.py compare``: the input the gate refuses (bad files, missing provenance or accuracy,
mismatched runs) and its exit statuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.report.results import Record, write_json
from tests.harness.compare_helpers import (
    HEADER,
    run_compare,
    sweep,
    write,
)
from tests.helpers import run_cli


def test_a_folder_for_markdown_is_refused_before_comparing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "base.json", sweep(seed=1))
    code, out, err = run_compare(capsys, path, path, "--markdown", str(tmp_path))
    assert code == 2 and out == ""
    assert err.strip() == f"run.py: error: {tmp_path} is a folder; give a file name"


def test_run_py_compare_exits_1_on_regression(tmp_path: Path) -> None:
    result = run_cli("compare", write(tmp_path / "base.json", sweep(seed=1)),
                     write(tmp_path / "cur.json", sweep(seed=2, scale={"eager": 1.2})), timeout=120)
    assert result.returncode == 1, result.stderr
    assert "3 regression" in result.stdout.splitlines()[-2]


def _truncated(path: Path) -> str:
    text = Path(write(path, sweep(seed=1))).read_text()
    path.write_text(text[: len(text) // 2])
    return str(path)


def _binary(path: Path) -> str:
    path.write_bytes(b"\xff\xfe\x00")
    return str(path)


def _not_results(path: Path) -> str:
    path.write_text(json.dumps({"benchmarks": []}))
    return str(path)


@pytest.mark.parametrize(
    ("make_baseline", "reason"),
    [
        (_truncated, "not valid JSON, truncated or corrupt"),
        (_not_results, "not a result file"),
        (lambda path: str(path), "cannot read"),
        (lambda path: write(path, sweep(seed=1), device="NVIDIA H100"), "was measured on 'NVIDIA H100'"),
        (_binary, "not a text file"),
    ],
    ids=["truncated", "not_results", "absent", "other_device", "binary"],
)
def test_bad_baseline_exits_2_naming_file_and_reason(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], make_baseline, reason: str) -> None:
    baseline = make_baseline(tmp_path / "base.json")
    code, out, err = run_compare(capsys, baseline, write(tmp_path / "cur.json", sweep(seed=2)))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert err.startswith(f"run.py: error: baseline {baseline}") and reason in err


def test_device_mismatch_can_be_allowed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    baseline = write(tmp_path / "base.json", sweep(seed=1), device="NVIDIA H100")
    code, _, err = run_compare(capsys, baseline, write(tmp_path / "cur.json", sweep(seed=2)),
                               "--allow-device-mismatch")
    assert code == 0, err


def test_files_sharing_no_op_mode_dtype_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    current = sweep(seed=2)
    for record in current:
        record.mode = "bwd"
    code, _, err = run_compare(capsys, write(tmp_path / "base.json", sweep(seed=1)),
                               write(tmp_path / "cur.json", current))
    assert code == 2 and "share no (op, mode, dtype)" in err and "exp/bwd/bfloat16" in err


@pytest.mark.parametrize("option", [["--noise", "2"], ["--bootstrap-samples", "ten"], ["--nope"],
                                    ["--noisy-threshold", "inf"], ["--allow-missing", "--fail-on-missing"]])
def test_bad_option_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], option: list[str]) -> None:
    path = write(tmp_path / "base.json", sweep(seed=1))
    code, _, err = run_compare(capsys, path, path, *option)
    assert code == 2 and err.startswith("run.py: error: ") and len(err.strip().splitlines()) == 1


def test_runs_with_different_operator_options_are_refused(tmp_path) -> None:
    from tests.helpers import run_cli

    record = Record("addmm", "fwd", "bfloat16", [64, 64, 64], "eager", "latency", 1.0, "ms")
    accuracy = Record("addmm", "fwd", "bfloat16", [64, 64, 64], "eager", "accuracy", 1.0, "bool")
    base, cur = tmp_path / "base.json", tmp_path / "cur.json"
    write(base, [record, accuracy], options={"bias": "1d"})
    write(cur, [record, accuracy], options={"bias": "2d"})
    result = run_cli("compare", str(base), str(cur))
    assert result.returncode == 2
    assert "different options" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_cell_given_twice_or_files_with_different_timers_are_bad_input(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = sweep(seed=1)
    twice = write(tmp_path / "twice.json", records + [records[1]])
    code, _, err = run_compare(capsys, twice, twice)
    assert code == 2 and "given twice" in err
    base, cur = tmp_path / "base.json", tmp_path / "cur.json"
    write(base, records, timer={"warmup_ms": 25.0, "rep_ms": 100.0})
    write(cur, records, timer={"warmup_ms": 5.0, "rep_ms": 50.0})
    code, _, err = run_compare(capsys, str(base), str(cur))
    assert code == 2 and "timer" in err


def _in_seconds(records: list[Record]) -> list[Record]:
    for record in records:
        if record.metric == "latency":
            record.unit, record.value = "s", record.value / 1000
            record.repeats = [m / 1000 for m in record.repeats]
    return records


@pytest.mark.parametrize(
    ("make_current", "reason"),
    [
        (lambda path: write(path, _in_seconds(sweep(seed=2))), "in 's', not 'ms'"),
        (lambda path: write(path, sweep(seed=2), repeats=9), "has 7 repeats, its header says 9"),
        (lambda path: write(path, sweep(seed=2), gpus=[{"rank": 0, "device_name": "NVIDIA H200"},
                                                       {"rank": 1, "device_name": "NVIDIA H100"}]),
         "measured on 'NVIDIA H200' but current"),
    ],
    ids=["seconds", "repeats_not_as_header", "an_h100_rank"],
)
def test_a_current_file_measured_otherwise_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], make_current, reason: str) -> None:
    current = make_current(tmp_path / "cur.json")
    code, out, err = run_compare(capsys, write(tmp_path / "base.json", sweep(seed=1)), current)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert reason in err


@pytest.mark.parametrize("field", ["timer", "device_name", "git_commit", "repeats", "tolerance"])
def test_a_current_file_without_provenance_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str) -> None:
    current = tmp_path / "cur.json"
    write_json(current, {k: v for k, v in HEADER.items() if k != field}, sweep(seed=2))
    code, _, err = run_compare(capsys, write(tmp_path / "base.json", sweep(seed=1)), str(current))
    assert code == 2 and f"no {field} in its header (provenance missing" in err


def test_a_current_file_without_accuracy_records_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    current = [r for r in sweep(seed=2) if r.metric != "accuracy"]
    code, _, err = run_compare(capsys, write(tmp_path / "base.json", sweep(seed=1)),
                               write(tmp_path / "cur.json", current))
    assert code == 2 and "no accuracy records" in err


def test_a_baseline_file_without_accuracy_records_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    baseline = [r for r in sweep(seed=1) if r.metric != "accuracy"]
    code, _, err = run_compare(capsys, write(tmp_path / "base.json", baseline),
                               write(tmp_path / "cur.json", sweep(seed=2)))
    assert code == 2 and "baseline" in err and "no accuracy records" in err


@pytest.mark.parametrize("value", [float("nan"), -0.5, 0.0, "1.0"])
def test_malformed_latency_values_are_refused_naming_the_cell(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], value: object) -> None:
    current = tmp_path / "cur.json"
    write(current, sweep(seed=2))
    payload = json.loads(current.read_text())
    cell = next(r for r in payload["records"] if r["metric"] == "latency" and r["backend"] == "helion")
    cell["value"] = value
    current.write_text(json.dumps(payload))
    code, out, err = run_compare(capsys, write(tmp_path / "base.json", sweep(seed=1)), str(current))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert f"current {current}: latency of exp/fwd/bfloat16/4096/helion" in err
    shown = run_cli("show", str(current))
    assert shown.returncode == 2 and "latency of exp/fwd/bfloat16/4096/helion" in shown.stderr


@pytest.mark.parametrize(("field", "value", "says"), [
    ("repeats", 5, "repeats 5 is not a list"),
    ("extra", "abc", "extra 'abc' is not an object"),
    ("extra", {"spread": "x"}, "spread 'x' is not a non-negative number"),
    ("flag", ["x"], "flag ['x'] is not a string"),
    ("error", 5, "error 5 is not a string"),
])
def test_malformed_latency_fields_are_refused_by_compare_and_show(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: object, says: str) -> None:
    current = tmp_path / "cur.json"
    write(current, sweep(seed=2))
    payload = json.loads(current.read_text())
    cell = next(r for r in payload["records"] if r["metric"] == "latency" and r["backend"] == "helion")
    cell[field] = value
    current.write_text(json.dumps(payload))
    code, out, err = run_compare(capsys, write(tmp_path / "base.json", sweep(seed=1)), str(current))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and says in err
    shown = run_cli("show", str(current))
    assert shown.returncode == 2 and says in shown.stderr and "Traceback" not in shown.stderr


def test_malformed_ceilings_in_a_header_are_refused_in_one_line(tmp_path: Path) -> None:
    current = tmp_path / "cur.json"
    write(current, sweep(seed=2))
    payload = json.loads(current.read_text())
    payload["header"]["ceilings_gbps"] = {"copy": "fast"}
    current.write_text(json.dumps(payload))
    shown = run_cli("show", str(current))
    assert shown.returncode == 2 and "ceilings_gbps" in shown.stderr and "Traceback" not in shown.stderr


def test_runs_with_different_tolerances_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = sweep(seed=1)
    base = write(tmp_path / "base.json", records)
    cur = write(tmp_path / "cur.json", records, tolerance={"rtol": 10.0, "atol": None})
    code, _, err = run_compare(capsys, base, cur)
    assert code == 2 and "different tolerance" in err


MALFORMED_HEADERS = [("repeats", "abc"), ("repeats", 0), ("isolate", "yes"), ("git_commit", " "),
                     ("seed", "7"),
                     ("tolerance", {"rtol": "x", "atol": None}),
                     ("timer", {"warmup_ms": 25.0, "rep_ms": -1.0}),
                     ("timer", {"warmup_ms": 25.0, "rep_ms": 100.0, "flush": "none"}),
                     ("gpus", [{"rank": 0, "device_name": 5}]), ("gpus", "NVIDIA H200")]


@pytest.mark.parametrize(("field", "value"), MALFORMED_HEADERS)
def test_a_malformed_header_field_is_refused_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: object) -> None:
    records = sweep(seed=1)
    base = write(tmp_path / "base.json", records)
    cur = write(tmp_path / "cur.json", records, **{field: value})
    code, _, err = run_compare(capsys, base, cur)
    assert code == 2 and f"malformed header field {field}" in err and str(cur) in err
    assert len(err.strip().splitlines()) == 1


def test_a_baseline_run_after_the_current_one_is_noted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Swapped files judge the old code against the new: compare says so, and still judges."""
    records = sweep(seed=1)
    old = write(tmp_path / "old.json", records, date_utc="2026-12-01T10:00:00+00:00")
    new = write(tmp_path / "new.json", records, date_utc="2026-12-02T10:00:00+00:00")
    code, _, err = run_compare(capsys, new, old, "--markdown", str(tmp_path / "summary.md"))
    assert err.strip() in (tmp_path / "summary.md").read_text()
    assert code == 0 and err.strip() == (
        f"note: baseline {new} was run after current {old} (2026-12-02T10:00:00+00:00 vs "
        "2026-12-01T10:00:00+00:00): the baseline(s) go first, the run under test last")
    assert run_compare(capsys, old, new)[2] == ""


def test_runs_with_different_seeds_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Another seed draws other inputs: a gate comparing them compares other work."""
    records = sweep(seed=1)
    base = write(tmp_path / "base.json", records)
    code, _, err = run_compare(capsys, base, write(tmp_path / "cur.json", records, seed=7))
    assert code == 2 and "different seed: 0 vs 7" in err
    assert run_compare(capsys, base, write(tmp_path / "same.json", records, seed=0))[0] == 0
    assert run_compare(capsys, base, write(tmp_path / "null.json", records, seed=None))[0] == 0, \
        "a null seed reads as absent: the default"


def test_runs_with_and_without_isolation_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = sweep(seed=1)
    base = write(tmp_path / "base.json", records)
    code, _, err = run_compare(capsys, base, write(tmp_path / "cur.json", records, isolate=True))
    assert code == 2 and "different isolate" in err


@pytest.mark.parametrize("partial", ["baseline", "current"])
def test_a_partial_run_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], partial: str) -> None:
    """A run stopped before it finished would shrink what the gate judges, or pass its lost cells
    as missing."""
    baseline = write(tmp_path / "base.json", sweep(seed=1), complete=partial != "baseline")
    current = write(tmp_path / "cur.json", sweep(seed=2), complete=partial != "current")
    code, _, err = run_compare(capsys, baseline, current)
    assert code == 2 and f"{partial} {tmp_path}" in err and "is a partial run" in err
    assert len(err.strip().splitlines()) == 1


def test_a_run_given_as_its_own_baseline_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same file twice, or a copy of the baseline as the run under test, compares nothing."""
    when = {"date_utc": "2026-12-07T10:00:00+00:00"}
    baseline = write(tmp_path / "base.json", sweep(seed=1), **when)
    code, _, err = run_compare(capsys, baseline, baseline)
    assert code == 2 and "is the same run as baseline" in err
    later = write(tmp_path / "cur.json", sweep(seed=1), date_utc="2026-12-07T11:00:00+00:00")
    assert run_compare(capsys, baseline, later)[0] == 0


def test_header_options_that_are_not_an_object_are_refused_by_show_and_split(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    write(path, sweep(seed=1))
    payload = json.loads(path.read_text())
    payload["header"]["options"] = ["bias", "2d"]
    path.write_text(json.dumps(payload))
    for command in (["show", str(path)], ["split", str(path), "-o", str(tmp_path / "parts")]):
        result = run_cli(*command)
        assert result.returncode == 2 and "header options" in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
