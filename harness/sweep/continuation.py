"""Go on with a run in fresh processes after a cell poisoned this process's CUDA context.

The parent keeps every record it has.  What is left (the backends of the shape in progress
that had not finished, then every later shape and sweep) runs in a worker process that writes
each event and each finished cell's records to a file as JSON lines, which the parent reads
as they come.  A worker that dies (a crash, or another lost context) costs the cell it was in:
that cell gets the error, and another worker takes what is still left.

Worker entry point: ``python -m harness.sweep.continuation SPEC.json EVENTS.jsonl``.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.error_line import error_line
from harness.measure.ceilings import DeviceCeilings
from harness.measure.errors import ContextLost
from harness.measure.records import Baseline, cell_records
from harness.metrics.cell_data import Measurement
from harness.operator import DTYPE_NAMES, Mode, Shape
from harness.report.results import Record
from harness.settings import RunSettings
from harness.sweep.spec import CellEvent, Sweep
from harness.sweep.worker import kill_worker, start_worker, worker_env

LOST_EXIT = 3
"""A worker's exit status when it lost its CUDA context too."""


@dataclass
class ShapeWork:
    """The backends of one (sweep, shape) still to run, and the speedup baseline's median if known."""

    sweep: int
    shape: Shape
    backends: list[str]
    baseline_p50: float | None = None


def remaining_work(sweeps: list[Sweep], index: int, lost: ContextLost) -> list[ShapeWork]:
    """What is left of ``sweeps`` after sweep ``index`` lost its context at ``lost.shape_index``."""
    sweep, at = sweeps[index], lost.shape_index
    left = [name for name in sweep.backends if name not in lost.done]
    work = [ShapeWork(index, sweep.shapes[at], left, lost.baseline_p50)] if left else []
    work += [ShapeWork(index, shape, list(sweep.backends)) for shape in sweep.shapes[at + 1:]]
    for later in range(index + 1, len(sweeps)):
        work += [ShapeWork(later, shape, list(sweeps[later].backends)) for shape in sweeps[later].shapes]
    return work


def _spec(sweeps: list[Sweep], work: list[ShapeWork]) -> dict[str, Any]:
    first = sweeps[0]
    return {
        "settings": first.settings.to_json(), "ceilings": dataclasses.asdict(first.ceilings),
        "sweeps": [{"op": s.op.name, "mode": s.mode.value, "backends": s.backends,
                    "speedup_baseline": s.speedup_baseline} for s in sweeps],
        "work": [dataclasses.asdict(item) for item in work],
    }


@dataclass(frozen=True)
class Supervision:
    """What the process waiting on a worker does meanwhile: ``poll()`` every fraction of a
    second, and it ends the worker once ``stop()`` says so."""

    stop: Callable[[], bool] = lambda: False
    poll: Callable[[], None] = lambda: None


def continue_in_workers(sweeps: list[Sweep], work: list[ShapeWork], sink: Callable[[list[Record]], None],
                        progress: Callable[[CellEvent], None],
                        supervision: Supervision = Supervision()) -> None:
    """Run ``work`` in worker processes, passing their records to ``sink`` as cells finish."""
    stop = supervision.stop
    while work:
        finished, started, stderr, medians = _run_worker(sweeps, work, sink, progress, supervision)
        if stop():
            return
        culprit = started if started is not None and started not in finished else None
        if culprit is not None:
            sweep = sweeps[culprit[0]]
            error = f"worker process died in this cell: {error_line(stderr)}"
            records = cell_records(sweep.op, sweep.mode, culprit[1], culprit[2], Measurement(), error,
                                   sweep.settings.metrics, sweep.ceilings,
                                   Baseline(sweep.speedup_baseline, sweep.op.baseline().name))
            sink(records)
            finished.add(culprit)
        left = []
        for item in work:
            backends = [name for name in item.backends if (item.sweep, item.shape, name) not in finished]
            if backends:
                p50 = medians.get((item.sweep, item.shape), item.baseline_p50)
                left.append(dataclasses.replace(item, backends=backends, baseline_p50=p50))
        if len(left) == len(work) and all(a.backends == b.backends for a, b in zip(left, work, strict=True)):
            raise RuntimeError(f"a worker made no progress on the rest of the run: {error_line(stderr)}")
        work = left


