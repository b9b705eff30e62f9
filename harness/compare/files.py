"""The two result files of a comparison: loading them and refusing files that cannot be compared."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.report.results import Record, ResultFileError, is_finite_number, is_whole_number, read_json
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
        if record.metric == "latency":
            _check_latency(record, header.get("repeats"), f"{role} {path}")
    return ResultFile(role, Path(path), header, records)


def _check_latency(record: Record, repeats: int | None, where: str) -> None:
    """A latency in ms, with as many repeat medians as the header's ``repeats`` where it lists them."""
    if record.unit != "ms":
        raise CompareInputError(f"{where}: latency of cell {record.cell()} in {record.unit!r}, not 'ms'")
    if repeats is not None and record.repeats is not None and len(record.repeats) != repeats:
        raise CompareInputError(f"{where}: latency of cell {record.cell()} has {len(record.repeats)} "
                                f"repeats, its header says {repeats}")


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
    "repeats": lambda v: is_whole_number(v) and v >= 1,
    "isolate": lambda v: isinstance(v, bool),
    "seed": is_whole_number,
    "options": lambda v: isinstance(v, dict),
    "gpus": lambda v: isinstance(v, list) and all(
        isinstance(g, dict) and isinstance(g.get("device_name", ""), str) for g in v),
    "tolerance": _tolerance,
    "timer": _timer,
}
"""The header fields compare reads, and what a well-formed value of each is (where present)."""

PROVENANCE = ("device_name", "git_commit", "timer", "repeats", "options", "tolerance", "isolate")
"""Header fields a current run must carry: where, from which code and how it was measured."""

BASELINE_PROVENANCE = ("device_name", "timer")
"""Header fields a baseline must carry (baselines older than the other fields lack them)."""

MATCHING = ("options", "timer", "tolerance", "isolate", "seed")
"""Header fields whose values change what a cell measures or checks (the seed draws its inputs):
they must match."""

DEFAULTS = {"options": {}, "tolerance": {"rtol": None, "atol": None}, "isolate": False, "seed": 0}
"""What a file without one of the :data:`MATCHING` fields (or with a null) was run with."""


def _setting(header: dict[str, Any], name: str) -> Any:
    """A header's value of a :data:`MATCHING` setting; a timer from before the flush was a
    setting flushed by writing (``dirty``)."""
    value = header.get(name)
    if value is None:
        value = DEFAULTS.get(name)
    if name == "timer" and isinstance(value, dict):
        value = {**value, "flush": value.get("flush", "dirty")}
    return value


def _require(file: ResultFile, fields: tuple[str, ...]) -> None:
    missing = [name for name in fields if file.header.get(name) is None]
    if missing:
        raise CompareInputError(f"{file.role} {file.path}: no {', '.join(missing)} in its header "
                                "(provenance missing: the file cannot be judged)")


def _devices(header: dict[str, Any]) -> set[str]:
    """The GPU names a file was measured on: its ``device_name``, and each rank's in a run over several."""
    ranks = header.get("gpus") if isinstance(header.get("gpus"), list) else []
    named = [gpu.get("device_name") for gpu in ranks if isinstance(gpu, dict)]
    return {header["device_name"], *(name for name in named if name not in (None, "unknown"))}


def _names(devices: set[str]) -> str:
    return ", ".join(repr(name) for name in sorted(devices))


def _one_commit(commits: list[str | None]) -> bool:
    """Whether the hashes name one commit: all given, each a prefix of the longest (a short hash
    of 7 or more characters names the commit its full hash does)."""
    if None in commits or not commits:
        return False
    longest = max(commits, key=len)
    return all(len(c) >= 7 and longest.startswith(c) for c in commits)


def _same_run(base: ResultFile, cur: ResultFile) -> bool:
    """Whether two files hold one run: the same commit, started at the same moment, the same records."""
    when = cur.header.get("date_utc")
    return (when is not None and when == base.header.get("date_utc")
            and _one_commit([base.header.get("git_commit"), cur.header.get("git_commit")])
            and base.records == cur.records)


def _run_time(file: ResultFile) -> dt.datetime | None:
    """When the run started (UTC), or None where its header does not say."""
    try:
        when = dt.datetime.fromisoformat(file.header["date_utc"])
    except (KeyError, TypeError, ValueError):
        return None
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def order_notes(baselines: list[ResultFile], cur: ResultFile) -> list[str]:
    """A note for each baseline run after the current one: files given in the wrong order judge
    the old code against the new (a legitimate order too, when a baseline is re-measured)."""
    cur_time = _run_time(cur)
    if cur_time is None:
        return []
    return [f"note: baseline {base.path} was run after current {cur.path} ({base.header['date_utc']} vs "
            f"{cur.header['date_utc']}): the baseline(s) go first, the run under test last"
            for base in baselines if (base_time := _run_time(base)) is not None and base_time > cur_time]


def check_compatible(baselines: list[ResultFile], cur: ResultFile, allow_device_mismatch: bool) -> None:
    """Refuse files without provenance, partial runs, a current run that is one of its baselines,
    baseline runs of different commits, files measured on different GPUs or settings, a current
    run of fewer repeats than a baseline's, or files sharing no (op, mode, dtype); refuse any
    file without accuracy records (a baseline without them would let a wrong current cell pass
    as unchanged)."""
    _require(cur, PROVENANCE)
    if cur.header.get("complete") is False:
        raise CompareInputError(f"current {cur.path} is a partial run (stopped before it finished): "
                                "the cells it lacks cannot be judged; rerun it")
    for base in baselines:
        _require(base, BASELINE_PROVENANCE)
        if base.header.get("complete") is False:
            raise CompareInputError(f"baseline {base.path} is a partial run (stopped before it finished): "
                                    "the cells it lacks would go unjudged")
        if _same_run(base, cur):
            raise CompareInputError(f"current {cur.path} is the same run as baseline {base.path} (its "
                                    "commit and time): give the baseline(s) first, the run under test last")
    if len(baselines) > 1:
        if not _one_commit([base.header.get("git_commit") for base in baselines]):
            runs = ", ".join(f"{b.path} at {b.header.get('git_commit')}" for b in baselines)
            raise CompareInputError(f"baseline runs must be separate runs of one commit: {runs}")
    for file in (*baselines, cur):
        if not any(r.metric == "accuracy" for r in file.records):
            raise CompareInputError(
                f"{file.role} {file.path}: no accuracy records (run with --metrics accuracy,latency)")
    for base in baselines:
        base_devices, cur_devices = _devices(base.header), _devices(cur.header)
        if base_devices != cur_devices and not allow_device_mismatch:
            raise CompareInputError(
                f"baseline {base.path} was measured on {_names(base_devices)} but current {cur.path} on "
                f"{_names(cur_devices)} (--allow-device-mismatch compares them anyway)")
        base_repeats = base.header.get("repeats")
        if base_repeats is not None and cur.header["repeats"] < base_repeats:
            raise CompareInputError(
                f"current {cur.path} has {cur.header['repeats']} repeats, baseline {base.path} "
                f"{base_repeats}: rerun with --repeats {base_repeats} (fewer repeats widen the interval "
                "a slowdown has to clear)")
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
