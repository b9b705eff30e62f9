"""Shared command-line pieces: the one-line parser, its error, and value types that reject bad input.

Bad input raises :class:`UsageError` (or argparse's own error, which the parser turns into
one), printed as one line naming the valid choices, with exit status 2.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from harness.operator import Option, finite_number
from harness.report.results import Record, ResultFileError, read_json


class UsageError(Exception):
    """Bad command-line input; the message names the valid choices."""


def program() -> str:
    """The command's name in its messages: ``opbench`` when run as the installed command, else
    ``run.py``."""
    return "opbench" if Path(sys.argv[0]).name == "opbench" else "run.py"


def help_text(doc: str) -> str:
    """A module docstring as ``--help`` prints it: no reST literal marks, the command as the user runs it."""
    return doc.replace("``", "").replace("python run.py", invocation()).replace("run.py", program())


def invocation() -> str:
    """How a message tells the user to run the command again: ``opbench`` or ``python run.py``."""
    return "opbench" if program() == "opbench" else "python run.py"


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and exit code 2, with no traceback."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def comma_list(text: str) -> list[str]:
    """A non-empty comma-separated list, duplicates dropped, order kept."""
    items = list(dict.fromkeys(item.strip() for item in text.split(",") if item.strip()))
    if not items:
        raise argparse.ArgumentTypeError(f"{text!r} names nothing")
    return items


def argparse_type(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse`` as an argparse ``type``: its ``ValueError`` message becomes argparse's error."""
    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from exc

    convert.__name__ = parse.__name__
    return convert


finite_float = argparse_type(finite_number)


def integer(text: str) -> int:
    """``text`` as an int; ``ValueError`` naming it otherwise."""
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an integer") from None


def option_parse(option: Option) -> Callable[[str], Any] | None:
    """How an operator option's text becomes its value: its own ``parse``, else by the type of its
    default (an int or a finite float; an option with ``choices``, or a bool or str default,
    keeps the text)."""
    if option.parse is not None:
        return option.parse
    if option.choices is not None or isinstance(option.default, bool):
        return None
    if isinstance(option.default, int):
        return integer
    return finite_number if isinstance(option.default, float) else None


def add_operator_options(group: argparse._ArgumentGroup, options: Sequence[Option]) -> None:
    """Add an operator's own options to ``group``."""
    for option in options:
        parse = option_parse(option)
        group.add_argument(f"--{option.name}", default=option.default, help=option.help,
                           choices=option.choices, type=argparse_type(parse) if parse else None)


def non_negative_float(text: str) -> float:
    value = finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 0")
    return value


def positive_float(text: str) -> float:
    value = finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be > 0")
    return value


def non_negative_int(text: str) -> int:
    value = argparse_type(integer)(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 0")
    return value


def validate_choices(kind: str, given: list[str], valid: Sequence[str]) -> None:
    """Refuse the first of ``given`` that is not in ``valid``, naming the valid ones."""
    unknown = [g for g in given if g not in valid]
    if unknown:
        raise UsageError(f"unknown {kind} {unknown[0]!r} (valid: {', '.join(valid)})")


def check_writable(path: Path | None) -> None:
    """Fail before the work, not after it, when a result file cannot be written."""
    if path is None:
        return
    if path.is_dir():
        raise UsageError(f"{path} is a folder; give a file name")
    existing = next(parent for parent in path.absolute().parents if parent.exists())
    if not existing.is_dir():
        raise UsageError(f"cannot write {path} ({existing} is not a folder)")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".opbench-check-"):
            pass
    except OSError as exc:
        raise UsageError(f"cannot write {path} ({exc.strerror})") from exc


def read_result_file(path: Path) -> tuple[dict[str, Any], list[Record]]:
    """A result file's header and records; an unreadable or malformed file is bad input."""
    try:
        return read_json(path)
    except ResultFileError as exc:
        raise UsageError(str(exc)) from exc


def of_modes(path: Path, records: list[Record], modes: list[str] | None) -> list[Record]:
    """The records of ``modes`` (all of them when None); none is bad input, naming the modes the
    file has."""
    kept = [r for r in records if modes is None or r.mode in modes]
    if not kept:
        present = ", ".join(dict.fromkeys(r.mode for r in records))
        wanted = f" for mode {','.join(modes)} (it has: {present})" if modes else ""
        raise UsageError(f"{path}: no records{wanted}")
    return kept
