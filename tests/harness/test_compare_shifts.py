"""``run.py compare``: cells that move together, judged as a group (a backend's, the whole
file's) as well as one by one, on synthetic result files (compare_helpers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness.compare_helpers import BACKENDS, backend_verdicts, find, gate, run_compare, sweep, write


@pytest.mark.parametrize(("slower_cells", "factor", "code"), [(7, 1.24, 1), (4, 1.24, 0), (7, 1.01, 0)])
def test_a_backend_whose_noisy_cells_moved_slower_together_fails(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], slower_cells: int, factor: float,
        code: int) -> None:
    """Seven helion cells, each spread 13% (noisy) and 24% slower (within the noisy threshold),
    7 of 28 cells noisy (within --max-noisy): one by one no verdict, together a slowdown that a
    sign test confirms.  Four slower and three faster is no shift, nor all seven 1% slower
    (within the threshold)."""
    x_vals = tuple(4096 * 2**i for i in range(7))
    baseline, current = sweep(seed=1, x_vals=x_vals), sweep(seed=2, x_vals=x_vals)
    for i, x_val in enumerate(x_vals):
        median = find(baseline, x_val, "helion", "latency").value
        shift = factor if i < slower_cells else 1 / factor
        cell = find(current, x_val, "helion", "latency")
        cell.repeats = [median * shift * f for f in (0.75, 0.85, 0.95, 1.0, 1.05, 1.15, 1.25)]
        cell.value = median * shift
    status, verdicts = gate(tmp_path, capsys, baseline, current)
    assert backend_verdicts(verdicts, "helion") == {"noisy"} and status == code
    reason = "slower together: helion (exp fwd bfloat16): 7 of 7 cells slower, median 1.240x"
    assert ("slower together" in (tmp_path / "summary.md").read_text()) == (code == 1)
    assert code == 0 or reason in (tmp_path / "summary.md").read_text()


@pytest.mark.parametrize(("factor", "code"), [(1.045, 1), (1.01, 0)])
def test_cells_slower_together_under_each_threshold_fail(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], factor: float, code: int) -> None:
    """Every cell 4.5% slower, each under the 5% threshold: no cell fails alone, each backend's
    seven together do.  1% slower (the run-to-run noise) passes."""
    x_vals = tuple(4096 * 2**i for i in range(7))
    current = sweep(seed=2, x_vals=x_vals, scale=dict.fromkeys(BACKENDS, factor))
    status, verdicts = gate(tmp_path, capsys, sweep(seed=1, x_vals=x_vals), current)
    assert {verdict for verdict, _ in verdicts.values()} == {"unchanged"} and status == code
    summary = (tmp_path / "summary.md").read_text()
    for backend in BACKENDS:
        assert (f"slower together: {backend} (exp fwd bfloat16): 7 of 7" in summary) == (code == 1)
    assert ("slower together: the whole file: 28 of 28" in summary) == (code == 1)


def test_a_file_of_mostly_noisy_cells_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    current = sweep(seed=2, noise=dict.fromkeys(("eager", "triton", "helion"), 0.3))
    code, out, _ = run_compare(capsys, write(tmp_path / "base.json", sweep(seed=1)),
                               write(tmp_path / "cur.json", current))
    assert code == 1
    assert "are noisy (more than --max-noisy 25%): this run cannot be judged" in out.splitlines()[-1]
    code, _, _ = run_compare(capsys, write(tmp_path / "base.json", sweep(seed=1)),
                             write(tmp_path / "cur.json", current), "--max-noisy", "0.9")
    assert code == 0
