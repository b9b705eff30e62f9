"""Compile before timing (``run.py --parallel-compile N``): call every cell of a run once, accuracy
only, in N worker processes at once, so that the compilers' on-disk caches hold what the timed
run would otherwise compile one cell after another: Triton's kernels and every autotuning
candidate, Helion's kernels, the kernels of Inductor's graphs and max-autotune's templates.

The timed run still makes every choice itself: Triton's autotuner keeps no choice on disk, and
the workers write neither Inductor's compiled graphs nor its autotuning timings (both would
carry a choice made while N processes shared the GPU), so the run times the candidates again,
only without compiling them.

Each worker is a chain of the processes that continue a run after a lost CUDA context
(:mod:`harness.sweep.continuation`) over every N-th cell: a crash costs the cell it was in and
the next process takes the rest; a worker silent for longer than a cell's start-up may take
(``--startup-timeout``) is ended, and the rest of its cells compile in the timed run.  The
workers' records are not kept.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.error_line import error_line
from harness.report.results import Record
from harness.report.table import x_label
from harness.sweep.continuation import ShapeWork, Supervision, continue_in_workers
from harness.sweep.spec import CellEvent, Sweep


@dataclass
class PrecompileOutcome:
    """How many cells were called, and why those that were not called cleanly were not."""

    cells: int
    done: int = 0
    problems: list[str] = field(default_factory=list)


def precompile(sweeps: list[Sweep], workers: int,
               progress: Callable[[CellEvent], None] = lambda _: None) -> PrecompileOutcome:
    """Call each cell of ``sweeps`` once in ``workers`` processes at once, each cell's events
    passed to ``progress``; Ctrl-C or SIGTERM (as an exception here) ends every worker."""
    settings = dataclasses.replace(sweeps[0].settings, metrics=["accuracy"], repeats=1, isolate=False,
                                   profile_dir=None, precompiling=True)
    checked = [dataclasses.replace(sweep, settings=settings) for sweep in sweeps]
    cells = [ShapeWork(index, shape, [backend]) for index, sweep in enumerate(sweeps)
             for shape in sweep.shapes for backend in sweep.backends]
    outcome = PrecompileOutcome(len(cells))
    lock, stopping = threading.Lock(), threading.Event()

    def run_share(share: list[ShapeWork], ended: threading.Event) -> None:
        try:
            call_share(share)
        finally:
            ended.set()

    def call_share(share: list[ShapeWork]) -> None:
        last_event = [time.monotonic()]

        def seen(event: CellEvent) -> None:
            last_event[0] = time.monotonic()
            with lock:
                outcome.done += event.phase == "done"
                progress(event)

        def failed(records: list[Record]) -> None:
            with lock:
                outcome.problems += [f"{r.op} {r.mode} {x_label(r.x_val)} {r.backend}: {error_line(r.error)}"
                                     for r in records if r.status == "error" and r.metric == "accuracy"]

        def stop() -> bool:
            return stopping.is_set() or time.monotonic() - last_event[0] > settings.startup_timeout_s

        try:
            continue_in_workers(checked, share, failed, seen, Supervision(stop=stop))
        except RuntimeError as exc:
            with lock:
                outcome.problems.append(error_line(str(exc)))
        if not stopping.is_set() and time.monotonic() - last_event[0] > settings.startup_timeout_s:
            with lock:
                outcome.problems.append(f"a worker was silent for {settings.startup_timeout_s:g} s and "
                                        "was ended; the timed run compiles the rest of its cells")

    ends = [threading.Event() for _ in range(min(workers, len(cells)))]
    for start, ended in enumerate(ends):
        threading.Thread(target=run_share, args=(cells[start::workers], ended), daemon=True).start()

    def wait_for_all() -> None:
        # Not Thread.join: a join that Ctrl-C or SIGTERM interrupts marked a running thread as
        # ended (seen on CPython 3.11), and its worker outlived the run.
        while not all(ended.is_set() for ended in ends):
            time.sleep(0.2)

    try:
        wait_for_all()
    except BaseException:
        stopping.set()
        wait_for_all()
        raise
    return outcome
