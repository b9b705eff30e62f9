"""The verdict rules of ``run.py compare``: one verdict per (op, mode, dtype, x_val, backend).

A baseline cell with an ok latency is, in this order of precedence:

* ``accuracy_lost``: the current run has accuracy 0 or its check failed (whatever the baseline's),
  with or without a latency;
* ``missing``: absent from the current run;
* ``accuracy_missing``: the baseline had accuracy 1, the current run has no accuracy for it;
* ``missing``: no ok latency in the current run;
* for a *noisy* cell (either side's repeat medians spread wider than the noise limit, or a cell
  that got no slower flagged ``below_physical_floor`` in the current run or the baseline run it is
  judged against): ``regression`` / ``improvement`` when the ratio of medians is beyond the noisy
  threshold, else ``noisy``.  A flag never softens a slowdown: the current run's flags come from
  the code under test, which could set them;
* otherwise ``regression`` when the ratio ``median(current) / median(baseline)`` is above
  ``1 + max(threshold, 2 x run noise)`` and either the lower end of its 95% bootstrap interval
  is above ``1 + run noise`` or the ratio is beyond the noisy threshold (a change that large
  fails however wide its interval), ``improvement`` for the mirror image, ``noisy`` when the
  ratio is beyond that limit but its interval reaches into the run noise (inconclusive), and
  ``unchanged`` for everything else.

A current cell the run got wrong (accuracy 0, or its check failed) that is not among the
baseline's timed cells is ``accuracy_lost`` too: a wrong result never passes unseen.  Cells of a
backend, or of the whole file, slower together by half their thresholds fail the gate however
each was judged (:func:`shifted_together`).

The run noise (``--run-noise``) is the run-to-run variation that repeats within one run do not
show.  A baseline of several runs of one commit measures it per cell: the cell is judged against
its slowest run (its repeats and their spread), so that current runs within the range the code
itself spans pass, unless that run is more than the threshold slower than the fastest, which is
then the baseline (:func:`_reference`).  A cell is judged if any baseline run timed it.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass

from scipy.stats import binomtest

from harness.compare.stats import ratio_ci, relative_spread
from harness.error_line import error_line
from harness.report.results import BELOW_FLOOR, Record

VERDICTS = ("accuracy_lost", "accuracy_missing", "regression", "missing", "improvement", "noisy",
            "unchanged")
FAILING = ("accuracy_lost", "accuracy_missing", "regression")
SMALL_CELL_MS = 0.020
SHIFT_SIGNIFICANCE = 0.01
"""The sign test's level for cells that moved slower together (:func:`shifted_together`)."""
SHIFT_SHARE = 0.5
"""The share of each cell's threshold by which cells slower together fail (:func:`shifted_together`)."""

CellKey = tuple[str, str, str, tuple[int, ...], str]


@dataclass(frozen=True)
class Settings:
    """The gate's thresholds, from the command line."""

    threshold: float
    small_threshold: float
    noise: float
    noisy_threshold: float
    run_noise: float
    bootstrap_samples: int

    def threshold_for(self, baseline_ms: float) -> float:
        return self.threshold if baseline_ms >= SMALL_CELL_MS else self.small_threshold


@dataclass(frozen=True)
class Side:
    """One side of a cell: its repeat medians (or its single median), their spread, its flag."""

    medians: list[float]
    spread: float | None
    flag: str | None

    @classmethod
    def of(cls, record: Record) -> Side:
        """The repeats of a latency record; a record without them is one median with its sample spread."""
        medians = list(record.repeats or [record.value])
        spread = relative_spread(medians) if len(medians) > 1 else record.extra.get("spread")
        return cls(medians, spread, record.flag)

    @property
    def median(self) -> float:
        return statistics.median(self.medians)


@dataclass
class Row:
    """A judged cell: the numbers shown and its verdict."""

    key: CellKey
    verdict: str
    base_ms: float | None = None
    cur_ms: float | None = None
    ratio: float | None = None
    ci: tuple[float, float] | None = None
    run_noise: float | None = None
    note: str = ""
    threshold: float | None = None
    """The relative change that counts for this cell (by its fastest baseline run's median)."""


