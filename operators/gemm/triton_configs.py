"""The Triton gemm kernels' autotuning configs, pruned to what fits in the GPU's shared memory.

``triton.autotune`` times the configs per shape, layout and bias kind on the first call; under
Triton's CPU interpreter (no timers) one small config runs instead.  Which list a kernel gets is
fixed when it is decorated, as Triton fixes interpretation itself then (:data:`INTERPRETED`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import triton

from harness.device import triton_interpreted

INTERPRETED = triton_interpreted()
NO_BIAS, ROW_BIAS, FULL_BIAS = 0, 1, 2
_SMEM_SLACK = 2048


def set_block_shapes(nargs: dict) -> None:
    """Config pre-hook: give the host-side TMA descriptors the block shapes of this config."""
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [bk, bm] if nargs["A_TRANS"] else [bm, bk]
    nargs["b_desc"].block_shape = [bn, bk] if nargs["B_TRANS"] else [bk, bn]
    nargs["c_desc"].block_shape = [bm, bn // 2 if nargs["EPILOGUE_SUBTILE"] else bn]


def tma_config(bm: int, bn: int, bk: int, stages: int, warps: int, group: int = 8,
               persistent: bool = True, subtile: bool = False) -> triton.Config:
    """A config of the tiled TMA kernel: a BLOCK_M x BLOCK_N output tile over k-blocks of BLOCK_K."""
    meta = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group,
            "PERSISTENT": persistent, "EPILOGUE_SUBTILE": subtile}
    return triton.Config(meta, num_warps=warps, num_stages=stages, pre_hook=set_block_shapes)


def pointer_config(bm: int, bn: int, bk: int, stages: int, warps: int,
                   group: int = 8) -> triton.Config:
    """A config of the tiled pointer kernel (the TMA kernel's tiles, one program per tile)."""
    meta = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group}
    return triton.Config(meta, num_warps=warps, num_stages=stages)


TMA_CONFIGS = [
    tma_config(128, 256, 64, stages=3, warps=8),
    tma_config(128, 256, 64, stages=3, warps=8, subtile=True),
    tma_config(128, 256, 64, stages=4, warps=8, subtile=True),
    tma_config(256, 128, 64, stages=3, warps=8),
    tma_config(128, 128, 64, stages=4, warps=8),
    tma_config(128, 128, 64, stages=5, warps=8, subtile=True),
    tma_config(64, 256, 64, stages=4, warps=4),
    tma_config(128, 64, 64, stages=4, warps=4),
    tma_config(128, 256, 64, stages=4, warps=8, persistent=False),
    tma_config(256, 128, 64, stages=4, warps=8, persistent=False),
    tma_config(128, 128, 64, stages=5, warps=8, persistent=False),
    tma_config(128, 128, 32, stages=3, warps=8),
    tma_config(64, 128, 32, stages=4, warps=4),
    tma_config(64, 128, 128, stages=4, warps=4, persistent=False),
    tma_config(64, 64, 128, stages=5, warps=4, persistent=False),
    tma_config(64, 32, 128, stages=5, warps=4, persistent=False),
    tma_config(64, 64, 64, stages=4, warps=4, persistent=False),
]
"""64x128x128, 64x64x128 and 64x32x128, Inductor's picks at 1024^3, 128x4096x4096 and 256^3, lead
there (gemm NOTES: prediction 41); 64x64x64, a 64x64 tile that fits fp32's shared memory too
(the split-K route's whole-K tile)."""
POINTER_CONFIGS = [
    pointer_config(128, 256, 64, stages=3, warps=8),
    pointer_config(128, 128, 64, stages=4, warps=8),
    pointer_config(128, 128, 32, stages=4, warps=4),
    pointer_config(64, 128, 32, stages=4, warps=4),
    pointer_config(64, 64, 32, stages=4, warps=4),
    pointer_config(64, 128, 16, stages=3, warps=4),
    pointer_config(64, 128, 16, stages=1, warps=4),
]
"""The last two for K of 16 or less (the decode and 8192x8x8192 backward; gemm NOTES: prediction
41); unpipelined, the one-step loop loads straight to registers as Inductor's template does
(gemm NOTES: prediction 57)."""


def set_split_k_block_shape(nargs: dict) -> None:
    """Split-K config pre-hook: give B's host-side TMA descriptor, when there is one, this config's box."""
    if nargs["b_desc"] is not None:
        bk, bn = nargs["BLOCK_K"], nargs["BLOCK_N"]
        nargs["b_desc"].block_shape = [bn, bk] if nargs["B_TRANS"] else [bk, bn]


