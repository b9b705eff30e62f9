"""Terminal tables: x_val column, baseline first, spreads, footnotes and the average row.
"""

from __future__ import annotations

import math

import pytest

from harness.report.results import Record
from harness.report.table import AVERAGE_NOTE, TableData, render


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


def test_average_row_uses_geometric_mean_for_speedup_and_arithmetic_otherwise() -> None:
    data = TableData(_records(), "numel")
    averages = dict(zip(data.header()[1:], data.averages(), strict=True))
    assert averages["triton-speedup"] == pytest.approx(math.sqrt(2.0 * 4.0))
    assert averages["eager-latency"] == pytest.approx((2.0 + 8.0) / 2)
    assert averages["triton-latency"] == pytest.approx(1.5)


def test_table_has_xval_column_baseline_first_spread_and_error_footnote() -> None:
    text = render(_records(), "numel")
    lines = text.splitlines()
    header = lines[1].split()
    assert header[:3] == ["numel", "eager-latency", "eager-speedup"]
    assert "triton-latency" in header
    assert "2 (±1.0%)" in text
    assert any(line.startswith("average") for line in lines)
    assert AVERAGE_NOTE in text
    assert "ERR[1]" in text and "[1] eager: RuntimeError: out of memory" in text

