"""``run.py compare`` against a baseline of several runs of one commit (compare_helpers): each
cell judged against its slowest run, within the threshold, and a cell any run timed."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.report.results import Record
from tests.harness.compare_helpers import (
    CellId,
    backend_verdicts,
    find,
    gate,
    markdown_verdicts,
    run_compare,
    sweep,
    write,
)


def gate_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str], first: list[Record], second: list[Record],
              current: list[Record]) -> tuple[int, dict[CellId, tuple[str, str]]]:
    """``current`` against the baseline runs ``first`` and ``second``: (exit status, verdict per cell)."""
    files = [write(tmp_path / f"{name}.json", records)
             for name, records in (("first", first), ("second", second), ("cur", current))]
    summary = tmp_path / "runs.md"
    code, _, err = run_compare(capsys, *files, "--markdown", str(summary))
    assert code in (0, 1), err
    return code, markdown_verdicts(summary.read_text())


def test_a_baseline_of_several_runs_widens_a_cell_that_moves_between_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A cell 4% apart in two baseline runs (say, an autotuner's pick) is judged against the
    slower run: 7% over the first run fails against it alone, not against both."""
    first, second = sweep(seed=1), sweep(seed=3, scale={"torch_compile": 1.04})
    current = sweep(seed=2, scale={"torch_compile": 1.07})
    code, alone = gate(tmp_path, capsys, first, current)
    assert backend_verdicts(alone, "torch_compile") == {"regression"} and code == 1
    code, verdicts = gate_runs(tmp_path, capsys, first, second, current)
    assert backend_verdicts(verdicts, "torch_compile") == {"unchanged"} and code == 0


@pytest.mark.parametrize(("second_run", "current"), [(1.20, 1.30), (1.20, 1.12), (2.0, 1.8), (1.09, 1.10)])
def test_a_slow_second_run_cannot_hide_a_slowdown(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 second_run: float, current: float) -> None:
    """A second run more than the threshold slower than the first leaves the first as the
    baseline: the slowdown fails as if the second run were not there."""
    code, verdicts = gate_runs(tmp_path, capsys, sweep(seed=1), sweep(seed=3, scale={"triton": second_run}),
                               sweep(seed=2, scale={"triton": current}))
    assert code == 1
    assert backend_verdicts(verdicts, "triton") == {"regression"}
    notes = [note for (_, backend), (_, note) in verdicts.items() if backend == "triton"]
    assert all("judged against the fastest" in note for note in notes)
    assert backend_verdicts(verdicts, "eager") == {"unchanged"}


def test_a_noisy_second_run_does_not_loosen_the_first(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A cell is judged against its slowest run's repeats and their spread: a second run as fast
    but spread 20% (noisy) leaves a 20% slowdown over the first a regression, not noisy."""
    first, second = sweep(seed=1), sweep(seed=3)
    for record in second:
        if record.backend == "triton" and record.metric == "latency":
            median = find(first, record.x_val, "triton", "latency").value
            record.repeats = [median * f for f in (0.78, 0.85, 0.92, 0.98, 1.04, 1.10, 1.18)]
            record.value = 0.98 * median
    code, verdicts = gate_runs(tmp_path, capsys, first, second, sweep(seed=2, scale={"triton": 1.2}))
    assert backend_verdicts(verdicts, "triton") == {"regression"} and code == 1


def test_a_cell_only_a_later_baseline_run_timed_is_judged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, second = sweep(seed=1), sweep(seed=3)
    failed = find(first, 4096, "helion", "latency")
    failed.status, failed.value, failed.repeats, failed.error = "error", None, None, "timeout"
    code, verdicts = gate_runs(tmp_path, capsys, first, second, sweep(seed=2, scale={"helion": 3.0}))
    assert verdicts[("4096", "helion")][0] == "regression" and code == 1


def test_a_cell_accurate_in_a_later_baseline_run_needs_its_accuracy_checked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The first run's accuracy check of a cell was skipped, the second's passed: a current run
    without that cell's accuracy is accuracy_missing."""
    first, second, current = sweep(seed=1), sweep(seed=3), sweep(seed=2)
    skipped = find(first, 4096, "eager", "accuracy")
    skipped.status, skipped.value, skipped.error = "skipped", None, "not checked"
    current.remove(find(current, 4096, "eager", "accuracy"))
    code, verdicts = gate_runs(tmp_path, capsys, first, second, current)
    assert verdicts[("4096", "eager")][0] == "accuracy_missing" and code == 1


def test_baseline_runs_of_different_commits_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = sweep(seed=1)
    first = write(tmp_path / "first.json", records)
    other = write(tmp_path / "other.json", records, git_commit="1" * 40)
    code, _, err = run_compare(capsys, first, other, write(tmp_path / "cur.json", records))
    assert code == 2 and "separate runs of one commit" in err and len(err.strip().splitlines()) == 1


def test_baseline_runs_under_a_short_and_a_full_hash_of_one_commit_are_one_commit(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = sweep(seed=1)
    short = write(tmp_path / "short.json", records, git_commit="0" * 7)
    full = write(tmp_path / "full.json", sweep(seed=3), git_commit="0" * 40)
    assert run_compare(capsys, short, full, write(tmp_path / "cur.json", sweep(seed=2)))[0] == 0
    other = write(tmp_path / "other.json", sweep(seed=3), git_commit="1" + "0" * 39)
    assert run_compare(capsys, short, other, write(tmp_path / "cur.json", sweep(seed=2)))[0] == 2
