"""Result records and atomic JSON/CSV writers and readers (the run header is
:mod:`harness.report.run_header`'s).

A result file is ``{"schema": 1, "header": {...}, "records": [...]}``: one long-format
record per (op, mode, dtype, x_val, backend, metric).  Values are numbers or null, never
strings; a failed cell has ``status: "error"`` and its message in ``error``; a cell that
cannot run on this device/dtype has ``status: "skipped"`` and the reason in ``error``.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.metrics.table import METRICS

SCHEMA_VERSION = 1
BELOW_FLOOR = "below_physical_floor"
"""The flag of a record faster than the device's physical floor: kept out of averages and verdicts."""
REVIEW_SPEEDUP = "review_speedup"
"""The flag of a speedup above its operator's ``review_speedup``: worth a second look."""


@dataclass
class Record:
    """One measured value (or its failure) for one cell of one metric."""

    op: str
    mode: str
    dtype: str
    x_val: int | list[int]
    backend: str
    metric: str
    value: float | None
    unit: str
    status: str = "ok"
    error: str | None = None
    note: str | None = None
    p20: float | None = None
    p50: float | None = None
    p80: float | None = None
    n_samples: int | None = None
    repeats: list[float] | None = None
    flag: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    gpu: str | None = None
    """The device the cell ran on, in runs over several (``host/cuda:3``)."""

    def cell(self) -> tuple[str, str, str, tuple[int, ...], str]:
        """The (op, mode, dtype, x_val, backend) this record belongs to."""
        x = tuple(self.x_val) if isinstance(self.x_val, list) else (self.x_val,)
        return (self.op, self.mode, self.dtype, x, self.backend)


def _finite_or_none(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite_or_none(v) for v in value]
    return value


def _read_umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


_UMASK = _read_umask()
"""The process's file-creation mask, read once at import (reading it means setting it)."""


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temp file in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with contextlib.suppress(OSError):  # some filesystems keep their own modes
            os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp's 0600 would hide results from other users
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def result_json(header: dict[str, Any], records: list[Record]) -> str:
    """A result file's text."""
    payload = {
        "schema": SCHEMA_VERSION,
        "header": _finite_or_none(header),
        "records": [_finite_or_none(dataclasses.asdict(r)) for r in records],
    }
    return json.dumps(payload, indent=1, allow_nan=False) + "\n"


def write_json(path: Path, header: dict[str, Any], records: list[Record]) -> None:
    """Write a result file atomically (temp file + rename)."""
    atomic_write(path, result_json(header, records))


class ResultFileError(ValueError):
    """A result file that cannot be read: the message says which file and why."""


def read_json(path: Path) -> tuple[dict[str, Any], list[Record]]:
    """Load a result file back into its header and records."""
    try:
        payload = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ResultFileError(f"{path}: cannot read ({exc.strerror})") from exc
    except json.JSONDecodeError as exc:
        raise ResultFileError(f"{path}: not valid JSON, truncated or corrupt ({exc.msg})") from exc
    except UnicodeDecodeError as exc:
        raise ResultFileError(f"{path}: not a text file ({exc.reason})") from exc
    if not isinstance(payload, dict) or payload.get("schema") != SCHEMA_VERSION:
        raise ResultFileError(f"{path}: not a result file of schema {SCHEMA_VERSION}")
    names = {f.name for f in dataclasses.fields(Record)}
    if not isinstance(payload.get("header"), dict) or not isinstance(payload.get("records"), list):
        raise ResultFileError(f"{path}: missing header or records")
    try:
        records = [Record(**{k: v for k, v in r.items() if k in names}) for r in payload["records"]]
    except (AttributeError, KeyError, TypeError) as exc:
        raise ResultFileError(f"{path}: malformed records ({exc})") from exc
    for record in records:
        if (problem := malformed(record)) is not None:
            raise ResultFileError(f"{path}: {describe_cell(record)}: {problem}")
    options = payload["header"].get("options")
    if options is not None and not isinstance(options, dict):
        raise ResultFileError(f"{path}: header options {options!r} is not an object")
    ceilings = payload["header"].get("ceilings_gbps")
    if ceilings is not None and not (isinstance(ceilings, dict)
                                     and all(is_finite_number(v) and v > 0 for v in ceilings.values())):
        raise ResultFileError(f"{path}: header ceilings_gbps {ceilings!r} is not positive numbers by pattern")
    return payload["header"], records


