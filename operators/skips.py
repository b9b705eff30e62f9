"""Skip rules shared by operators: backends that cannot run with a given device and dtype."""

from __future__ import annotations

import torch

from harness.device import uses_interpreter
from harness.operator import Backend

INTERPRETED_BACKENDS = (
    "triton", "triton_direct", "triton_compiled", "helion", "helion_op", "helion_compiled",
)
"""The backends whose kernels are Triton's or Helion's (however they are called or compiled)."""


def interpreter_bf16_skip(device: str, dtype: torch.dtype, backend: Backend) -> str | None:
    """Why ``backend`` cannot run bf16 on ``device`` (None: it can).

    Triton's CPU interpreter computes bf16 wrongly, so the Triton and Helion backends (all of
    ``INTERPRETED_BACKENDS``) skip bf16 wherever they would run through it.
    """
    if backend.name in INTERPRETED_BACKENDS and dtype == torch.bfloat16 and uses_interpreter(device):
        return "bf16 is broken in Triton's CPU interpreter; run bf16 on a GPU"
    return None
