"""The tiled pointer kernel with 16-byte vector loads, where rows are 16-byte but not 128-byte
aligned: every pointer config, against the plan's autotuned pick (TMA there), cuBLAS, Helion on
its stored config and Helion on that config pointer-indexed, in one process.

Question: our TMA loads read 10,000- and 14,000-byte rows (3000x5000x7000) at 0.63x cuBLAS
and a 128-byte pitch alone brings them to cuBLAS's speed (gemm NOTES: prediction 42); cuBLAS
reads the same rows at full speed without one.  Until the ``VECTOR`` argument, the pointer kernel
could not stand in: Triton assumes 16-byte alignment only of sizes and pitches that are
multiples of 16 elements, so at N = 5000 (or K = 8: the dX of 8192x8x8192) every load was one
element.  Does the pointer kernel, now moving 16-byte vectors, beat TMA at such shapes, and does
Helion's pointer indexing (its static shapes already tell Triton the alignment)?  Shapes are
matmul ``(M, N, K)``; ``,t`` reads B through a transposed view, ``,ta`` reads A so.  Each
variant is checked against float64 (:class:`~operators.gemm.probes.common.VariantLog`)::

    python -m operators.gemm.probes.pointer_vectors --out vectors.json [--shape 3000,5000,7000]
"""

from __future__ import annotations

from collections.abc import Callable

import helion
import torch

from harness.tuning.configs import config_key, load_store
from operators.gemm import helion_impl, triton_impl
from operators.gemm.alignment import output_buffer
from operators.gemm.helion_dispatch import plan as helion_plan
from operators.gemm.probes.common import DTYPE, Run, plan_label, probe_matmuls, tiled_into
from operators.gemm.probes.matmul_configs import describe
from operators.gemm.triton_configs import POINTER_CONFIGS
from operators.gemm.triton_dispatch import Kernel, plan

SHAPES = ("3000,5000,7000", "3000,7000,5000,t", "7000,5000,3000,ta", "1000,1000,1000",
          "1000,1000,1000,t", "1000,1000,1000,ta", "8192,8192,8,t", "20120,512,1536")
"""3000x5000x7000's forward, dX and dW, 1000^3's, the dX of 8192x8x8192 (K = 8) and, aligned,
the reference forward (how far the pointer kernel trails TMA where TMA reads at full speed)."""


def helion_pointer_call(x: torch.Tensor, y: torch.Tensor) -> Callable[[], torch.Tensor] | None:
    """Helion's tiled kernel on the config stored for ``x @ y``'s bucket, pointer-indexed, as a
    kernel object of its own (the shared one keeps the config its first call set); None when
    that bucket holds no config."""
    size = helion_plan(x.shape[0], y.shape[1], x.shape[1], x.device).size
    key = config_key("matmul", DTYPE, helion_impl.bucket(x, y, size))
    stored = load_store(helion_impl.CONFIG_PATH).get(key)
    if stored is None:
        return None
    kernel = helion.kernel(helion_impl.matmul_kernel.fn, static_shapes=True,
                           config=helion.Config(**{**stored, **helion_impl.POINTER}))
    out = output_buffer(x.shape[0], y.shape[1], x.dtype, x.device)
    return lambda: kernel(x, y, 1.0, 0.0, None, out, helion_impl.scaled)


def probe_shape(a: torch.Tensor, b: torch.Tensor, run: Run) -> None:
    """cuBLAS, the plan's pick, every pointer config, Helion stored and Helion pointer-indexed."""
    (m, k), n = a.shape, b.shape[1]
    chosen = plan(m, n, k, "tf32", a.device)
    run("cublas", lambda: torch.mm(a, b))
    triton_impl.fused_matmul(a, b)  # the autotuner picks
    tiled = chosen.kernel is not Kernel.SPLIT_K
    pick = describe(triton_impl.autotuned_tiled_pick(chosen.kernel)) if tiled else ""
    run(f"triton plan ({plan_label(chosen)} {pick})", lambda: triton_impl.fused_matmul(a, b))
    out = output_buffer(m, n, a.dtype, a.device)
    for config in POINTER_CONFIGS:
        run(f"triton pointer {describe(config)}",
            lambda config=config: tiled_into(a, b, out, Kernel.POINTER, config))
    run("helion", lambda: helion_impl.fused_matmul(a, b))
    pointer = helion_pointer_call(a, b)
    if pointer is not None:
        run("helion pointer-indexed", pointer)


def main() -> None:
    probe_matmuls(__doc__, SHAPES, probe_shape)


if __name__ == "__main__":
    main()