def split_k_config(bk: int, stages: int, warps: int, group: int = 8,
                    tma: bool = False) -> triton.Config:
    """A config of the split-K kernel, whose output tile (BLOCK_M, BLOCK_N) the dispatch sets;
    ``tma``: B's tiles arrive by TMA (where B allows: :func:`prune_split_k`), A's by pointer."""
    return triton.Config({"BLOCK_K": bk, "GROUP_M": group, "TMA_LOADS": tma}, num_warps=warps,
                         num_stages=stages, pre_hook=set_split_k_block_shape)


SPLIT_K_CONFIGS = (
    split_k_config(32, stages=4, warps=4),
    split_k_config(32, stages=5, warps=4),
    split_k_config(64, stages=5, warps=4),
    split_k_config(64, stages=3, warps=4),
    split_k_config(64, stages=5, warps=4, tma=True),
    split_k_config(64, stages=4, warps=8, tma=True),
)
"""For 128x128 output tiles over K parts of 256 and more; BLOCK_K 32 leads (gemm NOTES: probe
split_k_configs); the TMA configs are timed beside them (gemm NOTES: prediction 40)."""
SKINNY_CONFIGS = (
    split_k_config(128, stages=4, warps=4),
    split_k_config(256, stages=3, warps=4),
    split_k_config(256, stages=4, warps=8),
    split_k_config(64, stages=6, warps=4),
    split_k_config(64, stages=8, warps=4),
    split_k_config(128, stages=3, warps=4),
    split_k_config(64, stages=8, warps=4, tma=True),
    split_k_config(128, stages=4, warps=4, tma=True),
    split_k_config(256, stages=3, warps=4, tma=True),
)
"""For (16..64) x (32..64) output tiles streaming B: long k-blocks and deep pipelines keep an SM's
share of HBM's bandwidth x latency in flight (BK64/s8 and BK128/s3 lead: gemm NOTES, probe
skinny_plans); the TMA configs are timed beside them (gemm NOTES: prediction 40)."""
INTERPRETER_SPLIT_K_CONFIGS = (split_k_config(16, stages=2, warps=4, group=2),)
INTERPRETER_SPLIT_K_TMA_CONFIG = split_k_config(16, stages=2, warps=4, group=2, tma=True)
"""The interpreter's TMA variant, for tests that run it as a given config."""
INTERPRETER_TMA_CONFIGS = [tma_config(32, 32, 16, stages=2, warps=4, group=2, subtile=True)]
INTERPRETER_POINTER_CONFIGS = [pointer_config(32, 32, 16, stages=2, warps=4, group=2)]


def gemv_config(bn: int, bk: int, warps: int, stages: int = 1) -> triton.Config:
    """A config of the matrix-vector kernel: BLOCK_N columns a program, k-blocks of BLOCK_K."""
    return triton.Config({"BLOCK_N": bn, "BLOCK_K": bk}, num_warps=warps, num_stages=stages)


GEMV_CONFIGS = [
    gemv_config(4, 1024, 4),
    gemv_config(8, 512, 4),
    gemv_config(8, 1024, 8),
    gemv_config(16, 256, 4),
    gemv_config(16, 512, 8),
    gemv_config(32, 256, 8),
    gemv_config(8, 512, 4, stages=3),
    gemv_config(16, 256, 4, stages=3),
]
"""32 fp32 partial sums a thread in each; 128 to 1024 programs at N = 4096, 512 B to 2 KiB
contiguous of each of B's rows a step in 16-bit types (gemm NOTES: prediction 56)."""
INTERPRETER_GEMV_CONFIGS = [gemv_config(16, 16, 4)]
"""The interpreter's one matrix-vector config."""
ACTIVE_GEMV_CONFIGS = INTERPRETER_GEMV_CONFIGS if INTERPRETED else GEMV_CONFIGS
GEMV_TUNING_KEY = ["N", "K", "BIAS_KIND"]
"""What the matrix-vector kernel's pick depends on (B is always read along K; nothing is pruned)."""


ACTIVE_TMA_CONFIGS = INTERPRETER_TMA_CONFIGS if INTERPRETED else TMA_CONFIGS


def boxes_fit(config: triton.Config, m: int, n: int, k: int) -> bool:
    """Whether no block of a TMA ``config`` exceeds its dim of an (M, N, K) problem: a TMA box
    may not exceed the tensor (pytorch/helion#2555: larger boxes fault at run time)."""
    kw = config.kwargs
    return kw["BLOCK_M"] <= m and kw["BLOCK_N"] <= n and kw["BLOCK_K"] <= k


