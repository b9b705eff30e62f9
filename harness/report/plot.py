"""Plots of result records (matplotlib): one panel per (op, mode, dtype), a metric against the shape.

Each panel draws one line per backend over the shapes in file order, labelled at its right end
(same colour and marker for a backend in every panel), and the ceiling as a dashed line: the
measured bandwidth of the cell's traffic pattern for GB/s (the copy's in files from before the
patterns were measured), the datasheet peak for TFLOP/s, and for latency the floor they imply.
A cell that failed (an error, or an accuracy check it did not pass) or was skipped is never drawn
as a value: an ``x`` at the bottom of the panel marks it, with the backend and what happened.
matplotlib is imported only when plotting.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from harness.operator import BenchmarkOperator, Mode
from harness.registry import load_operator, operator_names
from harness.report.results import Record
from harness.report.table import group_records, options_line, x_label
from harness.report.traffic import traffic_ceiling

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

PLOT_METRICS = ("latency", "gbps", "tflops")
SUFFIXES = (".png", ".svg")
AXIS_LABELS = {"latency": "latency (ms, log scale)", "gbps": "GB/s", "tflops": "TFLOP/s"}
STYLES = {"eager": ("#444444", "o"), "triton": ("tab:blue", "s"), "helion": ("tab:green", "^"),
          "torch_compile": ("tab:purple", "D")}
OTHER_STYLES = [("tab:orange", "v"), ("tab:brown", "P"), ("tab:pink", "X"), ("tab:olive", "*"),
                ("tab:cyan", "h")]
MARKS = {"error": "tab:red", "inaccurate": "tab:red", "skipped": "0.55"}
LABEL_GAP = 0.05
"""The least distance between two line labels, as a fraction of the panel's height."""


@dataclass
class Panel:
    """What one panel draws: a value (NaN where there is none) per backend and shape, the marked
    cells as (shape index, backend, ``error``, ``inaccurate`` or ``skipped``), and the ceiling per shape."""

    title: str
    metric: str
    x_title: str
    shapes: list[str]
    values: dict[str, list[float]]
    marks: list[tuple[int, str, str]]
    ceiling: list[float] | None
    ceiling_label: str


def _operator(op: str, dtype: str, options: dict[str, Any] | None) -> BenchmarkOperator | None:
    """The operator's models (bytes, flops, traffic) for a record's dtype; None for an unknown op."""
    if op not in operator_names():
        return None
    return load_operator(op)("cuda", getattr(torch, dtype), options)


def _metric(model: BenchmarkOperator | None, present: set[str], asked: str | None) -> str | None:
    """The metric a panel plots: ``asked``, else the throughput its records have, else latency."""
    if asked is not None:
        return asked if asked in present else None
    compute_bound = model is not None and model.compute_bound
    order = ("tflops", "gbps", "latency") if compute_bound else ("gbps", "tflops", "latency")
    return next((m for m in order if m in present), None)


def _memory_ceiling(header: dict[str, Any], traffic: dict[str, int]) -> tuple[float | None, str]:
    """The measured bandwidth of a cell's traffic, and what it is."""
    measured = header.get("ceilings_gbps")
    if not measured:  # files from before the patterns were measured: the copy is their ceiling
        return header.get("copy_gbps"), "measured copy"
    ceiling = traffic_ceiling(traffic, measured)
    return ceiling, "measured " + "+".join(traffic)


def _ceiling(header: dict[str, Any], model: BenchmarkOperator | None, mode: str, metric: str,
             x_vals: list[int | list[int]]) -> tuple[list[float] | None, str]:
    """The ceiling of each shape in the panel's unit (for latency, the floor it sets) and its label;
    None where the operator has no model of the work or the file no measure of the device."""
    peak = header.get("peak_tflops")
    if metric == "tflops":
        return ([peak] * len(x_vals), "datasheet peak") if peak else (None, "")
    if model is None:
        return None, ""
    shapes = [tuple(x) if isinstance(x, list) else (x,) for x in x_vals]
    if metric == "latency" and model.compute_bound:
        flops = [model.flops(s, Mode(mode)) for s in shapes]
        if not peak or None in flops:
            return None, ""
        return [f / (peak * 1e9) for f in flops], "floor at datasheet peak"
    traffic = [model.traffic(s, Mode(mode)) for s in shapes]
    if None in traffic:
        return None, ""
    measured = [_memory_ceiling(header, t) for t in traffic]
    ceilings = [gbps for gbps, _ in measured]
    if None in ceilings:
        return None, ""
    label = measured[0][1]
    if metric == "gbps":
        return ceilings, label
    nbytes = [sum(t.values()) for t in traffic]
    return [b / (gbps * 1e6) for b, gbps in zip(nbytes, ceilings, strict=True)], f"floor at {label}"


