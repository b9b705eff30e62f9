"""What one cell's call launches: a ``torch.profiler`` trace of a few calls (``--profile DIR``) and
the time of each kernel in them (the ``kernels`` metric), with the work of each launch where the
operator's model tells it (:func:`with_work`), from which the kernel tables give GB/s and TFLOP/s.

The profiled calls run as the timer runs them (``setup`` before each) but with no L2 flush and
no spin kernel, so the trace holds only the call's own kernels; each call is the range
``opbench.call`` in the trace.  On the CPU the "kernels" are the call's operators.

A GPU kernel's time is the time it adds to the device's busy time (:func:`exposed_times`), not
its span from start to end: a kernel launched as a programmatic dependent starts while the one
before it still runs and waits there, so its span includes that wait (rms_norm's ``dw`` sum:
``results/h200/rms_norm/NOTES.md``, "Issue 19 evidence").
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

from harness.measure.cell import Cell
from harness.operator import BenchmarkOperator, KernelWork, Mode, Shape
from harness.timing import synchronize

CALLS = 3
"""Calls a profile records."""
CALL_RANGE = "opbench.call"


def profile_cell(cell: Cell, device: str, trace: Path | None) -> list[dict[str, Any]]:
    """Profile :data:`CALLS` calls of ``cell``; write their Chrome/Perfetto trace to ``trace`` when
    given; the kernels, largest share first (:func:`kernel_times`)."""
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
        trace.unlink(missing_ok=True)
        prof.export_chrome_trace(str(trace))
        if not trace.is_file():  # torch.profiler reports a failed export only as a log line
            raise OSError(f"the trace {trace} was not written")
    if device == "cuda":
        return kernel_times((e.name, e.time_range.start, e.time_range.end) for e in prof.events()
                            if e.device_type == DeviceType.CUDA and not e.is_user_annotation)
    return _operator_times(prof.key_averages())


def exposed_times(intervals: Iterable[tuple[str, float, float]]) -> list[tuple[str, float, float]]:
    """``(name, span, exposed)`` of each ``(name, start, end)`` device interval, in start order:
    ``exposed`` is the part of it after every interval that started earlier has ended, so the
    exposed times add up to the time the device was busy, and a kernel that overlaps the one
    before it (a programmatic dependent launch waiting on it, or another stream's) counts only
    what it adds."""
    timed = []
    busy_until = float("-inf")
    for name, start, end in sorted(intervals, key=lambda i: (i[1], i[2])):
        timed.append((name, end - start, max(0.0, end - max(start, busy_until))))
        busy_until = max(busy_until, end)
    return timed


def kernel_times(intervals: Iterable[tuple[str, float, float]]) -> list[dict[str, Any]]:
    """The kernels of :data:`CALLS` calls' device intervals ``(name, start_us, end_us)``, largest
    share first: launches and microseconds per call (``us_per_call`` exposed, ``span_us_per_call``
    start to end: :func:`exposed_times`) and share of the calls' busy device time."""
    launches: dict[str, int] = defaultdict(int)
    span: dict[str, float] = defaultdict(float)
    exposed: dict[str, float] = defaultdict(float)
    for name, span_us, exposed_us in exposed_times(intervals):
        launches[name] += 1
        span[name] += span_us
        exposed[name] += exposed_us
    total = sum(exposed.values()) or 1.0
    kernels = [{"name": name, "calls": launches[name] / CALLS, "us_per_call": exposed[name] / CALLS,
                "span_us_per_call": span[name] / CALLS, "share": exposed[name] / total} for name in launches]
    return sorted(kernels, key=lambda k: -k["share"])


def _operator_times(averages: Any) -> list[dict[str, Any]]:
    """On the CPU: each operator's self time, which nests (``aten::matmul`` around ``aten::mm``)."""
    rows = [(e.key, e.count, e.self_cpu_time_total) for e in averages
            if not e.key.startswith("opbench.") and e.self_cpu_time_total > 0]
    total = sum(us for _, _, us in rows) or 1.0
    kernels = [{"name": name, "calls": count / CALLS, "us_per_call": us / CALLS,
                "span_us_per_call": us / CALLS, "share": us / total} for name, count, us in rows]
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
