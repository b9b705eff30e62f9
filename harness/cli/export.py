"""``run.py export RESULTS.json --format FORMAT [-o FILE]``: a result file in another tool's format.

Formats (``harness.report.exporters.FORMATS``): ``tritonbench-csv`` and ``tritonbench-json``
(tritonbench's ``--csv`` tables and ``--output-json`` keys), ``hud-v3`` (records for the PyTorch
OSS benchmark database).  Failed and skipped cells are never written as 0.  The text goes to
stdout, or atomically to ``-o FILE``; ``--mode`` keeps only the named modes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cli.args import (
    OneLineParser,
    UsageError,
    check_writable,
    comma_list,
    help_text,
    of_modes,
    program,
    read_result_file,
    validate_choices,
)
from harness.operator import Mode
from harness.report.exporters import FORMATS
from harness.report.exporters.common import ExportError
from harness.report.results import atomic_write


def export_main(argv: list[str]) -> int:
    """Write one result file in the chosen format; returns the exit status."""
    parser = OneLineParser(prog=f"{program()} export", description=help_text(__doc__),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, help="a result file written by --output-json")
    parser.add_argument("--format", help=f"one of: {', '.join(FORMATS)}")
    parser.add_argument("-o", "--output", type=Path, help="write here instead of stdout")
    parser.add_argument("--mode", type=comma_list, help="export only these modes (comma list)")
    args = parser.parse_args(argv)
    if args.format is None:
        raise UsageError(f"give --format (valid: {', '.join(FORMATS)})")
    validate_choices("format", [args.format], list(FORMATS))
    if args.mode is not None:
        validate_choices("mode", args.mode, [mode.value for mode in Mode])
    check_writable(args.output)
    header, records = read_result_file(args.results)
    records = of_modes(args.results, records, args.mode)
    try:
        text = FORMATS[args.format](header, records)
    except ExportError as exc:
        raise UsageError(f"{args.results}: {exc}") from exc
    if args.output is None:
        sys.stdout.write(text)
    else:
        atomic_write(args.output, text)
    return 0
