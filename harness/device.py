"""Choose the device and prepare Triton and Helion to run on it.

On a machine without a GPU, Triton kernels run through Triton's interpreter and Helion
kernels run their generated Triton code through the same interpreter.  Both read their
environment when kernels are decorated, so :func:`prepare_backends` must run before any
kernel module is imported; the operator registry imports kernel modules lazily for that
reason.
"""

from __future__ import annotations

import os

import torch

from harness.timing import make_timer

_INTERPRETER_MATH = (
    "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "abs", "floor", "ceil",
    "fma", "erf",
)


def default_device() -> str:
    """Return ``"cuda"`` when a GPU is visible, else ``"cpu"``."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def uses_interpreter(device: str) -> bool:
    """Whether Triton and Helion kernels run through Triton's CPU interpreter."""
    return device == "cpu"


def prepare_backends(device: str) -> None:
    """Set up Triton and Helion for ``device``; idempotent.

    On the CPU this turns on Triton's interpreter, stops Helion from autotuning (which
    cannot run there) and points the ``libdevice`` math functions that Helion emits at
    their ``tl`` equivalents, which the interpreter can run (triton issue 8825).  On CUDA
    it makes any accidental Helion autotuning an error: benchmarks use stored configs.
    """
    if uses_interpreter(device):
        os.environ["TRITON_INTERPRET"] = "1"
        os.environ["HELION_AUTOTUNE_EFFORT"] = "none"
        _route_libdevice_to_tl()
    elif os.environ.get("OPBENCH_ALLOW_AUTOTUNE") != "1":
        os.environ["HELION_DISALLOW_AUTOTUNING"] = "1"


def _route_libdevice_to_tl() -> None:
    import triton.language as tl
    from triton.language.extra import libdevice

    def forward_to_tl(name: str):
        # Looked up at call time: the interpreter patches ``tl`` only while a kernel runs.
        def call(*args, **kwargs):
            return getattr(tl, name)(*args, **kwargs)

        call.__name__ = name
        return call

    for name in _INTERPRETER_MATH:
        setattr(libdevice, name, forward_to_tl(name))


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


def measure_copy_gbps(device: str, warmup_ms: float, rep_ms: float) -> float:
    """Device-to-device copy bandwidth, counting bytes read plus bytes written, in GB/s.

    Timed with plain launches even when the run replays CUDA graphs: a captured ``copy_``
    becomes a memcpy node that runs on the copy engines (about 2.8 TB/s on the H200, against
    4.26 TB/s for the copy kernel the backends compete with).
    """
    timer = make_timer(device, warmup_ms, rep_ms, cudagraph=False)
    numel = (2**28 if device == "cuda" else 2**23)
    src = torch.randn(numel, device=device)
    dst = torch.empty_like(src)
    stats = timer.measure(lambda: dst.copy_(src))
    return 2 * src.numel() * src.element_size() / (stats.p50 * 1e-3) / 1e9
