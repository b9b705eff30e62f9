"""Result files: atomic writes, a round trip that keeps numbers and errors, readers that refuse bad files.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.report.results import Record, ResultFileError, read_json, write_json


def _records() -> list[Record]:
    rows = []
    for x, (base, fast) in {1024: (2.0, 1.0), 4096: (8.0, 2.0)}.items():
        for backend, latency in (("eager", base), ("triton", fast)):
            rows.append(Record("exp", "fwd", "float32", x, backend, "latency", latency, "ms",
                               p20=latency * 0.99, p50=latency, p80=latency * 1.01, n_samples=50,
                               extra={"spread": 0.01}))
            rows.append(Record("exp", "fwd", "float32", x, backend, "speedup", base / latency, "x"))
    rows.append(Record("exp", "fwd", "float32", 8192, "eager", "latency", None, "ms",
                       status="error", error="RuntimeError: out of memory"))
    return rows


def test_json_round_trip_keeps_numbers_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    header = {"device": "cpu", "command": "run.py --op exp"}
    records = _records()
    write_json(path, header, records)
    raw = json.loads(path.read_text())
    assert all(isinstance(r["value"], (float, int)) or r["value"] is None for r in raw["records"])
    loaded_header, loaded = read_json(path)
    assert loaded_header == header
    assert loaded == records
    assert not list(tmp_path.glob(".*tmp"))


def test_reader_rejects_truncated_and_foreign_files(tmp_path: Path) -> None:
    truncated = tmp_path / "truncated.json"
    write_json(truncated, {}, _records())
    truncated.write_text(truncated.read_text()[:200])
    with pytest.raises(ResultFileError, match="truncated"):
        read_json(truncated)
    foreign = tmp_path / "foreign.json"
    foreign.write_text('{"hello": 1}')
    with pytest.raises(ResultFileError, match="schema"):
        read_json(foreign)


def test_result_files_get_the_modes_of_ordinary_files(tmp_path):
    import harness.report.results

    path = tmp_path / "out.json"
    write_json(path, {"device": "cpu"}, [])
    assert path.stat().st_mode & 0o777 == 0o666 & ~harness.report.results._UMASK


def test_a_write_that_fails_midway_leaves_the_previous_file_whole(tmp_path, monkeypatch):
    import os

    path = tmp_path / "run.json"
    write_json(path, {"device_name": "cpu"}, _records())
    before = path.read_text()

    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space"):
        write_json(path, {"device_name": "cpu", "note": "second write"}, _records()[:1])
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]

