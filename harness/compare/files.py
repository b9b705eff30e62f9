"""The two result files of a comparison: loading them and refusing files that cannot be compared."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.report.results import Record, ResultFileError, is_finite_number, read_json
from harness.settings import FLUSHES


class CompareInputError(ValueError):
    """Files that cannot be compared; the message names the file and why."""


@dataclass(frozen=True)
class ResultFile:
    """One loaded result file and the role it plays (baseline or current)."""

    role: str
    path: Path
    header: dict[str, Any]
    records: list[Record]

    def groups(self) -> set[tuple[str, str, str]]:
        return {(r.op, r.mode, r.dtype) for r in self.records if r.metric == "latency"}


def load(role: str, path: Path) -> ResultFile:
    """Read a result file; unreadable or malformed files are bad input naming the file."""
    try:
        header, records = read_json(path)
    except ResultFileError as exc:
        raise CompareInputError(f"{role} {exc}") from exc
    except (KeyError, AttributeError) as exc:  # a result-like object with parts missing
        raise CompareInputError(
            f"{role} {path}: malformed result file ({type(exc).__name__}: {exc})") from exc
    if not isinstance(header, dict):
        raise CompareInputError(f"{role} {path}: malformed result file (header is not an object)")
    for name, valid in HEADER_FIELDS.items():
        if header.get(name) is not None and not valid(header[name]):
            raise CompareInputError(f"{role} {path}: malformed header field {name}: {header[name]!r}")
    seen = set()
    for record in records:
        if (record.cell(), record.metric) in seen:
            raise CompareInputError(f"{role} {path}: {record.metric} of cell {record.cell()} given twice")
        seen.add((record.cell(), record.metric))
    return ResultFile(role, Path(path), header, records)


def _tolerance(value: Any) -> bool:
    return isinstance(value, dict) and all(
        value.get(key) is None or (is_finite_number(value[key]) and value[key] >= 0)
        for key in ("rtol", "atol"))


def _timer(value: Any) -> bool:
    return (isinstance(value, dict) and value.get("flush", "dirty") in FLUSHES
            and all(is_finite_number(value.get(key)) and value[key] >= 0 for key in ("warmup_ms", "rep_ms")))


HEADER_FIELDS: dict[str, Callable[[Any], bool]] = {
    "device_name": lambda v: isinstance(v, str),
    "git_commit": lambda v: isinstance(v, str) and v.strip() != "",
    "repeats": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
    "isolate": lambda v: isinstance(v, bool),
    "options": lambda v: isinstance(v, dict),
    "tolerance": _tolerance,
    "timer": _timer,
}
"""The header fields compare reads, and what a well-formed value of each is (where present)."""

PROVENANCE = ("device_name", "git_commit", "timer", "repeats", "options", "tolerance", "isolate")
"""Header fields a current run must carry: where, from which code and how it was measured."""

BASELINE_PROVENANCE = ("device_name", "timer")
"""Header fields a baseline must carry (baselines older than the other fields lack them)."""

MATCHING = ("options", "timer", "tolerance", "isolate")
"""Header fields whose values change what a cell measures or checks: they must match."""

DEFAULTS = {"options": {}, "tolerance": {"rtol": None, "atol": None}, "isolate": False}
"""What a baseline without one of the :data:`MATCHING` fields was run with."""


def _setting(header: dict[str, Any], name: str) -> Any:
    """A header's value of a :data:`MATCHING` setting; a timer from before the flush was a
    setting flushed by writing (``dirty``)."""
    value = header.get(name, DEFAULTS.get(name))
    if name == "timer" and isinstance(value, dict):
        value = {**value, "flush": value.get("flush", "dirty")}
    return value


def _require(file: ResultFile, fields: tuple[str, ...]) -> None:
    missing = [name for name in fields if file.header.get(name) is None]
    if missing:
        raise CompareInputError(f"{file.role} {file.path}: no {', '.join(missing)} in its header "
                                "(provenance missing: the file cannot be judged)")


def check_compatible(baselines: list[ResultFile], cur: ResultFile, allow_device_mismatch: bool) -> None:
    """Refuse files without provenance, measured on different GPUs or settings, or sharing no
    (op, mode, dtype); refuse any file without accuracy records (a baseline without them would
    let a wrong current cell pass as unchanged)."""
    _require(cur, PROVENANCE)
    for base in baselines:
        _require(base, BASELINE_PROVENANCE)
        if base.header.get("complete") is False:
            raise CompareInputError(f"baseline {base.path} is a partial run (stopped before it finished): "
                                    "the cells it lacks would go unjudged")
    if len(baselines) > 1:
        commits = {base.header.get("git_commit") for base in baselines}
        if len(commits) > 1 or None in commits:
            runs = ", ".join(f"{b.path} at {b.header.get('git_commit')}" for b in baselines)
            raise CompareInputError(f"baseline runs must be separate runs of one commit: {runs}")
    for file in (*baselines, cur):
        if not any(r.metric == "accuracy" for r in file.records):
            raise CompareInputError(
                f"{file.role} {file.path}: no accuracy records (run with --metrics accuracy,latency)")
    for base in baselines:
        base_device, cur_device = base.header["device_name"], cur.header["device_name"]
        if base_device != cur_device and not allow_device_mismatch:
            raise CompareInputError(
                f"baseline {base.path} was measured on {base_device!r} but current {cur.path} on "
                f"{cur_device!r} (--allow-device-mismatch compares them anyway)")
        for setting in MATCHING:
            base_value, cur_value = _setting(base.header, setting), _setting(cur.header, setting)
            if base_value != cur_value:
                raise CompareInputError(f"baseline {base.path} and current {cur.path} were run with "
                                        f"different {setting}: {base_value} vs {cur_value}")
        if not base.groups() & cur.groups():
            def names(f: ResultFile) -> str:
                return ", ".join("/".join(g) for g in sorted(f.groups())) or "no latency records"
            raise CompareInputError(f"baseline {base.path} ({names(base)}) and current {cur.path} "
                                    f"({names(cur)}) share no (op, mode, dtype) with latency records")
