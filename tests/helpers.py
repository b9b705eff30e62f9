"""Shared test helpers: run one sweep cell in-process, run ``run.py`` as a user would."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from harness.operator import BenchmarkOperator, Mode, Shape
from harness.report.results import Record, read_json
from harness.settings import RunSettings, TimerSettings
from harness.sweep.runner import run_shape
from harness.sweep.spec import Sweep
from harness.tuning.configs import ConfigStore, load_store

ROOT = Path(__file__).resolve().parent.parent
BUILTIN_OPERATORS = sorted(path.parent.name for path in (ROOT / "operators").glob("*/operator.py"))
"""The operators' folder names: a new operator's folder adds it to every test that lists them."""


def store_copy(impl: ModuleType, path: Path, without: Collection[str],
               half_as_fp16: bool = False) -> ConfigStore:
    """``impl.CONFIG_STORE`` moved to a copy of its committed configs, written to ``path``, that
    lacks the keys ``without``; with ``half_as_fp16`` bf16's configs are keyed as fp16 first (the
    half dtype the interpreter runs)."""
    committed = load_store(impl.CONFIG_PATH)
    if half_as_fp16:
        committed = {key.replace("|bfloat16|", "|float16|"): config for key, config in committed.items()}
    assert set(without) <= set(committed)
    path.write_text(json.dumps({"configs": {k: v for k, v in committed.items() if k not in without}}))
    return dataclasses.replace(impl.CONFIG_STORE, path=path)


def assert_only_helion_noted(cells: dict[tuple[str, str], Record], note: str) -> None:
    """Helion's accuracy and latency records carry ``note``; eager's latency record none."""
    for metric in ("accuracy", "latency"):
        assert cells[("helion", metric)].note == note
    assert cells[("eager", "latency")].note is None


def cpu_settings(metrics: list[str], **overrides: Any) -> RunSettings:
    """Settings of a quick CPU run (no warm-up, 1 ms of samples); ``overrides`` replace fields."""
    return RunSettings(device="cpu", precision="fp32", metrics=metrics,
                       timer=TimerSettings(warmup_ms=0.0, rep_ms=1.0), **overrides)


def run_cells(op: BenchmarkOperator, mode: Mode, shape: Shape, metrics: list[str],
              backends: list[str] | None = None, progress: Callable[[str], None] = lambda _: None,
              **overrides: Any) -> dict[tuple[str, str], Record]:
    """Records of one shape, keyed by (backend, metric); ``overrides`` go to the RunSettings."""
    names = backends or [b.name for b in op.backends()]
    sweep = Sweep(op, mode, [shape], names, op.baseline().name, cpu_settings(metrics, **overrides),
                  progress=progress)
    return {(r.backend, r.metric): r for r in run_shape(sweep, shape)}


def run_compiling(script: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """``python SCRIPT`` with Triton's interpreter off, so that it can compile kernels (for a GPU
    target it names) although this session interprets them."""
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "HELION_AUTOTUNE_EFFORT")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), env.get("PYTHONPATH"))))
    return subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                          timeout=timeout)


def run_cli(*args: str, timeout: float = 600,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python run.py ARGS`` from the repository root (in environment ``env`` when given)."""
    return subprocess.run(
        [sys.executable, "run.py", *args], cwd=ROOT, capture_output=True, text=True,
        timeout=timeout, env=env,
    )


def assert_accurate(cells: dict[tuple[str, str], Record], backends: list[str]) -> None:
    """Every backend's accuracy record is a pass."""
    for backend in backends:
        accuracy = cells[(backend, "accuracy")]
        assert accuracy.status == "ok", accuracy.error
        assert accuracy.value == 1.0, accuracy.note


def assert_interpreted_backends_skipped(op: BenchmarkOperator, shape: Shape,
                                        backends: list[str] | None = None) -> None:
    """On the CPU in bf16, triton and helion are skipped with a reason naming the interpreter; eager runs."""
    cells = run_cells(op, Mode.FWD, shape, ["accuracy"], backends)
    for backend in ("triton", "helion"):
        assert cells[(backend, "accuracy")].status == "skipped"
        assert "interpreter" in cells[(backend, "accuracy")].error
    assert cells[("eager", "accuracy")].value == 1.0


@contextlib.contextmanager
def tf32_allowed() -> Iterator[None]:
    """fp32 matmuls may use TF32, as on a GPU after ``torch.set_float32_matmul_precision("high")``."""
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)


def cli_accuracy(out: Path, *args: str) -> dict[str, float | None]:
    """Run ``run.py ARGS --output-json OUT`` (exit 0 expected); each backend's accuracy."""
    result = run_cli(*args, "--metrics", "accuracy,latency", "--rep", "1", "--warmup", "0",
                     "--output-json", str(out))
    assert result.returncode == 0, result.stderr
    _, records = read_json(out)
    return {r.backend: r.value for r in records if r.metric == "accuracy"}


def sample_exp_records() -> list[Record]:
    """A small exp fwd result: eager and triton at two shapes (latency with spread, speedup), and
    one failed eager cell at a third."""
    rows = []
    for x, (base, fast) in {1024: (2.0, 1.0), 4096: (8.0, 2.0)}.items():
        for backend, latency in (("eager", base), ("triton", fast)):
            rows.append(Record("exp", "fwd", "float32", x, backend, "latency", latency, "ms",
                               p20=latency * 0.99, p50=latency, p80=latency * 1.01, n_samples=50,
                               extra={"spread": 0.01}))
            rows.append(Record("exp", "fwd", "float32", x, backend, "speedup", base / latency, "x"))
    rows.append(Record("exp", "fwd", "float32", 8192, "eager", "latency", None, "ms",
                       status="error", error="RuntimeError: out of memory"))
    return rows


BF16_CPU_COLUMNS = ["eager-latency", "triton-latency", "helion-latency", "torch_compile-latency"]
"""The columns a bf16 CPU run of exp prints: the operator's backends, baseline first."""


def bf16_cpu_exp_records() -> list[Record]:
    """An exp fwd bf16 run on the CPU as its file holds it: the skipped Triton and Helion cells of
    each shape after the measured ones (eager, torch_compile)."""
    rows = []
    for x in (1000, 2000):
        for backend, latency in (("eager", 0.01), ("torch_compile", 0.02)):
            rows.append(Record("exp", "fwd", "bfloat16", x, backend, "latency", latency, "ms", p50=latency))
        for backend in ("triton", "helion"):
            rows.append(Record("exp", "fwd", "bfloat16", x, backend, "latency", None, "ms", status="skipped",
                               error=f"{backend}: bf16 is broken in Triton's CPU interpreter"))
    return rows


class CountedLaunches:
    """A Triton kernel (plain or autotuned) whose launches through ``kernel[grid]`` are counted."""

    def __init__(self, kernel: Any):
        self.kernel, self.launches = kernel, 0
        self.fn = getattr(kernel, "fn", None)

    def __getitem__(self, grid: Any) -> Any:
        self.launches += 1
        return self.kernel[grid]
