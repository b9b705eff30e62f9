"""``run.py compare BASELINE.json CURRENT.json``: the CI performance-regression gate.

Every cell (op, mode, dtype, x_val, backend) with an ok latency in BASELINE gets a verdict:

  accuracy_lost  baseline accuracy 1, current accuracy 0 (or its accuracy check errored)
  missing        absent from CURRENT, or its latency failed or was skipped there
  noisy          flagged on either side (e.g. below_physical_floor), or the spread of either
                 side's repeat medians (half p20-p80 over the median; without repeats, the
                 cell's sample spread) is above --noise
  regression     ratio = median(current) / median(baseline) above 1 + threshold, the 95%
                 bootstrap CI of the ratio above 1, and the Benjamini-Hochberg adjusted
                 one-sided Mann-Whitney U p-value below --alpha
  improvement    the mirror image of regression
  unchanged      everything else

The threshold is --threshold for cells whose baseline median is at least 20 us and
--small-threshold below that.  The statistics need enough repeats per side (run.py
--repeats) for the p-value to reach --alpha at all: 4 against 4 at alpha 0.05; with fewer,
the ratio alone decides.  Exit status: 1 on any regression or accuracy_lost (and, with
--fail-on-missing, any missing cell), 0 otherwise, 2 on bad input.
"""

from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tabulate import tabulate

from harness.cli import OneLineParser, UsageError, check_writable
from harness.compare_verdicts import FAILING, VERDICTS, Row, Settings, judge
from harness.results import Record, ResultFileError, atomic_write, read_json

COLUMNS = ["op", "mode", "dtype", "x_val", "backend", "baseline ms", "current ms", "ratio", "95% CI",
           "p (adjusted)", "verdict", "note"]


@dataclass(frozen=True)
class ResultFile:
    """One loaded result file and the role it plays (baseline or current)."""

    role: str
    path: Path
    header: dict[str, Any]
    records: list[Record]

    def groups(self) -> set[tuple[str, str, str]]:
        return {(r.op, r.mode, r.dtype) for r in self.records if r.metric == "latency"}


def load(role: str, path: Path) -> ResultFile:
    """Read a result file; unreadable or malformed files are bad input naming the file."""
    try:
        header, records = read_json(path)
    except ResultFileError as exc:
        raise UsageError(f"{role} {exc}") from exc
    except (KeyError, AttributeError) as exc:  # a result-like object with parts missing
        raise UsageError(f"{role} {path}: malformed result file ({type(exc).__name__}: {exc})") from exc
    if not isinstance(header, dict):
        raise UsageError(f"{role} {path}: malformed result file (header is not an object)")
    seen = set()
    for record in records:
        if (record.cell(), record.metric) in seen:
            raise UsageError(f"{role} {path}: {record.metric} of cell {record.cell()} given twice")
        seen.add((record.cell(), record.metric))
    return ResultFile(role, Path(path), header, records)


def check_compatible(base: ResultFile, cur: ResultFile, allow_device_mismatch: bool) -> None:
    """Refuse files measured on different GPUs or settings, or that share no (op, mode, dtype)."""
    base_device, cur_device = base.header.get("device_name"), cur.header.get("device_name")
    if base_device != cur_device and not allow_device_mismatch:
        raise UsageError(f"baseline {base.path} was measured on {base_device!r} but current {cur.path} on "
                         f"{cur_device!r} (--allow-device-mismatch compares them anyway)")
    for setting in ("options", "timer"):
        base_value, cur_value = base.header.get(setting), cur.header.get(setting)
        if base_value is not None and cur_value is not None and base_value != cur_value:
            raise UsageError(f"baseline {base.path} and current {cur.path} were run with different "
                             f"{setting}: {base_value} vs {cur_value}")
    if not base.groups() & cur.groups():
        def names(f: ResultFile) -> str:
            return ", ".join("/".join(g) for g in sorted(f.groups())) or "no latency records"
        raise UsageError(f"baseline {base.path} ({names(base)}) and current {cur.path} ({names(cur)}) "
                         "share no (op, mode, dtype) with latency records")


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table_rows(rows: list[Row]) -> list[list[str]]:
    """The rows as strings, in COLUMNS order."""
    out = []
    for row in rows:
        op, mode, dtype, x_val, backend = row.key
        ci = "-" if row.ci is None else f"[{row.ci[0]:.3f}, {row.ci[1]:.3f}]"
        out.append([op, mode, dtype, "x".join(map(str, x_val)), backend, _fmt(row.base_ms, ".4g"),
                    _fmt(row.cur_ms, ".4g"), _fmt(row.ratio, ".3f"), ci, _fmt(row.p, ".2g"), row.verdict,
                    row.note])
    return out


