"""Tuning the gemm and addmm Helion kernels: candidate configs and example arguments per slot.

``run.py tune --op gemm`` (or ``addmm``) times each slot's candidates on the GPU and stores
the fastest correct one in :data:`operators.gemm.helion_impl.CONFIG_PATH`.  The slots are those
of the tiled kernel (``matmul``, ``addmm_2d``; ``addmm_1d`` runs matmul's) in the small, medium,
large, wide, outer, skinny and decode buckets, of the split-K pair (``matmul_split_k``,
``split_k_reduce``) in the large and skinny buckets, and of the row-bias gradient's pair
(``row_sum_parts``, ``row_sum_finish``) in the small and large ones.  Skinny and split-K
candidates keep their route's output tile (:data:`operators.gemm.helion_dispatch.ROUTES`, which
the K split is counted in), a BLOCK_K that divides the route's part step, and pointer indexing.
"""

from __future__ import annotations

import functools

import helion
import torch

from harness.tuning.configs import TuningJob, config_key
from operators.gemm.alignment import output_buffer
from operators.gemm.helion_dispatch import ROUTES, Plan, choose
from operators.gemm.helion_impl import CONFIG_PATH, EPILOGUES, POINTER_SIZES, matmul_kernel, scaled
from operators.gemm.helion_row_sum import row_sum_finish_kernel, row_sum_parts_kernel
from operators.gemm.helion_splitk import matmul_split_k_kernel, split_k_reduce_kernel
from operators.gemm.row_sum_plan import row_parts
from operators.gemm.strategy import GPU_LIMITS

__all__ = ["CONFIG_PATH", "ROW_SUM_KERNELS", "SLOTS", "SPLIT_K_KERNELS", "tuning_args", "tuning_candidates",
           "tuning_jobs"]

SPLIT_K_KERNELS = {"matmul_split_k": matmul_split_k_kernel, "split_k_reduce": split_k_reduce_kernel}
"""The split-K kernels by stored-config name (the tiled kernel's names are its epilogues')."""
ROW_SUM_KERNELS = {"row_sum_parts": row_sum_parts_kernel, "row_sum_finish": row_sum_finish_kernel}
"""The row-bias gradient's kernels by stored-config name."""
_KERNELS = {**SPLIT_K_KERNELS, **ROW_SUM_KERNELS}
"""The kernels named otherwise than by their epilogue (which run ``matmul_kernel``)."""
_ROW_SUM_SHAPES = {"small": (1024, 1024), "large": (20120, 512)}
"""(M, N) of the gradient each row-sum bucket is tuned on: 1024^3's, and addmm's reference shape's."""
_SHAPES = {"small": (1024, 1024, 1024), "medium": (2048, 2048, 2048), "large": (4096, 4096, 4096),
           "skinny": (16, 4096, 4096), "decode": (1, 4096, 4096), "wide": (128, 4096, 4096),
           "outer": (8192, 8192, 8)}
"""(M, N, K) each bucket size is tuned on, for the tiled kernel."""
_SPLIT_K_SHAPES = {"large|tn": (1536, 512, 20120), "large": (256, 1024, 8192), "skinny": (1, 1024, 4096)}
"""(M, N, K) the split-K kernels are tuned on: addmm's dW at its reference shape (``x.T @ grad``),
a short problem too narrow for 64x64 tiles to fill the GPU (forward and ``grad @ y.T``: 16 tiles x
8 parts), decode against a 1024-wide weight."""
TUNING_SMS = 132
"""The H200's SMs, which the candidates are chosen for: the split-K slots are tuned on its parts."""


def _candidate(blocks: list[int], warps: int, stages: int, indexing: str = "tensor_descriptor",
               pid_type: str = "flat", flatten: bool | None = None) -> helion.Config:
    """A config for the [tile_m, tile_n, tile_k] loop nest; ``flatten`` fuses a persistent
    tile loop with the k loop so the next tile's loads overlap this tile's epilogue."""
    return helion.Config(block_sizes=blocks, num_warps=warps, num_stages=stages,
                         l2_groupings=[8], indexing=indexing, pid_type=pid_type,
                         range_flattens=[flatten, None], range_unroll_factors=[0, 0],
                         range_num_stages=[0, 0])


