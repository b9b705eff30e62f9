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
from pathlib import Path

from tabulate import tabulate

from harness.cli.args import OneLineParser, UsageError, check_writable
from harness.compare.files import CompareInputError, check_compatible, load
from harness.compare.summary import COLUMNS, failing_verdicts, markdown, summary, table_rows
from harness.compare.verdicts import Settings, judge
from harness.report.results import atomic_write


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
    try:
        base, cur = load("baseline", args.baseline), load("current", args.current)
        check_compatible(base, cur, args.allow_device_mismatch)
    except CompareInputError as exc:
        raise UsageError(str(exc)) from exc
    rows = judge(base.records, cur.records, settings)
    print(tabulate(table_rows(rows), headers=COLUMNS, disable_numparse=True))
    print(summary(rows))
    failing = failing_verdicts(args.fail_on_missing)
    failed = any(row.verdict in failing for row in rows)
    if args.markdown is not None:
        atomic_write(args.markdown, markdown(rows, base, cur, failed))
    return 1 if failed else 0
