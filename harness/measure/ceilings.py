"""What the device can do: its datasheet peaks and the copy bandwidth measured at the start of a run."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from harness.measure.timing import make_timer
from harness.settings import TimerSettings


@dataclass(frozen=True)
class DeviceCeilings:
    """What the run measured or declared about the device."""

    copy_gbps: float | None
    peak_gbps: float | None
    peak_tflops: float | None


def measure_ceilings(device: str, dtype: torch.dtype, timer: TimerSettings) -> DeviceCeilings:
    """The copy bandwidth measured now, and the datasheet peaks for ``device`` and ``dtype``."""
    copy_gbps = measure_copy_gbps(device, timer)
    return DeviceCeilings(copy_gbps=copy_gbps, peak_gbps=declared_peak_gbps(device, copy_gbps),
                          peak_tflops=declared_peak_tflops(device, dtype))


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


def measure_copy_gbps(device: str, settings: TimerSettings) -> float:
    """Device-to-device copy bandwidth, counting bytes read plus bytes written, in GB/s.

    Timed with plain launches even when the run replays CUDA graphs: a captured ``copy_``
    becomes a memcpy node that runs on the copy engines (about 2.8 TB/s on the H200, against
    4.26 TB/s for the copy kernel the backends compete with).
    """
    timer = make_timer(device, TimerSettings(settings.warmup_ms, settings.rep_ms, cudagraph=False))
    numel = (2**28 if device == "cuda" else 2**23)
    src = torch.randn(numel, device=device)
    dst = torch.empty_like(src)
    stats = timer.measure(lambda: dst.copy_(src))
    return 2 * src.numel() * src.element_size() / (stats.p50 * 1e-3) / 1e9
