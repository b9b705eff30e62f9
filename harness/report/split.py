"""Splitting a result file into one file per (op, mode): the layout of the committed baselines
(``results/baselines/h200/<op>_<mode>.json``), from one run of several operators and modes."""

from __future__ import annotations

from typing import Any

from harness.registry import load_operator, operator_names
from harness.report.results import Record

Part = tuple[dict[str, Any], list[Record]]
"""One (op, mode)'s header and records."""


def own_options(op: str, options: dict[str, Any]) -> dict[str, Any]:
    """Of a run's operator options (every ``--op``'s, in one dict), those ``op`` declares, as a
    run of ``op`` alone records them; all of them for an operator this process does not know."""
    if op not in operator_names():
        return options
    names = {option.name.replace("-", "_") for option in load_operator(op).command_line_options}
    return {name: value for name, value in options.items() if name in names}


def split_by_sweep(header: dict[str, Any], records: list[Record]) -> dict[tuple[str, str], Part]:
    """(op, mode) -> its header and records, for every (op, mode) of ``records`` in the file's
    order; each header is the file's with ``split`` naming the (op, mode) and only that
    operator's options."""
    parts: dict[tuple[str, str], Part] = {}
    for record in records:
        key = (record.op, record.mode)
        if key not in parts:
            options = own_options(record.op, header.get("options") or {})
            parts[key] = ({**header, "options": options, "split": {"op": record.op, "mode": record.mode}}, [])
        parts[key][1].append(record)
    return parts