def _panel(header: dict[str, Any], records: list[Record], asked: str | None) -> Panel | None:
    """The panel of one (op, mode, dtype) group; None when it has no record of the metric."""
    op, mode, dtype = records[0].op, records[0].mode, records[0].dtype
    model = _operator(op, dtype, header.get("options"))
    metric = _metric(model, {r.metric for r in records}, asked)
    if metric is None:
        return None
    x_vals = list({x_label(r.x_val): r.x_val for r in records}.values())
    shapes = [x_label(x) for x in x_vals]
    inaccurate = {r.cell() for r in records if r.metric == "accuracy" and r.status == "ok" and r.value == 0}
    values: dict[str, list[float]] = {}
    marks = []
    for r in records:
        if r.metric != metric:
            continue
        row = values.setdefault(r.backend, [math.nan] * len(shapes))
        index = shapes.index(x_label(r.x_val))
        if r.status != "ok" or r.value is None:
            marks.append((index, r.backend, "skipped" if r.status == "skipped" else "error"))
        elif r.cell() in inaccurate:
            marks.append((index, r.backend, "inaccurate"))
        else:
            row[index] = r.value
    ceiling, ceiling_label = _ceiling(header, model, mode, metric, x_vals)
    return Panel(f"{op} {mode} {dtype}", metric, model.x_val_label if model else "x_val", shapes,
                 values, marks, ceiling, ceiling_label)


