"""exp's Triton kernels through a plain ``torch.autograd.Function``: the ``triton_direct`` backend.

Forward:  y = exp(x).  Backward: dx = dy * y, from the saved output.

The host functions are those the ``opbench::exp_fwd`` / ``opbench::exp_bwd`` custom ops of
:mod:`operators.exp.triton_impl` call, here without torch.library's dispatch, so the two
backends differ only by that dispatch (the ``walltime`` metric shows its cost).
"""

from __future__ import annotations

import torch

from operators.exp.triton_impl import exp_backward, exp_forward


class ExpFunction(torch.autograd.Function):
    """exp with the Triton forward and backward kernels, called directly."""

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
    """Differentiable exp through the Triton kernels, bypassing torch.library."""
    return ExpFunction.apply(x)