def _reduce_candidate(rows: int, cols: int, warps: int) -> helion.Config:
    """A config of :func:`~operators.gemm.helion_splitk.split_k_reduce_kernel`'s one tile loop."""
    return helion.Config(block_sizes=[rows, cols], num_warps=warps, num_stages=1, l2_groupings=[1],
                         indexing="pointer", pid_type="flat", range_flattens=[None],
                         range_unroll_factors=[0], range_num_stages=[0])


_PERSISTENT = "persistent_interleaved"
_LARGE_CANDIDATES = [
    _candidate([128, 256, 64], warps=8, stages=3),
    _candidate([128, 256, 64], warps=8, stages=4),
    _candidate([128, 256, 64], warps=8, stages=3, pid_type=_PERSISTENT),
    _candidate([128, 256, 64], warps=8, stages=3, pid_type=_PERSISTENT, flatten=True),
    _candidate([128, 256, 64], warps=8, stages=3, pid_type="persistent_blocked"),
    _candidate([256, 128, 64], warps=8, stages=3),
    _candidate([256, 128, 64], warps=8, stages=4),
    _candidate([128, 128, 64], warps=8, stages=4),
    _candidate([128, 128, 64], warps=8, stages=5, pid_type=_PERSISTENT),
    _candidate([128, 128, 64], warps=4, stages=4),
    _candidate([64, 256, 64], warps=4, stages=4),
    _candidate([128, 256, 64], warps=8, stages=3, indexing="pointer"),
    _candidate([128, 128, 64], warps=8, stages=4, indexing="pointer"),
]
_LARGE_FULL_BIAS_EXTRA = [
    _candidate([128, 256, 64], warps=8, stages=2, pid_type=_PERSISTENT, flatten=True),
    _candidate([128, 128, 64], warps=8, stages=5, pid_type=_PERSISTENT, flatten=True),
]
"""``addmm_2d``'s flattened persistent candidates that fit an H200 block's shared memory with the
(M, N) bias tile (the 3-stage 128x256 one needs 278,568 bytes of 232,448; see
``results/h200/gemm/NOTES.md``), besides the large list, whose flattened ones do not."""
_SMALL_CANDIDATES = [
    _candidate([128, 128, 64], warps=8, stages=4),
    _candidate([128, 128, 64], warps=4, stages=4),
    _candidate([64, 128, 64], warps=4, stages=4),
    _candidate([128, 64, 64], warps=4, stages=4),
    _candidate([64, 64, 64], warps=4, stages=4),
    _candidate([64, 128, 64], warps=4, stages=4, pid_type=_PERSISTENT),
    _candidate([128, 128, 64], warps=8, stages=3, pid_type=_PERSISTENT, flatten=True),
    _candidate([64, 128, 64], warps=4, stages=4, indexing="pointer"),
    _candidate([64, 64, 32], warps=4, stages=4, indexing="pointer"),
    _candidate([64, 128, 128], warps=4, stages=4),
    _candidate([64, 32, 128], warps=4, stages=5),
    _candidate([64, 64, 128], warps=4, stages=5),
]
"""The last three: Inductor's picks at 1024^3 and 256^3 (gemm NOTES: prediction 41)."""
_WIDE_CANDIDATES = [
    _candidate([64, 64, 128], warps=4, stages=5),
    _candidate([64, 64, 128], warps=4, stages=4),
    _candidate([64, 64, 128], warps=4, stages=3),
    _candidate([64, 64, 64], warps=4, stages=5),
    _candidate([64, 64, 128], warps=4, stages=5, indexing="pointer"),
    _candidate([64, 64, 128], warps=4, stages=4, pid_type=_PERSISTENT),
]
"""64x64 tiles over the whole of K, as many as the SMs (Inductor's pick at 128x4096x4096: gemm
NOTES, prediction 41)."""
_OUTER_CANDIDATES = [
    _candidate([64, 128, 16], warps=4, stages=3, indexing="pointer"),
    _candidate([64, 128, 16], warps=4, stages=2, indexing="pointer"),
    _candidate([64, 64, 16], warps=4, stages=2, indexing="pointer"),
    _candidate([128, 128, 16], warps=4, stages=2, indexing="pointer"),
    _candidate([128, 128, 16], warps=8, stages=2, indexing="pointer"),
    _candidate([64, 256, 16], warps=4, stages=2, indexing="pointer"),
    _candidate([128, 256, 16], warps=8, stages=2, indexing="pointer"),
    _candidate([64, 128, 16], warps=4, stages=2, indexing="pointer", pid_type=_PERSISTENT),
]
"""One k-block of 16 over K of 16 or less, pointer loads: the output's write is the work
(Triton's pointer 64x128x16 leads at 8192x8192x8; gemm NOTES: prediction 41), and its
neighbours."""
_SKINNY_CANDIDATES = [
    _candidate([16, 32, 256], warps=4, stages=3, indexing="pointer"),
    _candidate([16, 32, 256], warps=4, stages=4, indexing="pointer"),
    _candidate([16, 32, 256], warps=8, stages=4, indexing="pointer"),
    _candidate([16, 32, 128], warps=4, stages=4, indexing="pointer"),
    _candidate([16, 32, 128], warps=4, stages=6, indexing="pointer"),
    _candidate([16, 32, 64], warps=4, stages=6, indexing="pointer"),
]
"""16x32 output tiles streaming the large operand: long k-blocks and deep pipelines keep 24-48 KiB
of loads in flight per program (Triton's skinny configs, ``triton_configs.SKINNY_CONFIGS``)."""
_SPLIT_K_CANDIDATES = [
    _candidate([128, 128, 64], warps=8, stages=4, indexing="pointer"),
    _candidate([128, 128, 64], warps=8, stages=3, indexing="pointer"),
    _candidate([128, 128, 64], warps=4, stages=3, indexing="pointer"),
    _candidate([128, 128, 64], warps=8, stages=5, indexing="pointer"),
    _candidate([128, 128, 32], warps=4, stages=5, indexing="pointer"),
]
"""128x128 tiles over parts of K in steps of 64 (the split-K route's part step)."""
_REDUCE_CANDIDATES = {
    "large": [_reduce_candidate(32, 128, 4), _reduce_candidate(64, 128, 4), _reduce_candidate(64, 64, 4),
              _reduce_candidate(128, 128, 8)],
    "skinny": [_reduce_candidate(16, 128, 4), _reduce_candidate(16, 256, 4), _reduce_candidate(32, 128, 4)],
}


