"""Notes that code running inside a cell leaves for that cell's records.

A kernel module cannot see the cell it runs in; when it does something a reader of the results
should know (e.g. a Helion kernel running on a config stored for another shape bucket), it
calls :func:`add_note`.  The cell runner collects the notes of a cell's set-up and first call
with :func:`collecting`, and they end up in the ``note`` of each of the cell's records.  Outside
a collecting block a note goes nowhere, unless it is :func:`announced <announce_note>`: then it
is a :class:`CellNote` warning, so a caller outside this suite's runner (tritonbench's runner, a
user's script) still learns of it.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

_collectors: list[list[str]] = []


class CellNote(UserWarning):
    """A note left outside any cell: shown once, as Python shows warnings."""


def add_note(text: str) -> None:
    """Leave ``text`` for the cell being collected, once (no-op outside :func:`collecting`)."""
    if _collectors and text not in _collectors[-1]:
        _collectors[-1].append(text)


def announce_note(text: str) -> None:
    """:func:`add_note`, or outside :func:`collecting` a :class:`CellNote` warning of ``text``.

    For what a reader must not miss, once per occurrence (e.g. a Helion kernel configured on
    Helion's default config); a note repeated on every call stays :func:`add_note`'s, which costs
    nothing outside a cell.  Under ``-W error`` the warning is raised and the call's result is lost.
    """
    if _collectors:
        add_note(text)
    else:
        warnings.warn(text, CellNote, stacklevel=2)


@contextlib.contextmanager
def collecting(notes: list[str]) -> Iterator[list[str]]:
    """Append to ``notes`` every new note left while the block runs (the innermost block wins)."""
    _collectors.append(notes)
    try:
        yield notes
    finally:
        _collectors.pop()
