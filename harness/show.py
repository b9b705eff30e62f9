"""``run.py show RESULTS.json``: print the tables of a result file, as the run printed them.

A run that was stopped (Ctrl-C, a CI timeout) still leaves the cells it finished in its result
file; this renders them without a GPU.  ``--mode`` keeps only the named modes.  A ``note`` in
the file's header (what a person recorded about the run, e.g. why it is partial) is printed
last.
"""

from __future__ import annotations

from pathlib import Path

from harness.cli import OneLineParser, UsageError
from harness.results import ResultFileError, read_json
from harness.table import group_records, render
from operators import OPERATORS, load_operator


def show_main(argv: list[str]) -> int:
    """Print the tables of one result file; returns the exit status."""
    parser = OneLineParser(prog="run.py show", description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="a result file written by --output-json")
    parser.add_argument("--mode", action="append", help="show only this mode (repeatable)")
    args = parser.parse_args(argv)
    try:
        header, records = read_json(args.results)
    except ResultFileError as exc:
        raise UsageError(f"{args.results}: {exc}") from exc
    records = [r for r in records if args.mode is None or r.mode in args.mode]
    if not records:
        raise UsageError(f"{args.results}: no records" + (f" for mode {args.mode}" if args.mode else ""))
    for (op, _, _), group in group_records(records).items():
        label = load_operator(op).x_val_label if op in OPERATORS else "x_val"
        print(render(group, label))
        print()
    copy_gbps = header.get("copy_gbps")
    copy_text = "-" if copy_gbps is None else f"{copy_gbps:.1f} GB/s"
    print(f"device: {header.get('device_name')}  commit: {header.get('git_commit')}  "
          f"copy bandwidth: {copy_text}")
    if header.get("note"):
        print(f"note: {header['note']}")
    return 0
