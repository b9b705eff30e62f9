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

import importlib.util

import torch
import torch.nn.functional as F

PEERS_INSTALL = "pip install -e '.[peers]'"
_PACKAGES = {"liger": ("liger_kernel", "liger-kernel"), "quack": ("quack", "quack-kernels")}
QUACK_MIN_CAPABILITY = (9, 0)
QUACK_ALIGNMENT_BYTES = 16


def installed(module: str) -> bool:
    """Whether ``module`` can be found, without importing it."""
    return importlib.util.find_spec(module) is not None


def skip_reason(peer: str, device: str) -> str | None:
    """Why ``peer`` cannot run on ``device`` (None: it can, or it is no optional peer)."""
    if peer not in _PACKAGES:
        return None
    module, package = _PACKAGES[peer]
    if not installed(module):
        return f"{package} is not installed ({PEERS_INSTALL})"
    if peer == "liger" and device != "cuda":
        return "liger needs a GPU (its Triton kernels do not run in Triton's CPU interpreter)"
    if peer == "quack" and (device != "cuda" or torch.cuda.get_device_capability() < QUACK_MIN_CAPABILITY):
        return "quack needs an sm_90+ GPU"
    return None


def liger_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Liger's Triton RMSNorm; its backward leaves ``dy`` unchanged."""
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction

    # apply() takes no keywords: X, W, eps, offset, casting_mode, in_place.
    return LigerRMSNormFunction.apply(x, weight, eps, 0.0, "llama", False)


def check_quack_width(x: torch.Tensor) -> None:
    """Refuse rows whose width in bytes is not a multiple of 16, which quack's kernels need."""
    width = x.shape[-1]
    if width * x.element_size() % QUACK_ALIGNMENT_BYTES:
        raise ValueError(f"quack: N must keep {QUACK_ALIGNMENT_BYTES}-byte alignment "
                         f"(N={width} in {str(x.dtype).removeprefix('torch.')})")


def quack_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """quack's CuTe DSL RMSNorm."""
    from quack.rmsnorm import rmsnorm

    return rmsnorm(x, weight, eps=eps)


def torch_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """PyTorch's built-in RMSNorm over the last dim."""
    return F.rms_norm(x, x.shape[-1:], weight, eps)
