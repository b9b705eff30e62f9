"""``run.py compare``: the regression gate's verdicts on synthetic result files (compare_helpers)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.compare.verdicts import Settings, judge
from harness.report.results import Record
from tests.harness.compare_helpers import (
    BACKENDS,
    X_VALS,
    backend_verdicts,
    find,
    gate,
    run_compare,
    sweep,
    write,
)


def test_identical_files_are_unchanged_and_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = sweep(seed=1)
    code, verdicts = gate(tmp_path, capsys, records, records)
    assert code == 0
    assert len(verdicts) == len(X_VALS) * len(BACKENDS)
    assert {v for v, _ in verdicts.values()} == {"unchanged"}


@pytest.mark.parametrize(
    ("slowdown", "options"),
    # A true 5% slowdown measures 1.05 +- 0.3%, right at the default 5% threshold; a 3% threshold
    # checks that the statistics confirm it.  20% runs with the defaults.
    [(1.05, ["--threshold", "0.03"]), (1.20, [])],
)
def test_slowdown_of_one_backend_is_a_regression_there_only(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], slowdown: float, options: list[str]) -> None:
    current = sweep(seed=2, scale={"triton": slowdown})
    code, verdicts = gate(tmp_path, capsys, sweep(seed=1), current, *options)
    assert code == 1
    assert backend_verdicts(verdicts, "triton") == {"regression"}
    for backend in ("eager", "helion", "torch_compile"):
        assert backend_verdicts(verdicts, backend) == {"unchanged"}


def test_slowdown_below_threshold_is_unchanged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, verdicts = gate(tmp_path, capsys, sweep(seed=1), sweep(seed=2, scale={"triton": 1.02}))
    assert code == 0
    assert {v for v, _ in verdicts.values()} == {"unchanged"}


def test_speedup_is_an_improvement_and_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, verdicts = gate(tmp_path, capsys, sweep(seed=1), sweep(seed=2, scale={"helion": 0.8}))
    assert code == 0
    assert backend_verdicts(verdicts, "helion") == {"improvement"}
    assert backend_verdicts(verdicts, "triton") == {"unchanged"}


def test_noisy_cells_within_the_noisy_threshold_get_no_verdict(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    current = sweep(seed=2, scale={"triton": 1.1}, noise={"triton": 0.2})
    code, verdicts = gate(tmp_path, capsys, sweep(seed=1), current)
    assert code == 0
    assert backend_verdicts(verdicts, "triton") == {"noisy"}
    assert all(note.startswith("spread ") for (_, b), (_, note) in verdicts.items() if b == "triton")


def test_a_flagged_cell_that_got_faster_is_noisy_with_its_flag(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    baseline, current = sweep(seed=1), sweep(seed=2, scale={"eager": 0.85})
    find(baseline, 4096, "eager", "latency").flag = "below_physical_floor"
    code, verdicts = gate(tmp_path, capsys, baseline, current)
    assert verdicts[("4096", "eager")] == ("noisy", "flagged: below_physical_floor")
    assert verdicts[("65536", "eager")][0] == "improvement" and code == 0


def test_lost_accuracy_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    current = sweep(seed=2)
    find(current, 4096, "triton", "accuracy").value = 0.0
    broken = find(current, 65536, "triton", "accuracy")
    broken.value, broken.status, broken.error = None, "error", "RuntimeError: illegal memory access"
    code, verdicts = gate(tmp_path, capsys, sweep(seed=1), current)
    assert code == 1
    assert verdicts[("4096", "triton")][0] == "accuracy_lost"
    assert verdicts[("65536", "triton")] == (
        "accuracy_lost", "accuracy check failed: RuntimeError: illegal memory access")
    assert verdicts[("1048576", "triton")][0] == "unchanged"


def test_a_lost_accuracy_note_is_the_line_that_says_what_went_wrong(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A Triton compile error's first line is ``at 4:33:``: the note (and the PR comment) gives
    the message after the source's caret instead, as the tables do."""
    current = sweep(seed=2)
    broken = find(current, 4096, "triton", "accuracy")
    broken.value, broken.status = None, "error"
    broken.error = ("CompilationError: at 4:33:\n    y = tl.load(x_ptr + offs)\n        ^\n"
                    "NameError: offs is not defined")
    _, verdicts = gate(tmp_path, capsys, sweep(seed=1), current)
    assert verdicts[("4096", "triton")] == (
        "accuracy_lost", "accuracy check failed: CompilationError: NameError: offs is not defined")


