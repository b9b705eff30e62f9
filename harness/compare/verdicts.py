"""The verdict rules of ``run.py compare``: one verdict per (op, mode, dtype, x_val, backend).

A baseline cell with an ok latency is, in this order of precedence: ``accuracy_lost`` (the
current run lost an accuracy of 1), ``missing`` (no ok latency in the current run),
``noisy`` (flagged on either side, or either side's repeat medians spread wider than the
noise limit), and otherwise ``regression``, ``improvement`` or ``unchanged`` by the ratio of
medians against the cell's threshold, confirmed by the bootstrap CI of the ratio and the
Benjamini-Hochberg adjusted Mann-Whitney p-value when the two sides have enough repeats for
that p-value to fall below alpha at all (else the ratio alone decides).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from harness.compare.stats import (
    benjamini_hochberg,
    median_ratio,
    ratio_ci,
    relative_spread,
    slower_faster_p,
    smallest_p,
)
from harness.report.results import Record

VERDICTS = ("accuracy_lost", "regression", "missing", "improvement", "noisy", "unchanged")
FAILING = ("accuracy_lost", "regression")
SMALL_CELL_MS = 0.020

CellKey = tuple[str, str, str, tuple[int, ...], str]


@dataclass(frozen=True)
class Settings:
    """The gate's thresholds, from the command line."""

    threshold: float
    small_threshold: float
    noise: float
    alpha: float
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
    p: float | None = None
    note: str = ""


def _first_line(text: str | None) -> str:
    lines = (text or "").strip().splitlines()
    return lines[0][:120] if lines else "no message"


def _lost_accuracy(base_acc: Record | None, cur_acc: Record | None) -> str | None:
    """Why the current run lost the accuracy the baseline had, or None if it did not."""
    if base_acc is None or cur_acc is None or base_acc.status != "ok" or base_acc.value != 1.0:
        return None
    if cur_acc.status == "error":
        return f"accuracy check failed: {_first_line(cur_acc.error)}"
    if cur_acc.status == "ok" and cur_acc.value == 0.0:
        return cur_acc.note or "accuracy 0"
    return None


def _missing(cur: Record | None) -> str | None:
    """Why the current run has no latency for a cell, or None if it has one."""
    if cur is None:
        return "absent from current"
    if cur.status != "ok" or cur.value is None:
        return f"{cur.status} in current: {_first_line(cur.error)}"
    return None


def _direction(ratio: float, threshold: float, slower_shown: bool, faster_shown: bool) -> str:
    if ratio > 1 + threshold and slower_shown:
        return "regression"
    if ratio < 1 - threshold and faster_shown:
        return "improvement"
    return "unchanged"


def _screen(key: CellKey, base: Record, cur: Record | None, accuracy: tuple[Record | None, Record | None],
            settings: Settings) -> tuple[Row, tuple[Side, Side] | None]:
    """A cell's row; its verdict is final unless the sides come back for the statistical tests."""
    base_side = Side.of(base)
    row = Row(key, "unchanged", base_ms=base_side.median)
    if reason := _lost_accuracy(*accuracy):
        row.verdict, row.note = "accuracy_lost", reason
        return row, None
    if reason := _missing(cur):
        row.verdict, row.note = "missing", reason
        return row, None
    cur_side = Side.of(cur)
    row.cur_ms, row.ratio = cur_side.median, median_ratio(base_side.medians, cur_side.medians)
    flags = sorted({s.flag for s in (base_side, cur_side) if s.flag})
    spread = max((s.spread for s in (base_side, cur_side) if s.spread is not None), default=0.0)
    if flags:
        row.verdict, row.note = "noisy", f"flagged: {', '.join(flags)}"
    elif spread > settings.noise:
        row.verdict, row.note = "noisy", f"spread {100 * spread:.1f}% > {100 * settings.noise:g}%"
    elif (lowest := smallest_p(len(base_side.medians), len(cur_side.medians))) >= settings.alpha:
        row.verdict = _direction(row.ratio, settings.threshold_for(row.base_ms), True, True)
        row.note = "no repeats: ratio only" if len(base_side.medians) == len(cur_side.medians) == 1 \
            else f"too few repeats for p < {settings.alpha:g} (smallest p {lowest:.3g}): ratio only"
    else:
        return row, (base_side, cur_side)
    return row, None


def _decide_tested(tested: list[tuple[Row, Side, Side]], settings: Settings) -> None:
    """Verdicts of the cells with enough repeats: ratio, bootstrap CI and BH-adjusted p-values."""
    raw = [slower_faster_p(base.medians, cur.medians) for _, base, cur in tested]
    slower_p = benjamini_hochberg([p for p, _ in raw])
    faster_p = benjamini_hochberg([p for _, p in raw])
    for (row, base, cur), p_slower, p_faster in zip(tested, slower_p, faster_p, strict=True):
        row.ci = ratio_ci(base.medians, cur.medians, settings.bootstrap_samples)
        row.p = p_slower if row.ratio >= 1 else p_faster
        threshold = settings.threshold_for(row.base_ms)
        slower_shown = row.ci[0] > 1 and p_slower < settings.alpha
        faster_shown = row.ci[1] < 1 and p_faster < settings.alpha
        row.verdict = _direction(row.ratio, threshold, slower_shown, faster_shown)
        if row.verdict == "unchanged" and abs(row.ratio - 1) > threshold:
            row.note = "beyond threshold, not significant"


def cells(records: list[Record], metric: str) -> dict[CellKey, Record]:
    """The records of one metric, keyed by cell."""
    return {record.cell(): record for record in records if record.metric == metric}


def judge(baseline: list[Record], current: list[Record], settings: Settings) -> list[Row]:
    """Every baseline cell with an ok latency, judged; failing verdicts first, else in file order."""
    cur_latency = cells(current, "latency")
    base_accuracy, cur_accuracy = cells(baseline, "accuracy"), cells(current, "accuracy")
    rows, tested = [], []
    for key, record in cells(baseline, "latency").items():
        if record.status != "ok" or record.value is None or record.value <= 0:
            continue
        accuracy = (base_accuracy.get(key), cur_accuracy.get(key))
        row, sides = _screen(key, record, cur_latency.get(key), accuracy, settings)
        rows.append(row)
        if sides is not None:
            tested.append((row, *sides))
    _decide_tested(tested, settings)
    return sorted(rows, key=lambda r: VERDICTS.index(r.verdict))
