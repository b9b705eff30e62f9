"""rms_norm's Helion kernels as ``torch.library`` custom ops with registered autograd: the
``helion_op`` and ``helion_compiled`` backends.

Same math and kernels as :mod:`operators.rms_norm.helion_impl`: ``opbench_helion::rms_norm_fwd``
returns ``y`` and the fp32 ``rstd`` of every row, ``opbench_helion::rms_norm_bwd`` the gradients
``(dx, dw)`` from ``x``, ``weight`` and that ``rstd``.

Dynamo cannot trace the Helion calls themselves (helion 1.5.0, torch 2.13): binding a stored
config (``Kernel.bind``) is a graph break.  As custom ops with fake implementations the kernels
are opaque to Dynamo, so ``torch.compile(fullgraph=True)`` traces the call whole.  The ``helion``
backend keeps :class:`~operators.rms_norm.helion_impl.RMSNormFunction`: the dispatcher costs
host time on every call (the ``walltime`` metric of ``helion`` against ``helion_op`` shows how
much).
"""

from __future__ import annotations

import torch

from operators.rms_norm.helion_impl import check_inputs, rms_norm_backward, rms_norm_forward


@torch.library.custom_op("opbench_helion::rms_norm_fwd", mutates_args=())
def rms_norm_fwd(x: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """RMS-normalize the rows of contiguous 2-D ``x``; returns ``y`` and the fp32 ``rstd`` (M,)."""
    return rms_norm_forward(x, weight, eps)


@rms_norm_fwd.register_fake
def _(x: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.empty_like(x), x.new_empty(x.shape[:1], dtype=torch.float32)


@torch.library.custom_op("opbench_helion::rms_norm_bwd", mutates_args=())
def rms_norm_bwd(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradients ``(dx, dw)`` of :func:`rms_norm_fwd` given ``grad_out`` and the saved ``rstd``."""
    return rms_norm_backward(grad_out, x, weight, rstd)


@rms_norm_bwd.register_fake
def _(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.empty_like(x), torch.empty_like(weight)


def _setup_context(ctx, inputs: tuple, output: tuple) -> None:
    x, weight, _ = inputs
    _, rstd = output
    ctx.mark_non_differentiable(rstd)
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(x, weight, rstd)


def _backward(ctx, grad_y: torch.Tensor | None, _grad_rstd: None) -> tuple:
    if grad_y is None:
        return None, None, None
    x, weight, rstd = ctx.saved_tensors
    dx, dw = rms_norm_bwd(grad_y, x, weight, rstd)
    return dx, dw, None


rms_norm_fwd.register_autograd(_backward, setup_context=_setup_context)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Llama-style RMS norm of the rows of 2-D ``x`` scaled by ``weight``; differentiable, traceable
    by Dynamo."""
    check_inputs(x, weight)
    y, _ = rms_norm_fwd(x.contiguous(), weight.contiguous(), eps)
    return y