def test_absent_or_failed_cell_is_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    current = [r for r in sweep(seed=2) if (r.x_val, r.backend) != (4096, "helion")]
    failed = find(current, 65536, "helion", "latency")
    failed.value, failed.status, failed.error = None, "error", "OutOfMemoryError"
    code, verdicts = gate(tmp_path, capsys, sweep(seed=1), current)
    assert code == 1
    assert "Performance gate: FAIL" in (tmp_path / "summary.md").read_text()
    assert verdicts[("4096", "helion")] == ("missing", "absent from current")
    assert verdicts[("65536", "helion")] == ("missing", "error in current: OutOfMemoryError")
    assert gate(tmp_path, capsys, sweep(seed=1), current, "--fail-on-missing")[0] == 1
    assert gate(tmp_path, capsys, sweep(seed=1), current, "--allow-missing")[0] == 0


def test_without_repeats_the_ratio_alone_decides(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    baseline, current = sweep(seed=1), sweep(seed=2, scale={"triton": 1.2})
    for record in baseline + current:
        record.repeats = None
    code, verdicts = gate(tmp_path, capsys, baseline, current)
    assert code == 1
    assert verdicts[("4096", "triton")] == ("regression", "no repeats on one side: ratio only")
    assert verdicts[("4096", "eager")] == ("unchanged", "no repeats on one side: ratio only")


def test_one_side_without_repeats_shows_no_interval() -> None:
    """An interval bootstrapped from one side's repeats would hide the other side's variation."""
    baseline, current = sweep(seed=1, repeats=1), sweep(seed=2, repeats=3, scale={"triton": 1.2})
    rows = judge([baseline], current, Settings(0.05, 0.10, 0.10, 0.25, 0.01, 1000))
    assert all(row.ci is None and row.note == "no repeats on one side: ratio only" for row in rows)
    assert {row.verdict for row in rows if row.key[4] == "triton"} == {"regression"}


@pytest.mark.parametrize(("base_repeats", "cur_repeats"), [(3, 3), (2, 2), (3, 7)])
def test_few_repeats_on_either_side_still_fail_a_large_slowdown(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], base_repeats: int, cur_repeats: int) -> None:
    current = sweep(seed=2, repeats=cur_repeats, scale={"triton": 2.0})
    code, verdicts = gate(tmp_path, capsys, sweep(seed=1, repeats=base_repeats), current)
    assert code == 1
    assert backend_verdicts(verdicts, "triton") == {"regression"}
    assert backend_verdicts(verdicts, "eager") == {"unchanged"}


@pytest.mark.parametrize("cur_repeats", [5, 3])
def test_a_current_run_of_fewer_repeats_than_its_baseline_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], cur_repeats: int) -> None:
    """Fewer repeats widen the ratio's interval, so a 15-49% slowdown would come out inconclusive
    (noisy) and pass: compare asks for the baseline's repeats instead."""
    current = write(tmp_path / "cur.json", sweep(seed=2, repeats=cur_repeats, scale={"triton": 1.45}))
    code, out, err = run_compare(capsys, write(tmp_path / "base.json", sweep(seed=1)), current)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert f"has {cur_repeats} repeats" in err and "rerun with --repeats 7" in err


@pytest.mark.parametrize(("factor", "verdict", "code"),
                         [(1.33, "regression", 1), (1 / 1.33, "improvement", 0)])
def test_an_inconclusive_change_beyond_the_noisy_threshold_gets_its_verdict(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], factor: float, verdict: str, code: int) -> None:
    """Five of seven repeats 33% slower (or faster), two at the baseline's speed: the interval
    reaches 1.0, but a median beyond the noisy threshold counts however wide its interval (a
    --noise of 20% keeps the faster cell's 13% spread out of the noisy cells' rule)."""
    baseline, current = sweep(seed=1), sweep(seed=2)
    median = find(baseline, 4096, "triton", "latency").value
    cell = find(current, 4096, "triton", "latency")
    cell.repeats, cell.value = [median] * 2 + [factor * median] * 5, factor * median
    status, verdicts = gate(tmp_path, capsys, baseline, current, "--noise", "0.2")
    assert verdicts[("4096", "triton")][0] == verdict and status == code
    assert verdicts[("4096", "triton")][1].startswith("interval inconclusive, but 1.33x")


