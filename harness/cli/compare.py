"""``run.py compare BASELINE.json [BASELINE.json ...] CURRENT.json``: the CI performance-regression gate.

Every cell (op, mode, dtype, x_val, backend) with an ok latency in a BASELINE gets a verdict
(``harness.compare.verdicts`` gives the rules):

  accuracy_lost     current accuracy 0 (or its accuracy check errored), whatever the baseline's,
                    with or without a latency
  missing           absent from CURRENT
  accuracy_missing  baseline accuracy 1, no accuracy for the cell in CURRENT
  missing           its latency failed or was skipped in CURRENT
  regression        ratio = median(current) / median(baseline) above 1 + threshold (and twice
                    the run noise), and the lower end of its 95% bootstrap interval above
                    1 + run noise or the ratio above 1 + --noisy-threshold; for a noisy cell,
                    the ratio above 1 + --noisy-threshold
  improvement       the mirror image of regression
  noisy             either side's repeat medians spread wider than --noise, or no slower and
                    flagged below_physical_floor (in CURRENT or the baseline run it is judged
                    against), and within --noisy-threshold; or a ratio
                    beyond the threshold, within --noisy-threshold, whose interval does not
                    clear the run noise
  unchanged         everything else

A current cell that is wrong (accuracy 0 or an errored check) and is not a timed baseline cell
is accuracy_lost too.

The run noise is the run-to-run variation repeats inside one run do not show (--run-noise).
Several BASELINE files must be separate runs of one commit: each cell is judged against its
slowest run, or its fastest where the runs are more than the threshold apart.  CURRENT needs
at least a baseline's repeats.

Exit status: 1 on any regression, lost or missing accuracy or missing cell (unless
--allow-missing), when no baseline cell could be judged (every one missing), when more than
--max-noisy of the cells are noisy, or when a backend's cells, or the whole file's, are slower
together by half their thresholds (a sign test), however each cell was judged; 0 otherwise; 2 on bad input
(unreadable or malformed files, missing provenance, partial runs, a run given as its own
baseline, files from different GPUs or settings, fewer repeats than a baseline's, baseline runs
of different commits).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tabulate import tabulate

from harness.cli.args import (
    OneLineParser,
    UsageError,
    argparse_type,
    check_writable,
    help_text,
    positive_float,
    program,
)
from harness.compare.files import CompareInputError, check_compatible, load, order_notes
from harness.compare.summary import COLUMNS, failing_verdicts, markdown, summary, table_rows
from harness.compare.verdicts import Settings, judge, noisy_share, shifted_together
from harness.operator import finite_number
from harness.report.results import atomic_write


def _fraction(text: str) -> float:
    value = finite_number(text)
    if not 0 < value < 1:
        raise ValueError(f"expected a number greater than 0 and less than 1, got {text!r}")
    return value


def _sample_count(text: str) -> int:
    if not text.isdigit() or int(text) < 100:
        raise ValueError(f"expected an integer of at least 100, got {text!r}")
    return int(text)


fraction, sample_count = argparse_type(_fraction), argparse_type(_sample_count)


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog=f"{program()} compare", description=help_text(__doc__),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("files", type=Path, nargs="+", metavar="FILE",
        help="the baseline run(s), e.g. results/baselines/h200/..., then the run under test")
    add("--threshold", type=fraction, default=0.05,
        help="relative change that counts, for cells of 20 us or more (default 0.05 = 5%%)")
    add("--small-threshold", type=fraction, default=0.10,
        help="relative change that counts, for cells under 20 us (default 0.10)")
    add("--noise", type=fraction, default=0.10,
        help="largest spread of a side's repeat medians (half p20-p80 over the median) that still "
             "gets the tested verdicts; above it the cell is noisy (default 0.10)")
    add("--noisy-threshold", type=positive_float, default=0.25,
        help="relative change that fails (or improves) a noisy or flagged cell (default 0.25)")
    add("--run-noise", type=fraction, default=0.01,
        help="run-to-run variation between separate runs of the same code (default 0.01, measured on "
             "the H200: README)")
    add("--max-noisy", type=fraction, default=0.25,
        help="the gate fails when more than this share of the cells is noisy (default 0.25)")
    add("--bootstrap-samples", type=sample_count, default=10_000,
        help="bootstrap resamples for the 95%% CI of the ratio (default 10000)")
    add("--markdown", type=Path, metavar="FILE", help="also write a markdown summary for a PR comment")
    add("--allow-missing", action="store_true",
        help="pass baseline cells missing from CURRENT, absent or without a latency there (a run of "
             "fewer shapes or backends, a failed or skipped cell); by default each fails the gate")
    add("--fail-on-missing", action="store_true",
        help="the default, kept for scripts that pass it: a missing cell fails the gate")
    add("--allow-device-mismatch", action="store_true",
        help="compare files measured on different GPUs (refused by default)")
    return parser


def compare_main(argv: list[str]) -> int:
    """Entry point of ``run.py compare``; returns the exit status."""
    args = build_parser().parse_args(argv)
    if len(args.files) < 2:
        raise UsageError("compare takes a baseline file (or several runs of one) and a current file")
    if args.allow_missing and args.fail_on_missing:
        raise UsageError("--allow-missing and --fail-on-missing contradict each other: give one")
    check_writable(args.markdown)
    settings = Settings(args.threshold, args.small_threshold, args.noise, args.noisy_threshold,
                        args.run_noise, args.bootstrap_samples)
    try:
        baselines = [load("baseline", path) for path in args.files[:-1]]
        cur = load("current", args.files[-1])
        check_compatible(baselines, cur, args.allow_device_mismatch)
    except CompareInputError as exc:
        raise UsageError(str(exc)) from exc
    notes = order_notes(baselines, cur)
    for note in notes:
        print(note, file=sys.stderr)
    rows = judge([base.records for base in baselines], cur.records, settings)
    print(tabulate(table_rows(rows), headers=COLUMNS, disable_numparse=True))
    print(summary(rows))
    failing = failing_verdicts(fail_on_missing=not args.allow_missing)
    reasons = [f"{sum(row.verdict == v for row in rows)} cell(s) {v}" for v in failing
               if any(row.verdict == v for row in rows)]
    if not any(row.verdict != "missing" and row.base_ms is not None for row in rows):
        reasons.append("no baseline cell could be judged: the current run has none of their latencies")
    reasons += [f"slower together: {shift}" for shift in shifted_together(rows, settings)]
    if (share := noisy_share(rows)) > args.max_noisy:
        reasons.append(f"{100 * share:.0f}% of the cells are noisy (more than --max-noisy "
                       f"{100 * args.max_noisy:g}%): this run cannot be judged, rerun it on a quiet GPU")
    if reasons:
        print("gate fails: " + "; ".join(reasons))
    if args.markdown is not None:
        atomic_write(args.markdown, markdown(rows, baselines, cur, bool(reasons), reasons, notes))
    return 1 if reasons else 0