STATUSES = ("ok", "error", "skipped")


def is_finite_number(value: Any) -> bool:
    """A real, finite int or float (not a bool, NaN or infinity)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def is_whole_number(value: Any) -> bool:
    """An int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def describe_cell(record: Record) -> str:
    """The cell and metric of a record as one phrase: ``latency of exp/fwd/bfloat16/4096/triton``."""
    x_val = "x".join(map(str, record.x_val)) if isinstance(record.x_val, list) else record.x_val
    return f"{record.metric} of {record.op}/{record.mode}/{record.dtype}/{x_val}/{record.backend}"


def malformed(record: Record) -> str | None:
    """What is wrong with a record read from a file (a value that is not a finite number, a
    latency that is not positive, an accuracy that is not 0 or 1), or None; which metrics are
    positive or pass/fail is :data:`~harness.metrics.table.METRICS`'s to say."""
    names = ("op", "mode", "dtype", "backend", "metric")
    if not all(isinstance(getattr(record, name), str) for name in names):
        return "op, mode, dtype, backend and metric must be strings"
    x_vals = record.x_val if isinstance(record.x_val, list) else [record.x_val]
    if not x_vals or not all(is_whole_number(v) for v in x_vals):
        return f"x_val {record.x_val!r} is not an integer or a list of integers"
    if record.status not in STATUSES:
        return f"status {record.status!r} is not one of {', '.join(STATUSES)}"
    texts = {"error": record.error, "note": record.note, "flag": record.flag, "unit": record.unit,
             "gpu": record.gpu}
    for name, text in texts.items():
        if text is not None and not isinstance(text, str):
            return f"{name} {text!r} is not a string"
    if record.value is not None and not is_finite_number(record.value):
        return f"value {record.value!r} is not a finite number"
    if record.status == "ok" and record.value is None:
        return "status ok without a value"
    if record.repeats is not None and not isinstance(record.repeats, list):
        return f"repeats {record.repeats!r} is not a list of latencies"
    if not isinstance(record.extra, dict):
        return f"extra {record.extra!r} is not an object"
    spread = record.extra.get("spread")
    if spread is not None and not (is_finite_number(spread) and spread >= 0):
        return f"spread {spread!r} is not a non-negative number"
    entry = METRICS.get(record.metric)
    if entry is not None and entry.positive and record.value is not None and record.value <= 0:
        return f"{record.metric} {record.value!r} is not positive"
    timing = [v for v in (record.p20, record.p50, record.p80) if v is not None]
    timing += list(record.repeats or [])
    if not all(is_finite_number(v) and v > 0 for v in timing):
        bad = next(v for v in timing if not (is_finite_number(v) and v > 0))
        return f"latency {bad!r} is not a positive number of milliseconds"
    if entry is not None and entry.pass_fail and record.value not in (None, 0, 1):
        return f"{record.metric} {record.value!r} is neither 0 nor 1"
    return None


def csv_text(header_row: list[str], rows: list[list[Any]], delimiter: str = ",") -> str:
    """A table as CSV text."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=delimiter, lineterminator="\n")
    writer.writerow(header_row)
    writer.writerows(rows)
    return buffer.getvalue()


def write_csv(path: Path, header_row: list[str], rows: list[list[Any]], delimiter: str = ",") -> None:
    """Write a table as CSV atomically."""
    atomic_write(path, csv_text(header_row, rows, delimiter))
