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

import argparse
import dataclasses
import itertools
from collections.abc import Callable

import torch
import triton

from operators.gemm import helion_impl
from operators.gemm.probes.common import DTYPE, Run, VariantLog
from operators.gemm.probes.split_k_configs import describe
from operators.gemm.strategy import Regime, sm_count
from operators.gemm.triton_configs import NO_BIAS, SKINNY_CONFIGS, SPLIT_K_CONFIGS
from operators.gemm.triton_dispatch import Kernel, Plan, plan
from operators.gemm.triton_splitk import autotuned_pick, split_k_matmul

SHAPES = ("8192,8,8192", "128,4096,4096", "16,4096,4096", "1,4096,4096", "8192,8,8192,ta",
          "128,4096,4096,t", "16,4096,4096,t", "1,4096,4096,t")
"""The sweep's skinny and few-tile forwards, then the backward matmul of each that runs split-K."""
SKINNY_TILE_COLS = (16, 32, 64, 128)
SPLIT_K_TILE_COLS = (64, 128, 256)
PARTS = (1, 2, 4, 8)
EXTRA_CONFIGS = tuple(
    triton.Config({"BLOCK_K": bk, "GROUP_M": 8}, num_warps=warps, num_stages=stages)
    for bk, stages, warps in ((128, 3, 4), (64, 8, 4)))
"""Deeper and shallower pipelines beside the regimes' own lists."""


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
    chosen = plan(m, n, k, "tf32", a.device)
    if chosen.kernel is not Kernel.SPLIT_K:
        raise SystemExit(f"{m}x{n}x{k} runs {chosen.kernel.value}, not split-K")
    run("cublas", lambda: torch.mm(a, b))
    run("helion", lambda: helion_impl.fused_matmul(a, b))
    rows, cols = (n, m) if chosen.swap else (m, n)

    def triton_call(variant: Plan, config: triton.Config | None) -> Callable[[], torch.Tensor]:
        out = torch.full((m, n), float("nan"), device=a.device, dtype=a.dtype)

        def call() -> torch.Tensor:
            split_k_matmul(a, b, out, NO_BIAS, None, 1.0, 0.0, "tf32", variant, config)
            return out
        return call

    triton_call(chosen, None)()  # the autotuner picks
    pick = describe(autotuned_pick(chosen.regime))
    run(f"triton plan {chosen.block_m}x{chosen.block_n}, {chosen.split_k} parts ({pick})",
        triton_call(chosen, None))
    configs = (SKINNY_CONFIGS if chosen.regime is Regime.SKINNY else SPLIT_K_CONFIGS) + EXTRA_CONFIGS
    for variant in _plans(chosen, rows, cols, k, sm_count(a.device)):
        for config in configs:
            run(f"triton {variant.block_m}x{variant.block_n}, {variant.split_k} parts {describe(config)}",
                triton_call(variant, config))


def operand(rows: int, cols: int, transposed: bool) -> torch.Tensor:
    """A random bf16 (rows, cols) operand, row-major or a transposed view of a row-major one."""
    if transposed:
        return torch.randn(cols, rows, device="cuda", dtype=DTYPE).mT
    return torch.randn(rows, cols, device="cuda", dtype=DTYPE)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--shape", action="append", help=f"M,N,K[,t|,ta] (default: {' '.join(SHAPES)})")
    args = parser.parse_args()
    log = VariantLog(args.out)
    for text in args.shape or SHAPES:
        m, n, k = map(int, text.split(",")[:3])
        a, b = operand(m, k, text.endswith(",ta")), operand(k, n, text.endswith(",t"))
        probe_shape(a, b, log.runner(text, a.double() @ b.double(), 2.0 * m * n * k))


if __name__ == "__main__":
    main()