def _run_worker(sweeps: list[Sweep], work: list[ShapeWork], sink: Callable[[list[Record]], None],
                progress: Callable[[CellEvent], None],
                supervision: Supervision) -> tuple[set, tuple | None, str, dict]:
    """One worker over ``work``: the cells it finished, the last it started, its stderr, and the
    speedup baselines' medians it measured, by (sweep, shape)."""
    index_of = {(s.op.name, s.mode.value): i for i, s in enumerate(sweeps)}
    finished: set = set()
    medians: dict = {}
    started = None
    with tempfile.TemporaryDirectory(prefix="opbench-continue-") as tmp:
        spec_path, events_path = Path(tmp) / "spec.json", Path(tmp) / "events.jsonl"
        spec_path.write_text(json.dumps(_spec(sweeps, work)))
        events_path.touch()
        with open(Path(tmp) / "stderr.txt", "w+") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "harness.sweep.continuation", str(spec_path), str(events_path)],
                stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
                env=worker_env(),
            )
            try:
                with open(events_path) as events:
                    while True:
                        running = proc.poll() is None
                        for line in events.readlines():
                            event = json.loads(line)
                            if "records" in event:
                                records = [Record(**r) for r in event["records"]]
                                for r in records:
                                    cell = (index_of[(r.op, r.mode)], tuple(event["shape"]), r.backend)
                                    finished.add(cell)
                                    if (r.metric == "latency" and r.status == "ok"
                                            and r.backend == sweeps[cell[0]].speedup_baseline):
                                        medians[cell[:2]] = r.value
                                sink(records)
                            else:
                                op, mode, shape, backend, phase = event["event"]
                                cell = (index_of[(op, mode)], tuple(shape), backend)
                                started = cell if phase == "build" else started
                                progress(CellEvent(op, mode, tuple(shape), backend, phase))
                        if not running:
                            break
                        supervision.poll()
                        if supervision.stop():
                            kill_worker(proc)
                            break
                        time.sleep(0.2)
            except BaseException:
                kill_worker(proc)
                raise
            err.seek(0)
            return finished, started, err.read(), medians


def _worker(spec: dict[str, Any], events_path: Path) -> int:
    settings = RunSettings.from_json(spec["settings"])
    start_worker(settings)
    from harness.registry import load_operator
    from harness.sweep.runner import ShapeResume, run_shape

    ceilings = DeviceCeilings(**spec["ceilings"])
    with open(events_path, "a") as events:
        def write(event: dict[str, Any]) -> None:
            events.write(json.dumps(event) + "\n")
            events.flush()

        operators: dict[str, Any] = {}
        for item in spec["work"]:
            described = spec["sweeps"][item["sweep"]]
            name = described["op"]
            if name not in operators:
                operators[name] = load_operator(name)(settings.device, DTYPE_NAMES[settings.precision],
                                                      settings.options)
            shape = tuple(item["shape"])

            def progress(event: CellEvent) -> None:
                write({"event": [event.op, event.mode, list(event.shape), event.backend, event.phase]})

            sweep = Sweep(operators[name], Mode(described["mode"]), [shape], described["backends"],
                          described["speedup_baseline"], settings, ceilings, progress)

            def emit(records: list[Record], shape: Shape = shape) -> None:
                write({"shape": list(shape), "records": [dataclasses.asdict(r) for r in records]})

            try:
                run_shape(sweep, shape, emit, ShapeResume(item["backends"], item["baseline_p50"]))
            except ContextLost:
                return LOST_EXIT
    return 0


def main(argv: list[str]) -> int:
    return _worker(json.loads(Path(argv[0]).read_text()), Path(argv[1]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
