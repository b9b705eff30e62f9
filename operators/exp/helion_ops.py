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

from operators.exp.custom_ops import define_exp_ops
from operators.exp.helion_impl import exp_backward, exp_forward

exp = define_exp_ops("opbench_helion", exp_forward, exp_backward)
"""Differentiable exp through the Helion kernels as custom ops, which Dynamo traces."""
