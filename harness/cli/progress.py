"""How a run shows its progress on stderr: a rich bar with cells done of the total and an ETA on a
terminal, one short line per finished cell otherwise (a CI log shows where a run is, and where
it hung); nothing goes to stdout, which holds the tables (or the data of ``--csv -`` and
``--output-json -``).
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from harness.sweep.spec import CellEvent


def cell_label(event: CellEvent) -> str:
    """A cell as progress lines name it: ``exp fwd 65536 triton``."""
    shape = "x".join(map(str, event.shape))
    return f"{event.op} {event.mode} {shape} {event.backend}"


class ProgressDisplay:
    """Counts finished cells of ``total``; a context manager that starts and stops the display."""

    def __init__(self, total: int, stream: TextIO | None = None, prefix: str = ""):
        self.total, self.done, self.prefix = total, 0, prefix
        self.stream = stream or sys.stderr
        self.start = time.monotonic()
        self.bar: Progress | None = None
        if self.stream.isatty():
            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                                console=Console(file=self.stream), transient=True)
            self.task = self.bar.add_task("starting", total=total)

    def __enter__(self) -> ProgressDisplay:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self.bar is not None:
            self.bar.stop()

    def __call__(self, event: CellEvent) -> None:
        """Show a cell's event: on a terminal every phase; in a log, each finished cell."""
        if event.phase == "done":
            self.done += 1
        if self.bar is not None:
            label = cell_label(event) + ("" if event.phase in ("done", "build") else f" ({event.phase})")
            self.bar.update(self.task, description=label, completed=self.done)
        elif event.phase == "done":
            elapsed = time.monotonic() - self.start
            print(f"{self.prefix}[{self.done}/{self.total}] {elapsed:7.1f} s  {cell_label(event)}",
                  file=self.stream, flush=True)
