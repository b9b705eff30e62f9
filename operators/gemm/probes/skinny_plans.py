"""The decode, matrix-vector and few-tile matmuls: Triton's split-K kernel over output tiles,
part counts and configs beside the plan's own, against Helion and cuBLAS, all in one process.

Question: these products are bound by reading their large operand once (a 4096x4096 weight,
32 MiB; an 8192x8192 matrix, 128 MiB), so their floor is that read at the copy ceiling; does
a tile and K split other than the plan's come nearer it, where the plan's runs at 0.75-0.91x
cuBLAS?  Shapes are matmul ``(M, N, K)``; ``,t`` reads B through a transposed view (the
backward's ``grad @ w.T``), ``,ta`` reads A so (``a.T @ grad``).  Each variant is checked
against float64 (:class:`~operators.gemm.probes.common.VariantLog`)::

    python -m operators.gemm.probes.skinny_plans --out skinny.json [--shape 8192,8,8192]
"""

from __future__ import annotations

import dataclasses
import itertools

import torch

from operators.gemm import helion_impl, triton_impl
from operators.gemm.probes.common import Run, probe_matmuls, split_k_call
from operators.gemm.probes.split_k_configs import describe
from operators.gemm.strategy import Regime, sm_count
from operators.gemm.triton_configs import SKINNY_CONFIGS, SPLIT_K_CONFIGS, split_k_config
from operators.gemm.triton_dispatch import Kernel, Plan, plan, reads_rows_along_k
from operators.gemm.triton_splitk import autotuned_pick

SHAPES = ("8192,8,8192", "16,4096,4096", "1,4096,4096", "8192,8,8192,ta", "16,4096,4096,t",
          "1,4096,4096,t")
"""The sweep's skinny forwards, then the backward matmul of each that runs split-K (128x4096x4096
runs tiled over the whole of K since prediction 43)."""
SKINNY_TILE_COLS = (16, 32, 64, 128)
SPLIT_K_TILE_COLS = (64, 128, 256)
PARTS = (1, 2, 4, 8)
EXTRA_CONFIGS = tuple(split_k_config(bk, stages, warps, tma=tma)
                      for bk, stages, warps, tma in ((128, 6, 4, False), (128, 6, 4, True), (64, 6, 4, True)))
"""Deeper pipelines beside the regimes' own lists, pointer and TMA (none of them in either list)."""


def _plans(chosen: Plan, rows: int, cols: int, k: int, sms: int) -> list[Plan]:
    """Column tiles and part counts around ``chosen`` (its BLOCK_M): 0.5 to 8 waves of programs,
    parts of 256 and more."""
    widths = SKINNY_TILE_COLS if chosen.regime is Regime.SKINNY else SPLIT_K_TILE_COLS
    found = []
    for block_n, split in itertools.product(widths, PARTS):
        programs = -(-rows // chosen.block_m) * -(-cols // block_n) * split
        if sms // 2 <= programs <= 8 * sms and k // split >= 256:
            found.append(dataclasses.replace(chosen, block_n=block_n, split_k=split))
    return found


def probe_shape(a: torch.Tensor, b: torch.Tensor, run: Run) -> None:
    """cuBLAS, Helion, the plan's autotuned pick and every (tile, parts, config) variant of ``a @ b``."""
    (m, k), n = a.shape, b.shape[1]
    chosen = plan(m, n, k, "tf32", a.device)  # the split-K plan, were the GEMV not routed
    if chosen.kernel is not Kernel.SPLIT_K:
        raise SystemExit(f"{m}x{n}x{k} runs {chosen.kernel.value}, not split-K")
    run("cublas", lambda: torch.mm(a, b))
    run("helion", lambda: helion_impl.fused_matmul(a, b))
    routed = plan(m, n, k, "tf32", a.device, reads_rows_along_k(a, b))
    if routed.kernel is Kernel.GEMV:
        run("triton plan (gemv)", lambda: triton_impl.fused_matmul(a, b))
    rows, cols = (n, m) if chosen.swap else (m, n)
    split_k_call(a, b, chosen, None)()  # the autotuner picks
    pick = describe(autotuned_pick(chosen.regime))
    label = "plan" if routed == chosen else "split-K"
    run(f"triton {label} {chosen.block_m}x{chosen.block_n}, {chosen.split_k} parts ({pick})",
        split_k_call(a, b, chosen, None))
    configs = (SKINNY_CONFIGS if chosen.regime is Regime.SKINNY else SPLIT_K_CONFIGS) + EXTRA_CONFIGS
    for variant in _plans(chosen, rows, cols, k, sm_count(a.device)):
        for config in configs:
            run(f"triton {variant.block_m}x{variant.block_n}, {variant.split_k} parts {describe(config)}",
                split_k_call(a, b, variant, config))


def main() -> None:
    probe_matmuls(__doc__, SHAPES, probe_shape)


if __name__ == "__main__":
    main()
