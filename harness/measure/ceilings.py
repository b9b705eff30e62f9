"""What the device can do: its datasheet peaks, and the bandwidth of each traffic pattern the
operators use, measured at the start of a run with the run's timer.

A 1:1 copy is not a ceiling for traffic that reads more than it writes (reads are cheaper), so
each memory-bound cell is read against the pattern of its own traffic (operators give it by
mode, :meth:`harness.operator.BenchmarkOperator.traffic`): ``copy`` (read 1, write 1),
``read2_write1`` (``c = a + b``) and ``read`` (a reduction).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from harness.report.traffic import traffic_ceiling
from harness.settings import TimerSettings
from harness.timing import Timer, make_timer

TRAFFIC_PATTERNS = ("copy", "read2_write1", "read")


@dataclass(frozen=True)
class DeviceCeilings:
    """What the run measured or declared about the device (bandwidths in GB/s)."""

    copy_gbps: float | None
    peak_gbps: float | None
    peak_tflops: float | None
    traffic_gbps: dict[str, float] = field(default_factory=dict)

    def memory_ceiling(self, traffic: dict[str, int] | None) -> float | None:
        """The bandwidth of a mix of patterns (bytes per pattern), :func:`traffic_ceiling` of the
        measured ones; None when a pattern was not measured."""
        return traffic_ceiling(traffic, self.traffic_gbps)


def measure_ceilings(device: str, dtype: torch.dtype, timer: TimerSettings,
                     timed: bool = True) -> DeviceCeilings:
    """The bandwidth of every traffic pattern measured now, and the datasheet peaks; nothing for a
    run that times no cell (an accuracy-only run has no use for them)."""
    if not timed:
        return DeviceCeilings(None, None, None)
    traffic = measure_traffic_gbps(device, timer)
    return DeviceCeilings(copy_gbps=traffic["copy"], peak_gbps=declared_peak_gbps(device, traffic["copy"]),
                          peak_tflops=declared_peak_tflops(device, dtype), traffic_gbps=traffic)


# Dense tensor-core peaks from the vendor datasheets (TFLOP/s), keyed by a device-name fragment,
# the first fragment found in the name wins (so the PCIe and NVL parts come before the SXM
# ones); fp32 matmuls are compared with the TF32 rate, which Triton uses for fp32 dots.
_DECLARED_PEAK_TFLOPS = {
    "H200 NVL": {torch.bfloat16: 835.5, torch.float16: 835.5, torch.float32: 417.5},
    "H200": {torch.bfloat16: 989.4, torch.float16: 989.4, torch.float32: 494.7},
    "H100 PCIe": {torch.bfloat16: 756.5, torch.float16: 756.5, torch.float32: 378.0},
    "H100 NVL": {torch.bfloat16: 835.5, torch.float16: 835.5, torch.float32: 417.5},
    "H100": {torch.bfloat16: 989.4, torch.float16: 989.4, torch.float32: 494.7},
    "A100": {torch.bfloat16: 312.0, torch.float16: 312.0, torch.float32: 156.0},
}


# Datasheet memory bandwidth (GB/s): no kernel can move bytes faster than this.
_DECLARED_PEAK_GBPS = {"H200": 4800.0, "H100 PCIe": 2000.0, "H100 NVL": 3900.0, "H100": 3350.0,
                       "A100": 2039.0}


def declared_peak_gbps(device: str, copy_gbps: float) -> float | None:
    """The GPU's datasheet memory bandwidth (1.2x the measured copy where unknown).

    None on the CPU: without cache flushing, small CPU cases legitimately run from cache.
    """
    if device != "cuda":
        return None
    name = torch.cuda.get_device_name()
    for fragment, peak in _DECLARED_PEAK_GBPS.items():
        if fragment in name:
            return peak
    return 1.2 * copy_gbps


def declared_peak_tflops(device: str, dtype: torch.dtype) -> float | None:
    """The datasheet dense matmul peak for this GPU and dtype, if known."""
    if device != "cuda":
        return None
    name = torch.cuda.get_device_name()
    for fragment, peaks in _DECLARED_PEAK_TFLOPS.items():
        if fragment in name:
            return peaks.get(dtype)
    return None


def _pattern_calls(name: str, numel: int, device: str) -> tuple[list[Callable[[], object]], int]:
    """The calls that move pattern ``name``'s traffic over ``numel`` fp32 elements (PyTorch's, then
    on a GPU the Triton kernel's of :mod:`harness.measure.ceiling_kernels`), and its bytes."""
    a = torch.randn(numel, device=device)
    if name == "copy":
        out = torch.empty_like(a)
        calls, inputs, nbytes = [lambda: out.copy_(a)], (a,), 2 * a.nbytes
    elif name == "read2_write1":
        b, out = torch.randn_like(a), torch.empty_like(a)
        calls, inputs, nbytes = [lambda: torch.add(a, b, out=out)], (a, b), 3 * a.nbytes
    else:
        sink = torch.empty((), device=device)
        calls, inputs, nbytes = [lambda: torch.sum(a, dim=0, out=sink)], (a,), a.nbytes
    if device == "cuda":
        from harness.measure.ceiling_kernels import pattern_call  # triton, after harness.device set it up

        calls.append(pattern_call(name, inputs)[0])
    return calls, nbytes


def _best_gbps(name: str, numel: int, device: str, timer: Timer) -> float:
    """The bandwidth of the fastest of pattern ``name``'s calls."""
    calls, nbytes = _pattern_calls(name, numel, device)
    return max(nbytes / (timer.measure(call).p50 * 1e-3) / 1e9 for call in calls)


def measure_traffic_gbps(device: str, settings: TimerSettings,
                         patterns: tuple[str, ...] = TRAFFIC_PATTERNS) -> dict[str, float]:
    """GB/s of each of ``patterns`` (by default every one of :data:`TRAFFIC_PATTERNS`; bytes read
    plus bytes written over the median), the best of PyTorch's kernel and, on a GPU, a Triton one.

    Timed with plain launches even when the run replays CUDA graphs: a captured ``copy_``
    becomes a memcpy node that runs on the copy engines, slower than the copy kernel the backends
    compete with (``results/h200/exp/NOTES.md``, "``--cudagraph`` and ``peak_mem`` on the H200").
    """
    timer = make_timer(device, dataclasses.replace(settings, cudagraph=False))
    return {name: _best_gbps(name, _numel(device), device, timer) for name in patterns}


def _numel(device: str) -> int:
    """1 GiB of fp32 on a GPU (far past its L2), 32 MiB on the CPU."""
    return 2**28 if device == "cuda" else 2**23
