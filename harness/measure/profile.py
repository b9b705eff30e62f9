"""What one cell's call launches: a ``torch.profiler`` trace of a few calls (``--profile DIR``) and
the time of each kernel in them (the ``kernels`` metric), with the work of each launch where the
operator's model tells it (:func:`with_work`), from which the kernel tables give GB/s and TFLOP/s.

The profiled calls run as the timer runs them (``setup`` before each) but with no L2 flush and
no spin kernel, so the trace holds only the call's own kernels; each call is the range
``opbench.call`` in the trace.  On the CPU the "kernels" are the call's operators.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

from harness.measure.cell import Cell
from harness.measure.timing import synchronize
from harness.operator import BenchmarkOperator, KernelWork, Mode, Shape

CALLS = 3
"""Calls a profile records."""
CALL_RANGE = "opbench.call"


def profile_cell(cell: Cell, device: str, trace: Path | None) -> list[dict[str, Any]]:
    """Profile :data:`CALLS` calls of ``cell``; write their Chrome/Perfetto trace to ``trace`` when
    given; the kernels, largest share first: name, calls and microseconds per call, share."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    cell.setup()
    cell.timed()
    synchronize(device)
    with profile(activities=activities) as prof:
        for _ in range(CALLS):
            cell.setup()
            with record_function(CALL_RANGE):
                cell.timed()
            synchronize(device)
    if trace is not None:
        trace.parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(trace))
    return _kernel_times(prof.key_averages(), device)


def _kernel_times(averages: Any, device: str) -> list[dict[str, Any]]:
    if device == "cuda":
        rows = [(e.key, e.count, e.self_device_time_total) for e in averages
                if e.device_type == DeviceType.CUDA and e.self_device_time_total > 0]
    else:
        rows = [(e.key, e.count, e.self_cpu_time_total) for e in averages
                if not e.key.startswith("opbench.") and e.self_cpu_time_total > 0]
    total = sum(us for _, _, us in rows) or 1.0
    kernels = [{"name": name, "calls": count / CALLS, "us_per_call": us / CALLS, "share": us / total}
               for name, count, us in rows]
    return sorted(kernels, key=lambda k: -k["share"])


def with_work(kernels: list[dict[str, Any]], op: BenchmarkOperator, shape: Shape,
              mode: Mode) -> list[dict[str, Any]]:
    """``kernels`` with ``bytes_moved`` and ``flops`` of one launch of each (None where unknown): the
    operator's :meth:`~harness.operator.BenchmarkOperator.kernel_work` by name, or, for a call of
    one kernel launched once, the call's whole model.  Only GPU kernels have work: on the CPU the
    "kernels" are operators (``aten::matmul`` wraps the ``aten::mm`` that does the work)."""
    whole = KernelWork(op.bytes_moved(shape, mode), op.flops(shape, mode))
    alone = len(kernels) == 1 and kernels[0]["calls"] == 1
    worked = []
    for kernel in kernels:
        work = KernelWork()
        if op.device == "cuda":
            work = op.kernel_work(shape, mode, kernel["name"]) or (whole if alone else work)
        worked.append({**kernel, "bytes_moved": work.bytes_moved, "flops": work.flops})
    return worked
