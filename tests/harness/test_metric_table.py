"""The metric table is the one place a metric lives: the record checker, the tables, the record
guards and the command line read its entries, and the runner computes exactly its metrics."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
import torch

from harness.cli.main import main
from harness.measure.records import Baseline, cell_records
from harness.metrics.cell_data import CellContext, Measurement, SampleStats
from harness.metrics.table import METRICS, Metric, MetricUnavailable, RecordFields, needed
from harness.operator import Mode
from harness.report.results import BELOW_FLOOR, REVIEW_SPEEDUP, Record, malformed, read_json
from harness.report.table import AVERAGE_NOTE, TableData
from harness.sweep import in_process
from harness.sweep.spec import Sweep
from operators.exp.operator import ExpOperator
from tests.harness.test_guards import CEILINGS
from tests.harness.test_import_graph import import_graph, package_graph
from tests.helpers import cpu_settings, run_cells


def _record(metric: str, value: float, x_val: int = 1024) -> Record:
    return Record(op="exp", mode="fwd", dtype="float32", x_val=x_val, backend="triton", metric=metric,
                  value=value, unit=METRICS[metric].unit)


def _average(metric: str, values: list[float]) -> float | None:
    data = TableData([_record(metric, v, x_val=i + 1) for i, v in enumerate(values)], "numel")
    return data.averages()[0]


def test_every_entry_is_filed_under_its_own_name() -> None:
    assert all(metric.name == name for name, metric in METRICS.items())


def test_the_table_is_a_leaf_that_measuring_and_reporting_both_read() -> None:
    graph = package_graph(import_graph())
    assert graph["harness.metrics"] == set()
    assert "harness.metrics" in graph["harness.measure"] and "harness.metrics" in graph["harness.report"]


@pytest.mark.parametrize("name", list(METRICS))
def test_the_checker_rejects_zero_exactly_for_the_metrics_marked_positive(name: str) -> None:
    metric = METRICS[name]
    problem = malformed(_record(name, 0.0))
    assert (problem == f"{name} 0.0 is not positive") == metric.positive
    assert metric.positive or problem is None
    assert (malformed(_record(name, 0.5)) is not None) == metric.pass_fail


@pytest.mark.parametrize("name", list(METRICS))
def test_the_table_averages_each_metric_by_the_mean_its_entry_names(name: str) -> None:
    mean = METRICS[name].mean
    assert _average(name, [1.0, 4.0]) == pytest.approx({"geometric": 2.0, "arithmetic": 2.5}[mean])
    assert (f"geometric mean for {name}" in AVERAGE_NOTE) == (mean == "geometric")


def test_changing_an_entry_changes_the_checker_and_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    gbps, speedup = METRICS["gbps"], METRICS["speedup"]
    monkeypatch.setitem(METRICS, "gbps", dataclasses.replace(gbps, positive=True, mean="geometric"))
    monkeypatch.setitem(METRICS, "speedup", dataclasses.replace(speedup, positive=False, mean="arithmetic"))
    assert malformed(_record("gbps", 0.0)) == "gbps 0.0 is not positive"
    assert malformed(_record("speedup", 0.0)) is None
    assert _average("gbps", [1.0, 4.0]) == pytest.approx(math.sqrt(4.0))
    assert _average("speedup", [1.0, 4.0]) == pytest.approx(2.5)


def test_the_floor_and_review_flags_follow_the_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    op = ExpOperator("cpu", torch.float32)
    for name, change in (("gbps", {"reviewed": True}), ("latency", {"floor_flagged": False})):
        monkeypatch.setitem(METRICS, name, dataclasses.replace(METRICS[name], **change))

    def flags(latency_ms: float) -> dict[str, str | None]:
        m = Measurement(timings={"device": [SampleStats(latency_ms, latency_ms, latency_ms, 50)]})
        records = cell_records(op, Mode.FWD, (2**26,), "triton", m, None, ["latency", "gbps"], CEILINGS,
                               Baseline("eager", "eager", p50=latency_ms))
        return {r.metric: r.flag for r in records}

    # 512 MiB moved: 0.05 ms is below the floor; 0.13 ms is above it at ~4100 GB/s, over exp's review_speedup.
    assert flags(0.05) == {"latency": None, "gbps": BELOW_FLOOR}
    assert flags(0.13) == {"latency": None, "gbps": REVIEW_SPEEDUP}


def _half_latency(ctx: CellContext) -> float:
    stats = ctx.measurement.stats
    if stats is None:
        raise MetricUnavailable("not timed")
    return stats.p50 / 2


HALF_LATENCY = Metric(
    "half_latency", "ms", "half the median latency", _half_latency, positive=True, mean="geometric",
    record_fields=lambda ctx: RecordFields(note="halved", extra={"halves": 2}),
)


def test_one_entry_in_the_table_is_a_whole_new_metric(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Adding an entry (and nothing else) makes the command line accept and list the metric, the
    runner compute it with what its entry carries, and the checker and the tables read its facts."""
    run = ["--op", "exp", "--device", "cpu", "--shape", "1024", "--only", "eager", "--warmup", "0",
           "--rep", "1", "--metrics", "latency,half_latency", "--output-json", str(tmp_path / "r.json")]
    with pytest.raises(SystemExit) as refused:
        main(run)
    assert refused.value.code == 2 and "unknown metric 'half_latency'" in capsys.readouterr().err

    monkeypatch.setitem(METRICS, "half_latency", HALF_LATENCY)
    assert main(["--list-metrics"]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listing] == list(METRICS)
    assert listing[-1] == "half_latency ms       half the median latency"

    assert main(run) == 0
    tables = capsys.readouterr().out
    assert "eager-half_latency" in tables
    _, records = read_json(tmp_path / "r.json")
    latency, half = records
    assert (half.metric, half.unit, half.status, half.note) == ("half_latency", "ms", "ok", "halved")
    assert half.value == pytest.approx(latency.value / 2) and half.extra == {"halves": 2}
    assert malformed(_record("half_latency", 0.0)) == "half_latency 0.0 is not positive"
    assert _average("half_latency", [1.0, 4.0]) == pytest.approx(2.0)


