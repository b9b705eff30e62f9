"""``run.py split RESULTS.json -o DIR``: one result file per (op, mode) of a run, ``DIR/<op>_<mode>.json``,
the layout of the committed baselines (a run of several operators and modes, made once, becomes
the baselines of each)."""

from __future__ import annotations

from pathlib import Path

from harness.cli.args import OneLineParser, UsageError, check_writable
from harness.report.results import ResultFileError, read_json, write_json
from harness.report.split import split_by_sweep


def split_main(argv: list[str]) -> int:
    """Entry point of ``run.py split``; returns the exit status."""
    parser = OneLineParser(prog="run.py split", description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="a result file")
    parser.add_argument("-o", "--output-dir", type=Path, required=True,
                        help="where the <op>_<mode>.json files go (made if missing)")
    args = parser.parse_args(argv)
    try:
        header, records = read_json(args.results)
    except ResultFileError as exc:
        raise UsageError(str(exc)) from exc
    parts = split_by_sweep(header, records)
    if not parts:
        raise UsageError(f"{args.results}: no records to split")
    paths = {name: args.output_dir / f"{name}.json" for name in parts}
    for path in paths.values():
        check_writable(path)
    for name, (part_header, part_records) in parts.items():
        write_json(paths[name], part_header, part_records)
        print(f"{paths[name]}: {len(part_records)} records")
    return 0