def summary(rows: list[Row]) -> str:
    """One line: the number of cells per verdict."""
    counts = Counter(row.verdict for row in rows)
    return f"{len(rows)} cells: " + ", ".join(f"{counts[v]} {v}" for v in VERDICTS)


def _md_table(rows: list[Row]) -> str:
    cells = [[text.replace("|", "\\|") for text in row] for row in table_rows(rows)]
    return tabulate(cells, headers=COLUMNS, tablefmt="github", disable_numparse=True)


def failing_verdicts(fail_on_missing: bool) -> tuple[str, ...]:
    """The verdicts that fail the gate: always a regression or lost accuracy, optionally a missing cell."""
    return (*FAILING, "missing") if fail_on_missing else FAILING


def markdown(rows: list[Row], base: ResultFile, cur: ResultFile, failed: bool) -> str:
    """A pull-request comment: headline with counts, the changed cells, then all cells collapsed."""
    changed = [row for row in rows if row.verdict != "unchanged"]
    parts = [
        f"**Performance gate: {'FAIL' if failed else 'pass'}** — {summary(rows)} "
        f"(`{base.path}` → `{cur.path}`)",
        _md_table(changed) if changed else "No cell changed beyond its threshold.",
        f"<details><summary>All {len(rows)} cells</summary>\n\n{_md_table(rows)}\n\n</details>",
    ]
    return "\n\n".join(parts) + "\n"


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}")
    return value


def _sample_count(text: str) -> int:
    if not text.isdigit() or int(text) < 100:
        raise argparse.ArgumentTypeError(f"expected an integer of at least 100, got {text!r}")
    return int(text)


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="run.py compare", description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("baseline", type=Path, help="result file of the reference run (e.g. results/baselines/h200/...)")
    add("current", type=Path, help="result file of the run under test")
    add("--threshold", type=_fraction, default=0.05,
        help="relative change that counts, for cells of 20 us or more (default 0.05 = 5%%)")
    add("--small-threshold", type=_fraction, default=0.10,
        help="relative change that counts, for cells under 20 us (default 0.10)")
    add("--noise", type=_fraction, default=0.10,
        help="largest spread of a side's repeat medians (half p20-p80 over the median) that still "
             "gets a verdict; above it the cell is noisy (default 0.10)")
    add("--alpha", type=_fraction, default=0.05,
        help="significance level for the Benjamini-Hochberg adjusted p-values (default 0.05)")
    add("--bootstrap-samples", type=_sample_count, default=10_000,
        help="bootstrap resamples for the 95%% CI of the ratio (default 10000)")
    add("--markdown", type=Path, metavar="FILE", help="also write a markdown summary for a PR comment")
    add("--fail-on-missing", action="store_true",
        help="also exit 1 when a baseline cell is missing from CURRENT (a crashed, partial or failed run)")
    add("--allow-device-mismatch", action="store_true",
        help="compare files measured on different GPUs (refused by default)")
    return parser


def compare_main(argv: list[str]) -> int:
    """Entry point of ``run.py compare``; returns the exit status."""
    args = build_parser().parse_args(argv)
    check_writable(args.markdown)
    settings = Settings(args.threshold, args.small_threshold, args.noise, args.alpha, args.bootstrap_samples)
    base, cur = load("baseline", args.baseline), load("current", args.current)
    check_compatible(base, cur, args.allow_device_mismatch)
    rows = judge(base.records, cur.records, settings)
    print(tabulate(table_rows(rows), headers=COLUMNS, disable_numparse=True))
    print(summary(rows))
    failing = failing_verdicts(args.fail_on_missing)
    failed = any(row.verdict in failing for row in rows)
    if args.markdown is not None:
        atomic_write(args.markdown, markdown(rows, base, cur, failed))
    return 1 if failed else 0
