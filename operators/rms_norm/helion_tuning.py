"""Tuning rms_norm's Helion kernels: the configs each stored slot tries, and the jobs for ``run.py tune``.

``run.py tune --op rms_norm`` calls :func:`tuning_jobs` and stores the fastest correct
candidate of each job in :data:`CONFIG_PATH`, where :mod:`operators.rms_norm.helion_impl`
reads it.  Candidates are short lists for the H200; why each is there is in
``results/h200/rms_norm/NOTES.md`` (the ``tune_*.txt`` files hold the tuner's logs).
"""

from __future__ import annotations

import functools

import helion
import torch
import triton

from harness.tuning.configs import TuningJob, config_key
from operators.rms_norm import helion_impl

CONFIG_PATH = helion_impl.CONFIG_PATH
"""The stored configs the tuner writes and :mod:`operators.rms_norm.helion_impl` reads."""

TUNING_NUMEL = 2**25
"""Rows x width of the arguments the configs are timed on (see ``TUNING_MIN_ROWS``)."""

TUNING_MIN_ROWS = 4096
"""Configs are timed on ``max(TUNING_NUMEL // width, TUNING_MIN_ROWS)`` rows: never fewer rows
than the default sweep's M = 4096 (the stripe kernel tuned at 4096 x 32768 ran faster than tuned on
fewer rows: prediction 2 in NOTES.md)."""

TUNING_PARTIAL_ROWS = 256
"""Partial ``dw`` rows :func:`~operators.rms_norm.helion_impl.rms_norm_dw_sum`'s width configs
are timed on: about what ``rms_norm_bwd`` leaves with two programs per SM (264 on the H200's
132 SMs; 132 to 1056 with one to eight)."""


def kernels_for_width(n: int, dtype: torch.dtype) -> list[str]:
    """Names of the kernels that rows of width ``n``'s bucket run in ``dtype``: the ones to tune
    for it (16-bit rows of the row split's widths whose ``N`` is not a multiple of 16 take the
    shared-rows backward, so it is tuned beside the row split)."""
    names = ["rms_norm_fwd", *helion_impl.bwd_kernel_names(_tuning_rows("rms_norm_bwd", n), n, dtype)]
    if "rms_norm_bwd_row_split" in names:
        names.insert(2, "rms_norm_bwd_shared_rows")
    return names


def tuning_args(
    kernel_name: str, m: int, n: int, dtype: torch.dtype, device: str
) -> tuple[object, ...]:
    """Example arguments of shape (m, n) for timing configs of ``helion_impl.KERNELS[kernel_name]``."""
    x = torch.randn(m, n, dtype=dtype, device=device)
    weight = torch.randn(n, dtype=dtype, device=device)
    if kernel_name == "rms_norm_fwd":
        return x, weight, 1e-6
    if kernel_name == "rms_norm_dw_sum":  # ``m`` partial rows
        return torch.randn(m, n, dtype=torch.float32, device=device), weight
    if kernel_name not in _CANDIDATES:
        raise ValueError(f"no tuning arguments for kernel {kernel_name!r}; "
                         f"expected one of {sorted(_CANDIDATES)}")
    rstd = torch.rsqrt(x.float().pow(2).mean(-1) + 1e-6)
    args = (torch.randn_like(x), x, weight, rstd)
    if helion_impl.takes_sm_grid(kernel_name):
        return (*args, helion_impl.sm_grid(torch.device(device)))
    return args


def tuning_candidates(kernel_name: str, n: int) -> list[helion.Config]:
    """A short list of plausible H200 configs for ``helion_impl.KERNELS[kernel_name]`` on rows of width ``n``
    (the kernels :func:`kernels_for_width` names at a stored width; the two-pass backward of wider
    rows has no stored config and runs on Helion's default).

    The first candidate mirrors the Triton launch heuristics (checked with ``ptxas`` for sm_90: no
    spills, about 32 warps resident per SM); the others vary one knob each, except for
    ``rms_norm_bwd``, whose candidates cross programs per SM, warps and pipelining.
    """
    if kernel_name not in _CANDIDATES:
        raise ValueError(f"no tuning candidates for kernel {kernel_name!r}; "
                         f"expected one of {sorted(_CANDIDATES)}")
    return _CANDIDATES[kernel_name](triton.next_power_of_2(n))


