"""Result files in tritonbench's CSV and JSON layouts (``triton_op.py``'s ``write_csv_to_file``
and ``userbenchmark_dict``).

CSV: per (op, mode, dtype) one ``;``-separated table, tables separated by a blank line.  The first
column is headed by our operator's x_val label (``MxN``, where tritonbench writes ``(M, H)``) and
holds the x_val as tritonbench prints it (``(4096, 1024)``); then ``<backend>-<metric>`` columns,
baseline first; last an ``average`` row.  Failed and skipped cells are empty.

JSON: one flat object, ``tritonbench_<op>_<mode>[x_<x_val>-<backend>]_<metric>`` per value, plus
tritonbench's per-backend averages ``[x_average-<backend>]_<metric>`` and
``[<backend>]-<metric>-avg``.  Values are numbers (tritonbench writes latency as a string);
failed and skipped cells have no key.

Both averages are our table's (geometric mean for speedup, arithmetic mean otherwise, over the
cells with a value not below the physical floor), not tritonbench's, which counts failed cells
in the divisor.
"""

from __future__ import annotations

import json
from typing import Any

from harness.report.exporters.common import ExportError, exported, tritonbench_x_val
from harness.report.results import Record, csv_text
from harness.report.table import TableData, group_records, table_layout, x_label


def _table(records: list[Record]) -> TableData:
    """The table of one (op, mode, dtype) group, columns ordered as the terminal table's."""
    return TableData(records, *table_layout(records[0].op))


def to_csv(header: dict[str, Any], records: list[Record]) -> str:
    """tritonbench's ``--csv`` tables, one per (op, mode, dtype)."""
    tables = []
    for group in group_records(records).values():
        data = _table(group)
        tables.append(csv_text(data.header(), tritonbench_rows(data, group), delimiter=";"))
    return "\n".join(tables)


def tritonbench_rows(data: TableData, records: list[Record]) -> list[list[Any]]:
    """``data``'s CSV rows (of ``records``) with each x_val spelled as tritonbench prints it."""
    spelled = {x_label(r.x_val): tritonbench_x_val(r.x_val) for r in records}
    return [[spelled.get(row[0], row[0]), *row[1:]] for row in data.raw_rows()]


def _check_one_dtype(records: list[Record]) -> None:
    dtypes: dict[tuple[str, str], set[str]] = {}
    for r in records:
        dtypes.setdefault((r.op, r.mode), set()).add(r.dtype)
    for (op, mode), found in dtypes.items():
        if len(found) > 1:
            raise ExportError(f"{op} {mode} has records of several dtypes ({', '.join(sorted(found))}); "
                              "tritonbench-json keys name no dtype")


def to_json(header: dict[str, Any], records: list[Record]) -> str:
    """tritonbench's ``--output-json`` object, with numeric values."""
    _check_one_dtype(records)
    metrics: dict[str, float] = {}
    for (op, mode, _), group in group_records(records).items():
        data, name = _table(group), f"tritonbench_{op}_{mode}"
        for r in exported(group):
            metrics[f"{name}[x_{tritonbench_x_val(r.x_val)}-{r.backend}]_{r.metric}"] = r.value
        for (backend, metric), average in zip(data.columns, data.averages(), strict=True):
            if average is not None:
                metrics[f"{name}[x_average-{backend}]_{metric}"] = average
                metrics[f"{name}[{backend}]-{metric}-avg"] = average
    return json.dumps(metrics, indent=4, allow_nan=False) + "\n"
