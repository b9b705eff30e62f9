"""The rms_norm kernels users compare against: Liger-Kernel's, quack's and PyTorch's own.

Each host function computes Llama RMSNorm, ``y = weight * (x * rstd).to(x.dtype)``, with a
weight of ``x``'s width, and is differentiable.  Liger and quack are optional
(``pip install -e '.[peers]'``) and imported only when called; :func:`skip_reason` says why a
peer cannot run on a device, before anything is imported.

- ``liger``: ``LigerRMSNormFunction`` from Liger's ``ops.rms_norm`` module, which always holds
  the Triton kernels (the ``liger_kernel.ops`` package swaps in its CuTe DSL kernels on
  Hopper once the CUTLASS DSL is installed, as quack installs it), in ``"llama"`` casting and
  with ``in_place=False``: by default its backward writes ``dx`` into the ``dy`` it was given.
- ``quack``: ``quack.rmsnorm.rmsnorm`` (CuTe DSL, JIT-compiled per width and dtype on the first
  call), for sm_90 and newer GPUs, on rows of a width that keeps 16-byte alignment.
- ``torch_rms_norm``: ``torch.nn.functional.rms_norm`` (a fused kernel on CUDA).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from operators import peers_support


def skip_reason(peer: str, device: str) -> str | None:
    """Why ``peer`` cannot run on ``device`` (None: it can, or it is no optional peer)."""
    if peer == "quack":
        return peers_support.quack_skip_reason(device)
    if peer != "liger":
        return None
    if not peers_support.installed("liger_kernel"):
        return peers_support.not_installed("liger-kernel")
    if device != "cuda":
        return "liger needs a GPU (its Triton kernels do not run in Triton's CPU interpreter)"
    return None


def liger_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Liger's Triton RMSNorm; its backward leaves ``dy`` unchanged."""
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction

    # apply() takes no keywords: X, W, eps, offset, casting_mode, in_place.
    return LigerRMSNormFunction.apply(x, weight, eps, 0.0, "llama", False)


def check_quack_width(x: torch.Tensor) -> None:
    """Refuse rows whose width in bytes is not a multiple of 16, which quack's kernels need."""
    peers_support.check_quack_alignment(x.dtype, N=x.shape[-1])


def quack_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """quack's CuTe DSL RMSNorm."""
    from quack.rmsnorm import rmsnorm

    return rmsnorm(x, weight, eps=eps)


def torch_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """PyTorch's built-in RMSNorm over the last dim."""
    return F.rms_norm(x, x.shape[-1:], weight, eps)
