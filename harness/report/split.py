"""Splitting a result file into one file per (op, mode): the layout of the committed baselines
(``results/baselines/h200/<op>_<mode>.json``), from one run of several operators and modes."""

from __future__ import annotations

from typing import Any

from harness.report.results import Record

ResultFile = tuple[dict[str, Any], list[Record]]
"""A result file's header and records."""


def split_by_sweep(header: dict[str, Any], records: list[Record]) -> dict[str, ResultFile]:
    """``<op>_<mode>`` -> (header, records) for every (op, mode) of ``records``, in the file's
    order; each header is the file's, with ``split`` naming the (op, mode) it keeps."""
    parts: dict[str, ResultFile] = {}
    for record in records:
        name = f"{record.op}_{record.mode}"
        if name not in parts:
            parts[name] = ({**header, "split": {"op": record.op, "mode": record.mode}}, [])
        parts[name][1].append(record)
    return parts
