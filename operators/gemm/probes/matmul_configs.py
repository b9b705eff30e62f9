"""The forward matmul at the shapes where it trails cuBLAS: every config of the kernel its plan
picks (tiled TMA or pointer, split-K at the plan's part count, or the matrix-vector kernel),
timed flushed, against the autotuner's pick, Helion and cuBLAS, all in one process.

Question: does the autotuner pick a config that our flushed timer finds slow (its own timing
runs unflushed, once per process), or does no config of the list reach cuBLAS?  Shapes are
matmul ``(M, N, K)``; a ``,t`` suffix reads B through a transposed view, as addmm's dX
(``grad @ mat2.T``) does.  Each variant is checked against float64 (:class:`VariantLog`)::

    python -m operators.gemm.probes.matmul_configs --out matmul.json [--shape 20120,512,1536]
"""

from __future__ import annotations

import torch
import triton

from operators.gemm import helion_impl, triton_gemv, triton_impl
from operators.gemm.probes.common import Run, plan_label, probe_matmuls
from operators.gemm.strategy import Regime
from operators.gemm.triton_configs import (
    GEMV_CONFIGS,
    POINTER_CONFIGS,
    SKINNY_CONFIGS,
    SPLIT_K_CONFIGS,
    TMA_CONFIGS,
    boxes_fit,
)
from operators.gemm.triton_dispatch import Kernel, plan, reads_rows_along_k
from operators.gemm.triton_splitk import autotuned_pick

SHAPES = ("20120,512,1536", "20120,1536,512,t", "128,4096,4096", "3000,5000,7000", "1024,1024,1024",
          "1000,1000,1000", "256,256,256")
"""The reference shape's forward and dX (``,t``: B transposed), then the tiled forward shapes where
Triton trails cuBLAS by more than 5% (``results/h100/NOTES.md``, "gemm and addmm, ``fwd``, ``bwd``,
``fwd_bwd``, ``--repeats 7``")."""
CONFIGS = {Kernel.TMA: TMA_CONFIGS, Kernel.POINTER: POINTER_CONFIGS, Kernel.GEMV: GEMV_CONFIGS}
"""The tiled and matrix-vector kernels' lists; a split-K plan's list is its regime's (split-K or skinny)."""


def describe(config: triton.Config | None) -> str:
    if config is None:
        return "none"
    kw = config.kwargs
    tile = (f"{kw['BLOCK_M']}x{kw['BLOCK_N']}x" if "BLOCK_M" in kw
            else f"N{kw['BLOCK_N']}xK" if "BLOCK_N" in kw else "BK")
    extra = "".join(f" {name.lower()}" for name in ("PERSISTENT", "EPILOGUE_SUBTILE", "TMA_LOADS")
                    if kw.get(name))
    return f"{tile}{kw['BLOCK_K']}/s{config.num_stages}/w{config.num_warps}{extra}"


def probe_shape(a: torch.Tensor, b: torch.Tensor, run: Run) -> None:
    """Every variant of ``a @ b``."""
    (m, k), n = a.shape, b.shape[1]
    chosen = plan(m, n, k, "tf32", a.device, reads_rows_along_k(a, b))
    run("cublas", lambda: torch.mm(a, b))
    run("helion", lambda: helion_impl.fused_matmul(a, b))
    triton_impl.fused_matmul(a, b)  # the autotuner picks
    if chosen.kernel is Kernel.SPLIT_K:
        pick = describe(autotuned_pick(chosen.regime))
        configs = SKINNY_CONFIGS if chosen.regime is Regime.SKINNY else SPLIT_K_CONFIGS
    else:
        picked = (triton_gemv.autotuned_pick() if chosen.kernel is Kernel.GEMV
                  else triton_impl.autotuned_tiled_pick(chosen.kernel))
        pick, configs = describe(picked), CONFIGS[chosen.kernel]
    label = plan_label(chosen)
    run(f"triton autotuned ({label} {pick})", lambda: triton_impl.fused_matmul(a, b))
    if chosen.kernel is Kernel.TMA:
        configs = [config for config in configs if boxes_fit(config, m, n, k)]
    for config in configs:
        run(f"triton {label} {describe(config)}",
            lambda config=config: triton_impl.fused_matmul(a, b, config=config))


def main() -> None:
    probe_matmuls(__doc__, SHAPES, probe_shape)


if __name__ == "__main__":
    main()
