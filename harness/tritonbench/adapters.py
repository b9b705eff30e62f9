"""How each tritonbench operator's input tuple becomes a call of this suite's backends.

tritonbench hands a benchmark method the tuple its operator's ``get_input_iter`` yields; the
adapter of that operator names which of our operators computes the same thing, with which
inputs and options:

- ``vector_exp`` ``(x,)`` -> ``exp`` on ``x``; the output is returned as ``{"output": y}``, the
  form tritonbench's vector_exp metrics read.
- ``rms_norm`` ``(H, x)`` (no weight: each of its backends builds a weight of ones of width H)
  -> ``rms_norm`` on ``(x, weight, 1e-6)``, tritonbench's eps.  We build ``ones(H)`` in ``x``'s
  dtype requiring grad, like the ``nn.Parameter`` its baseline builds, so that ``--bwd`` has a
  gradient to compute when ``x`` does not require one; a weight given as a third element is
  used as it is.
- ``gemm`` ``(a, w, bias)`` -> ``gemm`` on ``(a, w)``, or with a bias (a row ``(N,)``) ``addmm`` on
  ``(bias, a, w)`` with the row bias: ``a @ w + bias``, what tritonbench's baseline computes.
- ``addmm`` ``(a, mat1, mat2)``, ``a`` the bias, ``(M, N)`` -> ``addmm`` on the same tuple with the
  full bias (a row ``(N,)`` bias takes the row option).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

TRITONBENCH_RMS_NORM_EPS = 1e-6
"""The eps of tritonbench's rms_norm, fixed in every version."""


@dataclass(frozen=True)
class Call:
    """One of our operators, the inputs its backends take, and the operator options."""

    operator: str
    inputs: tuple[Any, ...]
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of the first tensor input: the benchmark dtype."""
        return next(x.dtype for x in self.inputs if isinstance(x, torch.Tensor))


def vector_exp(x: torch.Tensor) -> Call:
    """tritonbench's ``vector_exp`` tuple ``(x,)``: our ``exp``."""
    return Call("exp", (x,))


def rms_norm(hidden: int, x: torch.Tensor, weight: torch.Tensor | None = None) -> Call:
    """tritonbench's ``rms_norm`` tuple ``(H, x)``: our ``rms_norm`` with a weight of ones."""
    if x.shape[-1] != hidden:
        raise ValueError(f"rms_norm: H={hidden} but x is {tuple(x.shape)}")
    if weight is None:
        weight = torch.ones(hidden, dtype=x.dtype, device=x.device, requires_grad=True)
    return Call("rms_norm", (x, weight, TRITONBENCH_RMS_NORM_EPS))


def gemm(a: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None) -> Call:
    """tritonbench's ``gemm`` tuple ``(a, w, bias)``: our ``gemm``, or ``addmm`` with a row bias."""
    if bias is None:
        return Call("gemm", (a, w))
    n = w.shape[1]
    if tuple(bias.shape) != (n,):
        raise ValueError(f"gemm: a bias of shape {tuple(bias.shape)} does not add to N={n} columns "
                         f"(give --bias {n})")
    return Call("addmm", (bias, a, w), {"bias": "1d"})


def addmm(bias: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor) -> Call:
    """tritonbench's ``addmm`` tuple ``(a, mat1, mat2)``, ``a`` the bias: our ``addmm``."""
    return Call("addmm", (bias, mat1, mat2), {"bias": "2d" if bias.dim() == 2 else "1d"})


@dataclass(frozen=True)
class Adapter:
    """A tritonbench operator: how its input tuple maps to a :class:`Call`, and how our output
    is handed back (as is, or in the dict tritonbench's metrics of that operator read)."""

    adapt: Callable[..., Call]
    output_key: str | None = None

    def wrap(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        """``fn`` returning its output in the form tritonbench's operator expects."""
        if self.output_key is None:
            return fn
        key = self.output_key
        return lambda: {key: fn()}


ADAPTERS: dict[str, Adapter] = {
    "vector_exp": Adapter(vector_exp, output_key="output"),
    "rms_norm": Adapter(rms_norm),
    "gemm": Adapter(gemm),
    "addmm": Adapter(addmm),
}
"""tritonbench operator name -> its adapter."""
