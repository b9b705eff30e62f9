"""Which Helion kernel, config bucket and K split compute a matmul: the shape's regime
(:mod:`operators.gemm.strategy`) mapped to the Helion gemm kernels, one line of reason each.

The tiled kernel is :func:`operators.gemm.helion_impl.matmul_kernel` (one program per output
tile over the whole of K, the epilogue in the kernel); the split-K pair of
:mod:`operators.gemm.helion_splitk` computes fp32 parts of K side by side and adds them in a
second kernel.  A regime's route names the bucket size its configs are stored under, the
output tile its programs are counted in when K may be split, and whether its loads must be
pointer-indexed whatever config is stored.  Each route's predictions and their measurements on
the H200 are in ``results/h200/gemm/NOTES.md`` (issue 17).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from dataclasses import dataclass

import torch

from operators.gemm.strategy import (
    GPU_LIMITS,
    INTERPRETER_LIMITS,
    MIN_PART_STEPS,
    Limits,
    Regime,
    output_tiles,
    regime,
    settled_regime,
    sm_count,
    split_count,
    whole_k_fills_a_wave,
)


class Kernel(enum.Enum):
    """The Helion gemm kernels."""

    TILED = "tiled"
    """``matmul_kernel``: each output tile over the whole of K, the epilogue applied in the kernel."""
    SPLIT_K = "split_k"
    """``matmul_split_k_kernel``: fp32 parts of K into an ``(S, M, N)`` workspace, then
    ``split_k_reduce_kernel`` adds them in order and applies the epilogue once."""


@dataclass(frozen=True)
class Route:
    """How Helion runs a regime.

    ``size`` is the bucket size its configs are stored under (None: by the largest dim, as
    for the tiled kernel).  When ``tile`` is set, K may be split: the programs are counted
    in (rows, cols) output tiles, the tile of the regime's stored configs, and every part but the
    last is a whole number of ``part_step`` (the BLOCK_K of those configs), at least
    :data:`~operators.gemm.strategy.MIN_PART_STEPS` of them (rounding parts up to the step may
    leave fewer parts than :func:`~operators.gemm.strategy.split_count` asked for).  ``pointer``: every access
    pointer-indexed, whatever config is stored (for skinny tiles a speed choice: helion 1.5.0
    already indexes by pointer an access whose block exceeds the tensor; the split-K kernel's
    parts are pointer-indexed in every regime for correctness, :mod:`operators.gemm.helion_splitk`).
    """

    reason: str
    size: str | None = None
    tile: tuple[int, int] | None = None
    part_step: int = 0
    pointer: bool = False
    decode_size: str | None = None
    """The bucket of an unsplit, unswapped problem with fewer rows than the tile (decode, M < 16):
    its configs are tuned at M = 1, where the skinny bucket's are slower (gemm NOTES: the split-K
    and skinny slots tuned)."""
    whole_k_tile: int = 0
    """For the split-K regime: where output tiles of this side fill one wave
    (:func:`~operators.gemm.strategy.whole_k_fills_a_wave`), the tiled kernel runs over the whole of K
    instead; 0: never."""
    whole_k_size: str | None = None
    """The bucket of those whole-K problems' configs."""
    short_k_size: str | None = None
    """For the tiled regime: the bucket of a problem of K at most :data:`SHORT_K`, whose loads are
    pointer-indexed (an outer product of thin operands: its time is the output's write)."""


SHORT_K = 16
"""The longest K the tiled regime's ``short_k_size`` bucket serves: one k-block of 16, the
smallest a bf16 dot takes (the dX of 8192x8x8192, the dW of 1x4096x4096 and 16x4096x4096;
gemm NOTES: prediction 48)."""


