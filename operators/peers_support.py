"""What the peer backends (other libraries' kernels, the optional ``[peers]`` extra) share.

Whether a peer's library is installed (found without importing it), the skip reasons naming
the install command or the GPU a peer needs, and quack's requirements, which its RMSNorm
(:mod:`operators.rms_norm.peers`) and its GEMM (:mod:`operators.gemm.peers`) have in common:
an sm_90+ GPU, and rows whose pitch in bytes is a multiple of 16.  The peer modules call
these through this module, so that a test patches :func:`installed` once for all of them.
"""

from __future__ import annotations

import importlib.util

import torch

PEERS_INSTALL = "pip install -e '.[peers]'"
QUACK_MIN_CAPABILITY = (9, 0)
QUACK_ALIGNMENT_BYTES = 16


def installed(module: str) -> bool:
    """Whether ``module`` can be found, without importing it."""
    return importlib.util.find_spec(module) is not None


def not_installed(package: str) -> str:
    """The skip reason of a peer whose PyPI ``package`` is missing."""
    return f"{package} is not installed ({PEERS_INSTALL})"


def gpu_at_least(device: str, capability: tuple[int, int]) -> bool:
    """Whether ``device`` is a CUDA GPU of compute ``capability`` or newer."""
    return device == "cuda" and torch.cuda.get_device_capability() >= capability


def quack_skip_reason(device: str) -> str | None:
    """Why quack cannot run on ``device``: not installed, or no sm_90+ GPU (None: it can)."""
    if not installed("quack"):
        return not_installed("quack-kernels")
    if not gpu_at_least(device, QUACK_MIN_CAPABILITY):
        return "quack needs an sm_90+ GPU"
    return None


def check_quack_alignment(dtype: torch.dtype, **sizes: int) -> None:
    """Refuse row lengths (given by name, e.g. ``N=3001``) whose bytes in ``dtype`` are not a
    multiple of 16, which quack's kernels need: a one-line ValueError naming them all."""
    if any(size * dtype.itemsize % QUACK_ALIGNMENT_BYTES for size in sizes.values()):
        values = ", ".join(f"{name}={size}" for name, size in sizes.items())
        raise ValueError(f"quack: {' and '.join(sizes)} must keep {QUACK_ALIGNMENT_BYTES}-byte alignment "
                         f"({values} in {str(dtype).removeprefix('torch.')})")
