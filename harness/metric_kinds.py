"""What each metric is: name, unit, description and the facts the record checks and tables read.

A leaf module that every package may import: ``harness/measure/metrics.py`` attaches each
metric's computation to its entry here; the result-file checker, the terminal tables and the
record guards read these facts instead of naming metrics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class MetricKind:
    """One metric as the records and reports see it."""

    name: str
    unit: str
    description: str
    positive: bool = False
    """Every measured value is above zero (a ratio or a time): a file with one that is not is rejected."""
    mean: Literal["arithmetic", "geometric"] = "arithmetic"
    """How a table's ``average`` row averages the metric's values."""
    pass_fail: bool = False
    """Its values are 1 (passed) or 0 (failed)."""
    floor_flagged: bool = True
    """A cell timed faster than the physical floor flags this record ``below_physical_floor``."""
    reviewed: bool = False
    """A value above the operator's ``review_speedup`` (of a backend other than the registered
    baseline) flags the record ``review_speedup``."""


METRIC_KINDS: dict[str, MetricKind] = {kind.name: kind for kind in (
    MetricKind("latency", "ms", "median time per call, shown with its spread (half p20-p80 / median)",
               positive=True),
    MetricKind("speedup", "x", "baseline median latency / backend median latency", positive=True,
               mean="geometric", reviewed=True),
    MetricKind("accuracy", "bool", "1 if every output/gradient matches the float64 reference",
               pass_fail=True, floor_flagged=False),
    MetricKind("gbps", "GB/s", "bytes moved (operator's model for the mode) / median latency"),
    MetricKind("tflops", "TFLOP/s", "floating-point operations (operator's model) / median latency"),
    MetricKind("pct_peak", "%",
               "gbps / the measured bandwidth of the cell's traffic pattern (memory-bound ops), or "
               "tflops / dense datasheet peak (matmuls)"),
    MetricKind("peak_mem", "MB", "peak device memory allocated during one call (CUDA only)"),
    MetricKind("compile_time", "ms", "set-up plus first call, minus the steady-state median"),
    MetricKind("walltime", "ms", "host time per call (Python, dispatch, launch): batches of calls back to "
               "back, one device sync per batch, no L2 flush", positive=True),
    MetricKind("kernels", "count", "kernels one call launches; each one's device time and share in the "
               "record and in a table after the run (profiled, no flush)"),
)}
