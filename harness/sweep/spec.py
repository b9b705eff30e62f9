"""What one sweep runs: an operator in one mode, its shapes and backends, under the run's settings."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.measure.ceilings import DeviceCeilings
from harness.metrics.table import METRICS, Need, needed
from harness.operator import BenchmarkOperator, Mode, Shape
from harness.settings import RunSettings, TimerSettings
from harness.timing import TIMER_KINDS, Timer, make_timer


@dataclass(frozen=True)
class CellEvent:
    """What the sweep is doing: a cell of ``op`` in ``mode`` at ``shape`` for ``backend`` is in
    ``phase`` (``build``, ``repeat 2/7``, ``isolated``, ``done``)."""

    op: str
    mode: str
    shape: Shape
    backend: str
    phase: str


@dataclass
class Sweep:
    """One operator in one mode: the shapes, the backends (speedup baseline first) and the settings."""

    op: BenchmarkOperator
    mode: Mode
    shapes: list[Shape]
    backends: list[str]
    speedup_baseline: str
    settings: RunSettings
    ceilings: DeviceCeilings = field(default_factory=lambda: DeviceCeilings(None, None, None))
    progress: Callable[[CellEvent], None] = field(default=lambda _: None)

    def report(self, shape: Shape, backend: str, phase: str) -> None:
        """Tell :attr:`progress` that ``backend``'s cell at ``shape`` entered ``phase``."""
        self.progress(CellEvent(self.op.name, self.mode.value, shape, backend, phase))

    def cell_name(self, shape: Shape, backend: str) -> str:
        """A cell's name in file and folder names, safe in them: ``<op>_<mode>_<shape>_<backend>``
        (``rms_norm_bwd_4096x8192_triton``)."""
        label = "x".join(map(str, shape))
        return re.sub(r"[^\w.+-]", "_", f"{self.op.name}_{self.mode.value}_{label}_{backend}")

    def tolerance(self, shape: Shape) -> Callable[[str], tuple[float, float]]:
        """The operator's (rtol, atol) of each compared tensor of ``shape``, with the command line's
        overrides."""
        settings = self.settings

        def of(tensor: str) -> tuple[float, float]:
            rtol, atol = self.op.tolerance(shape, tensor)
            return (settings.rtol if settings.rtol is not None else rtol,
                    settings.atol if settings.atol is not None else atol)

        return of

    @property
    def timers(self) -> set[str]:
        """The timers the metrics asked for need: ``device``, ``wall`` (:attr:`Metric.timer
        <harness.metrics.table.Metric.timer>`)."""
        return {timer for name in self.settings.metrics if (timer := METRICS[name].timer) is not None}

    @property
    def timed(self) -> bool:
        """Whether any metric asked for needs the cells timed (else only their checks run)."""
        return bool(self.timers)

    @property
    def needs(self) -> set[Need]:
        """What the metrics asked for need measured besides their timers (:attr:`Metric.needs
        <harness.metrics.table.Metric.needs>`)."""
        return needed(self.settings.metrics)

    @property
    def profiled(self) -> bool:
        """Whether cells are profiled: for their traces (``--profile DIR``) or for a metric."""
        return self.settings.profile_dir is not None or "profile" in self.needs

    def timers_in_order(self) -> dict[str, Timer]:
        """The timers the metrics need, by kind, in :data:`~harness.timing.TIMER_KINDS` order
        (one per process, kind and timer settings, so the L2 flush buffer is shared)."""
        return {kind: _timer(self.settings.device, self.settings.timer, kind)
                for kind in TIMER_KINDS if kind in self.timers}


@functools.cache
def _timer(device: str, settings: TimerSettings, kind: str) -> Timer:
    return make_timer(device, settings, kind)


def run_plan(sweeps: list[Sweep], metrics: list[str]) -> dict[str, Any]:
    """What a run set out to measure, before any ``--shard`` took its share: the metrics and, per
    sweep, its operator, mode, shapes, backends and speedup baseline (recorded in the header, so
    that only parts of one plan merge)."""
    return {"metrics": list(metrics),
            "sweeps": [{"op": s.op.name, "mode": s.mode.value, "shapes": [list(shape) for shape in s.shapes],
                        "backends": list(s.backends), "baseline": s.speedup_baseline} for s in sweeps]}
