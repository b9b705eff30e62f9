"""exp's Helion kernels as ``torch.library`` custom ops with registered autograd: the ``helion_op``
and ``helion_compiled`` backends.

Forward:  y = exp(x) (``opbench_helion::exp_fwd``).  Backward: dx = dy * y from the saved output
(``opbench_helion::exp_bwd``).

Dynamo cannot trace the Helion call itself (helion 1.5.0, torch 2.13): binding a stored config
(``Kernel.bind``) is a graph break, and a kernel writing two views of one buffer (the bulk and
the tail) is refused.  As custom ops with fake implementations the kernels are opaque to
Dynamo, so ``torch.compile(fullgraph=True)`` traces the call whole.  The ``helion`` backend keeps
:class:`~operators.exp.helion_impl.ExpFunction`: the dispatcher costs host time on every call
(the ``walltime`` metric of ``helion`` against ``helion_op`` shows how much).
"""

from __future__ import annotations

import torch

from operators.exp.helion_impl import exp_backward, exp_forward


@torch.library.custom_op("opbench_helion::exp_fwd", mutates_args=())
def exp_fwd(x: torch.Tensor) -> torch.Tensor:
    """exp(x) by the Helion kernel; contiguous."""
    return exp_forward(x)


@exp_fwd.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return x.new_empty(x.shape)


@torch.library.custom_op("opbench_helion::exp_bwd", mutates_args=())
def exp_bwd(dy: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """dy * y by the Helion kernel; contiguous."""
    return exp_backward(dy, y)


@exp_bwd.register_fake
def _(dy: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return y.new_empty(y.shape)


def _setup_context(ctx, inputs: tuple, output: torch.Tensor) -> None:
    ctx.save_for_backward(output)


def _backward(ctx, dy: torch.Tensor) -> torch.Tensor:
    (y,) = ctx.saved_tensors
    return exp_bwd(dy, y)


exp_fwd.register_autograd(_backward, setup_context=_setup_context)


def exp(x: torch.Tensor) -> torch.Tensor:
    """Differentiable exp through the Helion kernels as custom ops, which Dynamo traces."""
    return exp_fwd(x)
