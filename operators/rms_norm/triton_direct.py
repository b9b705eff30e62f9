"""rms_norm's Triton kernels through a plain ``torch.autograd.Function``: the ``triton_direct`` backend.

Same math and kernels as :mod:`operators.rms_norm.triton_impl` (``rstd`` saved per row)::

    y  = x * rstd * weight,        rstd = rsqrt(mean(x**2) + eps)
    dx = rstd * (g - xhat * mean(g * xhat)),   dw = sum over rows of dy * xhat

The host functions are those the ``opbench::rms_norm_fwd`` / ``opbench::rms_norm_bwd`` custom
ops call, here without torch.library's dispatch, so the two backends differ only by that
dispatch (the ``walltime`` metric shows its cost).
"""

from __future__ import annotations

import torch

from operators.rms_norm.strategy import check_inputs
from operators.rms_norm.triton_impl import rms_norm_backward, rms_norm_forward


class RMSNormFunction(torch.autograd.Function):
    """The Triton forward and backward, called directly; the forward saves ``x``, ``weight``, ``rstd``."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        y, rstd = rms_norm_forward(x, weight, eps)
        ctx.save_for_backward(x, weight, rstd)
        return y

    @staticmethod
    def backward(ctx, grad_y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
        x, weight, rstd = ctx.saved_tensors
        dx, dw = rms_norm_backward(grad_y, x, weight, rstd)
        return dx, dw, None


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Llama-style RMS norm of the rows of 2-D ``x`` scaled by ``weight``; differentiable, bypassing
    torch.library."""
    check_inputs(x, weight)
    return RMSNormFunction.apply(x.contiguous(), weight, eps)