def _accuracy_verdict(base_acc: Record | None, cur_acc: Record | None) -> tuple[str, str] | None:
    """The accuracy verdict and its note when the current cell is wrong (whatever the baseline
    says of it) or lost the baseline's accuracy check, else None."""
    if cur_acc is not None and cur_acc.status == "error":
        return "accuracy_lost", f"accuracy check failed: {error_line(cur_acc.error)}"
    if cur_acc is not None and cur_acc.status == "ok" and cur_acc.value == 0.0:
        return "accuracy_lost", cur_acc.note or "accuracy 0"
    if base_acc is None or base_acc.status != "ok" or base_acc.value != 1.0:
        return None
    if cur_acc is None:
        return "accuracy_missing", "no accuracy record in current"
    if cur_acc.status == "skipped":
        return "accuracy_missing", f"accuracy skipped in current: {error_line(cur_acc.error)}"
    return None


def _missing(cur: Record | None) -> str | None:
    """Why the current run has no latency for a cell, or None if it has one."""
    if cur is None:
        return "absent from current"
    if cur.status != "ok" or cur.value is None:
        return f"{cur.status} in current: {error_line(cur.error)}"
    return None


def _joined(*notes: str) -> str:
    """A cell's note: its non-empty parts, joined."""
    return "; ".join(filter(None, notes))


def _reference(runs: list[Side], threshold: float) -> tuple[Side, str]:
    """The baseline run a cell is judged against, and a note: of several runs of one commit, the
    slowest, so that the code's own run-to-run range is no regression, unless it is more than
    ``threshold`` slower than the fastest, which then stands (a slow run cannot hide a slowdown)."""
    fastest, slowest = min(runs, key=lambda r: r.median), max(runs, key=lambda r: r.median)
    apart = slowest.median / fastest.median - 1
    if apart <= threshold:
        return slowest, ""
    return fastest, f"baseline runs {100 * apart:.1f}% apart: judged against the fastest"


def _judge_cell(key: CellKey, runs: list[Side], cur_record: Record | None,
                accuracy: tuple[Record | None, Record | None], settings: Settings) -> Row:
    threshold = settings.threshold_for(min(r.median for r in runs))
    base, note = _reference(runs, threshold)
    row = Row(key, "unchanged", base_ms=base.median, threshold=threshold)
    lost = _accuracy_verdict(*accuracy)
    if cur_record is None and (lost is None or lost[0] != "accuracy_lost"):
        row.verdict, row.note = "missing", "absent from current"
        return row
    if lost:
        row.verdict, row.note = lost
        return row
    if reason := _missing(cur_record):
        row.verdict, row.note = "missing", reason
        return row
    cur = Side.of(cur_record)
    row.cur_ms, row.ratio = cur.median, cur.median / base.median
    flags = sorted({side.flag for side in (base, cur) if side.flag == BELOW_FLOOR}) if row.ratio <= 1 else []
    spread = max((side.spread for side in (base, cur) if side.spread is not None), default=0.0)
    if flags or spread > settings.noise:
        reason = (f"flagged: {', '.join(flags)}" if flags
                  else f"spread {100 * spread:.1f}% > {100 * settings.noise:g}%")
        limit = max(threshold, settings.noisy_threshold)
        if row.ratio > 1 + limit:
            row.verdict, reason = "regression", f"{reason}, but {row.ratio:.2f}x slower"
        elif row.ratio < 1 / (1 + limit):
            row.verdict, reason = "improvement", f"{reason}, but {1 / row.ratio:.2f}x faster"
        else:
            row.verdict = "noisy"
        row.note = _joined(reason, note)
        return row
    row.run_noise = settings.run_noise
    limit = max(threshold, 2 * row.run_noise)
    noisy_limit = max(limit, settings.noisy_threshold)
    ratio_only = len(base.medians) == 1 or len(cur.medians) == 1
    if not ratio_only:  # an interval of one side's repeats alone would hide the other's variation
        row.ci = ratio_ci(base.medians, cur.medians, settings.bootstrap_samples)
    low, high = row.ci or (row.ratio, row.ratio)
    inconclusive = f"interval inconclusive, but {max(row.ratio, 1 / row.ratio):.2f}x"
    if row.ratio > 1 + limit and low > 1 + row.run_noise:
        row.verdict = "regression"
    elif row.ratio > 1 + noisy_limit:
        row.verdict, note = "regression", _joined(note, f"{inconclusive} slower")
    elif row.ratio < 1 / (1 + limit) and high < 1 / (1 + row.run_noise):
        row.verdict = "improvement"
    elif row.ratio < 1 / (1 + noisy_limit):
        row.verdict, note = "improvement", _joined(note, f"{inconclusive} faster")
    elif abs(row.ratio - 1) > limit:
        row.verdict = "noisy"
        note = _joined(note, "beyond threshold, within the interval's run noise")
    if ratio_only:
        note = _joined(note, "no repeats on one side: ratio only")
    row.note = note
    return row