def _row_sum_parts_candidate(rows: int, cols: int, warps: int, stages: int = 0) -> helion.Config:
    """A config of :func:`~operators.gemm.helion_row_sum.row_sum_parts_kernel`: ``rows`` x ``cols``
    tiles, the row loop pipelined ``stages`` deep (0: Triton's default)."""
    return helion.Config(block_sizes=[rows, cols], num_warps=warps, num_stages=1, l2_groupings=[1],
                         loop_orders=[[0, 1]], indexing="pointer", pid_type="flat",
                         range_flattens=[None, None], range_unroll_factors=[0, 0],
                         range_num_stages=[0, stages])


def _row_sum_finish_candidate(rows: int, cols: int, warps: int) -> helion.Config:
    """A config of :func:`~operators.gemm.helion_row_sum.row_sum_finish_kernel`: ``cols`` columns a
    program, the parts added ``rows`` at a time."""
    return helion.Config(block_sizes=[rows, cols], num_warps=warps, num_stages=1,
                         indexing="pointer", pid_type="flat", range_flattens=[None, None],
                         range_unroll_factors=[0, 0], range_num_stages=[0, 0])


_ROW_SUM_CANDIDATES = {
    "row_sum_parts": [_row_sum_parts_candidate(32, 128, 4), _row_sum_parts_candidate(16, 128, 4),
                      _row_sum_parts_candidate(32, 256, 8), _row_sum_parts_candidate(32, 128, 4, stages=3),
                      _row_sum_parts_candidate(32, 64, 4), _row_sum_parts_candidate(16, 256, 4)],
    "row_sum_finish": [_row_sum_finish_candidate(32, 128, 4), _row_sum_finish_candidate(16, 128, 4),
                       _row_sum_finish_candidate(32, 64, 4), _row_sum_finish_candidate(64, 128, 8)],
}
"""Tiles of 128 bf16 columns (256 contiguous bytes a row), as Triton's row sum at the tuning
shapes' N (512 and 1024), and their neighbours; the parts' row blocks divide
:data:`~operators.gemm.row_sum_plan.ROW_STEP`, so no part ends in a half-masked block.  The same
in both buckets."""


