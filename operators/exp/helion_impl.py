"""Elementwise exp in Helion, forward and backward, with an autograd Function.

Forward:  y = exp(x) (fp32 math, rounded to x's dtype).
Backward: dx = dy * y, from the saved output.

The kernels write into a given output.  A flat tensor is split into its bulk, a multiple of
``ALIGN`` elements, and the short tail; one launch walks both as two loops, so the bulk's
tiles need no mask and its accesses stay 16 bytes wide (a masked tile whose bound is not a
multiple of the vector width falls back to narrow accesses).

Configs are tuned on the GPU by ``python run.py tune --op exp``
(:mod:`operators.exp.helion_tuning`) and stored in ``helion_configs.json`` next to this file,
one block size per loop; the bucket is ``small`` below ``SMALL_LIMIT`` elements, else ``large``
(:data:`BUCKETS`, in order: a call whose bucket is not stored takes the other one).
"""

from __future__ import annotations

from pathlib import Path

import helion
import helion.language as hl
import torch

from harness.tuning.configs import BucketPlace, ConfigStore, config_key
from harness.tuning.launch import call_with_stored_config

CONFIG_PATH = Path(__file__).with_name("helion_configs.json")

ALIGN = 16384
SMALL_LIMIT = 2**18


@helion.kernel(static_shapes=True)
def exp_fwd(x: torch.Tensor, y: torch.Tensor, x_tail: torch.Tensor,
            y_tail: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """y = exp(x) over the flat bulk and, in a second loop, tail (fp32 math); returns both outputs."""
    for tile in hl.tile(x.size(0)):
        y[tile] = torch.exp(x[tile].to(torch.float32)).to(y.dtype)
    for tile in hl.tile(x_tail.size(0)):
        y_tail[tile] = torch.exp(x_tail[tile].to(torch.float32)).to(y_tail.dtype)
    return y, y_tail


@helion.kernel(static_shapes=True)
def exp_bwd(dy: torch.Tensor, y: torch.Tensor, dx: torch.Tensor, dy_tail: torch.Tensor, y_tail: torch.Tensor,
            dx_tail: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """dx = dy * y over the flat bulk and, in a second loop, tail (fp32 math); returns both outputs."""
    for tile in hl.tile(y.size(0)):
        dx[tile] = (dy[tile].to(torch.float32) * y[tile].to(torch.float32)).to(dx.dtype)
    for tile in hl.tile(y_tail.size(0)):
        dx_tail[tile] = (dy_tail[tile].to(torch.float32) * y_tail[tile].to(torch.float32)).to(dx_tail.dtype)
    return dx, dx_tail


KERNELS = {"exp_fwd": exp_fwd, "exp_bwd": exp_bwd}


BUCKETS = ("small", "large")
"""The shape buckets, smallest first."""


def bucket(numel: int) -> str:
    """The shape bucket whose stored config a tensor of ``numel`` elements uses."""
    return "small" if numel < SMALL_LIMIT else "large"


def bucket_place(name: str) -> BucketPlace | None:
    """Where bucket ``name`` lies on exp's scale: its index in :data:`BUCKETS`."""
    return (BUCKETS.index(name), "") if name in BUCKETS else None


CONFIG_STORE = ConfigStore(CONFIG_PATH, bucket_place)


def split_at_bulk(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Each flat tensor's bulk (a multiple of ``ALIGN`` elements), then each one's tail, in order."""
    n = tensors[0].numel()
    bulk = n - n % ALIGN
    return tuple(t[:bulk] for t in tensors) + tuple(t[bulk:] for t in tensors)


def _run(name: str, *inputs: torch.Tensor) -> torch.Tensor:
    """Run kernel ``name`` on flat ``inputs`` into a new output, bulk and tail in one launch."""
    out = torch.empty_like(inputs[0])
    key = config_key(name, out.dtype, bucket(out.numel()))
    call_with_stored_config(KERNELS[name], CONFIG_STORE, key, *split_at_bulk(*inputs, out))
    return out


def exp_forward(x: torch.Tensor) -> torch.Tensor:
    """exp(x) by :func:`exp_fwd`, into a new contiguous tensor of x's shape."""
    return _run("exp_fwd", x.contiguous().view(-1)).view(x.shape)


def exp_backward(dy: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """dy * y by :func:`exp_bwd`, into a new contiguous tensor of y's shape."""
    return _run("exp_bwd", dy.contiguous().view(-1), y.contiguous().view(-1)).view(y.shape)


class ExpFunction(torch.autograd.Function):
    """exp with Helion forward and backward kernels."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        y = exp_forward(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, dy: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return exp_backward(dy, y)


def exp(x: torch.Tensor) -> torch.Tensor:
    """Differentiable exp through the Helion kernels."""
    return ExpFunction.apply(x)
