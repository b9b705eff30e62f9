"""Entry point of ``run.py``: dispatch to the run or to a subcommand (compare, export, merge, plot, show,
split, tritonbench, tune).

Bad input exits with status 2 and one line naming the valid choices; a run whose cells all
succeeded exits 0, one with failed cells 1.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Sequence

from harness.cli.args import UsageError, program
from harness.cli.compare import compare_main
from harness.cli.export import export_main
from harness.cli.merge import merge_main
from harness.cli.plot import plot_main
from harness.cli.run import run_command
from harness.cli.show import show_main
from harness.cli.split import split_main
from harness.cli.tritonbench import tritonbench_main
from harness.cli.tune import tune_main

SUBCOMMANDS: dict[str, Callable[[list[str]], int]] = {
    "compare": compare_main,
    "export": export_main,
    "merge": merge_main,
    "plot": plot_main,
    "show": show_main,
    "split": split_main,
    "tritonbench": tritonbench_main,
    "tune": tune_main,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``run.py``; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = SUBCOMMANDS.get(argv[0]) if argv else None
    try:
        if command is None and argv and not argv[0].startswith("-"):
            raise UsageError(f"unknown subcommand {argv[0]!r} (valid: {', '.join(SUBCOMMANDS)}; "
                             "a benchmark run starts with its options, e.g. --op)")
        return command(argv[1:]) if command is not None else run_command(argv)
    except UsageError as exc:
        print(f"{program()}: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except BrokenPipeError:
        # The reader of stdout went away (``run.py show FILE | head``): stop quietly, and keep
        # Python from reporting the same error again when it flushes stdout at exit.
        with contextlib.suppress(OSError, ValueError, AttributeError):  # no real stdout to quiet
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