def test_one_slowed_cell_among_many_is_still_a_regression(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No correction for the number of cells hides a lone regression (4 repeats a side)."""
    current = sweep(seed=2, repeats=4)
    slowed = find(current, 65536, "helion", "latency")
    slowed.repeats = [2 * m for m in slowed.repeats]
    slowed.value = 2 * slowed.value
    code, verdicts = gate(tmp_path, capsys, sweep(seed=1, repeats=4), current)
    assert code == 1
    regressions = [cell for cell, (verdict, _) in verdicts.items() if verdict == "regression"]
    assert regressions == [("65536", "helion")]


@pytest.mark.parametrize(("ms", "verdict"), [(1.0, "regression"), (0.010, "unchanged")])
def test_cells_under_20_us_use_the_small_threshold(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], ms: float, verdict: str) -> None:
    code, verdicts = gate(tmp_path, capsys, sweep(seed=1, ms=ms), sweep(seed=2, ms=ms, scale={"eager": 1.07}))
    assert backend_verdicts(verdicts, "eager") == {verdict}


@pytest.mark.parametrize("slower", [True, False])
def test_change_beyond_threshold_without_significance_is_noisy(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], slower: bool) -> None:
    """Either way round: a slower or a faster set of repeats, too mixed to be significant, is
    inconclusive, and counts against --max-noisy (one such cell of 12 does not fail the gate)."""
    baseline, current = sweep(seed=1), sweep(seed=2)
    steady = [0.95, 1.00, 1.05, 0.97, 1.03, 0.99, 1.01]
    shifted = [1.00, 1.07, 1.12, 0.99, 1.15, 1.06, 1.10]
    find(baseline, 4096, "eager", "latency").repeats = steady if slower else shifted
    find(current, 4096, "eager", "latency").repeats = shifted if slower else steady
    code, verdicts = gate(tmp_path, capsys, baseline, current)
    assert code == 0
    assert verdicts[("4096", "eager")] == ("noisy", "beyond threshold, within the interval's run noise")


def test_markdown_summary_has_headline_and_regression_row(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    summary = tmp_path / "summary.md"
    code, out, _ = run_compare(capsys, write(tmp_path / "base.json", sweep(seed=1)),
                               write(tmp_path / "cur.json", sweep(seed=2, scale={"triton": 1.2})),
                               "--markdown", str(summary))
    assert code == 1
    text = summary.read_text()
    headline, reason, changed = text.split("\n\n")[:3]
    assert reason == "3 cell(s) regression"
    assert headline.startswith("**Performance gate: FAIL** — 12 cells: 0 accuracy_lost, 0 accuracy_missing, "
                               "3 regression")
    assert changed.count("| regression |") == 3 and "| triton " in changed
    assert "<details><summary>All 12 cells</summary>" in text
    assert out.strip().splitlines()[-2] == ("12 cells: 0 accuracy_lost, 0 accuracy_missing, 3 regression, "
                                            "0 missing, 0 improvement, 0 noisy, 9 unchanged")
    assert out.strip().splitlines()[-1] == "gate fails: 3 cell(s) regression"


def test_a_change_inside_a_wide_confidence_interval_is_noisy(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.compare.verdicts

    monkeypatch.setattr(harness.compare.verdicts, "ratio_ci", lambda base, cur, samples: (0.98, 1.3))
    code, verdicts = gate(tmp_path, capsys, sweep(seed=1), sweep(seed=2, scale={"triton": 1.2}))
    assert code == 0
    assert verdicts[("4096", "triton")] == ("noisy", "beyond threshold, within the interval's run noise")


def test_a_slowdown_in_most_repeats_is_never_unchanged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Five of seven repeats 20% slower: the bootstrap interval reaches 1.0, so the cell is no
    regression, but it is inconclusive, never unchanged; every cell so fails the gate."""
    baseline, current = sweep(seed=1, repeats=7), sweep(seed=2, repeats=7)
    for record in current:
        if record.metric == "latency":
            record.repeats = [m * (1.2 if i < 5 else 1.0) for i, m in enumerate(record.repeats)]
            record.value = float(np.median(record.repeats))
    code, verdicts = gate(tmp_path, capsys, baseline, current)
    assert {v for v, _ in verdicts.values()} <= {"noisy", "regression"}
    assert code == 1


def test_a_noisy_cell_whose_median_doubled_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    current = sweep(seed=2)
    cell = find(current, 4096, "triton", "latency")
    cell.repeats = [2 * m if i < 5 else m for i, m in enumerate(cell.repeats)]
    cell.value = float(np.median(cell.repeats))
    code, verdicts = gate(tmp_path, capsys, sweep(seed=1), current)
    assert code == 1
    verdict, note = verdicts[("4096", "triton")]
    assert verdict == "regression" and note.startswith("spread ") and note.endswith("x slower")
    assert 1.9 < float(note.split(", but ")[1].split("x")[0]) < 2.1


@pytest.mark.parametrize("flagged", ["current", "baseline"])
@pytest.mark.parametrize("flag", ["below_physical_floor", "made_up"])
def test_a_flag_never_softens_a_slowdown(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         flagged: str, flag: str) -> None:
    """The code under test writes the current run's flags: a slower cell gets the tested verdict
    whatever either side's flag says, and a made-up flag softens nothing."""
    baseline, current = sweep(seed=1), sweep(seed=2, scale={"eager": 1.2})
    for x_val in X_VALS:
        find(current if flagged == "current" else baseline, x_val, "eager", "latency").flag = flag
    code, verdicts = gate(tmp_path, capsys, baseline, current)
    assert code == 1
    assert all(verdicts[(str(x_val), "eager")] == ("regression", "") for x_val in X_VALS)


def test_a_wrong_current_cell_fails_whatever_its_baseline_said(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The baseline's cell lacks its accuracy record, or was wrong already: a wrong result still fails.
    baseline = [r for r in sweep(seed=1) if (r.x_val, r.backend, r.metric) != (4096, "triton", "accuracy")]
    find(baseline, 65536, "triton", "accuracy").value = 0.0
    current = sweep(seed=2)
    find(current, 4096, "triton", "accuracy").value = 0.0
    find(current, 65536, "triton", "accuracy").value = 0.0
    code, verdicts = gate(tmp_path, capsys, baseline, current)
    assert code == 1
    assert verdicts[("4096", "triton")] == ("accuracy_lost", "accuracy 0")
    assert verdicts[("65536", "triton")] == ("accuracy_lost", "accuracy 0")
    assert verdicts[("1048576", "triton")][0] == "unchanged"


def test_a_cell_whose_accuracy_record_was_deleted_fails(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    current = [r for r in sweep(seed=2) if (r.x_val, r.backend, r.metric) != (4096, "triton", "accuracy")]
    code, verdicts = gate(tmp_path, capsys, sweep(seed=1), current)
    assert code == 1
    assert verdicts[("4096", "triton")] == ("accuracy_missing", "no accuracy record in current")


def test_same_code_a_percent_apart_is_unchanged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two runs of one commit differ by about 1% (README): within the run noise, never a verdict."""
    current = sweep(seed=2, scale=dict.fromkeys(BACKENDS, 1.015))
    code, verdicts = gate(tmp_path, capsys, sweep(seed=1), current)
    assert code == 0
    assert {v for v, _ in verdicts.values()} == {"unchanged"}


@pytest.mark.parametrize(("run_noise", "verdict"), [("0.01", "unchanged"), ("0.001", "regression")])
def test_a_shift_inside_twice_the_run_noise_is_no_verdict_however_tight_the_repeats(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], run_noise: str, verdict: str) -> None:
    """Repeats 0.5% apart inside each run make a 1.5% shift between runs significant within the
    run; at a 1% threshold only the run-to-run noise (``--run-noise``) keeps it from failing."""
    current = sweep(seed=2, scale=dict.fromkeys(BACKENDS, 1.015))
    code, verdicts = gate(tmp_path, capsys, sweep(seed=1), current, "--threshold", "0.01",
                          "--small-threshold", "0.01", "--run-noise", run_noise)
    assert {v for v, _ in verdicts.values()} == {verdict}
    assert code == (1 if verdict == "regression" else 0)


def test_a_wrong_cell_without_a_latency_is_accuracy_lost(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Accuracy 0 and no latency record at all: the wrong result fails, even with --allow-missing."""
    current = sweep(seed=2)
    find(current, 4096, "triton", "accuracy").value = 0.0
    current.remove(find(current, 4096, "triton", "latency"))
    code, verdicts = gate(tmp_path, capsys, sweep(seed=1), current, "--allow-missing")
    assert verdicts[("4096", "triton")] == ("accuracy_lost", "accuracy 0") and code == 1


def test_a_wrong_cell_without_a_timed_baseline_fails(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A cell the baseline could not time (its latency failed) or never had, wrong in the
    current run, fails the gate even with --allow-missing."""
    baseline = sweep(seed=1)
    timed_out = find(baseline, 4096, "triton", "latency")
    timed_out.status, timed_out.value, timed_out.repeats, timed_out.error = "error", None, None, "timeout"
    current = sweep(seed=2)
    find(current, 4096, "triton", "accuracy").value = 0.0
    new_backend = Record(op="exp", mode="fwd", dtype="bfloat16", x_val=4096, backend="mine",
                         metric="accuracy", value=0.0, unit="bool")
    code, verdicts = gate(tmp_path, capsys, baseline, [*current, new_backend], "--allow-missing")
    assert code == 1
    assert verdicts[("4096", "triton")] == ("accuracy_lost", "accuracy 0 (no timed baseline cell)")
    assert verdicts[("4096", "mine")] == ("accuracy_lost", "accuracy 0 (no timed baseline cell)")


def test_a_run_that_shares_no_timed_cell_with_its_baseline_fails(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every baseline cell missing (another shape set, renamed backends): nothing was judged,
    which is no pass, even with --allow-missing."""
    current = sweep(seed=2)
    for record in current:
        record.backend = f"renamed_{record.backend}"
    code, out, _ = run_compare(capsys, write(tmp_path / "base.json", sweep(seed=1)),
                               write(tmp_path / "cur.json", current), "--allow-missing")
    assert code == 1
    assert out.strip().splitlines()[-1] == ("gate fails: no baseline cell could be judged: the current "
                                            "run has none of their latencies")
