"""``run.py split RESULTS.json -o DIR``: one result file per (op, mode) of a run, ``DIR/<op>_<mode>.json``.

The layout of the committed baselines: a run of several operators and modes, made once, becomes
the baseline of each (each file keeping only its operator's options, as a run of it alone would).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.args import OneLineParser, UsageError, check_writable, help_text, program, read_result_file
from harness.report.results import write_json
from harness.report.split import split_by_sweep


def split_main(argv: list[str]) -> int:
    """Entry point of ``run.py split``; returns the exit status."""
    parser = OneLineParser(prog=f"{program()} split", description=help_text(__doc__),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, help="a result file")
    parser.add_argument("-o", "--output-dir", type=Path, required=True,
                        help="where the <op>_<mode>.json files go (made if missing)")
    args = parser.parse_args(argv)
    parts = split_by_sweep(*read_result_file(args.results))
    if not parts:
        raise UsageError(f"{args.results}: no records to split")
    paths = {key: args.output_dir / f"{key[0]}_{key[1]}.json" for key in parts}
    for path in paths.values():
        check_writable(path)
    for key, (header, records) in parts.items():
        write_json(paths[key], header, records)
        print(f"{paths[key]}: {len(records)} records")
    return 0
