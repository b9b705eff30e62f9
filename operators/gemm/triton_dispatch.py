"""Which Triton kernel, tile and K split compute a matmul: the shape's regime
(:mod:`operators.gemm.strategy`) mapped to the Triton gemm kernels, one line of reason each.

The tiled kernels live in :mod:`operators.gemm.triton_impl` (one program per output tile over
the whole of K); the split-K kernel of :mod:`operators.gemm.triton_splitk` serves both the
split-K and the skinny regimes, with a tile and configs of its own for each, except a skinny
problem of one row (or column) whose operand is read along K, which the matrix-vector kernel of
:mod:`operators.gemm.triton_gemv` computes.  Each route's
predictions and their measurements on the H200 are in ``results/h200/gemm/NOTES.md`` (issue 17).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from dataclasses import dataclass

import torch
import triton

from operators.gemm.strategy import (
    GPU_LIMITS,
    INTERPRETER_LIMITS,
    MAX_SPLIT,
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
from operators.gemm.triton_configs import (
    ACTIVE_TMA_CONFIGS,
    INTERPRETED,
    INTERPRETER_SPLIT_K_CONFIGS,
    SKINNY_CONFIGS,
    SPLIT_K_CONFIGS,
    boxes_fit,
)


class Kernel(enum.Enum):
    """The Triton gemm kernels."""

    TMA = "tma"
    """``_matmul_tma_kernel``: tiles over the whole of K, operands and output through TMA."""
    POINTER = "pointer"
    """``_matmul_pointer_kernel``: the same with masked pointer loads and stores."""
    SPLIT_K = "split_k"
    """``_matmul_split_k_kernel``: a tile over one of ``split_k`` parts of K; with more than one
    part, ``_split_k_reduce_kernel`` adds them and applies the epilogue."""
    GEMV = "gemv"
    """``_gemv_kernel``: one output row of dot products on the CUDA cores, no tensor-core tile."""


@dataclass(frozen=True)
class Route:
    """How Triton runs a regime: its ``kernel`` and, for the split-K kernel, the output tile
    (BLOCK_M is the skinny side rounded up to a power of two within ``block_m``), the configs
    the autotuner times and ``part_step``, the K unit of a part (a part is at least
    ``MIN_PART_STEPS`` of them: see :func:`split_count`)."""

    kernel: Kernel
    reason: str
    block_m: tuple[int, int] = (0, 0)
    block_n: int = 0
    configs: tuple[triton.Config, ...] = ()
    part_step: int = 0
    swapped_block_n: int = 0
    """For a problem computed transposed (N skinny), its BLOCK_N; 0: ``block_n`` as any other."""
    swapped_part_k: int = 0
    """For a problem computed transposed, the part length K is also cut into (:func:`streaming_parts`)."""
    swapped_reason: str = ""
    row_dot_reason: str = ""
    """Why a one-row (or one-column) problem whose long operand is contiguous along K runs the
    matrix-vector kernel (:attr:`Kernel.GEMV`)."""
    row_dot_cols: int = 0
    """The matrix-vector kernel runs only where the output's length over this many columns (a
    representative block of its configs) gives every SM a program, as it does not split K; 0:
    it never runs."""
    whole_k_tile: int = 0
    """For the split-K regime: the side of a square tile the tiled kernels' lists hold in every
    dtype; where tiles of it fill one wave (:func:`~operators.gemm.strategy.whole_k_fills_a_wave`), the
    tiled kernel runs over the whole of K instead; 0: never."""


ROUTES: dict[Regime, Route] = {
    Regime.TILED: Route(
        Kernel.TMA,
        reason="persistent TMA kernel (gemm NOTES: second round); pointer loads for exact fp32 "
               "(FMA dots), a dim below a tile or a GPU before Hopper (uses_tma)"),
    Regime.SPLIT_K: Route(
        Kernel.SPLIT_K, block_m=(128, 128), block_n=128, configs=SPLIT_K_CONFIGS, part_step=64,
        whole_k_tile=64,
        reason="128x128 tiles, K cut until the programs fill 90% of their waves: addmm's dW "
               "1536x512, K=20120: 48 tiles x 5 parts = 240 programs on 132 SMs; unless 64x64 "
               "tiles fill one wave unsplit (128x4096x4096: 128 tiles; gemm NOTES: prediction 41)"),
    Regime.SKINNY: Route(
        Kernel.SPLIT_K, block_m=(16, 64), block_n=32, configs=SKINNY_CONFIGS, part_step=64,
        reason="BLOCK_M covers M (16-64) so B is read once; 32 columns a program (128 programs at "
               "N=4096), K split only when they leave SMs idle",
        swapped_block_n=64, swapped_part_k=2048,
        swapped_reason="N the small side: out.T = b.T @ a.T streams a.T along K; 64 columns over "
                       "parts of 2048 keep more of it in flight than 32 over all of K (gemm NOTES: "
                       "probe skinny_plans)",
        row_dot_reason="M (or N) of 1 over a weight read along K (grad @ w.T at decode): each output "
                       "a dot of two contiguous rows, no 16-row tile to pad (gemm NOTES: prediction 56)",
        row_dot_cols=16),
}
"""The Triton kernel of each regime, with the H200's tiles and configs."""

STREAMING_WAVES = 4
"""The most waves of programs :func:`streaming_parts` cuts K for (8192x8x8192: 512 programs)."""


