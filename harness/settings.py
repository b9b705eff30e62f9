"""The one settings object of a run: made by the command line, carried to the header, the
isolated worker and the timer.

Everything here is a plain value, so the settings round-trip through JSON (the ``--isolate``
worker rebuilds them from its spec) and are written into the result file's header, where
``run.py compare`` reads back the timer and operator options a run used.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

CUDA_WARMUP_MS, CUDA_REP_MS = 25.0, 100.0
CPU_WARMUP_MS, CPU_REP_MS = 5.0, 50.0
TUNE_WARMUP_MS, TUNE_REP_MS = 10.0, 50.0
"""The budgets ``run.py tune`` times each candidate config with (``--rep`` overrides the second)."""
FLUSHES = ("clean", "dirty")
"""How the timer flushes L2 before each sample: a read pass (leaves it clean) or a write."""
DEFAULT_FLUSH = FLUSHES[0]


@dataclass(frozen=True)
class TimerSettings:
    """How cells are timed: warm-up and measurement budgets in ms (wall time a repeat on CUDA,
    :func:`harness.timing.sample_counts`), CUDA-graph replay."""

    warmup_ms: float
    rep_ms: float
    cudagraph: bool = False
    flush: str = DEFAULT_FLUSH
    """How L2 is flushed before each CUDA sample: ``clean`` (a read pass) or ``dirty`` (a write)."""

    @classmethod
    def default(cls, device: str, warmup_ms: float | None = None, rep_ms: float | None = None,
                cudagraph: bool = False, flush: str = DEFAULT_FLUSH) -> TimerSettings:
        """The device's default budgets, with any of them overridden."""
        cuda = device == "cuda"
        return cls(
            warmup_ms=(CUDA_WARMUP_MS if cuda else CPU_WARMUP_MS) if warmup_ms is None else warmup_ms,
            rep_ms=(CUDA_REP_MS if cuda else CPU_REP_MS) if rep_ms is None else rep_ms,
            cudagraph=cudagraph, flush=flush,
        )


STARTUP_TIMEOUT_S = 600.0
"""What an ``--isolate`` worker's start-up, or a silent ``--parallel-compile`` worker, may take by default."""

GATHER_TIMEOUT_S = 1800.0
"""How long rank 0 of a torchrun run waits by default for a rank that stopped reporting."""


@dataclass(frozen=True)
class RunSettings:
    """What the command line decided for every sweep of a run."""

    device: str
    precision: str
    metrics: list[str]
    timer: TimerSettings
    repeats: int = 1
    seed: int = 0
    rtol: float | None = None
    atol: float | None = None
    isolate: bool = False
    timeout_s: float | None = None
    startup_timeout_s: float = STARTUP_TIMEOUT_S
    plugins: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    profile_dir: str | None = None
    """Where each cell's profiler trace goes (``--profile DIR``), or None."""
    precompiling: bool = False
    """A ``--parallel-compile`` worker's run: the compilers keep on disk what they compile, never what
    they choose (:func:`harness.device.keep_no_compiler_choices`)."""

    def to_json(self) -> dict[str, Any]:
        """The settings as plain JSON values."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunSettings:
        """Settings written by :meth:`to_json`."""
        return cls(**{**data, "timer": TimerSettings(**data["timer"])})

    def header_fields(self) -> dict[str, Any]:
        """What the result file's header records of these settings."""
        return {
            "precision": self.precision,
            "repeats": self.repeats,
            "options": self.options,
            "timer": dataclasses.asdict(self.timer),
            "tolerance": {"rtol": self.rtol, "atol": self.atol},
            "isolate": self.isolate,
            "seed": self.seed,
        }
