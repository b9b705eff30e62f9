"""Tuning the exp Helion kernels: candidate configs and example arguments per stored-config slot."""

from __future__ import annotations

import functools

import helion
import torch

from harness.tuning.configs import TuningJob, config_key
from operators.exp.helion_impl import CONFIG_PATH, KERNELS, split_at_bulk

__all__ = ["CONFIG_PATH", "tuning_jobs"]


def _candidates(bucket_name: str) -> list[helion.Config]:
    blocks = (1024, 2048, 4096, 8192) if bucket_name == "large" else (256, 512, 1024, 2048)
    return [
        helion.Config(block_sizes=[block, block], num_warps=warps, num_stages=1)
        for block in blocks
        for warps in (4, 8)
    ]


def _example_args(name: str, n: int, dtype: torch.dtype, device: str) -> tuple[torch.Tensor, ...]:
    """Bulk and tail arguments of kernel ``name`` for ``n`` elements (``n`` not a multiple of ALIGN)."""
    x = torch.randn(n, device=device, dtype=dtype)
    if name == "exp_fwd":
        return split_at_bulk(x, torch.empty_like(x))
    return split_at_bulk(torch.randn_like(x), x.exp(), torch.empty_like(x))


def tuning_jobs(dtype: torch.dtype, device: str) -> list[TuningJob]:
    """Every stored-config slot of this module for ``dtype``, with its candidates."""
    sizes = {"small": 2**16 + 3, "large": 2**26 + 3}
    return [
        TuningJob(
            kernel=KERNELS[name],
            key=config_key(name, dtype, bucket_name),
            make_args=functools.partial(_example_args, name, n, dtype, device),
            candidates=_candidates(bucket_name),
        )
        for name in KERNELS
        for bucket_name, n in sizes.items()
    ]