def test_every_field_a_metric_gives_its_record_is_a_field_of_the_record() -> None:
    record_fields = {f.name for f in dataclasses.fields(Record)}
    assert {f.name for f in dataclasses.fields(RecordFields)} <= record_fields


def _launches(ctx: CellContext) -> float:
    if ctx.measurement.kernels is None:
        raise MetricUnavailable("the call was not profiled")
    return float(len(ctx.measurement.kernels))


def test_the_sweep_measures_what_the_entries_of_its_metrics_need(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new metric that declares it needs a profile (or the first call's time) gets it; without
    the need it does not, and neither does ``kernels`` (or ``compile_time``) once its entry stops
    declaring it."""
    launches = Metric("launches", "count", "kernels per call", _launches, timer=None,
                      needs=frozenset({"profile"}))
    monkeypatch.setitem(METRICS, "launches", launches)
    op = ExpOperator("cpu", torch.float32)
    assert run_cells(op, Mode.FWD, (1000,), ["launches"], ["eager"])[("eager", "launches")].value >= 1

    monkeypatch.setitem(METRICS, "launches", dataclasses.replace(launches, needs=frozenset()))
    record = run_cells(op, Mode.FWD, (1000,), ["launches"], ["eager"])[("eager", "launches")]
    assert (record.status, record.error) == ("error", "the call was not profiled")

    # The backward's first call is timed apart from its forward exactly for the metrics that
    # declare the first_call need (compile_time), whatever their name.
    asked: list[bool] = []
    build_cell = in_process.build_cell

    def spy(*args: object, **kwargs: object) -> object:
        asked.append(bool(kwargs["first_call_time"]))
        return build_cell(*args, **kwargs)

    monkeypatch.setattr(in_process, "build_cell", spy)
    run_cells(op, Mode.BWD, (1000,), ["compile_time"], ["eager"])
    compile_time = METRICS["compile_time"]
    monkeypatch.setitem(METRICS, "compile_time", dataclasses.replace(compile_time, needs=frozenset()))
    monkeypatch.setitem(METRICS, "launches", dataclasses.replace(launches, needs=frozenset({"first_call"})))
    run_cells(op, Mode.BWD, (1000,), ["compile_time"], ["eager"])
    run_cells(op, Mode.BWD, (1000,), ["launches"], ["eager"])
    assert asked == [True, False, True]
    monkeypatch.setitem(METRICS, "compile_time", compile_time)

    for name, needs in (("kernels", set()), ("latency", {"peak_mem"})):
        monkeypatch.setitem(METRICS, name, dataclasses.replace(METRICS[name], needs=frozenset(needs)))
    metrics = ["kernels", "latency", "compile_time"]
    sweep = Sweep(op, Mode.FWD, [(1000,)], ["eager"], "eager", cpu_settings(metrics))
    assert sweep.needs == needed(["latency", "compile_time"]) == {"peak_mem", "first_call"}
    assert not sweep.profiled
