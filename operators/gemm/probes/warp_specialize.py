"""The tiled TMA kernel with and without warp specialization, at the tiled shapes where it
trails cuBLAS and at one where it does not, all timed in one process.

Question: with Triton's automatic warp specialization for Hopper (``WARP_SPECIALIZE``: one
warp group issues the TMA loads, two compute the halves of the tile, as cuBLAS's sm90 kernels
do), does a config reach 0.95x cuBLAS where no config of the list does?  Each warp-specialized
config is timed beside the autotuner's pick over the list; each variant is checked against
float64 (:class:`~operators.gemm.probes.common.VariantLog`); ``,t`` reads B transposed::

    python -m operators.gemm.probes.warp_specialize --out ws.json [--shape 3000,5000,7000]
"""

from __future__ import annotations

import argparse

import torch
import triton

from operators.gemm import triton_impl
from operators.gemm.probes.common import DTYPE, Run, VariantLog
from operators.gemm.probes.matmul_configs import describe
from operators.gemm.triton_dispatch import Kernel, plan

SHAPES = ("3000,5000,7000", "20120,512,1536", "20120,1536,512,t", "1024,1024,1024", "1000,1000,1000",
          "256,256,256", "4096,4096,4096", "8192,8192,8192")
"""The tiled shapes under 0.95x, then two at 0.98x and more as the control."""


def _config(bm: int, bn: int, stages: int, *, persistent: bool = True,
            subtile: bool = False) -> triton.Config:
    meta = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": 64, "GROUP_M": 8, "PERSISTENT": persistent,
            "EPILOGUE_SUBTILE": subtile, "WARP_SPECIALIZE": True}
    return triton.Config(meta, num_warps=4, num_stages=stages)


CANDIDATES = (
    _config(128, 256, 3),
    _config(128, 256, 3, subtile=True),
    _config(128, 256, 4, subtile=True),
    _config(128, 256, 3, persistent=False),
    _config(128, 256, 4, persistent=False),
    _config(256, 128, 3),
    _config(128, 128, 4),
    _config(128, 128, 5),
    _config(128, 128, 5, persistent=False),
    _config(128, 64, 5),
)
"""Warp-specialized configs: 4 warps a group, so 12 warps a program (one loading, two computing)."""


def probe_shape(a: torch.Tensor, b: torch.Tensor, run: Run) -> None:
    """cuBLAS, the autotuner's pick over the list, and every candidate, for ``a @ b``."""
    (m, k), n = a.shape, b.shape[1]
    if plan(m, n, k, "tf32", a.device).kernel is not Kernel.TMA:
        raise SystemExit(f"{m}x{n}x{k} does not run the TMA kernel")
    run("cublas", lambda: torch.mm(a, b))
    triton_impl.fused_matmul(a, b)  # the autotuner picks
    pick = describe(triton_impl.autotuned_tiled_pick(Kernel.TMA))
    run(f"triton autotuned ({pick})", lambda: triton_impl.fused_matmul(a, b))
    for config in CANDIDATES:
        run(f"triton {describe(config)}", lambda config=config: triton_impl.fused_matmul(a, b, config=config))


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
