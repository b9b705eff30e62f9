"""``run.py merge PART.json [PART.json ...] -o ALL.json``: one result file from the disjoint parts of
a run (``--shard K/N`` files of a CI matrix, say), refusing parts of different code or settings."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.args import OneLineParser, UsageError, check_writable, help_text, program
from harness.report.merge import MergeError, merge_parts
from harness.report.results import ResultFileError, read_json, write_json


def merge_main(argv: list[str]) -> int:
    """Entry point of ``run.py merge``; returns the exit status."""
    parser = OneLineParser(prog=f"{program()} merge", description=help_text(__doc__),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("parts", type=Path, nargs="+", help="result files of disjoint parts of one run")
    parser.add_argument("-o", "--output", type=Path, required=True, help="the merged result file")
    args = parser.parse_args(argv)
    check_writable(args.output)
    try:
        parts = [(str(path), *read_json(path)) for path in args.parts]
        header, records = merge_parts(parts)
    except (ResultFileError, MergeError) as exc:
        raise UsageError(str(exc)) from exc
    write_json(args.output, header, records)
    print(f"merged {len(parts)} files, {len(records)} records: {args.output}")
    return 0
