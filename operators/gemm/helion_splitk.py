"""Split-K matrix multiplication in Helion, for outputs with too few tiles to fill the GPU.

With ``P = part_k`` and ``S = ceil(K / P)`` parts, part ``s`` covers ``K[s*P : min((s+1)*P, K)]``
and the two kernels compute, in fp32::

    part[s] = x[:, s*P : (s+1)*P] @ y[s*P : (s+1)*P, :]                     matmul_split_k_kernel
    out     = epilogue(alpha * (part[0] + part[1] + ... + part[S-1]), tile, bias, beta)
                                                                            split_k_reduce_kernel

The parts go to an fp32 workspace ``(S, M, N)``; the second kernel adds them in that order
and applies the epilogue (:data:`operators.gemm.helion_impl.EPILOGUES`) once, so the result is
the same bits on every run (fp32 atomics, as in Helion's ``examples/matmul_split_k.py``, add
the parts in arrival order and need a zeroed output besides).

The parts kernel must run with pointer indexing: with tensor descriptors Helion 1.5.0 drops
the mask at a part's end (a TMA load has none), so a part whose length is not a multiple of
BLOCK_K would add the first k-steps of the next part as well.  Its configs have matmul's
shape (``block_sizes = [BLOCK_M, BLOCK_N, BLOCK_K]``); the part length is fixed per call.
"""

from __future__ import annotations

from collections.abc import Callable

import helion
import helion.language as hl
import torch


@helion.kernel(static_shapes=True)
def matmul_split_k_kernel(x: torch.Tensor, y: torch.Tensor, parts: torch.Tensor,
                          part_k: hl.constexpr) -> torch.Tensor:
    """``parts[s] = x[:, s*part_k : (s+1)*part_k] @ y[same rows, :]`` in fp32, unscaled.

    x (M, K), y (K, N), parts (S, M, N) fp32 with ``S = ceil(K / part_k)``; every part is written.
    """
    m, k = x.size()
    k2, n = y.size()
    assert k == k2, f"size mismatch {k} != {k2}"
    for tile_m, tile_n, tile_part in hl.tile([m, n, k], block_size=[None, None, part_k]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(tile_part.begin, tile_part.end):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        parts[tile_part.id, tile_m, tile_n] = acc
    return parts


@helion.kernel(static_shapes=True)
def split_k_reduce_kernel(parts: torch.Tensor, alpha: float, beta: float, bias: torch.Tensor | None,
                          out: torch.Tensor, epilogue: Callable[..., torch.Tensor]) -> torch.Tensor:
    """``out = epilogue(alpha * (parts[0] + ... + parts[S-1]), tile, bias, beta)``, the parts
    added in that order: parts (S, M, N) fp32, out (M, N) of the output dtype.

    ``epilogue`` is one of :data:`operators.gemm.helion_impl.EPILOGUES`.
    """
    s, m, n = parts.size()
    for tile_m, tile_n in hl.tile([m, n]):
        acc = parts[0, tile_m, tile_n]
        for part in hl.static_range(1, s):
            acc = acc + parts[part, tile_m, tile_n]
        out[tile_m, tile_n] = epilogue(alpha * acc, (tile_m, tile_n), bias, beta).to(out.dtype)
    return out
