"""Elementwise exp in Helion, forward and backward, with an autograd Function.

Forward:  y = exp(x) (fp32 math, rounded to x's dtype).
Backward: dx = dy * y, from the saved output.

Configs are tuned on the GPU by ``python run.py tune --op exp`` and stored in
``helion_configs.json`` next to this file; the bucket is ``small`` below 2**20 elements,
else ``large``.
"""

from __future__ import annotations

import functools
from pathlib import Path

import helion
import helion.language as hl
import torch

from operators.helion_configs import TuningJob, call_with_stored_config, config_key

CONFIG_PATH = Path(__file__).with_name("helion_configs.json")
KERNEL_NAMES = ("exp_fwd", "exp_bwd")


@helion.kernel(static_shapes=True)
def exp_fwd(x: torch.Tensor) -> torch.Tensor:
    """y = exp(x) over a flat tensor."""
    y = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        y[tile] = torch.exp(x[tile].to(torch.float32)).to(y.dtype)
    return y


@helion.kernel(static_shapes=True)
def exp_bwd(dy: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """dx = dy * y over flat tensors."""
    dx = torch.empty_like(y)
    for tile in hl.tile(y.size(0)):
        dx[tile] = (dy[tile].to(torch.float32) * y[tile].to(torch.float32)).to(dx.dtype)
    return dx


def bucket(numel: int) -> str:
    """The shape bucket whose stored config a tensor of ``numel`` elements uses."""
    return "small" if numel < 2**20 else "large"


def _run(name: str, *tensors: torch.Tensor) -> torch.Tensor:
    kernel = exp_fwd if name == "exp_fwd" else exp_bwd
    key = config_key(name, tensors[0].dtype, bucket(tensors[0].numel()))
    return call_with_stored_config(kernel, CONFIG_PATH, key, *tensors)


class ExpFunction(torch.autograd.Function):
    """exp with Helion forward and backward kernels."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        y = _run("exp_fwd", x.contiguous().view(-1)).view(x.shape)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, dy: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return _run("exp_bwd", dy.contiguous().view(-1), y.view(-1)).view(y.shape)


def exp(x: torch.Tensor) -> torch.Tensor:
    """Differentiable exp through the Helion kernels."""
    return ExpFunction.apply(x)


def _candidates(bucket_name: str) -> list[helion.Config]:
    blocks = (1024, 2048, 4096, 8192) if bucket_name == "large" else (256, 512, 1024, 2048)
    return [
        helion.Config(block_sizes=[block], num_warps=warps, num_stages=1)
        for block in blocks
        for warps in (4, 8)
    ]


def _example_args(name: str, n: int, dtype: torch.dtype, device: str) -> tuple[torch.Tensor, ...]:
    x = torch.randn(n, device=device, dtype=dtype)
    return (x,) if name == "exp_fwd" else (torch.randn_like(x), x.exp())


def tuning_jobs(dtype: torch.dtype, device: str) -> list[TuningJob]:
    """Every stored-config slot of this module for ``dtype``, with its candidates."""
    sizes = {"small": 2**16 + 7, "large": 2**26 + 7}
    return [
        TuningJob(
            kernel=exp_fwd if name == "exp_fwd" else exp_bwd,
            key=config_key(name, dtype, bucket_name),
            make_args=functools.partial(_example_args, name, n, dtype, device),
            candidates=_candidates(bucket_name),
        )
        for name in KERNEL_NAMES
        for bucket_name, n in sizes.items()
    ]
