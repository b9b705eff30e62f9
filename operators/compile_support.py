"""torch.compile settings shared by the ``torch_compile`` and ``*_compiled`` backends."""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

import torch
import torch._functorch.config as functorch_config


class GraphBreakError(RuntimeError):
    """Dynamo could not trace a ``fullgraph=True`` call whole; the message is Dynamo's reason."""


def _own_frame(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A function calling ``fn`` whose code object is new: Dynamo keeps its compiled graphs and
    their recompile count per code object, so each one compiles and keeps its own."""
    def frame(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)
    code = frame.__code__.replace()
    return types.FunctionType(code, frame.__globals__, getattr(fn, "__name__", "compiled"), None,
                              frame.__closure__)


def compiled(fn: Callable[..., Any], **options: Any) -> Callable[..., Any]:
    """``torch.compile(fn, fullgraph=True)`` (Inductor) set up for benchmarking forward and backward.

    Donated buffers are turned off: the harness times the backward on a retained graph,
    which donated buffers forbid.  Each call of ``compiled`` traces ``fn`` in a frame of its own
    (:func:`_own_frame`), so every shape of a sweep compiles anew (``dynamic=False``) without
    reaching the recompile limit, and without a reset of Dynamo's caches, which would make the
    backends built before it compile again inside their timed repeats.  A graph break raises
    :class:`GraphBreakError` with Dynamo's reason, which becomes the cell's error.
    """
    functorch_config.donated_buffer = False
    graph = torch.compile(_own_frame(fn), fullgraph=True, dynamic=False, **options)

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return graph(*args, **kwargs)
        except torch._dynamo.exc.Unsupported as exc:
            raise GraphBreakError(f"graph break under torch.compile(fullgraph=True): {exc}") from exc

    return call
