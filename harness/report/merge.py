"""Merging the result files of disjoint parts of one run (``--shard K/N`` files, torchrun ranks).

The parts must come from the same code and settings: the same commit, GPU model, timer,
repeats, tolerances, ``--isolate``, ``--parallel-compile``, precision, seed and operator
options; and no cell may be in two of them.  The merged header keeps the first part's fields
(but a split file's ``split``: :mod:`harness.report.split`) and lists every part's shard and GPUs.
"""

from __future__ import annotations

from typing import Any

from harness.report.results import Record, describe_cell

SAME = ("git_commit", "source_digest", "device_name", "timer", "repeats", "tolerance", "isolate", "precision",
        "seed", "options", "parallel_compile")
"""Header fields every part of one run must share."""


class MergeError(ValueError):
    """Parts that cannot be merged; the message names the part and why."""


def merge_parts(parts: list[tuple[str, dict[str, Any], list[Record]]]) -> tuple[dict[str, Any], list[Record]]:
    """One header and the union of the records of ``parts`` (name, header, records)."""
    if not parts:
        raise MergeError("nothing to merge")
    first_name, first, _ = parts[0]
    for name, header, _ in parts[1:]:
        for field in SAME:
            if header.get(field) != first.get(field):
                raise MergeError(f"{name} and {first_name} differ in {field}: "
                                 f"{header.get(field)!r} vs {first.get(field)!r}")
    seen: dict[tuple, str] = {}
    records: list[Record] = []
    for name, _, part in parts:
        for record in part:
            key = (record.cell(), record.metric)
            if key in seen:
                raise MergeError(f"{name} and {seen[key]} both hold {describe_cell(record)}")
            seen[key] = name
            records.append(record)
    header = {**first, "shards": [h.get("shard") for _, h, _ in parts],
              "gpus": [gpu for _, h, _ in parts for gpu in h.get("gpus", [])]}
    header.pop("shard", None)
    header.pop("split", None)
    return header, records
