"""addmm's dW matmul at its reference shapes: Triton's split-K kernel per config and part count,
against the autotuner's pick, Helion's split-K and cuBLAS, all timed in one process.

For addmm ``(M, N, K)`` the weight gradient is ``mat1.T @ grad``, a ``(K, M) @ (M, N)`` product
whose long inner dim is M, its first operand a transposed view (read in place, as the backward
does).  Each variant's result is checked against float64; the probe rewrites its JSON after
every variant, so a run stopped early keeps what it finished::

    python -m operators.gemm.probes.split_k_configs --out split_k.json [--shape 20120,512,1536]
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable

import torch
import triton

from operators.gemm import helion_impl
from operators.gemm.probes.common import DTYPE, Run, VariantLog, split_k_call
from operators.gemm.strategy import Regime
from operators.gemm.triton_configs import SPLIT_K_CONFIGS, split_k_config
from operators.gemm.triton_dispatch import Kernel, Plan, plan
from operators.gemm.triton_splitk import autotuned_pick

PARTS = (3, 4, 5, 6, 8)


def describe(config: triton.Config | None) -> str:
    if config is None:
        return "none"
    tma = " tma" if config.kwargs["TMA_LOADS"] else ""
    return f"BK{config.kwargs['BLOCK_K']}/s{config.num_stages}/w{config.num_warps}{tma}"


EXTRA_CONFIGS = tuple(
    config for config in (
        split_k_config(bk, stages, warps, tma=tma)
        for bk, stages, warps, tma in itertools.product((32, 64), (3, 4, 5), (4, 8), (False, True)))
    if describe(config) not in {describe(listed) for listed in SPLIT_K_CONFIGS}
)
"""Configs beside the route's own: Helion's stored split-K tiles (128x128x32 or x64, 3-5
stages, 4 warps) among them."""


def probe_shape(a: torch.Tensor, b: torch.Tensor, run: Run) -> None:
    """Every variant of ``a @ b`` (``a`` transposed, ``b`` the long-K gradient)."""
    (rows, inner), cols = a.shape, b.shape[1]
    chosen = plan(rows, cols, inner, "tf32", a.device)
    if chosen.kernel is not Kernel.SPLIT_K:
        raise SystemExit(f"the dW matmul {rows}x{cols}, K {inner}, is not split: its plan is {chosen}")
    run("cublas", lambda: torch.mm(a, b))
    run("helion", lambda: helion_impl.fused_matmul(a, b))

    def triton_call(split: int, config: triton.Config | None) -> Callable[[], torch.Tensor]:
        return split_k_call(a, b, Plan(Regime.SPLIT_K, Kernel.SPLIT_K, chosen.block_m, chosen.block_n, split),
                            config)

    triton_call(chosen.split_k, None)()  # the autotuner picks; this output is not checked
    pick = describe(autotuned_pick(Regime.SPLIT_K))
    run(f"triton autotuned ({pick}), {chosen.split_k} parts", triton_call(chosen.split_k, None))
    for split, config in itertools.product(PARTS, SPLIT_K_CONFIGS + EXTRA_CONFIGS):
        run(f"triton {split} parts {describe(config)}", triton_call(split, config))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--shape", action="append", help="addmm M,N,K (default: 20120,512,1536)")
    args = parser.parse_args()
    log = VariantLog(args.out)
    for text in args.shape or ["20120,512,1536"]:
        m, n, k = map(int, text.split(","))
        a = torch.randn(m, k, device="cuda", dtype=DTYPE).mT
        b = torch.randn(m, n, device="cuda", dtype=DTYPE)
        probe_shape(a, b, log.runner(text, a.double() @ b.double(), 2.0 * m * n * k))


if __name__ == "__main__":
    main()
