"""SIGTERM (``timeout``, a CI time limit, torchrun stopping its workers) handled as Ctrl-C is:
the run stops, keeps its finished cells and prints their tables."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


class Terminated(BaseException):
    """SIGTERM arrived: the run stops as Ctrl-C stops it."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated`."""
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
