"""Dealing a run's work into disjoint shards of similar cost: for ``--shard K/N`` and torchrun ranks.

The unit dealt is one shape of one sweep with all its backends, so a shape's speedups divide
by a baseline measured on the same GPU.  Shapes grow along a sweep, so contiguous blocks would
give the last shard the largest shapes: units are dealt largest first, each to the shard with
the least estimated cost so far (longest-processing-time first), and every shard runs its units
in the run's own order.  The estimate is what the timer spends on a cell (its budgets each
repeat, or its fewest samples of a long call: :func:`~harness.timing.sample_counts`, a
call's time taken from the modelled bytes and flops at about an H200's rates) plus a fixed cost
per backend for its set-up; the rule is deterministic, so every rank deals alike.
"""

from __future__ import annotations

import dataclasses
import heapq
from dataclasses import dataclass

from harness.operator import Shape
from harness.sweep.spec import Sweep
from harness.timing import ESTIMATE_SAMPLES, sample_counts

SETUP_S = 2.0
"""Estimated seconds a backend's cell costs beyond its timed work (compilation, checks)."""
NOMINAL_GBPS, NOMINAL_TFLOPS = 3000.0, 600.0
"""Rates that turn modelled bytes and flops into a call's time (about an H200's)."""
SAMPLE_OVERHEAD_S = 5e-4
"""What a sample costs besides its call (synchronize, flush, spin: 0.5-0.7 ms on the H200)."""


@dataclass(frozen=True, order=True)
class Unit:
    """One shape of one sweep: ``run.py``'s sweeps in order, and the shape's index in its sweep."""

    sweep: int
    shape: int


class ShardError(ValueError):
    """A ``--shard`` value that is not ``K/N`` with 1 <= K <= N."""


def parse_shard(text: str) -> tuple[int, int]:
    """``K/N`` as ``(K, N)``."""
    try:
        part, parts = (int(v) for v in text.split("/"))
    except ValueError:
        part = parts = 0
    if not 1 <= part <= parts:
        raise ShardError(f"--shard {text!r}: expected K/N with 1 <= K <= N, e.g. 2/8")
    return part, parts


def estimated_cost(sweep: Sweep, shape: Shape) -> float:
    """Seconds a unit is expected to take, up to a common factor."""
    op, mode = sweep.op, sweep.mode
    call_s = ((op.bytes_moved(shape, mode) or 0) / (NOMINAL_GBPS * 1e9)
              + (op.flops(shape, mode) or 0) / (NOMINAL_TFLOPS * 1e12))
    sample_s = call_s + SAMPLE_OVERHEAD_S
    warmup, count = sample_counts(sample_s * 1e3, sweep.settings.timer)
    repeat_s = (ESTIMATE_SAMPLES + warmup + count) * sample_s
    return len(sweep.backends) * (SETUP_S + sweep.settings.repeats * repeat_s)


def deal(sweeps: list[Sweep], parts: int) -> list[list[Unit]]:
    """Every unit of ``sweeps`` in one of ``parts`` shards, each shard's units in run order."""
    units = [(estimated_cost(sweep, shape), Unit(i, j))
             for i, sweep in enumerate(sweeps) for j, shape in enumerate(sweep.shapes)]
    shards: list[list[Unit]] = [[] for _ in range(parts)]
    loads = [(0.0, k) for k in range(parts)]
    for cost, unit in sorted(units, key=lambda item: (-item[0], item[1])):
        load, k = heapq.heappop(loads)
        shards[k].append(unit)
        heapq.heappush(loads, (load + cost, k))
    return [sorted(shard) for shard in shards]


def restrict(sweeps: list[Sweep], units: list[Unit]) -> list[Sweep]:
    """The sweeps cut down to ``units`` (sweeps left without a shape are dropped)."""
    chosen: dict[int, list[int]] = {}
    for unit in units:
        chosen.setdefault(unit.sweep, []).append(unit.shape)
    return [dataclasses.replace(sweep, shapes=[sweep.shapes[j] for j in sorted(chosen[index])])
            for index, sweep in enumerate(sweeps) if index in chosen]
