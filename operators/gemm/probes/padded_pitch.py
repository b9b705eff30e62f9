"""Row pitches padded to 128 bytes at 3000x5000x7000: our tiled TMA kernel on the plan's
autotuned config, its operands and output as they come (16-byte pitches) and copied to
128-byte pitches, against cuBLAS, in one process.

Question: with N = 5000 (10,000-byte rows of B and of the output) the kernel trails cuBLAS by far
more than with N = 5120 (``results/h100/NOTES.md``, "The pitch probe at 3000x5000x7000").  Does a
128-byte pitch of B, of the output, or of A too, bring it to the aligned shape's speed, and does
it still pay with B's copy inside the call?  Shapes are matmul ``(M, N, K)``; ``,t`` reads B
through a transposed view (the backward's dX), ``,ta`` reads A so (dW).  Each variant is checked
against float64 (:class:`~operators.gemm.probes.common.VariantLog`)::

    python -m operators.gemm.probes.padded_pitch --out pitch.json [--shape 3000,5000,7000]
"""

from __future__ import annotations

import torch
import triton

from operators.gemm import triton_impl
from operators.gemm.alignment import output_buffer, padded_copy
from operators.gemm.probes.common import Run, probe_matmuls, tiled_into
from operators.gemm.probes.matmul_configs import describe
from operators.gemm.triton_dispatch import Kernel, plan

SHAPES = ("3000,5000,7000", "3072,5000,7168", "3000,7000,5000,t", "7000,5000,3000,ta")
"""The sweep's shape forward, the same with M and K aligned, then its dX and dW matmuls."""
PITCH_BYTES = 128


def pitched(t: torch.Tensor) -> torch.Tensor:
    """A copy of ``t`` (row-major, or column-major: a transposed view) whose rows (columns) are
    a multiple of :data:`PITCH_BYTES` apart."""
    return padded_copy(t, t.stride(0) == 1 and t.stride(1) != 1, PITCH_BYTES)


def check_tiled(m: int, n: int, k: int, device: torch.device) -> None:
    """Stop unless the plan of an (M, N, K) matmul runs the tiled TMA kernel."""
    chosen = plan(m, n, k, "tf32", device)
    if chosen.kernel is not Kernel.TMA:
        raise SystemExit(f"{m}x{n}x{k} runs {chosen.kernel.value}, not the tiled TMA kernel")


def autotuned_config(a: torch.Tensor, b: torch.Tensor) -> triton.Config | None:
    """The config the autotuner picks for the plan's TMA kernel on ``a @ b``."""
    triton_impl.fused_matmul(a, b)
    return triton_impl.autotuned_tiled_pick(Kernel.TMA)


def probe_shape(a: torch.Tensor, b: torch.Tensor, run: Run) -> None:
    """cuBLAS, the plan, then the plan's config on 128-byte pitches (B; B and the output; A, B
    and the output; B copied inside the timed call)."""
    (m, k), n = a.shape, b.shape[1]
    check_tiled(m, n, k, a.device)
    run("cublas", lambda: torch.mm(a, b))
    config = autotuned_config(a, b)
    run(f"triton plan ({describe(config)})", lambda: triton_impl.fused_matmul(a, b))
    wide_a, wide_b = pitched(a), pitched(b)
    narrow_out = output_buffer(m, n, a.dtype, a.device)
    wide_out = output_buffer(m, n, a.dtype, a.device, pitch_bytes=PITCH_BYTES)
    run("b pitched", lambda: tiled_into(a, wide_b, narrow_out, Kernel.TMA, config))
    run("b and out pitched", lambda: tiled_into(a, wide_b, wide_out, Kernel.TMA, config))
    run("a, b and out pitched", lambda: tiled_into(wide_a, wide_b, wide_out, Kernel.TMA, config))
    run("b copied to a pitched buffer in the call",
        lambda: tiled_into(a, pitched(b), narrow_out, Kernel.TMA, config))


def main() -> None:
    probe_matmuls(__doc__, SHAPES, probe_shape)


if __name__ == "__main__":
    main()
