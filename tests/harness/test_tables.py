"""Terminal tables: x_val column, baseline first, spreads, footnotes and the average row.
"""

from __future__ import annotations

import math

import pytest

from harness.report.table import AVERAGE_NOTE, TableData, render
from tests.helpers import sample_exp_records


def test_average_row_uses_geometric_mean_for_speedup_and_arithmetic_otherwise() -> None:
    data = TableData(sample_exp_records(), "numel")
    averages = dict(zip(data.header()[1:], data.averages(), strict=True))
    assert averages["triton-speedup"] == pytest.approx(math.sqrt(2.0 * 4.0))
    assert averages["eager-latency"] == pytest.approx((2.0 + 8.0) / 2)
    assert averages["triton-latency"] == pytest.approx(1.5)


def test_table_has_xval_column_baseline_first_spread_and_error_footnote() -> None:
    text = render(sample_exp_records(), "numel")
    lines = text.splitlines()
    header = lines[1].split()
    assert header[:3] == ["numel", "eager-latency", "eager-speedup"]
    assert "triton-latency" in header
    assert "2 (±1.0%)" in text
    assert any(line.startswith("average") for line in lines)
    assert AVERAGE_NOTE in text
    assert "ERR[1]" in text and "[1] eager: RuntimeError: out of memory" in text

