"""The matmuls where torch.compile's max-autotune beat our Triton kernels on the H100: its two
best templates at each, run on our tiled TMA kernel (persistent and one tile a program) and our
pointer kernel, whatever our plan picks there, against that pick and cuBLAS, in one process.

Question: the templates Inductor picked there were missing from our config lists (k-blocks of
128 over 64-row tiles, of 16 for K of 16 or less), and at 128x4096x4096 our plan split K where
Inductor ran whole-K tiles (``results/h100/NOTES.md``, "torch_compile beside ours").  Is it the
configs, the plan, or the kernels' code that trails?  Shapes are matmul ``(M, N, K)``; ``,t``
reads B through a transposed view (``grad @ w.T``), ``,ta`` reads A so (``a.T @ grad``).  A TMA
variant runs only where no block exceeds its dim (a larger TMA box faults).  Each variant is
checked against float64 (:class:`~operators.gemm.probes.common.VariantLog`)::

    python -m operators.gemm.probes.tiled_candidates --out tiled.json [--shape 128,4096,4096]
"""

from __future__ import annotations

import torch
import triton

from operators.gemm import triton_impl
from operators.gemm.alignment import output_buffer
from operators.gemm.probes.common import Run, plan_label, probe_matmuls, tiled_into
from operators.gemm.probes.matmul_configs import describe
from operators.gemm.triton_configs import boxes_fit, pointer_config, tma_config
from operators.gemm.triton_dispatch import Kernel, plan

Tile = tuple[int, int, int, int, int]
"""BLOCK_M, BLOCK_N, BLOCK_K, stages, warps."""

INDUCTOR_PICKS: dict[str, tuple[Tile, ...]] = {
    "128,4096,4096": ((64, 64, 128, 5, 4), (64, 128, 128, 4, 4)),
    "128,4096,4096,t": ((64, 64, 128, 5, 4), (64, 128, 128, 4, 4)),
    "4096,4096,128,ta": ((128, 128, 32, 3, 4), (64, 128, 32, 3, 4)),
    "1024,1024,1024": ((64, 128, 128, 4, 4), (128, 128, 64, 5, 8)),
    "1024,1024,1024,t": ((64, 128, 128, 4, 4), (128, 128, 64, 5, 8)),
    "1024,1024,1024,ta": ((64, 128, 128, 4, 4), (128, 128, 64, 5, 8)),
    "256,256,256": ((64, 32, 128, 5, 4), (64, 64, 128, 5, 4)),
    "256,256,256,t": ((64, 32, 128, 5, 4), (64, 64, 128, 5, 4)),
    "256,256,256,ta": ((64, 32, 128, 5, 4), (64, 64, 128, 5, 4)),
    "1536,512,20120,ta": ((64, 128, 128, 4, 4), (128, 128, 64, 5, 8)),
    "8192,8192,8,t": ((64, 128, 16, 3, 4), (64, 128, 16, 4, 4)),
    "8192,8,8192,ta": ((128, 16, 64, 5, 8), (128, 16, 128, 4, 8)),
    "4096,4096,16,ta": ((64, 128, 16, 4, 8), (64, 128, 16, 3, 4)),
    "4096,4096,1,ta": ((64, 64, 16, 3, 8), (64, 32, 16, 5, 4)),
}
"""Per shape, the two fastest of Inductor's mm templates in its autotuning log (H100, torch
2.11; ``results/h100/torch_compile_autotune_log.txt``): the forward, dX (``,t``) or dW
(``,ta``) of the sweep's 128x4096x4096, 1024^3, 256^3, 20120x512x1536, 8192x8x8192,
16x4096x4096 and 1x4096x4096 (the first run's, where two runs ranked them differently)."""


def variants(tile: Tile, mnk: tuple[int, int, int]) -> list[tuple[Kernel, triton.Config]]:
    """``tile`` on the pointer kernel and, where every block fits its dim, on the TMA kernel
    persistent and one tile a program."""
    tma = [(Kernel.TMA, tma_config(*tile, persistent=persistent)) for persistent in (True, False)]
    return [(Kernel.POINTER, pointer_config(*tile)),
            *((kernel, config) for kernel, config in tma if boxes_fit(config, *mnk))]


def shape_key(a: torch.Tensor, b: torch.Tensor) -> str:
    """The ``M,N,K[,t|,ta]`` of ``a @ b``: ``,t`` for a column-major ``b``, ``,ta`` for ``a``."""
    (m, k), n = a.shape, b.shape[1]
    layout = ",ta" if a.stride(0) == 1 and m > 1 else ",t" if b.stride(0) == 1 and k > 1 else ""
    return f"{m},{n},{k}{layout}"


def probe_shape(a: torch.Tensor, b: torch.Tensor, run: Run) -> None:
    """cuBLAS, our plan's autotuned pick, then Inductor's picks for the shape (none for a shape
    :data:`INDUCTOR_PICKS` lacks) on our tiled kernels."""
    (m, k), n = a.shape, b.shape[1]
    chosen = plan(m, n, k, "tf32", a.device)
    run("cublas", lambda: torch.mm(a, b))
    run(f"triton plan ({plan_label(chosen)})", lambda: triton_impl.fused_matmul(a, b))
    out = output_buffer(m, n, a.dtype, a.device)
    for tile in INDUCTOR_PICKS.get(shape_key(a, b), ()):
        for kernel, config in variants(tile, (m, n, k)):
            run(f"triton {kernel.value} {describe(config)}",
                lambda kernel=kernel, config=config: tiled_into(a, b, out, kernel, config))


def main() -> None:
    probe_matmuls(__doc__, tuple(INDUCTOR_PICKS), probe_shape)


if __name__ == "__main__":
    main()
