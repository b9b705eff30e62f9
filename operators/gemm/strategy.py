"""Which regime a matmul ``(M, K) @ (K, N)`` is in, and how many parts its K is cut into: one
table and one split rule, for the Triton and Helion backends.

A regime names a kind of problem by its output's shape, its K and the GPU's SM count.  Each
backend maps a regime to its own kernels: :data:`operators.gemm.triton_dispatch.ROUTES` for
Triton, :data:`operators.gemm.helion_dispatch.ROUTES` for Helion.  Where a backend splits K, it
counts its programs in its own output tiles and cuts K by :func:`split_count`.  The thresholds'
predictions, with the cells they should move, and their measurements on the H200 are in
``results/h200/gemm/NOTES.md`` (issue 17).
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch


class Regime(enum.Enum):
    """How the output's tiles and the K loop are spread over the SMs."""

    TILED = "tiled"
    """One program per output tile, each over the whole of K: enough tiles to keep every SM busy."""
    SPLIT_K = "split_k"
    """Fewer output tiles than SMs and a long K: K is cut into parts computed side by side, then added."""
    SKINNY = "skinny"
    """An output side of at most :attr:`Limits.skinny` (decode, M = 1..64, or as few columns):
    the time goes into reading the large operand, which a tall tile would mostly pad."""


@dataclass(frozen=True)
class Limits:
    """The thresholds of :data:`RULES`."""

    tile: int
    """Side of the square output tile that tiles are counted in (the tiled kernel's 128x128 class)."""
    skinny: int
    """The largest M (or N) that counts as skinny."""
    min_split_k: int
    """The shortest K worth splitting."""


GPU_LIMITS = Limits(tile=128, skinny=64, min_split_k=2048)
INTERPRETER_LIMITS = Limits(tile=32, skinny=8, min_split_k=128)
"""Scaled down for Triton's CPU interpreter, so that test shapes of a few dozen rows reach every
regime while the existing small test shapes (20x12x9, 37x45x29, ...) stay tiled."""


@dataclass(frozen=True)
class Problem:
    """``(m, k) @ (k, n)`` on a GPU with ``sms`` SMs."""

    m: int
    n: int
    k: int
    sms: int

    def tiles(self, side: int) -> int:
        """Output tiles of ``side`` x ``side``."""
        return output_tiles(self.m, self.n, side, side)


@dataclass(frozen=True)
class Rule:
    """Problems for which ``applies(problem, limits)`` take ``regime``."""

    regime: Regime
    applies: Callable[[Problem, Limits], bool]
    reason: str


RULES: tuple[Rule, ...] = (
    Rule(Regime.SKINNY, lambda p, lim: min(p.m, p.n) <= lim.skinny,
         reason="a 128-row tile would be mostly padding and reading B dominates (gemm NOTES: "
                "issue 17, what the regimes gave)"),
    Rule(Regime.SPLIT_K, lambda p, lim: p.tiles(lim.tile) < p.sms and p.k >= lim.min_split_k,
         reason="a partial wave idles SMs for the whole K loop (addmm's dW 1536x512, K=20120: 48 "
                "tiles for 132 SMs); K from 2048 (32 k-steps of 64), so that a part's saving "
                "outweighs the reduction pass (gemm NOTES: issue 17, what the regimes gave)"),
    Rule(Regime.TILED, lambda p, lim: True,
         reason="enough tiles, or too short a K to split: one program per output tile over all of K"),
)
"""The regime of a problem: the first rule that applies (the last applies to all)."""


def regime(m: int, n: int, k: int, sms: int, limits: Limits) -> Regime:
    """The regime of ``(m, k) @ (k, n)`` on a GPU of ``sms`` SMs under ``limits``."""
    problem = Problem(m, n, k, sms)
    return next(rule.regime for rule in RULES if rule.applies(problem, limits))


def output_tiles(rows: int, cols: int, tile_rows: int, tile_cols: int) -> int:
    """How many ``tile_rows`` x ``tile_cols`` tiles cover a ``rows`` x ``cols`` output."""
    return -(-rows // tile_rows) * -(-cols // tile_cols)


MIN_PART_STEPS = 4
"""A K part shorter than this many k-blocks spends more on its pipeline's prologue than it computes."""
INTERPRETER_SMS = 3
"""The SM count off the GPU, where Triton's interpreter runs programs one after another: small, so
that persistent grids loop over several tiles and a few tiles already count as a partial wave."""
MAX_SPLIT = 16
WAVE_FILL = 0.9


@functools.cache
def _device_sms(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def sm_count(device: torch.device) -> int:
    """The SMs of a CUDA ``device`` (its properties), or :data:`INTERPRETER_SMS` for the CPU."""
    return _device_sms(device.index or 0) if device.type == "cuda" else INTERPRETER_SMS


def wave_fill(programs: int, sms: int) -> float:
    """The busy fraction of the waves that ``programs`` programs, one an SM at a time, take."""
    return programs / (-(-programs // sms) * sms)


def whole_k_fills_a_wave(m: int, n: int, side: int, sms: int) -> bool:
    """Whether an (M, N) output's ``side`` x ``side`` tiles, one program each over the whole of K,
    fit in one wave of ``sms`` SMs and keep :data:`WAVE_FILL` of them busy (``side`` 0: never)."""
    tiles = output_tiles(m, n, side, side) if side > 0 else 0
    return WAVE_FILL * sms <= tiles <= sms


def settled_regime(regime: Regime, parts: int) -> Regime:
    """The regime a problem runs in once its backend has counted its K ``parts``: a split-K
    problem left with one part (its tiles fill their waves unsplit, or K is too short to cut
    into parts of the backend's least length) runs tiled."""
    return Regime.TILED if regime is Regime.SPLIT_K and parts == 1 else regime


def split_count(tiles: int, k: int, sms: int, min_part_k: int) -> int:
    """How many parts of K each of ``tiles`` output tiles is cut into: 1 when the tiles fill a
    wave; else the fewest parts whose programs fill :data:`WAVE_FILL` of their waves (failing
    that, the count that fills most), at most :data:`MAX_SPLIT` and ``k // min_part_k``."""
    if tiles == 0 or tiles >= sms:  # no output, or a full wave
        return 1
    counts = range(1, max(1, min(MAX_SPLIT, k // min_part_k)) + 1)
    enough = (s for s in counts if wave_fill(tiles * s, sms) >= WAVE_FILL)
    return next(enough, max(counts, key=lambda s: wave_fill(tiles * s, sms)))