def _fwd_candidates(width: int) -> list[helion.Config]:
    # 32 row values per thread and 4096+ values per tile, the whole row in registers.
    rows = max(1, 4096 // width)
    warps = min(32, max(4, rows * width // 1024))
    base = {"block_sizes": [rows], "num_warps": warps, "reduction_loops": [None]}
    variants = [
        {},
        {"num_warps": min(32, 2 * warps)},
        {"num_warps": max(4, warps // 2)},
        {"indexing": "block_ptr"},
        {"load_eviction_policies": "first"},
        {"pid_type": "persistent_interleaved", "num_sm_multiplier": max(1, 32 // warps),
         "range_num_stages": [2]},
    ]
    if width <= 8192:
        variants.append({"block_sizes": [2 * rows], "num_warps": min(32, 2 * warps)})
    # One row a program in two loops over column chunks of at most half the width, as inductor
    # writes it: the sum of squares, then y from x read again, mostly from L2, with the
    # eviction hints that keep x there for the second loop (loads: x, x again, weight);
    # 4-16 values a thread.
    variants += [
        {"block_sizes": [1], "reduction_loops": [chunk], "num_warps": loop_warps,
         "load_eviction_policies": ["last", "first", "last"]}
        for chunk in (512, 1024, 2048, 4096, 8192) if chunk <= width // 2
        for loop_warps in (4, 8, 16, 32) if 4 <= chunk // (32 * loop_warps) <= 16
    ]
    return _unique(base, variants)


def _bwd_candidates(width: int) -> list[helion.Config]:
    # One row a step, 16 row values per thread (8 at 1024 wide, with the 4-warp floor), so
    # x, dy, weight and the dw accumulator stay in registers, and half the warps; the row
    # loop with no, three or four software-pipeline stages (probe 23); one to eight programs per SM.
    warps = min(32, max(4, width // 512))
    per_sm = (1, 2) if width >= 8192 else (2, 4) if width == 4096 else (4, 8)
    configs = [
        {"programs_per_sm": programs, "num_warps": num_warps, "range_num_stages": [0, stages]}
        for programs in per_sm
        for num_warps in dict.fromkeys((warps, max(4, warps // 2)))
        for stages in ((0, 3, 4) if width < 16384 else (0, 3))
    ]
    return [helion.Config(**config) for config in configs]


def _shared_rows_candidates(_width: int) -> list[helion.Config]:
    # Block sizes: rows per group (one partial dw row each), the stripe a tile owns, rows per
    # step.  Two 16384-wide stripes with 16 warps was the fastest Triton geometry at 32768
    # (probe 13).
    base = {"block_sizes": [64, 16384, 1], "num_warps": 16}
    variants = [
        {},
        {"num_warps": 32},
        {"block_sizes": [32, 16384, 1]},
        {"block_sizes": [128, 16384, 1]},
        {"block_sizes": [64, 8192, 1]},
        {"pid_type": "persistent_interleaved"},
    ]
    return _unique(base, variants)


def _row_split_candidates(_width: int) -> list[helion.Config]:
    # The part width and warps: Triton's row split ran fastest with 8192-wide parts and 16
    # warps (probe 18: 4096-wide parts with 8 warps lost 20 points).
    return [helion.Config(block_sizes=[part], num_warps=warps)
            for part, warps in ((8192, 16), (8192, 8), (8192, 32), (16384, 32), (4096, 8))]


def _dw_sum_candidates(_width: int) -> list[helion.Config]:
    # Any width: columns per program, and all partial rows loaded at once (no reduction loop)
    # so the sum waits on one memory round trip, as the Triton sum does.
    base = {"block_sizes": [16], "reduction_loops": [None], "num_warps": 4}
    variants = [
        {},
        {"block_sizes": [8]},
        {"block_sizes": [32], "num_warps": 8},
        {"block_sizes": [64], "reduction_loops": [64]},
        {"block_sizes": [32], "reduction_loops": [128]},
    ]
    return _unique(base, variants)


def _dw_sum_many_rows_candidates() -> list[helion.Config]:
    # Thousands of rows: a reduction loop keeps each program's tile at 2-8K values, and more
    # columns per program keep every SM busy when the width is small.
    base = {"block_sizes": [32], "reduction_loops": [128], "num_warps": 4}
    variants = [
        {},
        {"reduction_loops": [256], "num_warps": 8},
        {"block_sizes": [16], "reduction_loops": [256]},
        {"block_sizes": [64], "reduction_loops": [64]},
        {"block_sizes": [8], "reduction_loops": [512], "num_warps": 8},
        {"block_sizes": [16], "reduction_loops": [None]},
    ]
    return _unique(base, variants)


_CANDIDATES = {
    "rms_norm_fwd": _fwd_candidates,
    "rms_norm_bwd": _bwd_candidates,
    "rms_norm_bwd_shared_rows": _shared_rows_candidates,
    "rms_norm_bwd_row_split": _row_split_candidates,
    "rms_norm_dw_sum": _dw_sum_candidates,
}
"""Each tuned kernel's candidates for a padded width."""

_MANY_ROWS_CANDIDATES = {"rms_norm_dw_sum": _dw_sum_many_rows_candidates}
"""The candidates of each kernel's many-rows config (``helion_impl.MANY_ROWS_CONFIGS``), the same
at every width."""


def _unique(base: dict, variants: list[dict]) -> list[helion.Config]:
    configs = []
    for variant in variants:
        config = {**base, **variant}
        if config not in configs:
            configs.append(config)
    return [helion.Config(**config) for config in configs]


def tuning_jobs(dtype: torch.dtype, device: str) -> list[TuningJob]:
    """Every stored-config slot of the default sweep for ``dtype``, with its candidates.

    Per width bucket: the forward and the backward kernels that rows of that width run, timed on
    ``max(TUNING_NUMEL // width, TUNING_MIN_ROWS)`` rows (``rms_norm_dw_sum`` on
    ``TUNING_PARTIAL_ROWS``), and the many-rows configs of ``helion_impl.MANY_ROWS_CONFIGS`` on
    their rows; arguments are made only when a job is tuned.
    """
    jobs = [
        TuningJob(
            kernel=helion_impl.KERNELS[name],
            key=config_key(name, dtype, helion_impl.width_bucket(width)),
            make_args=functools.partial(tuning_args, name, _tuning_rows(name, width), width, dtype, device),
            candidates=tuning_candidates(name, width),
        )
        for width in helion_impl.STORED_WIDTHS
        for name in kernels_for_width(width, dtype)
    ]
    many_rows = [
        TuningJob(
            kernel=helion_impl.KERNELS[name],
            key=helion_impl.config_keys(name, dtype, width, rows)[0],
            make_args=functools.partial(tuning_args, name, rows, width, dtype, device),
            candidates=_MANY_ROWS_CANDIDATES[name](),
        )
        for width in helion_impl.STORED_WIDTHS
        for name, (_, rows) in helion_impl.MANY_ROWS_CONFIGS.items()
        if name in kernels_for_width(width, dtype)
    ]
    return jobs + many_rows


def _tuning_rows(kernel_name: str, width: int) -> int:
    """Rows of the arguments a kernel's width-bucket configs are timed on."""
    if kernel_name == "rms_norm_dw_sum":
        return TUNING_PARTIAL_ROWS
    return max(TUNING_NUMEL // width, TUNING_MIN_ROWS)
