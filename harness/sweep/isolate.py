"""Run one benchmark cell in its own subprocess (``run.py --isolate``).

A segfault, a CUDA illegal memory access (which poisons the CUDA context for good), an
out-of-memory or a hang in one backend then costs only that cell: the parent records the
cause as the cell's error and the sweep goes on.  The worker rebuilds the operator from a
JSON spec (the run's settings and the cell), draws the same seeded inputs, computes its own
reference and measures the one backend.

Worker entry point: ``python -m harness.sweep.isolate SPEC.json OUT.json``.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.error_line import error_line
from harness.metrics.cell_data import AccuracyResult, Measurement, SampleStats
from harness.operator import DTYPE_NAMES, Mode, Shape
from harness.settings import RunSettings
from harness.sweep.spec import CellEvent, Sweep
from harness.sweep.worker import kill_worker, start_worker, worker_env


def measurement_to_json(m: Measurement, error: str | None) -> dict[str, Any]:
    """Every field of the measurement as JSON values (its dataclasses as dicts), and the error."""
    return {**dataclasses.asdict(m), "error": error}


def measurement_from_json(data: dict[str, Any]) -> tuple[Measurement, str | None]:
    """What :func:`measurement_to_json` wrote, its timings and accuracy rebuilt as dataclasses."""
    fields = {f.name: data[f.name] for f in dataclasses.fields(Measurement)}
    fields["timings"] = {kind: [SampleStats(**stats) for stats in repeats]
                         for kind, repeats in fields["timings"].items()}
    if fields["accuracy"] is not None:
        fields["accuracy"] = AccuracyResult(**fields["accuracy"])
    return Measurement(**fields), data["error"]


def _died(returncode: int, stderr: str) -> str:
    if returncode < 0:
        return f"worker process killed by {signal.Signals(-returncode).name}"
    return f"worker process exited with code {returncode}: {error_line(stderr)}"


def measure_isolated(sweep: Sweep, shape: Shape, backend: str) -> tuple[Measurement, str | None]:
    """Measure one backend on one shape in a subprocess; its death becomes the cell's error.

    The worker's start-up (imports, inputs, the reference, the backend's set-up and first call,
    where compilation happens) may take ``startup_timeout_s``; from the moment it starts timing
    (in a run that times nothing: its checks), ``timeout_s`` (``--timeout``) bounds the rest.
    """
    spec = {
        "settings": sweep.settings.to_json(),
        "op": sweep.op.name, "mode": sweep.mode.value, "shape": list(shape), "backend": backend,
    }
    settings = sweep.settings
    with tempfile.TemporaryDirectory(prefix="opbench-cell-") as tmp:
        spec_path, out_path, timing_path = (Path(tmp) / name for name in ("spec.json", "out.json", "timing"))
        spec_path.write_text(json.dumps(spec))
        with open(Path(tmp) / "stderr.txt", "w+") as stderr:
            command = [sys.executable, "-m", "harness.sweep.isolate", str(spec_path), str(out_path),
                       str(timing_path)]
            # Its own session, so a timeout kills compile workers it started too.
            proc = subprocess.Popen(
                command,
                stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True,
                env=_worker_env(sweep.cell_name(shape, backend)),
            )
            try:
                late = _wait(proc, timing_path, out_path, settings.startup_timeout_s, settings.timeout_s,
                             "timing" if sweep.timed else "checking")
            except BaseException:
                # Ctrl-C reaches only this process (the worker has its own session): end the worker too.
                kill_worker(proc)
                raise
            if late is not None:
                kill_worker(proc)
                return Measurement(), late
            if out_path.exists():
                kill_worker(proc)
                return measurement_from_json(json.loads(out_path.read_text()))
            stderr.seek(0)
            return Measurement(), _died(proc.returncode, stderr.read())


def _worker_env(cell: str) -> dict[str, str]:
    """The worker's environment: the suite's root on its path, so it imports the harness from any
    working directory, and ``TORCH_TRACE`` (when set) a folder of the cell's own in it, so each
    cell's compile log is one ``tlparse`` report."""
    env = worker_env()
    if env.get("TORCH_TRACE"):
        env["TORCH_TRACE"] = str(Path(env["TORCH_TRACE"]) / cell)
    return env


def _wait(proc: subprocess.Popen, timing_path: Path, out_path: Path, startup_s: float,
          timeout_s: float | None, activity: str) -> str | None:
    """Wait until the worker has written its result or ended; why it was too late (the cell's
    error, saying what it was doing: ``activity``), or None if it finished in time.  Its
    interpreter's shutdown, after the result, is not the cell's time."""
    deadline, timing = time.monotonic() + startup_s, False
    while proc.poll() is None and not out_path.exists():
        now = time.monotonic()
        if not timing and timing_path.exists():
            timing = True
            deadline = now + timeout_s if timeout_s is not None else float("inf")
        if now > deadline:
            if timing:
                return f"timed out after {timeout_s:g} s of {activity} (--timeout)"
            return (f"did not finish its start-up within {startup_s:g} s (--startup-timeout: imports, "
                    "set-up and the first call)")
        time.sleep(0.05)
    return None


def _worker(spec: dict[str, Any], timing_path: Path) -> dict[str, Any]:
    settings = RunSettings.from_json(spec["settings"])
    start_worker(settings)
    from harness.registry import load_operator
    from harness.sweep.in_process import measure_in_process

    op = load_operator(spec["op"])(settings.device, DTYPE_NAMES[settings.precision], settings.options)
    shape = tuple(spec["shape"])
    def progress(event: CellEvent) -> None:
        if event.phase != "build":
            timing_path.touch()

    sweep = Sweep(op, Mode(spec["mode"]), [shape], [spec["backend"]], spec["backend"], settings,
                  progress=progress)
    # One cell: its result comes first; a lost CUDA context after it ends only this worker.
    _, measurement, error = next(measure_in_process(sweep, shape, [spec["backend"]]))
    return measurement_to_json(measurement, error)


def main(argv: list[str]) -> int:
    spec_path, out_path, timing_path = Path(argv[0]), Path(argv[1]), Path(argv[2])
    result = _worker(json.loads(spec_path.read_text()), timing_path)
    tmp = out_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    tmp.replace(out_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
