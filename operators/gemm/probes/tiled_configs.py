"""The tiled kernel at the shapes where it trails cuBLAS: every config of its list, timed
flushed, against the autotuner's pick, Helion and cuBLAS, all in one process.

Question: does the autotuner pick a config that our flushed timer finds slow (its own timing
runs unflushed, once per process), or does no config of the list reach cuBLAS?  Shapes are
matmul ``(M, N, K)``; ``--transposed-b`` reads B through a transposed view, as addmm's dX
(``grad @ mat2.T``) does.  Each variant's result is checked against float64; the JSON is
rewritten after every variant::

    python -m operators.gemm.probes.tiled_configs --out tiled.json [--shape 20120,512,1536]
"""

from __future__ import annotations

import argparse

import torch
import triton

from operators.gemm import helion_impl, triton_impl
from operators.gemm.probes.common import DTYPE, Run, VariantLog
from operators.gemm.triton_configs import POINTER_CONFIGS, TMA_CONFIGS
from operators.gemm.triton_dispatch import Kernel, plan

SHAPES = ("20120,512,1536", "20120,1536,512,t", "128,4096,4096", "3000,5000,7000", "1024,1024,1024",
          "1000,1000,1000")
"""The reference shape's forward and dX (``,t``: B transposed), then the sweep's shapes under 0.95x."""


def describe(config: triton.Config | None) -> str:
    if config is None:
        return "none"
    kw = config.kwargs
    extra = "".join(f" {name.lower()}" for name in ("PERSISTENT", "EPILOGUE_SUBTILE") if kw.get(name))
    return (f"{kw['BLOCK_M']}x{kw['BLOCK_N']}x{kw['BLOCK_K']}/s{config.num_stages}/w{config.num_warps}"
            f"{extra}")


def probe_shape(a: torch.Tensor, b: torch.Tensor, run: Run) -> None:
    """Every variant of ``a @ b``."""
    (m, k), n = a.shape, b.shape[1]
    chosen = plan(m, n, k, "tf32", a.device)
    run("cublas", lambda: torch.mm(a, b))
    run("helion", lambda: helion_impl.fused_matmul(a, b))
    if chosen.kernel is Kernel.SPLIT_K:
        run("triton autotuned (split_k)", lambda: triton_impl.fused_matmul(a, b))
        return
    triton_impl.fused_matmul(a, b)
    pick = describe(triton_impl.autotuned_tiled_pick(chosen.kernel))
    run(f"triton autotuned ({chosen.kernel.value} {pick})", lambda: triton_impl.fused_matmul(a, b))
    for config in TMA_CONFIGS if chosen.kernel is Kernel.TMA else POINTER_CONFIGS:
        run(f"triton {chosen.kernel.value} {describe(config)}",
            lambda config=config: triton_impl.fused_matmul(a, b, config=config))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--shape", action="append", help=f"M,N,K[,t] (default: {' '.join(SHAPES)})")
    args = parser.parse_args()
    log = VariantLog(args.out)
    for text in args.shape or SHAPES:
        m, n, k = map(int, text.split(",")[:3])
        a = torch.randn(m, k, device="cuda", dtype=DTYPE)
        b = torch.randn(n, k, device="cuda", dtype=DTYPE).mT if text.endswith(",t") else \
            torch.randn(k, n, device="cuda", dtype=DTYPE)
        probe_shape(a, b, log.runner(text, a.double() @ b.double(), 2.0 * m * n * k))


if __name__ == "__main__":
    main()