def tuning_candidates(kernel_name: str, bucket: str) -> list[helion.Config]:
    """Plausible H200 configs for ``kernel_name`` (a key of :data:`EPILOGUES`,
    :data:`SPLIT_K_KERNELS` or :data:`ROW_SUM_KERNELS`) in ``bucket``."""
    assert kernel_name in EPILOGUES or kernel_name in _KERNELS, f"unknown kernel {kernel_name}"
    if kernel_name in ROW_SUM_KERNELS:
        return list(_ROW_SUM_CANDIDATES[kernel_name])
    size = bucket.split("|")[0]
    if kernel_name == "split_k_reduce":
        return list(_REDUCE_CANDIDATES[size])
    if size == "outer":
        return list(_OUTER_CANDIDATES)
    if size in POINTER_SIZES:
        return list(_SKINNY_CANDIDATES)
    if kernel_name == "matmul_split_k":
        return list(_SPLIT_K_CANDIDATES)
    if size == "small":
        return list(_SMALL_CANDIDATES)
    if size == "wide":
        return list(_WIDE_CANDIDATES)
    large = _LARGE_CANDIDATES + (_LARGE_FULL_BIAS_EXTRA if kernel_name == "addmm_2d" else [])
    if size == "medium":
        return large + [config for config in _SMALL_CANDIDATES if config not in large]
    return large


def _operand(rows: int, cols: int, transposed: bool, dtype: torch.dtype,
             device: torch.device | str) -> torch.Tensor:
    """A (rows, cols) random operand, column-major (a transposed view) when ``transposed``."""
    if transposed:
        return torch.randn(cols, rows, dtype=dtype, device=device).T
    return torch.randn(rows, cols, dtype=dtype, device=device)


def _shape(kernel_name: str, bucket: str) -> tuple[int, int, int]:
    """The (M, N, K) a slot is tuned on."""
    if kernel_name not in SPLIT_K_KERNELS:
        return _SHAPES[bucket.split("|")[0]]
    return _SPLIT_K_SHAPES.get(bucket, _SPLIT_K_SHAPES[bucket.split("|")[0]])


def tuning_args(kernel_name: str, bucket: str, dtype: torch.dtype,
                device: torch.device | str) -> tuple:
    """Example arguments of ``kernel_name`` for ``bucket`` (e.g. ``large|nt``: 4096^3, y = b.T).

    The split-K kernels get as many parts as :func:`~operators.gemm.helion_dispatch.choose`
    cuts the slot's shape into on the H200 (:data:`TUNING_SMS`), on any device."""
    if kernel_name in ROW_SUM_KERNELS:
        return _row_sum_args(kernel_name, bucket, dtype, device)
    size, _, layout = bucket.partition("|")
    m, n, k = _shape(kernel_name, bucket)
    if kernel_name == "split_k_reduce":
        parts = torch.randn((_split_plan(m, n, k).split_k, m, n), dtype=torch.float32, device=device)
        return parts, 1.0, 0.0, None, output_buffer(m, n, dtype, device), scaled
    x = _operand(m, k, layout[0] == "t", dtype, device)
    y = _operand(k, n, layout[1] == "t", dtype, device)
    if kernel_name == "matmul_split_k":
        plan = _split_plan(m, n, k)
        return x, y, torch.empty((plan.split_k, m, n), dtype=torch.float32, device=device), plan.part_k
    out = output_buffer(m, n, dtype, device)
    bias = None
    if kernel_name != "matmul":
        bias_shape = (n,) if kernel_name == "addmm_1d" else (m, n)
        bias = torch.randn(bias_shape, dtype=dtype, device=device)
    return x, y, 1.0, 1.0, bias, out, EPILOGUES[kernel_name]


