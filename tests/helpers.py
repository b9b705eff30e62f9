"""Shared test helpers: run one sweep cell in-process, run ``run.py`` as a user would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch

from harness.operator import BenchmarkOperator, Mode, Shape
from harness.results import Record
from harness.runner import SweepSettings, run_shape
from harness.timing import CpuTimer

ROOT = Path(__file__).resolve().parent.parent


def run_cells(op: BenchmarkOperator, mode: Mode, shape: Shape, metrics: list[str],
              backends: list[str] | None = None) -> dict[tuple[str, str], Record]:
    """Records of one shape, keyed by (backend, metric)."""
    names = backends or [b.name for b in op.backends()]
    settings = SweepSettings(
        metrics=metrics, backends=names, speedup_baseline=op.baseline().name,
        shapes=[shape], timer=CpuTimer(warmup_ms=0.0, rep_ms=1.0),
    )
    return {(r.backend, r.metric): r for r in run_shape(op, mode, shape, settings)}


def run_cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """``python run.py ARGS`` from the repository root."""
    return subprocess.run(
        [sys.executable, "run.py", *args], cwd=ROOT, capture_output=True, text=True,
        timeout=timeout,
    )


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
