"""Guards against misleading numbers, and the metrics derived from a cell's median and models.
"""

from __future__ import annotations

import pytest
import torch

from harness.measure.ceilings import DeviceCeilings
from harness.measure.records import Baseline, cell_records
from harness.metrics.cell_data import Measurement, SampleStats
from harness.operator import Mode
from harness.report.results import BELOW_FLOOR, REVIEW_SPEEDUP
from harness.report.table import TableData, render
from operators.exp.operator import ExpOperator

CEILINGS = DeviceCeilings(copy_gbps=4000.0, peak_gbps=4800.0, peak_tflops=None,
                          traffic_gbps={"copy": 4000.0, "read2_write1": 4400.0, "read": 4500.0})


def _records(latency_ms: float, baseline_p50: float, backend: str = "triton") -> list:
    op = ExpOperator("cpu", torch.float32)
    m = Measurement(timings={"device": [SampleStats(latency_ms, latency_ms, latency_ms, 50)]})
    baseline = Baseline("eager", "eager", p50=baseline_p50)
    return cell_records(op, Mode.FWD, (2**26,), backend, m, None, ["latency", "speedup", "gbps"],
                        CEILINGS, baseline)


def test_cell_faster_than_physical_floor_is_flagged_and_left_out_of_averages() -> None:
    # 2**26 fp32 elements, read + write = 512 MiB: at 4.8 TB/s no call can beat 0.112 ms.
    honest = _records(0.13, 0.13, "eager")
    impossible = _records(0.05, 0.13)
    assert all(r.flag == BELOW_FLOOR for r in impossible)
    assert "physical floor" in impossible[0].note
    assert not any(r.flag for r in honest)
    data = TableData(honest + impossible, "numel")
    averages = dict(zip(data.header()[1:], data.averages(), strict=True))
    assert averages["triton-latency"] is None
    assert averages["eager-latency"] == 0.13
    assert " !" in render(honest + impossible, "numel")


def test_large_speedup_is_marked_for_review() -> None:
    records = {r.metric: r for r in _records(0.2, 2.5)}
    assert records["speedup"].value == 12.5
    assert records["speedup"].flag == REVIEW_SPEEDUP
    assert records["latency"].flag is None
    assert "12.5 ?" in render(list(records.values()), "numel")


def test_a_zero_median_latency_is_an_error_not_a_division_by_zero() -> None:
    op = ExpOperator("cpu", torch.float32)
    empty = Measurement(timings={"device": [SampleStats(0.0, 0.0, 0.0, 10)]})
    records = cell_records(op, Mode.FWD, (2**20,), "triton", empty, None, ["latency", "speedup", "gbps"],
                           CEILINGS, Baseline("eager", "eager", p50=0.1))
    assert all(r.status == "error" and "no measurable work" in r.error for r in records)


def test_throughput_metrics_follow_from_the_median_and_the_models() -> None:
    records = {r.metric: r for r in _records(0.25, 0.5)}
    moved = ExpOperator("cpu", torch.float32).bytes_moved((2**26,), Mode.FWD)
    assert records["latency"].value == 0.25
    assert records["speedup"].value == 2.0
    assert records["gbps"].value == pytest.approx(moved / 0.25e-3 / 1e9)


def test_compile_time_is_the_first_call_beyond_the_steady_median() -> None:
    op = ExpOperator("cpu", torch.float32)
    m = Measurement(timings={"device": [SampleStats(1.0, 1.0, 1.0, 50)]}, first_call_ms=41.0)
    record, = cell_records(op, Mode.FWD, (2**20,), "triton", m, None, ["compile_time"], CEILINGS,
                           Baseline("eager", "eager", p50=1.0))
    assert record.value == 40.0


@pytest.mark.parametrize(("name", "tflops", "gbps"), [
    ("NVIDIA H200", 989.4, 4800.0),
    ("NVIDIA H200 NVL", 835.5, 4800.0),
    ("NVIDIA H100 80GB HBM3", 989.4, 3350.0),
    ("NVIDIA H100 PCIe", 756.5, 2000.0),
    ("NVIDIA H100 NVL", 835.5, 3900.0),
])
def test_datasheet_peaks_tell_the_pcie_and_nvl_parts_from_the_sxm_ones(
        monkeypatch: pytest.MonkeyPatch, name: str, tflops: float, gbps: float) -> None:
    from harness.measure import ceilings as device

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_: name)
    assert device.declared_peak_tflops("cuda", torch.bfloat16) == tflops
    assert device.declared_peak_gbps("cuda", copy_gbps=1000.0) == gbps



def test_pct_peak_reads_each_cell_against_the_ceiling_of_its_traffic_pattern() -> None:
    op = ExpOperator("cuda", torch.bfloat16)
    size = 2**26 * 2
    mixed = 5 * size / (2 * size / 4000.0 + 3 * size / 4400.0)
    cases = {Mode.FWD: 4000.0, Mode.BWD: 4400.0, Mode.FWD_BWD: mixed}
    for mode, ceiling in cases.items():
        ms = op.bytes_moved((2**26,), mode) / (0.9 * ceiling * 1e9) * 1e3
        m = Measurement(timings={"device": [SampleStats(ms, ms, ms, 50)]})
        record, = cell_records(op, mode, (2**26,), "triton", m, None, ["pct_peak"], CEILINGS,
                               Baseline("eager", "eager"))
        assert record.value == pytest.approx(90.0), mode


def test_a_mix_of_patterns_takes_each_patterns_time_at_its_ceiling() -> None:
    assert CEILINGS.memory_ceiling({"copy": 4000, "read": 4500}) == pytest.approx(8500 / 2)
    assert CEILINGS.memory_ceiling({"copy": 1}) == 4000.0
    assert CEILINGS.memory_ceiling({"write_only": 1}) is None and CEILINGS.memory_ceiling(None) is None
