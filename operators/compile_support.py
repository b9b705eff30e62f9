"""torch.compile settings shared by the ``torch_compile`` backends."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch._functorch.config as functorch_config


def compiled(fn: Callable[..., Any], **options: Any) -> Callable[..., Any]:
    """``torch.compile(fn)`` (Inductor) set up for benchmarking forward and backward.

    Donated buffers are turned off: the harness times the backward on a retained graph,
    which donated buffers forbid.  Dynamo's caches are reset first: every shape of a sweep
    compiles anew (``dynamic=False``), which would otherwise hit the recompile limit.
    """
    functorch_config.donated_buffer = False
    torch._dynamo.reset()
    return torch.compile(fn, fullgraph=True, dynamic=False, **options)
