"""Tuning the gemm and addmm Helion kernel: candidate configs and example arguments per slot.

``run.py tune --op gemm`` (or ``addmm``) times each slot's candidates on the GPU and stores
the fastest correct one in :data:`operators.gemm.helion_impl.CONFIG_PATH`.
"""

from __future__ import annotations

import functools

import helion
import torch

from harness.tuning.configs import TuningJob, config_key
from operators.gemm.alignment import output_buffer
from operators.gemm.helion_impl import CONFIG_PATH, EPILOGUES, matmul_kernel

__all__ = ["CONFIG_PATH", "tuning_args", "tuning_candidates", "tuning_jobs"]

_BUCKET_SIZES = {"small": 1024, "large": 4096}


def _candidate(blocks: list[int], warps: int, stages: int, indexing: str = "tensor_descriptor",
               pid_type: str = "flat", flatten: bool | None = None) -> helion.Config:
    """A config for the [tile_m, tile_n, tile_k] loop nest; ``flatten`` fuses a persistent
    tile loop with the k loop so the next tile's loads overlap this tile's epilogue."""
    return helion.Config(block_sizes=blocks, num_warps=warps, num_stages=stages,
                         l2_groupings=[8], indexing=indexing, pid_type=pid_type,
                         range_flattens=[flatten, None], range_unroll_factors=[0, 0],
                         range_num_stages=[0, 0])


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
]


def tuning_candidates(kernel_name: str, bucket: str) -> list[helion.Config]:
    """Plausible H200 configs for ``kernel_name`` (a key of :data:`EPILOGUES`) in ``bucket``."""
    assert kernel_name in EPILOGUES, f"unknown kernel {kernel_name}"
    if bucket.split("|")[0] == "small":
        return list(_SMALL_CANDIDATES)
    return _LARGE_CANDIDATES + (_LARGE_FULL_BIAS_EXTRA if kernel_name == "addmm_2d" else [])


def _operand(rows: int, cols: int, transposed: bool, dtype: torch.dtype,
             device: torch.device | str) -> torch.Tensor:
    """A (rows, cols) random operand, column-major (a transposed view) when ``transposed``."""
    if transposed:
        return torch.randn(cols, rows, dtype=dtype, device=device).T
    return torch.randn(rows, cols, dtype=dtype, device=device)


def tuning_args(kernel_name: str, bucket: str, dtype: torch.dtype,
                device: torch.device | str) -> tuple:
    """Example arguments of ``kernel_name`` for ``bucket`` (e.g. ``large|nt``: 4096^3, y = b.T)."""
    size, layout = bucket.split("|")
    m = n = k = _BUCKET_SIZES[size]
    x = _operand(m, k, layout[0] == "t", dtype, device)
    y = _operand(k, n, layout[1] == "t", dtype, device)
    out = output_buffer(m, n, dtype, device)
    bias = None
    if kernel_name != "matmul":
        bias_shape = (n,) if kernel_name == "addmm_1d" else (m, n)
        bias = torch.randn(bias_shape, dtype=dtype, device=device)
    return x, y, 1.0, 1.0, bias, out, EPILOGUES[kernel_name]


def tuning_jobs(dtype: torch.dtype, device: str) -> list[TuningJob]:
    """Every stored-config slot the gemm and addmm sweeps use for ``dtype``, with its candidates.

    Per size bucket: ``matmul`` in the forward layout (``nn``) and the two backward layouts
    (``nt``, ``tn``; addmm's backward runs ``matmul`` too), and both addmm kernels forward.
    Arguments are made only when a job is tuned.
    """
    slots = [("matmul", f"{size}|{layout}") for size in _BUCKET_SIZES for layout in ("nn", "nt", "tn")]
    slots += [(name, f"{size}|nn") for name in ("addmm_1d", "addmm_2d") for size in _BUCKET_SIZES]
    return [
        TuningJob(
            kernel=matmul_kernel,
            key=config_key(name, dtype, bucket_name),
            make_args=functools.partial(tuning_args, name, bucket_name, dtype, device),
            candidates=tuning_candidates(name, bucket_name),
        )
        for name, bucket_name in slots
    ]
