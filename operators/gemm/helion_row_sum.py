"""addmm's row-vector bias gradient in Helion: the sum of the output gradient's rows, scaled.

For ``grad`` (M, N) and parts of ``R`` rows each (the last one shorter), in fp32::

    part[s] = grad[s*R : (s+1)*R, :].sum(0)                  row_sum_parts_kernel
    out     = beta * part.sum(0)                             row_sum_finish_kernel (cast to grad's dtype)

With one part (the decode shapes; up to 256 rows at N of 16 or less) the parts kernel writes
``out`` itself, ``beta * part[0]`` cast, and the finish is not launched, as in Triton.

As :mod:`operators.gemm.triton_row_sum` (whose docstring says why there are parts): the parts
give every SM programs at addmm's narrow N, and the second kernel adds them in one fixed order.
:func:`operators.gemm.helion_impl.summed_rows` launches them on the configs stored under
``row_sum_parts|<dtype>|<size>`` and ``row_sum_finish|<dtype>|<size>``, the size ``small`` or
``large`` as the gemm buckets'.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(static_shapes=True)
def row_sum_parts_kernel(grad: torch.Tensor, parts: torch.Tensor, part_rows: hl.constexpr,
                         beta: float) -> torch.Tensor:
    """``parts[s] = beta * grad[s*part_rows : (s+1)*part_rows, :].sum(0)``, summed in fp32 and
    cast to ``parts``' dtype.

    grad (M, N), parts (S, N) with ``S = ceil(M / part_rows)``: fp32 parts for the finish (beta
    1), or the output itself, viewed (1, N), when there is one part; every part is written.
    Rows at or past M are zeroed by hand: Helion broadcasts a 1-row ``grad`` over the whole row
    block (gemm NOTES, "the M = 1 bias gradient").
    """
    m, n = grad.size()
    block_m = hl.register_block_size(m)
    for tile_n, tile_part in hl.tile([n, m], block_size=[None, part_rows]):
        acc = hl.zeros([block_m, tile_n], dtype=torch.float32)
        for tile_m in hl.tile(tile_part.begin, tile_part.end, block_size=block_m):
            rows = grad[tile_m, tile_n].to(torch.float32)
            acc = acc + torch.where((tile_m.index < m)[:, None], rows, 0.0)
        parts[tile_part.id, tile_n] = (acc.sum(0) * beta).to(parts.dtype)
    return parts


@helion.kernel(static_shapes=True)
def row_sum_finish_kernel(parts: torch.Tensor, beta: float, out: torch.Tensor) -> torch.Tensor:
    """``out = beta * parts.sum(0)``, cast to ``out``'s dtype: parts (S, N) fp32, out (N,)."""
    s, n = parts.size()
    block_s = hl.register_block_size(s)
    for tile_n in hl.tile(n):
        acc = hl.zeros([block_s, tile_n], dtype=torch.float32)
        for tile_s in hl.tile(s, block_size=block_s):
            acc = acc + parts[tile_s, tile_n]
        out[tile_n] = (acc.sum(0) * beta).to(out.dtype)
    return out