def _baseline_accuracy(runs: list[Record]) -> Record | None:
    """A cell's baseline accuracy over several runs: one that passed, if any did."""
    return next((r for r in runs if r.status == "ok" and r.value == 1.0), runs[0] if runs else None)


def cells(records: list[Record], metric: str) -> dict[CellKey, Record]:
    """The records of one metric, keyed by cell."""
    return {record.cell(): record for record in records if record.metric == metric}


def judge(baselines: list[list[Record]], current: list[Record], settings: Settings) -> list[Row]:
    """Every cell with an ok latency in any baseline run, judged against the current run, and
    every other cell the current run got wrong; failing verdicts first, else in file order.
    Several baseline runs measure a cell's run-to-run variation (:func:`_reference`)."""
    cur_latency, cur_accuracy = cells(current, "latency"), cells(current, "accuracy")
    accuracy_runs = [cells(records, "accuracy") for records in baselines]
    timed_runs = [{key: latency for key, latency in cells(records, "latency").items()
                   if _missing(latency) is None} for records in baselines]
    rows = []
    for key in dict.fromkeys(key for run in timed_runs for key in run):
        runs = [Side.of(run[key]) for run in timed_runs if key in run]
        accuracy = (_baseline_accuracy([run[key] for run in accuracy_runs if key in run]),
                    cur_accuracy.get(key))
        rows.append(_judge_cell(key, runs, cur_latency.get(key), accuracy, settings))
    judged = {row.key for row in rows}
    for key, record in cur_accuracy.items():
        lost = _accuracy_verdict(None, record)
        if key not in judged and lost is not None:
            rows.append(Row(key, lost[0], note=f"{lost[1]} (no timed baseline cell)"))
    return sorted(rows, key=lambda r: VERDICTS.index(r.verdict))


def shifted_together(rows: list[Row], settings: Settings) -> list[str]:
    """Why the gate fails for cells slower together, however each was judged: per backend (of an op, mode
    and dtype) and over the whole file, more of them slower than a fair coin gives (a one-sided
    sign test at :data:`SHIFT_SIGNIFICANCE`: 7 of 7, 15 of 18) and their median ratio beyond
    :data:`SHIFT_SHARE` of each cell's threshold (and twice the run noise).  A slowdown spread
    under the per-cell threshold, or hidden in noisy cells, still fails."""
    judged = [row for row in rows if row.ratio is not None and row.threshold is not None]
    groups = defaultdict(list)
    for row in judged:
        op, mode, dtype, _, backend = row.key
        groups[f"{backend} ({op} {mode} {dtype})"].append(row)
    if len(groups) > 1:
        groups["the whole file"] = judged
    reasons = []
    for name, group in groups.items():
        slower = sum(row.ratio > 1 for row in group)
        p = binomtest(slower, len(group), alternative="greater").pvalue
        beyond = statistics.median(
            row.ratio / (1 + max(SHIFT_SHARE * row.threshold, 2 * settings.run_noise))
            for row in group)
        if p < SHIFT_SIGNIFICANCE and beyond > 1:
            ratio = statistics.median(row.ratio for row in group)
            reasons.append(f"{name}: {slower} of {len(group)} cells slower, median {ratio:.3f}x "
                           f"(sign test p = {p:.3f})")
    return reasons


def noisy_share(rows: list[Row]) -> float:
    """The share of judged cells that came out noisy."""
    return sum(row.verdict == "noisy" for row in rows) / len(rows) if rows else 0.0
