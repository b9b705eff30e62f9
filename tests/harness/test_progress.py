"""The progress display: on a terminal a bar with cells done of the total and an ETA; in a log one
line per finished cell; never anything on stdout."""

from __future__ import annotations

import io

import pytest

from harness.cli.progress import ProgressDisplay
from harness.sweep.spec import CellEvent


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def _events(backend: str) -> list[CellEvent]:
    return [CellEvent("exp", "fwd", (4096,), backend, phase) for phase in ("build", "repeat 1/3", "done")]


def test_a_terminal_gets_a_bar_with_cells_done_of_the_total_and_an_eta(
        capsys: pytest.CaptureFixture[str]) -> None:
    stream = Terminal()
    with ProgressDisplay(4, stream=stream) as display:
        for backend in ("eager", "triton"):
            for event in _events(backend):
                display(event)
        display.bar.refresh()
        shown = stream.getvalue()
    assert "2/4" in shown and "ETA" in shown and "exp fwd 4096 triton" in shown
    assert capsys.readouterr().out == ""


def test_a_log_gets_one_line_per_finished_cell() -> None:
    stream = io.StringIO()
    with ProgressDisplay(2, stream=stream) as display:
        for backend in ("eager", "triton"):
            for event in _events(backend):
                display(event)
    lines = stream.getvalue().splitlines()
    assert [line.split()[0] for line in lines] == ["[1/2]", "[2/2]"]
    assert lines[1].endswith("exp fwd 4096 triton") and "\x1b" not in stream.getvalue()
