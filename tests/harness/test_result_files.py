"""Result files: atomic writes, a round trip that keeps numbers and errors, readers that refuse bad files.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.report.results import ResultFileError, read_json, write_json
from tests.helpers import sample_exp_records


def test_json_round_trip_keeps_numbers_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    header = {"device": "cpu", "command": "run.py --op exp"}
    records = sample_exp_records()
    write_json(path, header, records)
    raw = json.loads(path.read_text())
    assert all(isinstance(r["value"], (float, int)) or r["value"] is None for r in raw["records"])
    loaded_header, loaded = read_json(path)
    assert loaded_header == header
    assert loaded == records
    assert not list(tmp_path.glob(".*tmp"))


def test_reader_rejects_truncated_and_foreign_files(tmp_path: Path) -> None:
    truncated = tmp_path / "truncated.json"
    write_json(truncated, {}, sample_exp_records())
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
    write_json(path, {"device_name": "cpu"}, sample_exp_records())
    before = path.read_text()

    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space"):
        write_json(path, {"device_name": "cpu", "note": "second write"}, sample_exp_records()[:1])
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]

