"""Time each of a kernel's curated Helion configs and keep the fastest one that computes right.

Every candidate config is compiled, its outputs checked against those of Helion's default
config, and timed with the benchmark timer (median, L2 flushed).  No search-based autotuning
runs: the candidates are a short list chosen for the GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch

from harness.metrics.cell_data import SampleStats
from harness.tuning.configs import TuningJob


class CandidateTimer(Protocol):
    """What times the candidates: any timer of :mod:`harness.timing` (``run.py tune`` makes
    one).  Named by its method, not imported: the operators import tuning, and measuring imports
    reporting, which loads the operators."""

    def measure(self, fn: Callable[[], object]) -> SampleStats: ...


def _outputs(result: object) -> list[torch.Tensor]:
    """The tensors a kernel call returned, in order."""
    items = result if isinstance(result, (tuple, list)) else (result,)
    return [item for item in items if isinstance(item, torch.Tensor)]


def _disagreement(got: list[torch.Tensor], want: list[torch.Tensor]) -> str | None:
    """Why a candidate's outputs differ from the default config's, or None if they agree.

    Outputs whose shape depends on the config (per-program partial rows) are not compared.
    The error is the largest difference over the reference's largest magnitude: rounding
    order moves it by ~1e-3 in 16-bit types, a wrong kernel by ~1.
    """
    for index, (a, b) in enumerate(zip(got, want, strict=True)):
        if a.shape != b.shape:
            continue
        a64, b64 = a.double(), b.double()
        error = ((a64 - b64).abs().max() / b64.abs().max().clamp_min(1e-30)).item()
        tolerance = 1e-3 if a.dtype in (torch.float32, torch.float64) else 2e-2
        if not error <= tolerance:
            return f"output {index} differs from the default config's by {error:.2g} (limit {tolerance:g})"
    return None


def tune_job(job: TuningJob, timer: CandidateTimer) -> tuple[dict | None, list[str]]:
    """The fastest candidate whose outputs match Helion's default config's, and the log lines."""
    args = job.make_args()
    bound = job.kernel.bind(args)
    log = []
    try:
        bound.set_config(bound.config_spec.default_config())
        returned = _outputs(bound(*args))
        reference = [tensor.clone() for tensor in returned]
    except Exception as exc:  # then candidates are timed unchecked, and the log says so
        returned, reference = [], None
        log.append(f"  default config failed ({type(exc).__name__}): candidates are not checked")
    # Outputs written into argument buffers are poisoned before each candidate, so a
    # candidate that leaves part of one unwritten cannot pass on the default config's values.
    written_in_place = [t for t in returned if t.is_floating_point() and any(t is a for a in args)]
    best: tuple[float, dict] | None = None
    for config in job.candidates:
        try:
            bound.set_config(config)
            for tensor in written_in_place:
                tensor.fill_(float("nan"))
            why = None if reference is None else _disagreement(_outputs(bound(*args)), reference)
            if why is None:
                ms = timer.measure(lambda: bound(*args)).p50
        except Exception as exc:  # a candidate that fails is skipped
            why = f"failed ({type(exc).__name__}: {str(exc)[:120]})"
        if why is not None:
            log.append(f"  {config}: {why}")
            continue
        log.append(f"  {ms * 1e3:9.1f} us  {config}")
        if best is None or ms < best[0]:
            best = (ms, dict(config.config))
    return (best[1] if best else None), log