def _styles(backends: list[str]) -> dict[str, tuple[str, str]]:
    """(colour, marker) per backend: fixed for the built-in backends, then in order of appearance."""
    others = iter(OTHER_STYLES * (1 + len(backends) // len(OTHER_STYLES)))
    return {b: STYLES[b] if b in STYLES else next(others) for b in backends}


def _spread(heights: list[float]) -> list[float]:
    """Label heights (fractions of the panel) moved apart by :data:`LABEL_GAP`, kept below the top."""
    placed = list(heights)
    last = -math.inf
    for i in sorted(range(len(heights)), key=heights.__getitem__):
        placed[i] = last = max(heights[i], last + LABEL_GAP)
    overflow = max(0.0, last - 0.98)
    return [h - overflow for h in placed]


def _set_limits(ax: Axes, panel: Panel) -> None:
    finite = [v for row in panel.values.values() for v in row if math.isfinite(v)] + (panel.ceiling or [])
    if panel.metric == "latency":
        ax.set_yscale("log")
        if finite:
            ax.set_ylim(min(finite) / 1.6, max(finite) * 1.6)
    else:
        ax.set_ylim(0, 1.12 * max(finite) if finite else 1)
    ax.set_xlim(-0.5, len(panel.shapes) - 0.5)


def _draw_marks(ax: Axes, panel: Panel, styles: dict[str, tuple[str, str]]) -> None:
    """An ``x`` per failed or skipped cell at the bottom of the panel, the backend and what happened
    written above it."""
    at_shape: dict[int, list[tuple[str, str]]] = {}
    for index, backend, kind in panel.marks:
        at_shape.setdefault(index, []).append((backend, kind))
    bottom = ax.get_xaxis_transform()
    for index, cells in at_shape.items():
        for k, (backend, kind) in enumerate(cells):
            x = index + 0.16 * (k - (len(cells) - 1) / 2)
            ax.plot([x], [0.03], transform=bottom, ls="none", marker="x", ms=7, mew=2,
                    color=MARKS[kind], clip_on=False, gid=f"{kind}:{backend}")
            ax.text(x, 0.07, f"{backend} {kind}", transform=bottom, rotation=90, ha="center",
                    va="bottom", fontsize=6.5, color=styles[backend][0], zorder=1.5,
                    bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.6, "pad": 0.6})


def _draw_ceiling(ax: Axes, panel: Panel) -> None:
    """The ceiling as a dashed line, labelled above its left end (with its value where it is one)."""
    xs, ys = list(range(len(panel.shapes))), list(panel.ceiling)
    if len(xs) == 1:  # one shape: a segment across its marks, where one point would draw nothing
        xs, ys = [-0.4, 0.4], ys * 2
    ax.plot(xs, ys, color="0.35", ls="--", lw=1.2, gid="ceiling")
    label = panel.ceiling_label
    one_value = all(math.isclose(c, panel.ceiling[0], rel_tol=1e-9) for c in panel.ceiling)
    if panel.metric != "latency" and one_value:
        value = panel.ceiling[0]
        label += f" {value:.0f}" if value >= 100 else f" {value:.3g}"
        label += f" {AXIS_LABELS[panel.metric]}"
    ax.annotate(label, (xs[0], panel.ceiling[0]), xytext=(-4, 3), textcoords="offset points",
                fontsize=7.5, color="0.3", va="bottom")


def _label_lines(ax: Axes, panel: Panel, styles: dict[str, tuple[str, str]]) -> None:
    """Each backend's name right of the panel, at the height of its last value (moved apart)."""
    ends = {}
    for backend, row in panel.values.items():
        last = max((i for i, v in enumerate(row) if math.isfinite(v)), default=None)
        if last is not None:
            ends[backend] = row[last]
    to_axes = ax.transScale + ax.transLimits
    heights = _spread([float(to_axes.transform((0, value))[1]) for value in ends.values()])
    for backend, height in zip(ends, heights, strict=True):
        ax.text(1.01, height, backend, transform=ax.transAxes, color=styles[backend][0], fontsize=8,
                fontweight="bold", va="center", ha="left", clip_on=False)


def _draw(ax: Axes, panel: Panel, styles: dict[str, tuple[str, str]]) -> None:
    xs = list(range(len(panel.shapes)))
    order = list(styles)
    for backend, row in panel.values.items():
        colour, marker = styles[backend]
        rank = min(order.index(backend), 4)  # later lines thinner, so lines that coincide stay visible
        ax.plot(xs, row, color=colour, marker=marker, ms=7.5 - 1.2 * rank, lw=2.6 - 0.4 * rank,
                label=backend)
    if panel.ceiling:
        _draw_ceiling(ax, panel)
    _set_limits(ax, panel)
    _label_lines(ax, panel, styles)
    _draw_marks(ax, panel, styles)
    ax.set_title(panel.title, fontsize=10)
    ax.set_ylabel(AXIS_LABELS[panel.metric])
    ax.set_xlabel(panel.x_title)
    ax.set_xticks(xs, panel.shapes, rotation=40, ha="right", rotation_mode="anchor", fontsize=7.5)
    ax.grid(axis="y", alpha=0.3)


def plot_results(header: dict[str, Any], records: list[Record], path: Path,
                 metric: str | None = None) -> Figure:
    """Write the plot of ``records`` to ``path`` (PNG or SVG, by its suffix) and return the figure.

    ``metric`` (latency, gbps or tflops) overrides each panel's choice: TFLOP/s for compute-bound
    operators, GB/s for the others, latency where a group has neither.  Groups without a record
    of the metric get no panel; raises ValueError when none has one or the suffix is unknown.
    """
    from matplotlib import rc_context
    from matplotlib.figure import Figure

    path = Path(path)
    if path.suffix not in SUFFIXES:
        raise ValueError(f"{path}: cannot plot to {path.suffix or 'a file without a suffix'} "
                         f"(valid: {', '.join(SUFFIXES)})")
    panels = [p for group in group_records(records).values() if (p := _panel(header, group, metric))]
    if not panels:
        raise ValueError(f"no {metric or ', '.join(PLOT_METRICS)} records to plot")
    styles = _styles(list(dict.fromkeys(r.backend for r in records)))
    ncols = 1 if len(panels) == 1 else 2
    nrows = math.ceil(len(panels) / ncols)
    figure = Figure(figsize=(6.8 * ncols, 4.4 * nrows + 0.4), layout="constrained")
    axes = list(figure.subplots(nrows, ncols, squeeze=False).flat)
    for i, panel in enumerate(panels):
        _draw(axes[i], panel, styles)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    commit = (header.get("git_commit") or "unknown")[:12]
    title = f"{header.get('device_name') or 'unknown device'}  ·  commit {commit}"
    if line := options_line(header.get("options")):
        title += f"  ·  {line}"
    figure.suptitle(title, fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    with rc_context({"svg.fonttype": "none", "svg.hashsalt": "opbench"}):
        figure.savefig(path, dpi=130, metadata={"Date": None} if path.suffix == ".svg" else None)
    return figure
