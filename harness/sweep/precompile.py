"""Compile before timing (``run.py --precompile N``): call every cell of a run once, accuracy only, in
N worker processes at once, so that the compilers' on-disk caches (Triton's kernels and its
autotuning candidates, Helion's, Inductor's graphs and max-autotune choices) hold what the timed
run would otherwise compile one cell after another.  The timed run then compiles nothing new,
but still makes every choice itself (Triton's autotuner times its candidates again in the
run's process), so the numbers are those of a run without ``--precompile``.

The workers are those that continue a run after a lost CUDA context
(:mod:`harness.sweep.continuation`), each given every N-th shape; their records are not kept.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import tempfile
from pathlib import Path

from harness.sweep.continuation import ShapeWork, kill_worker, start_worker, worker_spec
from harness.sweep.spec import Sweep


def precompile(sweeps: list[Sweep], workers: int) -> int:
    """Call each cell of ``sweeps`` once in ``workers`` processes at once; return how many of
    them failed (what they did not compile, the timed run compiles itself)."""
    settings = dataclasses.replace(sweeps[0].settings, metrics=["accuracy"], repeats=1, isolate=False,
                                   profile_dir=None)
    checked = [dataclasses.replace(sweep, settings=settings) for sweep in sweeps]
    work = [ShapeWork(index, shape, list(sweep.backends))
            for index, sweep in enumerate(sweeps) for shape in sweep.shapes]
    shares = [work[start::workers] for start in range(min(workers, len(work)))]
    with tempfile.TemporaryDirectory(prefix="opbench-precompile-") as tmp:
        procs = []
        try:
            for number, share in enumerate(shares):
                spec_path = Path(tmp) / f"spec{number}.json"
                spec_path.write_text(json.dumps(worker_spec(checked, share)))
                procs.append(start_worker(spec_path, Path(tmp) / f"events{number}.jsonl", subprocess.DEVNULL))
            return sum(proc.wait() != 0 for proc in procs)
        except BaseException:
            for proc in procs:
                kill_worker(proc)
            raise
