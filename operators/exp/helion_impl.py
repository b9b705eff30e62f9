"""Elementwise exp in Helion, forward and backward, with an autograd Function.

Forward:  y = exp(x) (fp32 math, rounded to x's dtype).
Backward: dx = dy * y, from the saved output.

The kernels write into a given output.  A tensor whose length is not a multiple of
``ALIGN`` runs as two calls, the aligned bulk and the short tail, so the bulk's accesses
need no mask and stay 16 bytes wide (a masked tile whose bound is not a multiple of the
vector width falls back to narrow accesses).

Configs are tuned on the GPU by ``python run.py tune --op exp``
(:mod:`operators.exp.helion_tuning`) and stored in ``helion_configs.json`` next to this file;
the bucket is ``small`` below 2**20 elements, else ``large``.
"""

from __future__ import annotations

from pathlib import Path

import helion
import helion.language as hl
import torch

from harness.tuning.configs import call_with_stored_config, config_key

CONFIG_PATH = Path(__file__).with_name("helion_configs.json")
KERNEL_NAMES = ("exp_fwd", "exp_bwd")


ALIGN = 16384


@helion.kernel(static_shapes=True)
def exp_fwd(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """y = exp(x) over flat tensors (fp32 math)."""
    for tile in hl.tile(x.size(0)):
        y[tile] = torch.exp(x[tile].to(torch.float32)).to(y.dtype)
    return y


@helion.kernel(static_shapes=True)
def exp_bwd(dy: torch.Tensor, y: torch.Tensor, dx: torch.Tensor) -> torch.Tensor:
    """dx = dy * y over flat tensors (fp32 math)."""
    for tile in hl.tile(y.size(0)):
        dx[tile] = (dy[tile].to(torch.float32) * y[tile].to(torch.float32)).to(dx.dtype)
    return dx


def bucket(numel: int) -> str:
    """The shape bucket whose stored config a tensor of ``numel`` elements uses."""
    return "small" if numel < 2**20 else "large"


def _run(name: str, *inputs: torch.Tensor) -> torch.Tensor:
    """Run kernel ``name`` on flat ``inputs`` into a new output: aligned bulk, then tail."""
    kernel = exp_fwd if name == "exp_fwd" else exp_bwd
    out = torch.empty_like(inputs[0])
    n = out.numel()
    key = config_key(name, out.dtype, bucket(n))
    bulk = n - n % ALIGN
    for part in (slice(0, bulk), slice(bulk, n)):
        if part.stop > part.start:
            call_with_stored_config(kernel, CONFIG_PATH, key, *(t[part] for t in inputs), out[part])
    return out


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