ROUTES: dict[Regime, Route] = {
    Regime.TILED: Route(
        short_k_size="outer",
        reason="matmul_kernel on its small/medium/large bucket configs (gemm NOTES: second round, "
               "prediction 52); K of 16 or less on the outer bucket's, pointer loads (gemm NOTES: "
               "prediction 48)"),
    Regime.SPLIT_K: Route(
        size="large", tile=(128, 128), part_step=64, whole_k_tile=64, whole_k_size="wide",
        reason="128x128 tiles, K cut until the programs fill 90% of their waves (addmm's dW 1536x512, "
               "K=20120: 48 tiles x 5 parts of 4032 = 240 programs on 132 SMs); unless 64x64 tiles "
               "fill one wave unsplit, on the wide bucket (128x4096x4096; gemm NOTES: prediction 41)"),
    Regime.SKINNY: Route(
        size="skinny", tile=(16, 32), part_step=256, pointer=True, decode_size="decode",
        reason="16-row tiles on the skinny side (N the small side: out.T = y.T @ x.T), 32 columns a "
               "program (128 programs at N=4096), pointer loads; K split only when the programs "
               "leave SMs idle (1x1024x4096: 32 x 4 parts)"),
}
"""The Helion kernel of each regime on the H200, with its stored configs' tiles."""


def _interpreted(route: Route) -> Route:
    """``route`` off the GPU: tiles a quarter the side (16 at least) and parts in steps of 16,
    Helion's default BLOCK_K (the dtypes the interpreter runs have no stored configs); no whole-K
    tile (a quarter of 64 would take the interpreter's split-K test shapes off their path)."""
    if route.tile is None:
        return route
    return dataclasses.replace(route, tile=(max(16, route.tile[0] // 4), max(16, route.tile[1] // 4)),
                               part_step=16, whole_k_tile=0)


INTERPRETER_ROUTES = {name: _interpreted(route) for name, route in ROUTES.items()}



@dataclass(frozen=True)
class Plan:
    """How one matmul runs: its regime and kernel, the bucket size of its configs (None: by the
    largest dim), the number of K parts and the K of each (``k`` itself when not split), whether
    it computes ``out.T = y.T @ x.T`` (``swap``: N skinny) and whether its loads must be
    pointer-indexed."""

    regime: Regime
    kernel: Kernel
    size: str | None = None
    split_k: int = 1
    part_k: int = 0
    swap: bool = False
    pointer: bool = False


def _tiled(route: Route, k: int) -> Plan:
    """The tiled regime's plan for a problem of depth ``k`` on ``route``."""
    if route.short_k_size is not None and k <= SHORT_K:
        return Plan(Regime.TILED, Kernel.TILED, route.short_k_size, 1, k, False, True)
    return Plan(Regime.TILED, Kernel.TILED, route.size, 1, k, False, route.pointer)


def choose(m: int, n: int, k: int, *, sms: int, limits: Limits, routes: dict[Regime, Route]) -> Plan:
    """The plan of ``(m, k) @ (k, n)`` on ``sms`` SMs under ``limits`` and ``routes``."""
    name = regime(m, n, k, sms, limits)
    route = routes[name]
    swap = name is Regime.SKINNY and n < m
    rows, cols = (n, m) if swap else (m, n)
    parts = 1
    if route.tile is not None:
        tiles = output_tiles(rows, cols, *route.tile)
        parts = split_count(tiles, k, sms, MIN_PART_STEPS * route.part_step)
    if settled_regime(name, parts) is not name or name is Regime.TILED:
        return _tiled(routes[Regime.TILED], k)
    if parts > 1 and whole_k_fills_a_wave(m, n, route.whole_k_tile, sms):
        return Plan(Regime.TILED, Kernel.TILED, route.whole_k_size, 1, k)
    if parts == 1:
        decode = route.decode_size is not None and not swap and rows < route.tile[0]
        size = route.decode_size if decode else route.size
        return Plan(name, Kernel.TILED, size, 1, k, swap, route.pointer)
    part_k = -(-k // (parts * route.part_step)) * route.part_step
    return Plan(name, Kernel.SPLIT_K, route.size, -(-k // part_k), part_k, swap, route.pointer)


@functools.lru_cache(maxsize=4096)
def plan(m: int, n: int, k: int, device: torch.device) -> Plan:
    """The plan of ``(m, k) @ (k, n)`` on ``device``: the H200's routes on a GPU, the
    interpreter's off it (cached: runs every call)."""
    gpu = device.type == "cuda"
    return choose(m, n, k, sms=sm_count(device), limits=GPU_LIMITS if gpu else INTERPRETER_LIMITS,
                  routes=ROUTES if gpu else INTERPRETER_ROUTES)
