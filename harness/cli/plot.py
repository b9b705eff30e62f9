"""``run.py plot RESULTS.json``: draw a result file's panels (one per op, mode and dtype) to PNG or SVG.

The plot goes next to the result file (``.png``) unless ``-o FILE.png|svg`` names it;
``--metric`` picks what the panels show (default: TFLOP/s for compute-bound operators, GB/s for
the others, latency where a file has neither); ``--mode`` keeps only the named modes.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.args import (
    OneLineParser,
    UsageError,
    check_writable,
    comma_list,
    help_text,
    program,
    read_result_file,
    validate_choices,
)
from harness.operator import Mode
from harness.report.plot import PLOT_METRICS, SUFFIXES, plot_results


def checked_plot_path(path: Path) -> Path:
    """``path`` when a plot can be written there: a known suffix, a writable folder."""
    if path.suffix not in SUFFIXES:
        raise UsageError(f"cannot plot to {path} (valid suffixes: {', '.join(SUFFIXES)})")
    check_writable(path)
    return path


def plot_main(argv: list[str]) -> int:
    """Plot one result file; returns the exit status."""
    parser = OneLineParser(prog=f"{program()} plot", description=help_text(__doc__),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, help="a result file written by --output-json")
    parser.add_argument("-o", "--output", type=Path, metavar="FILE",
                        help="FILE.png or FILE.svg (default: RESULTS with .png)")
    parser.add_argument("--metric", metavar="|".join(PLOT_METRICS),
                        help="what the panels show (default: tflops for compute-bound operators, else gbps)")
    parser.add_argument("--mode", type=comma_list, help="plot only these modes (comma list)")
    args = parser.parse_args(argv)
    if args.metric is not None:
        validate_choices("metric", [args.metric], PLOT_METRICS)
    if args.mode is not None:
        validate_choices("mode", args.mode, [mode.value for mode in Mode])
    header, records = read_result_file(args.results)
    output = checked_plot_path(args.output or args.results.with_suffix(".png"))
    present = list(dict.fromkeys(r.mode for r in records))
    records = [r for r in records if args.mode is None or r.mode in args.mode]
    wanted = [args.metric] if args.metric else list(PLOT_METRICS)
    if not any(r.metric in wanted for r in records):
        modes = f" for mode {','.join(args.mode)} (it has: {', '.join(present)})" if args.mode else ""
        raise UsageError(f"{args.results}: no {'/'.join(wanted)} records{modes}")
    plot_results(header, records, output, args.metric)
    print(f"plot: {output}")
    return 0
