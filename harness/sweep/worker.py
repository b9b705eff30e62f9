"""What every sweep worker subprocess shares (:mod:`harness.sweep.isolate`'s one cell,
:mod:`harness.sweep.continuation`'s rest of a run): its environment, its start-up, and its end.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

from harness.settings import RunSettings

ROOT = Path(__file__).resolve().parents[2]


def worker_env() -> dict[str, str]:
    """The parent's environment with the suite's root on ``PYTHONPATH``, so that a worker imports
    the harness from any working directory."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


def start_worker(settings: RunSettings) -> None:
    """Ready a worker to build operators as the parent does: the backends' compilers prepared (and,
    in a ``--parallel-compile`` worker, told to keep no choices), ``LOCAL_RANK``'s GPU made current
    under torchrun, and the run's plugins loaded."""
    from harness.device import keep_no_compiler_choices, prepare_backends
    from harness.sweep.ranks import select_gpu

    prepare_backends(settings.device)
    if settings.precompiling:
        keep_no_compiler_choices()
    select_gpu(settings.device)
    from harness.plugins import load_plugins

    load_plugins(settings.plugins)


def kill_worker(proc: subprocess.Popen) -> None:
    """Kill a worker started in its own session, and every process it started, and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