def _row_sum_args(kernel_name: str, bucket: str, dtype: torch.dtype, device: torch.device | str) -> tuple:
    """Example arguments of a row-sum kernel: the gradient of :data:`_ROW_SUM_SHAPES` in as many
    parts as the H200 (:data:`TUNING_SMS`) cuts it into."""
    m, n = _ROW_SUM_SHAPES[bucket]
    rows, count = row_parts(m, n, TUNING_SMS)
    parts = torch.randn((count, n), dtype=torch.float32, device=device)
    if kernel_name == "row_sum_parts":
        return torch.randn(m, n, dtype=dtype, device=device), parts, rows, 1.0
    return parts, 1.0, torch.empty(n, dtype=dtype, device=device)


def _split_plan(m: int, n: int, k: int) -> Plan:
    return choose(m, n, k, sms=TUNING_SMS, limits=GPU_LIMITS, routes=ROUTES)


SLOTS = [
    *(("matmul", f"{size}|{layout}") for size in ("small", "medium", "large")
      for layout in ("nn", "nt", "tn")),
    *(("addmm_2d", f"{size}|nn") for size in ("small", "medium", "large")),
    *(("matmul", f"skinny|{layout}") for layout in ("nn", "nt", "tn", "tt")),
    *(("matmul", f"decode|{layout}") for layout in ("nn", "nt")),
    *(("matmul", f"wide|{layout}") for layout in ("nn", "nt")),
    ("addmm_2d", "wide|nn"),
    *(("matmul", f"outer|{layout}") for layout in ("nt", "tn")),
    *(("matmul_split_k", f"large|{layout}") for layout in ("nn", "nt", "tn")),
    *(("matmul_split_k", f"skinny|{layout}") for layout in ("nn", "nt")),
    ("split_k_reduce", "large"),
    ("split_k_reduce", "skinny"),
    *((name, size) for name in ROW_SUM_KERNELS for size in ("small", "large")),
]
"""Every stored-config slot of the gemm and addmm kernels, (kernel name, bucket).

Per size bucket: ``matmul`` in the forward layout (``nn``) and the two backward layouts
(``nt``, ``tn``; addmm's backward runs ``matmul`` too), and ``addmm_2d`` forward (``addmm_1d``
has no slot: it runs matmul's config of its bucket,
:func:`~operators.gemm.helion_impl.config_keys`; where matmul has none of the call's bucket, a
stored ``addmm_1d`` config of any bucket would come before matmul's nearest,
:mod:`harness.tuning.choice`); skinny
``matmul`` in the four layouts of an M-skinny problem (``nn``, ``nt``) and of an N-skinny one
computed transposed (``tt`` forward, ``tn`` for ``x.T @ grad``), and decode ``matmul`` (M below
the skinny tile's 16 rows) in the two M-skinny layouts, which the addmm kernels share; wide
``matmul`` (an output of one wave of 64x64 tiles) forward and in ``grad @ y.T``, and
``addmm_2d`` forward there; outer ``matmul`` (K of 16 or less) in ``grad @ y.T`` (the dX of
8192x8x8192) and ``x.T @ grad`` (the dW of 1x4096x4096 and 16x4096x4096), the sweep having
no such forward; the split-K parts in the layouts of addmm's dW
(``tn``) and of short problems too narrow for 64x64 tiles to fill the GPU (``nn``, ``nt``; e.g.
256x1024x8192), and in those of decode against too few columns (e.g. 1x1024x4096), neither in
the sweep; the row-bias gradient's pair at a square and at addmm's reference gradient."""


def tuning_jobs(dtype: torch.dtype, device: str) -> list[TuningJob]:
    """The jobs of :data:`SLOTS` for ``dtype``, with their candidates; arguments are made only
    when a job is tuned."""
    return [
        TuningJob(
            kernel=_KERNELS.get(name, matmul_kernel),
            key=config_key(name, dtype, bucket_name),
            make_args=functools.partial(tuning_args, name, bucket_name, dtype, device),
            candidates=tuning_candidates(name, bucket_name),
        )
        for name, bucket_name in SLOTS
    ]
