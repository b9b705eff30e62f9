"""``run.py show RESULTS.json``: print the tables of a result file, as the run printed them.

A run that was stopped (Ctrl-C, a CI timeout) still leaves the cells it finished in its result
file; this renders them without a GPU.  ``--mode`` keeps only the named modes.  A ``note`` in
the file's header (what a person recorded about the run, e.g. why it is partial) is printed
last, after a line that marks a file written before its run finished (stopped, or still running).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.args import (
    OneLineParser,
    comma_list,
    help_text,
    of_modes,
    program,
    read_result_file,
    validate_choices,
)
from harness.operator import Mode
from harness.report.table import (
    ceilings_line,
    group_records,
    kernel_tables,
    options_line,
    render,
    table_layout,
)


def show_main(argv: list[str]) -> int:
    """Print the tables of one result file; returns the exit status."""
    parser = OneLineParser(prog=f"{program()} show", description=help_text(__doc__),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, help="a result file written by --output-json")
    parser.add_argument("--mode", type=comma_list, help="show only these modes (comma list)")
    args = parser.parse_args(argv)
    if args.mode is not None:
        validate_choices("mode", args.mode, [mode.value for mode in Mode])
    header, records = read_result_file(args.results)
    records = of_modes(args.results, records, args.mode)
    for (op, _, _), group in group_records(records).items():
        print(render(group, *table_layout(op)))
        print()
        for table in kernel_tables(group):
            print(table + "\n")
    digest = (header.get("source_digest") or "-")[:12]
    print(f"device: {header.get('device_name')}  commit: {header.get('git_commit')}  source: {digest}  "
          f"{ceilings_line(header.get('ceilings_gbps'), header.get('copy_gbps'))}")
    if line := options_line(header.get("options")):
        print(line)
    if header.get("complete") is False:
        print("partial: the run had not finished when this file was written; the tables hold "
              "the cells it had")
    if header.get("note"):
        print(f"note: {header['note']}")
    return 0
