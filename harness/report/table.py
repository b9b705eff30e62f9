"""Terminal tables and CSV rows derived from records (tabulate).

One table per (op, mode, dtype): the x_val column, then ``<backend>-<metric>`` columns with
the baseline first, and an ``average`` row (the mean the metric's entry in
:data:`~harness.metrics.table.METRICS` names: geometric for speedup, arithmetic for the
others; over cells that have a value and are not below the physical floor).
Failed and skipped cells show a short marker whose message is listed under the table;
notes (why accuracy failed, a flagged number) show as ``[n]`` after the value.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from tabulate import tabulate

from harness.error_line import error_line
from harness.metrics.table import METRICS
from harness.registry import load_operator, operator_names
from harness.report.results import BELOW_FLOOR, Record

AVERAGE_NOTE = "average: geometric mean for {}, arithmetic mean for other metrics".format(
    ", ".join(name for name, metric in METRICS.items() if metric.mean == "geometric"))


def _group_key(r: Record) -> tuple[str, str, str]:
    return (r.op, r.mode, r.dtype)


def x_label(x_val: int | list[int]) -> str:
    """A shape as tables and summaries spell it: ``4096x1024``, or the one number of a 1-D x_val."""
    return str(x_val) if isinstance(x_val, int) else "x".join(str(v) for v in x_val)


def _fmt(value: float) -> str:
    if value == 0 or 1e-3 <= abs(value) < 1e5:
        return f"{value:.4g}" if abs(value) < 1000 else f"{value:.1f}"
    return f"{value:.3e}"


def _average(metric: str, values: list[float]) -> float | None:
    if not values:
        return None
    entry = METRICS.get(metric)
    if entry is not None and entry.mean == "geometric":
        if any(v <= 0 for v in values):
            return None
        return math.exp(sum(math.log(v) for v in values) / len(values))
    return sum(values) / len(values)


class TableData:
    """The rows of one (op, mode, dtype) table, raw values and footnotes.

    Columns follow ``backend_order`` (the run's backends, baseline first) where given, else the
    order the backends first appear in; within a backend, the order the metrics appear in.
    """

    def __init__(self, records: list[Record], x_val_label: str, backend_order: list[str] | None = None):
        self.x_val_label = x_val_label
        self.columns: list[tuple[str, str]] = []
        self.rows: list[str] = []
        self.cells: dict[tuple[str, tuple[str, str]], Record] = {}
        for r in records:
            column = (r.backend, r.metric)
            if column not in self.columns:
                self.columns.append(column)
            row = x_label(r.x_val)
            if row not in self.rows:
                self.rows.append(row)
            self.cells[(row, column)] = r
        first_seen = list(dict.fromkeys(backend for backend, _ in self.columns))
        order = [b for b in backend_order or [] if b in first_seen] + [b for b in first_seen
                                                                      if b not in (backend_order or [])]
        self.columns.sort(key=lambda column: order.index(column[0]))
        self.footnotes: list[str] = []

    def header(self) -> list[str]:
        return [self.x_val_label, *(f"{b}-{m}" for b, m in self.columns)]

    def _footnote(self, text: str) -> int:
        if text not in self.footnotes:
            self.footnotes.append(text)
        return self.footnotes.index(text) + 1

    def _display(self, record: Record | None) -> str:
        if record is None:
            return ""
        if record.status == "skipped":
            return f"skip[{self._footnote(f'{record.backend}: {record.error}')}]"
        if record.status == "error" or record.value is None:
            return f"ERR[{self._footnote(f'{record.backend}: {error_line(record.error)}')}]"
        text = _fmt(record.value)
        if record.extra.get("spread") is not None:
            text += f" (±{100 * record.extra['spread']:.1f}%)"
        if record.flag:
            text += " !" if record.flag == BELOW_FLOOR else " ?"
        if record.note:
            text += f" [{self._footnote(f'{record.backend}: {record.note}')}]"
        return text

    def averages(self) -> list[float | None]:
        result = []
        for column in self.columns:
            values = [
                r.value for row in self.rows
                if (r := self.cells.get((row, column))) is not None
                and r.status == "ok" and r.value is not None and r.flag != BELOW_FLOOR
            ]
            result.append(_average(column[1], values))
        return result

    def display_rows(self) -> list[list[str]]:
        rows = [
            [row, *(self._display(self.cells.get((row, c))) for c in self.columns)]
            for row in self.rows
        ]
        rows.append(["average", *("" if v is None else _fmt(v) for v in self.averages())])
        return rows

    def raw_rows(self) -> list[list[object]]:
        rows: list[list[object]] = []
        for row in self.rows:
            values: list[object] = [row]
            for column in self.columns:
                r = self.cells.get((row, column))
                values.append(r.value if r is not None and r.status == "ok" else "")
            rows.append(values)
        rows.append(["average", *("" if v is None else v for v in self.averages())])
        return rows


def ceilings_line(traffic_gbps: dict[str, float] | None, copy_gbps: float | None = None) -> str:
    """The measured bandwidth of each traffic pattern, as one line (or the copy's alone, in files
    from before the patterns were measured)."""
    if traffic_gbps:
        return "bandwidth (GB/s): " + ", ".join(f"{name} {gbps:.1f}" for name, gbps in traffic_gbps.items())
    if copy_gbps is None:
        return "bandwidth: not measured (no cell was timed)"
    return f"copy bandwidth: {copy_gbps:.1f} GB/s"


def options_line(options: dict | None) -> str | None:
    """The operator options a run used (``addmm --bias 2d ...``), as one line; None when it had none."""
    if not options:
        return None
    return "operator options: " + ", ".join(f"{name}={value}" for name, value in sorted(options.items()))


def group_records(records: Iterable[Record]) -> dict[tuple[str, str, str], list[Record]]:
    groups: dict[tuple[str, str, str], list[Record]] = {}
    for r in records:
        groups.setdefault(_group_key(r), []).append(r)
    return groups


def table_layout(op: str) -> tuple[str, list[str] | None]:
    """The x_val label and the backend order of ``op``'s tables as its run prints them: the
    operator's backends, baseline first; ``("x_val", None)`` for an operator this process does not
    know (a plugin's), whose columns keep the records' order."""
    if op not in operator_names():
        return "x_val", None
    operator = load_operator(op)
    return operator.x_val_label, [b.name for b in operator.backends()]


def render(records: list[Record], x_val_label: str, backend_order: list[str] | None = None) -> str:
    """The terminal table of one (op, mode, dtype) group, with its footnotes."""
    data = TableData(records, x_val_label, backend_order)
    op, mode, dtype = _group_key(records[0])
    body = tabulate(data.display_rows(), headers=data.header(), tablefmt="simple", disable_numparse=True)
    lines = [f"{op} {mode} {dtype}", body, AVERAGE_NOTE]
    lines += [f"[{i}] {text}" for i, text in enumerate(data.footnotes, start=1)]
    return "\n".join(lines)


KERNEL_RATES = (("bytes_moved", "GB/s", 1e9), ("flops", "TFLOP/s", 1e12))
"""The rates a kernel table shows where the work of a launch is known: (work field, header, unit)."""


def _kernel_rate(kernel: dict, work: str, unit: float) -> str:
    per_launch = kernel.get(work)
    if per_launch is None or kernel["us_per_call"] <= 0:
        return "-"
    return f"{per_launch * kernel['calls'] / (kernel['us_per_call'] * 1e-6) / unit:.4g}"


OVERLAP_SHOWN = 0.05
"""A kernel table shows the kernels' spans where one spans this much more than its own time."""
SPAN_NOTE = ("span: start to end, where a kernel overlaps the one before it (a programmatic dependent "
             "launch waits there); us/call, share and rates count only the time it adds")


def _overlaps(kernel: dict) -> bool:
    return kernel.get("span_us_per_call", 0.0) > (1 + OVERLAP_SHOWN) * kernel["us_per_call"]


def kernel_tables(records: Iterable[Record], top: int = 8) -> list[str]:
    """One table per profiled cell of what its call launched: each kernel's calls and device time
    per call (the time it adds to the call's: :func:`~harness.measure.profile.exposed_times`), its
    share of the cell's kernel time, largest first (``top`` of them), its span where kernels
    overlap, and its GB/s and TFLOP/s where the work of its launches is known (columns left out
    where none is)."""
    tables = []
    for r in records:
        kernels = r.extra.get("kernels") if r.metric == "kernels" else None
        if not kernels:
            continue
        shown = kernels[:top]
        spans = any(_overlaps(k) for k in shown)
        rates = [rate for rate in KERNEL_RATES if any(k.get(rate[0]) is not None for k in shown)]
        rows = [[k["name"][:70], f"{k['calls']:g}", f"{k['us_per_call']:.2f}",
                 *([f"{k.get('span_us_per_call', k['us_per_call']):.2f}"] if spans else []),
                 f"{100 * k['share']:.1f}%", *(_kernel_rate(k, work, unit) for work, _, unit in rates)]
                for k in shown]
        headers = ["kernel", "calls", "us/call", *(["span"] if spans else []), "share",
                   *(header for _, header, _ in rates)]
        more = f"\n(and {len(kernels) - top} more)" if len(kernels) > top else ""
        note = f"\n{SPAN_NOTE}" if spans else ""
        title = f"kernels of {r.op} {r.mode} {x_label(r.x_val)} {r.backend}"
        tables.append(title + "\n" + tabulate(rows, headers=headers, disable_numparse=True) + more + note)
    return tables