def streaming_parts(tiles: int, k: int, sms: int, part_k: int) -> int:
    """K parts of ``part_k`` for ``tiles`` output tiles that stream their operand along K, as
    long as the programs stay within :data:`STREAMING_WAVES` waves (at most :data:`MAX_SPLIT`)."""
    return max(1, min(MAX_SPLIT, k // part_k, STREAMING_WAVES * sms // max(tiles, 1)))


def _interpreted(route: Route) -> Route:
    """``route`` for the CPU interpreter: tiles a quarter the side (16 at least), one config,
    parts in steps of its BLOCK_K, transposed problems' parts of 96 (6 k-blocks: the shared
    test cases' K of 300 in 3 parts, of 7, 7 and 5 k-blocks, as the wave-fill rule cuts it);
    no whole-K tile (the interpreter's one tiled config is the split-K tile's size);
    matrix-vector programs counted in 4 columns (3 SMs: 9 columns and more, so that test rows
    of a dozen columns reach the route)."""
    if route.kernel is not Kernel.SPLIT_K:
        return route
    step = INTERPRETER_SPLIT_K_CONFIGS[0].kwargs["BLOCK_K"]
    swapped = route.swapped_block_n > 0
    return dataclasses.replace(route, block_m=tuple(max(16, b // 4) for b in route.block_m),
                               block_n=max(16, route.block_n // 4), configs=INTERPRETER_SPLIT_K_CONFIGS,
                               part_step=step,
                               swapped_block_n=max(16, route.swapped_block_n // 4) if swapped else 0,
                               swapped_part_k=6 * step if swapped else 0, whole_k_tile=0,
                               row_dot_cols=4 if route.row_dot_cols else 0)


ACTIVE_ROUTES = {name: _interpreted(route) for name, route in ROUTES.items()} if INTERPRETED else ROUTES
ACTIVE_LIMITS = INTERPRETER_LIMITS if INTERPRETED else GPU_LIMITS


def uses_tma(mnk: tuple[int, int, int], precision: str, device: torch.device) -> bool:
    """Whether the TMA kernel serves an (M, N, K) problem: tensor-core dots on Hopper (or the
    interpreter), and a config whose every block fits its dim (:func:`boxes_fit`; the autotuner
    times those alone).  Misaligned operands do not matter: they are copied to aligned buffers
    first.

    Exact fp32 (``ieee``) dots run on the FMA units, where the TMA kernel's transposed tiles
    spill registers; they take the pointer kernel.
    """
    if precision == "ieee" or not any(boxes_fit(c, *mnk) for c in ACTIVE_TMA_CONFIGS):
        return False
    return INTERPRETED or torch.cuda.get_device_capability(device)[0] >= 9


@dataclass(frozen=True)
class Plan:
    """How one matmul runs: its regime and kernel and, for the split-K kernel, the output tile,
    the number of K parts and whether it computes ``out.T = b.T @ a.T`` (``swap``: N skinny)."""

    regime: Regime
    kernel: Kernel
    block_m: int = 0
    block_n: int = 0
    split_k: int = 1
    swap: bool = False


def choose(m: int, n: int, k: int, *, sms: int, tma: bool, row_dot: bool = False,
           limits: Limits = ACTIVE_LIMITS, routes: dict[Regime, Route] = ACTIVE_ROUTES) -> Plan:
    """The plan of ``(m, k) @ (k, n)`` on ``sms`` SMs; ``tma``: whether the TMA kernel could serve
    it; ``row_dot``: whether the operand the single output row (column) is taken across, B at
    M = 1 (A at N = 1), is contiguous along K (the matrix-vector kernel then runs where the row
    is long enough: :attr:`Route.row_dot_cols`)."""
    name = regime(m, n, k, sms, limits)
    route = routes[name]
    if route.kernel is not Kernel.SPLIT_K:
        return Plan(name, Kernel.TMA if tma else Kernel.POINTER)
    row_dot_programs = triton.cdiv(max(m, n), route.row_dot_cols) if route.row_dot_cols else 0
    if row_dot and min(m, n) == 1 and row_dot_programs >= sms:
        return Plan(name, Kernel.GEMV, swap=m != 1)
    tiled = Plan(Regime.TILED, Kernel.TMA if tma else Kernel.POINTER)
    swap = name is Regime.SKINNY and n < m
    rows, cols = (n, m) if swap else (m, n)
    low, high = route.block_m
    block_m = min(max(triton.next_power_of_2(rows), low), high)
    transposed = swap and route.swapped_block_n > 0
    block_n = route.swapped_block_n if transposed else route.block_n
    tiles = output_tiles(rows, cols, block_m, block_n)
    split = split_count(tiles, k, sms, MIN_PART_STEPS * route.part_step)
    if transposed:
        split = max(split, streaming_parts(tiles, k, sms, route.swapped_part_k))
    whole_k = split > 1 and whole_k_fills_a_wave(m, n, route.whole_k_tile, sms)
    if whole_k or settled_regime(name, split) is not name:
        return tiled
    return Plan(name, Kernel.SPLIT_K, block_m, block_n, split, swap)


@functools.lru_cache(maxsize=4096)
def plan(m: int, n: int, k: int, precision: str, device: torch.device, row_dot: bool = False) -> Plan:
    """The plan of ``(m, k) @ (k, n)`` with dots of ``precision`` on ``device`` (cached: runs every
    call); ``row_dot`` as :func:`choose` takes it (:func:`reads_rows_along_k`)."""
    return choose(m, n, k, sms=sm_count(device), tma=uses_tma((m, n, k), precision, device),
                  row_dot=row_dot)


def reads_rows_along_k(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a @ b`` with one output row reads B along K (B.T row-major), or with one output
    column (and more rows) reads A along K: :func:`choose`'s ``row_dot``."""
    if a.shape[0] == 1:
        return b.stride(0) == 1
    return b.shape[1] == 1 and a.stride(1) == 1