@functools.cache
def shared_memory_bytes(device_index: int) -> int:
    props = triton.runtime.driver.active.utils.get_device_properties(device_index)
    return props["max_shared_mem"] - _SMEM_SLACK


def config_smem(config: triton.Config, elem_bytes: int, tma_store: bool, converted_bias: bool) -> int:
    """Estimated shared memory of a config: the pipelined operand tiles, plus the epilogue's
    TMA output tile and the scratch that converts a loaded (M, N) bias tile to the accumulator
    layout (``converted_bias``: any full bias but a column-major one, which needs about 4 KiB
    there; ``tests/operators/sm90/tma_configs_fit_sm90.py``).  A one-tile program reuses the
    operand buffers for its epilogue; a persistent one keeps them filling with the next tile's
    operands meanwhile."""
    kw = config.kwargs
    operands = (kw["BLOCK_M"] + kw["BLOCK_N"]) * kw["BLOCK_K"] * elem_bytes * config.num_stages
    subtile = kw.get("EPILOGUE_SUBTILE", False)
    out_tile = kw["BLOCK_M"] * kw["BLOCK_N"] * elem_bytes // (2 if subtile else 1)
    epilogue = (out_tile if tma_store else 0) + (out_tile // 2 if converted_bias else 0)
    return operands + epilogue if kw.get("PERSISTENT", False) else max(operands, epilogue)


def _fitting(configs: list[triton.Config], operand: torch.Tensor,
             smem: Callable[[triton.Config], int]) -> list[triton.Config]:
    """The configs whose ``smem`` fits on ``operand``'s GPU, or the smallest one if none does."""
    budget = shared_memory_bytes(operand.device.index or 0)
    return [c for c in configs if smem(c) <= budget] or [min(configs, key=smem)]


def converts_bias_tile(bias_kind: int, bias_stride_m: int) -> bool:
    """Whether the epilogue converts a loaded bias tile through shared memory (:func:`config_smem`):
    a full bias, unless column-major (rows ``bias_stride_m`` = 1 apart)."""
    return bias_kind == FULL_BIAS and bias_stride_m != 1


def prune_by_smem(configs: list[triton.Config], operand: torch.Tensor, tma_store: bool,
                   bias_kind: int, bias_stride_m: int = 0) -> list[triton.Config]:
    """The configs that fit for a bias of ``bias_kind`` whose rows are ``bias_stride_m`` apart."""
    converted_bias = converts_bias_tile(bias_kind, bias_stride_m)

    def smem(config: triton.Config) -> int:
        return config_smem(config, operand.element_size(), tma_store, converted_bias)

    return _fitting(configs, operand, smem)


def prune_tma(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
    """The TMA configs whose boxes fit the problem (the dispatch runs it only where one does) and
    whose shared memory fits the GPU."""
    args = {**named_args, **kwargs}
    boxed = [c for c in configs if boxes_fit(c, args["M"], args["N"], args["K"])]
    return prune_by_smem(boxed, args["a_desc"].base, True, args["BIAS_KIND"], args["stride_bias_m"])


def prune_pointer(configs: list[triton.Config], named_args: dict,
                   **kwargs) -> list[triton.Config]:
    args = {**named_args, **kwargs}
    return prune_by_smem(configs, args["a_ptr"], False, args["BIAS_KIND"], args["stride_bias_m"])


def prune_split_k(configs: list[triton.Config], named_args: dict,
                  **kwargs) -> list[triton.Config]:
    """Split-K configs whose pipelined operand tiles fit (the launch sets BLOCK_M and BLOCK_N);
    one tile a program, so its epilogue reuses the operands' shared memory (as in :func:`config_smem`).
    TMA configs only where the launch passes B's descriptor (``B_TMA``)."""
    args = {**named_args, **kwargs}
    operand, rows = args["a_ptr"], args["BLOCK_M"] + args["BLOCK_N"]

    def smem(config: triton.Config) -> int:
        return rows * config.kwargs["BLOCK_K"] * operand.element_size() * config.num_stages

    loadable = [c for c in configs if args["B_TMA"] or not c.kwargs["TMA_LOADS"]]
    return _fitting(loadable, operand, smem)


TUNING_KEY = ["M", "N", "K", "A_TRANS", "B_TRANS", "BIAS_KIND", "stride_bias_m", "DOT_PRECISION"]
"""What a tiled kernel's pick depends on; ``stride_bias_m`` too, as pruning does (:func:`prune_by_smem`)."""
SPLIT_K_TUNING_KEY = [*TUNING_KEY, "SPLIT_K", "BLOCK_M", "BLOCK_N", "B_TMA"]
