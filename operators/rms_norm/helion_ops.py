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

from operators.rms_norm.custom_ops import define_rms_norm_ops
from operators.rms_norm.helion_impl import rms_norm_backward, rms_norm_forward
from operators.rms_norm.strategy import check_inputs

rms_norm_fwd, rms_norm_bwd = define_rms_norm_ops("opbench_helion", rms_norm_forward, rms_norm_backward)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Llama-style RMS norm of the rows of 2-D ``x`` scaled by ``weight``; differentiable, traceable
    by Dynamo."""
    check_inputs(x, weight)
    y, _ = rms_norm_fwd(x.contiguous(), weight.contiguous(), eps)
    return y
