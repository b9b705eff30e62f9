"""The metric table is the one place a metric's facts live: the record checker, the tables and
the record guards read it, and the runner computes exactly its metrics."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from harness.measure.measurement import Measurement
from harness.measure.metrics import METRICS
from harness.measure.records import Baseline, cell_records
from harness.measure.timing import SampleStats
from harness.metric_kinds import METRIC_KINDS
from harness.operator import Mode
from harness.report.results import BELOW_FLOOR, REVIEW_SPEEDUP, Record, malformed
from harness.report.table import AVERAGE_NOTE, TableData
from operators.exp.operator import ExpOperator
from tests.harness.test_guards import CEILINGS


def _record(metric: str, value: float, x_val: int = 1024) -> Record:
    return Record(op="exp", mode="fwd", dtype="float32", x_val=x_val, backend="triton", metric=metric,
                  value=value, unit=METRIC_KINDS[metric].unit)


def _average(metric: str, values: list[float]) -> float | None:
    data = TableData([_record(metric, v, x_val=i + 1) for i, v in enumerate(values)], "numel")
    return data.averages()[0]


def test_the_runner_computes_exactly_the_metric_table_s_metrics_in_its_order() -> None:
    assert list(METRICS) == list(METRIC_KINDS)
    assert all(metric.kind is METRIC_KINDS[name] for name, metric in METRICS.items())


@pytest.mark.parametrize("name", list(METRIC_KINDS))
def test_the_checker_rejects_zero_exactly_for_the_metrics_marked_positive(name: str) -> None:
    kind = METRIC_KINDS[name]
    problem = malformed(_record(name, 0.0))
    assert (problem == f"{name} 0.0 is not positive") == kind.positive
    assert kind.positive or problem is None
    assert (malformed(_record(name, 0.5)) is not None) == kind.pass_fail


@pytest.mark.parametrize("name", list(METRIC_KINDS))
def test_the_table_averages_each_metric_by_the_mean_its_entry_names(name: str) -> None:
    mean = METRIC_KINDS[name].mean
    assert _average(name, [1.0, 4.0]) == pytest.approx({"geometric": 2.0, "arithmetic": 2.5}[mean])
    assert (f"geometric mean for {name}" in AVERAGE_NOTE) == (mean == "geometric")


def test_changing_an_entry_changes_the_checker_and_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    gbps, speedup = METRIC_KINDS["gbps"], METRIC_KINDS["speedup"]
    monkeypatch.setitem(METRIC_KINDS, "gbps", dataclasses.replace(gbps, positive=True, mean="geometric"))
    monkeypatch.setitem(METRIC_KINDS, "speedup",
                        dataclasses.replace(speedup, positive=False, mean="arithmetic"))
    assert malformed(_record("gbps", 0.0)) == "gbps 0.0 is not positive"
    assert malformed(_record("speedup", 0.0)) is None
    assert _average("gbps", [1.0, 4.0]) == pytest.approx(math.sqrt(4.0))
    assert _average("speedup", [1.0, 4.0]) == pytest.approx(2.5)


def test_the_floor_and_review_flags_follow_the_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    op = ExpOperator("cpu", torch.float32)
    for name, change in (("gbps", {"reviewed": True}), ("latency", {"floor_flagged": False})):
        metric = METRICS[name]
        monkeypatch.setitem(METRICS, name, dataclasses.replace(
            metric, kind=dataclasses.replace(metric.kind, **change)))

    def flags(latency_ms: float) -> dict[str, str | None]:
        m = Measurement(timings={"device": [SampleStats(latency_ms, latency_ms, latency_ms, 50)]})
        records = cell_records(op, Mode.FWD, (2**26,), "triton", m, None, ["latency", "gbps"], CEILINGS,
                               Baseline("eager", "eager", p50=latency_ms))
        return {r.metric: r.flag for r in records}

    # 512 MiB moved: 0.05 ms is below the floor; 0.13 ms is above it at ~4100 GB/s, over exp's review_speedup.
    assert flags(0.05) == {"latency": None, "gbps": BELOW_FLOOR}
    assert flags(0.13) == {"latency": None, "gbps": REVIEW_SPEEDUP}
