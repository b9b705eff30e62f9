"""torch.compile settings shared by the ``torch_compile`` and ``*_compiled`` backends."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
import torch._functorch.config as functorch_config


class GraphBreakError(RuntimeError):
    """Dynamo could not trace a ``fullgraph=True`` call whole; the message is Dynamo's reason."""


def compiled(fn: Callable[..., Any], **options: Any) -> Callable[..., Any]:
    """``torch.compile(fn, fullgraph=True)`` (Inductor) set up for benchmarking forward and backward.

    Donated buffers are turned off: the harness times the backward on a retained graph,
    which donated buffers forbid.  Dynamo's caches are reset first: every shape of a sweep
    compiles anew (``dynamic=False``), which would otherwise hit the recompile limit.  A graph
    break raises :class:`GraphBreakError` with Dynamo's reason, which becomes the cell's error.
    """
    functorch_config.donated_buffer = False
    torch._dynamo.reset()
    graph = torch.compile(fn, fullgraph=True, dynamic=False, **options)

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return graph(*args, **kwargs)
        except torch._dynamo.exc.Unsupported as exc:
            raise GraphBreakError(f"graph break under torch.compile(fullgraph=True): {exc}") from exc

    return call
