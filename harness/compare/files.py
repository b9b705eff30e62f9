"""The two result files of a comparison: loading them and refusing files that cannot be compared."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.report.results import Record, ResultFileError, read_json


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
    seen = set()
    for record in records:
        if (record.cell(), record.metric) in seen:
            raise CompareInputError(f"{role} {path}: {record.metric} of cell {record.cell()} given twice")
        seen.add((record.cell(), record.metric))
    return ResultFile(role, Path(path), header, records)


def check_compatible(base: ResultFile, cur: ResultFile, allow_device_mismatch: bool) -> None:
    """Refuse files measured on different GPUs or settings, or that share no (op, mode, dtype)."""
    base_device, cur_device = base.header.get("device_name"), cur.header.get("device_name")
    if base_device != cur_device and not allow_device_mismatch:
        raise CompareInputError(
            f"baseline {base.path} was measured on {base_device!r} but current {cur.path} on "
            f"{cur_device!r} (--allow-device-mismatch compares them anyway)")
    for setting in ("options", "timer"):
        base_value, cur_value = base.header.get(setting), cur.header.get(setting)
        if base_value is not None and cur_value is not None and base_value != cur_value:
            raise CompareInputError(f"baseline {base.path} and current {cur.path} were run with different "
                                    f"{setting}: {base_value} vs {cur_value}")
    if not base.groups() & cur.groups():
        def names(f: ResultFile) -> str:
            return ", ".join("/".join(g) for g in sorted(f.groups())) or "no latency records"
        raise CompareInputError(f"baseline {base.path} ({names(base)}) and current {cur.path} ({names(cur)}) "
                                "share no (op, mode, dtype) with latency records")


