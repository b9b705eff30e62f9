"""Turn one cell's measurement into result records, with the guards against misleading numbers.

Guards: a cell faster than the device's physical floor (bytes at datasheet bandwidth, or
flops at datasheet peak) is flagged ``below_physical_floor`` and kept out of averages and
verdicts; a speedup above the operator's ``review_speedup`` is flagged ``review_speedup``.
The notes the cell's kernels left (e.g. a Helion config of another shape bucket) follow each
record's own note, so every number of that cell says how it was obtained.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from harness.measure.ceilings import DeviceCeilings
from harness.metrics.cell_data import CellContext, Measurement, Roofline
from harness.metrics.table import METRICS, MetricNotApplicable, MetricUnavailable, RecordFields
from harness.operator import BenchmarkOperator, Mode, Shape
from harness.report.results import BELOW_FLOOR, REVIEW_SPEEDUP, Record


@dataclass
class Baseline:
    """The backend speedups divide by, and what became of it on this shape."""

    name: str
    registered: str
    p50: float | None = None
    skipped: str | None = None

    def is_registered_baseline(self) -> bool:
        return self.name == self.registered


def base_record(op: BenchmarkOperator, mode: Mode, shape: Shape, backend: str, metric: str) -> Record:
    """An empty record of one cell and metric."""
    x_val = op.x_val(shape)
    return Record(
        op=op.name, mode=mode.value, dtype=str(op.dtype).removeprefix("torch."),
        x_val=list(x_val) if isinstance(x_val, tuple) else x_val, backend=backend,
        metric=metric, value=None, unit=METRICS[metric].unit,
    )


def _set_fields(record: Record, fields: RecordFields) -> None:
    """Give ``record`` what its metric's entry says it carries besides its value."""
    for carried in dataclasses.fields(RecordFields):
        if carried.name == "extra":
            record.extra.update(fields.extra)
        else:
            setattr(record, carried.name, getattr(fields, carried.name))


def roofline(op: BenchmarkOperator, mode: Mode, shape: Shape, ceilings: DeviceCeilings) -> Roofline:
    """The operator's work model for the cell against the device's ceilings."""
    return Roofline(
        bytes_moved=op.bytes_moved(shape, mode), flops=op.flops(shape, mode),
        compute_bound=op.compute_bound, memory_ceiling_gbps=ceilings.memory_ceiling(op.traffic(shape, mode)),
        peak_tflops=ceilings.peak_tflops, peak_gbps=ceilings.peak_gbps,
    )


def cell_records(op: BenchmarkOperator, mode: Mode, shape: Shape, backend: str,
                 measurement: Measurement, error: str | None, metrics: list[str],
                 ceilings: DeviceCeilings, baseline: Baseline) -> list[Record]:
    """One record per metric for a measured (or failed) cell."""
    roof = roofline(op, mode, shape, ceilings)
    ctx = CellContext(measurement, roof, baseline.p50, baseline.skipped)
    stats = measurement.stats
    floor = roof.floor_ms()
    below_floor = stats is not None and floor is not None and stats.p50 < floor
    records = []
    for name in metrics:
        metric = METRICS[name]
        record = base_record(op, mode, shape, backend, name)
        try:
            record.value = metric.compute(ctx)
        except MetricNotApplicable as reason:
            record.status, record.error = "skipped", str(reason)
        except MetricUnavailable as reason:
            record.status, record.error = "error", error or str(reason)
        _set_fields(record, metric.record_fields(ctx))
        if below_floor and metric.floor_flagged:
            record.flag = BELOW_FLOOR
            record.note = f"faster than the physical floor of {floor * 1e3:.2f} us"
        elif (metric.reviewed and record.value is not None and backend != baseline.name
              and baseline.is_registered_baseline() and record.value > op.review_speedup):
            record.flag = REVIEW_SPEEDUP
            record.note = f"{name} over {op.review_speedup:g}x: review"
        if measurement.notes:
            record.note = "; ".join(filter(None, [record.note, *measurement.notes]))
        records.append(record)
    return records


def skipped_records(op: BenchmarkOperator, mode: Mode, shape: Shape, backend: str,
                    reason: str, metrics: list[str]) -> list[Record]:
    """Records of a cell that cannot run here, each saying why."""
    records = []
    for metric in metrics:
        record = base_record(op, mode, shape, backend, metric)
        record.status, record.error = "skipped", reason
        records.append(record)
    return records
