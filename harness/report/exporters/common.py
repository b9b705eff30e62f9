"""What every export format shares: which records are exported and how an x_val is spelled."""

from __future__ import annotations

from harness.report.results import Record


class ExportError(ValueError):
    """Records a format cannot hold without losing or merging values; the message says which."""


def exported(records: list[Record]) -> list[Record]:
    """The records with a value: failed and skipped cells are left out, never written as 0, and a
    wrong cell (accuracy 0) keeps only its accuracy, so that no dashboard charts a wrong kernel's
    time or speedup."""
    wrong = {r.cell() for r in records if r.metric == "accuracy" and r.status == "ok" and r.value == 0}
    return [r for r in records if r.status == "ok" and r.value is not None
            and (r.metric == "accuracy" or r.cell() not in wrong)]


def tritonbench_x_val(x_val: int | list[int]) -> str:
    """An x_val as tritonbench prints it: ``4096``, or a shape as a Python tuple ``(4096, 1024)``."""
    return str(x_val) if isinstance(x_val, int) else str(tuple(x_val))
