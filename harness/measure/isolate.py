"""Run one benchmark cell in its own subprocess (``run.py --isolate``).

A segfault, a CUDA illegal memory access (which poisons the CUDA context for good), an
out-of-memory or a hang in one backend then costs only that cell: the parent records the
cause as the cell's error and the sweep goes on.  The worker rebuilds the operator from a
JSON spec (the run's settings and the cell), draws the same seeded inputs, computes its own
reference and measures the one backend.

Worker entry point: ``python -m harness.measure.isolate SPEC.json OUT.json``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness.measure.accuracy import AccuracyResult
from harness.measure.measurement import Measurement
from harness.measure.sweep import Sweep
from harness.measure.timing import SampleStats
from harness.operator import DTYPE_NAMES, Mode, Shape
from harness.settings import RunSettings

_ROOT = Path(__file__).resolve().parents[2]


def _measurement_to_json(m: Measurement, error: str | None) -> dict[str, Any]:
    accuracy = m.accuracy
    return {
        "repeats": [[s.p20, s.p50, s.p80, s.n] for s in m.repeats],
        "accuracy": None if accuracy is None else [
            accuracy.passed, accuracy.max_abs_err, accuracy.max_rel_err, accuracy.reason,
        ],
        "first_call_ms": m.first_call_ms,
        "peak_mem_bytes": m.peak_mem_bytes,
        "error": error,
    }


def _measurement_from_json(data: dict[str, Any]) -> tuple[Measurement, str | None]:
    accuracy = data["accuracy"]
    m = Measurement(
        repeats=[SampleStats(*r) for r in data["repeats"]],
        accuracy=None if accuracy is None else AccuracyResult(*accuracy),
        first_call_ms=data["first_call_ms"],
        peak_mem_bytes=data["peak_mem_bytes"],
    )
    return m, data["error"]


def _died(returncode: int, stderr: str) -> str:
    if returncode < 0:
        return f"worker process killed by {signal.Signals(-returncode).name}"
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    last = lines[-1][:200] if lines else "no output"
    return f"worker process exited with code {returncode}: {last}"


def _kill_session(proc: subprocess.Popen) -> None:
    """Kill the worker and every process it started, and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


def measure_isolated(sweep: Sweep, shape: Shape, backend: str) -> tuple[Measurement, str | None]:
    """Measure one backend on one shape in a subprocess; its death becomes the cell's error."""
    spec = {
        "settings": sweep.settings.to_json(),
        "op": sweep.op.name, "mode": sweep.mode.value, "shape": list(shape), "backend": backend,
    }
    timeout = sweep.settings.timeout_s
    with tempfile.TemporaryDirectory(prefix="opbench-cell-") as tmp:
        spec_path, out_path = Path(tmp) / "spec.json", Path(tmp) / "out.json"
        spec_path.write_text(json.dumps(spec))
        # Its own session, so a timeout kills compile workers it started too; the suite's root
        # on its path, so it imports the harness from any working directory.
        path = os.pathsep.join(filter(None, [str(_ROOT), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": path}
        proc = subprocess.Popen(
            [sys.executable, "-m", "harness.measure.isolate", str(spec_path), str(out_path)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, env=env,
        )
        try:
            _, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_session(proc)
            return Measurement(), f"timed out after {timeout:g} s (--timeout)"
        except BaseException:
            # Ctrl-C reaches only this process (the worker has its own session): end the worker too.
            _kill_session(proc)
            raise
        if out_path.exists():
            return _measurement_from_json(json.loads(out_path.read_text()))
        return Measurement(), _died(proc.returncode, stderr)


def _worker(spec: dict[str, Any]) -> dict[str, Any]:
    settings = RunSettings.from_json(spec["settings"])
    from harness.device import prepare_backends

    prepare_backends(settings.device)
    from harness.measure.in_process import measure_in_process
    from harness.plugins import load_plugins
    from harness.registry import load_operator

    load_plugins(settings.plugins)
    op = load_operator(spec["op"])(settings.device, DTYPE_NAMES[settings.precision], settings.options)
    shape = tuple(spec["shape"])
    sweep = Sweep(op, Mode(spec["mode"]), [shape], [spec["backend"]], spec["backend"], settings)
    ((_, measurement, error),) = measure_in_process(sweep, shape, [spec["backend"]])
    return _measurement_to_json(measurement, error)


def main(argv: list[str]) -> int:
    spec_path, out_path = Path(argv[0]), Path(argv[1])
    result = _worker(json.loads(spec_path.read_text()))
    tmp = out_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    tmp.replace(out_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
