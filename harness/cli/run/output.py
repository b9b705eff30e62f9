"""What a run leaves behind: its tables (terminal and CSV), its result file, its plot and its exit status.

Every run keeps its records in a result file (``--output-json PATH``, or by default a timestamped
file in the ignored ``--output-dir``; ``--no-save`` turns it off), rewritten after each finished
cell, so a run that is stopped keeps what it finished. ``--output-json -`` keeps that default file
too (unless ``--no-save``) and prints it to stdout once the run ends. ``--csv -`` writes the
tables as CSV to stdout (``;``-separated, one after another, as tritonbench does); ``--csv PATH``
writes one file, or, for several tables, one file each named
``<stem>_<op>_<mode>_<precision><suffix>``. While stdout carries CSV or the result file,
everything else Python prints goes to stderr. ``--plot FILE`` draws the run's records after the
tables, as ``run.py plot`` draws a result file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from harness.cli.args import check_writable
from harness.report.exporters.tritonbench import tritonbench_rows
from harness.report.plot import PLOT_METRICS, plot_results
from harness.report.results import Record, csv_text, result_json, write_csv, write_json
from harness.report.table import TableData, group_records, kernel_tables, render, x_label

MAX_LISTED_FAILURES = 8


def run_stamp() -> str:
    """The UTC time that names every file of one run."""
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def result_name(ops: list[str], modes: list[str], precision: str, stamp: str, suffix: str) -> str:
    return f"{'+'.join(ops)}_{'+'.join(modes)}_{precision}_{stamp}.{suffix}"


@contextmanager
def stdout_for_data(reserve: bool) -> Iterator[TextIO]:
    """The stream the run's stdout data goes to: stdout (``os.devnull`` when there is none).
    Reserved (``--csv -``, ``--output-json -``), whatever else Python code prints while the run
    lasts goes to stderr; output written to file descriptor 1 directly (a C ``printf``, a kernel's
    device print) is not redirected."""
    with ExitStack() as stack:
        data = sys.stdout if sys.stdout is not None else stack.enter_context(open(os.devnull, "w"))
        if reserve:
            stack.enter_context(redirect_stdout(sys.stderr))
        yield data


@dataclass(frozen=True)
class Outputs:
    """Where a run writes: its result file, its CSV target, its plot, and the stamp that names them.
    Tables and notes are plain ``print``: inside ``stdout_for_data`` they reach stderr where stdout
    carries data."""

    json_path: Path | None
    """The result file, rewritten after each cell (None with --no-save)."""
    json_stdout: bool
    """Whether the result file is printed to ``data`` once the run ends (--output-json -)."""
    data: TextIO
    """Where CSV (--csv -) and the result file (--output-json -) go: stdout, kept for them."""
    csv: str | None
    plot_path: Path | None
    output_dir: Path
    precision: str
    stamp: str
    several_tables: bool

    @classmethod
    def of(cls, args: argparse.Namespace, precision: str, modes: list[str], data: TextIO) -> Outputs:
        stamp = run_stamp()
        json_path = None
        json_stdout = args.output_json == "-"
        if not args.no_save:
            json_path = (Path(args.output_json) if args.output_json and not json_stdout
                         else Path(args.output_dir) / result_name(args.op, modes, precision, stamp, "json"))
        plot_path = Path(args.plot) if args.plot else None
        # Named by the tables the run asks for, not by those it finished: a stopped run's CSV
        # files have the names its whole run's would.
        several = len(args.op) * len(modes) > 1
        return cls(json_path, json_stdout, data, args.csv, plot_path, Path(args.output_dir), precision,
                   stamp, several)

    def check_writable(self) -> None:
        """Fail before the work, not after it, when the result file or the CSV cannot be written."""
        check_writable(self.json_path)
        if self.csv not in (None, "", "-"):
            check_writable(Path(self.csv))

    def save(self, header: dict[str, Any], records: list[Record]) -> None:
        """Rewrite the result file (none with --no-save)."""
        if self.json_path is not None:
            write_json(self.json_path, header, records)

    def print_result(self, header: dict[str, Any], records: list[Record]) -> None:
        """Print the result file to stdout where --output-json - asks (last, after the tables)."""
        if not self.json_stdout:
            return
        try:
            self.data.write(result_json(header, records))
            self.data.flush()
        except BrokenPipeError:
            kept = f" (kept in {self.json_path})" if self.json_path else ""
            print(f"stdout was closed before the result file was printed{kept}", file=sys.stderr)

    def csv_path(self, op: str, mode: str) -> Path | None:
        """The CSV file of one table (None when the tables go to stdout)."""
        if self.csv == "-":
            return None
        if not self.csv:
            return self.output_dir / result_name([op], [mode], self.precision, self.stamp, "csv")
        path = Path(self.csv)
        if self.several_tables:
            return path.with_name(f"{path.stem}_{op}_{mode}_{self.precision}{path.suffix or '.csv'}")
        return path


def print_tables(records: list[Record], labels: dict[str, str], orders: dict[str, list[str]],
                 outputs: Outputs) -> None:
    """Every (op, mode, dtype) table on the terminal, and as CSV where ``--csv`` asks."""
    groups = group_records(records)
    for (op, mode, _), group in groups.items():
        print(render(group, labels[op], orders.get(op)))
        print()
        for table in kernel_tables(group):
            print(table + "\n")
        if outputs.csv is None:
            continue
        data = TableData(group, labels[op], orders.get(op))
        rows = tritonbench_rows(data, group)
        path = outputs.csv_path(op, mode)
        if path is None:
            print(csv_text(data.header(), rows, delimiter=";"), file=outputs.data)
        else:
            write_csv(path, data.header(), rows, delimiter=";")
            print(f"csv: {path}")


def write_plot(header: dict[str, Any], records: list[Record], outputs: Outputs) -> None:
    """The plot ``--plot`` asks for (none when the run was stopped before any cell had a value)."""
    if outputs.plot_path is None:
        return
    if not any(r.metric in PLOT_METRICS for r in records):
        print(f"no plot: the run recorded no {'/'.join(PLOT_METRICS)}", file=sys.stderr)
        return
    plot_results(header, records, outputs.plot_path)
    print(f"plot: {outputs.plot_path}")


def failed_cells(records: list[Record]) -> list[str]:
    """The cells that failed (an error or accuracy 0), each as ``op/mode/backend/x_val``, in order."""
    failed: dict[str, None] = {}
    for r in records:
        if r.status == "error" or (r.metric == "accuracy" and r.status == "ok" and r.value == 0):
            failed[f"{r.op}/{r.mode}/{r.backend}/{x_label(r.x_val)}"] = None
    return list(failed)


def exit_status(records: list[Record], ending: str, outputs: Outputs) -> int:
    """Print why the run ended as it did and the result file's name (the last line of the text); the
    status."""
    status = 0
    if ending != "finished":
        print(f"{ending}: finished cells were kept", file=sys.stderr)
        status = 130 if ending == "interrupted" else 143
    elif failed := failed_cells(records):
        more = f" and {len(failed) - MAX_LISTED_FAILURES} more" if len(failed) > MAX_LISTED_FAILURES else ""
        print(f"{len(failed)} cell(s) failed: " + ", ".join(failed[:MAX_LISTED_FAILURES]) + more,
              file=sys.stderr)
        status = 1
    elif records and not any(r.status == "ok" for r in records):
        # Every cell skipped: a run that measured nothing fails (an empty --shard part has no records).
        reason = next((r.error for r in records if r.error), "no cells")
        print(f"nothing was measured: every cell was skipped ({reason})", file=sys.stderr)
        status = 1
    if outputs.json_path is not None:
        print(f"results: {outputs.json_path}")
    return status
