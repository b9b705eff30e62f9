"""How addmm's bias gradient ``beta * grad.sum(0)`` is cut into row parts: one rule for the
Triton and Helion kernels (:mod:`operators.gemm.triton_row_sum`, :mod:`operators.gemm.helion_row_sum`)."""

from __future__ import annotations

COLUMNS = 128
"""The widest column block the parts are counted in: 256 contiguous bytes a row in bf16."""
NARROWEST_COLUMNS = 16
"""The narrowest column block: 32 bytes a row in bf16."""
ROW_STEP = 32
"""The rows of a :data:`COLUMNS`-wide tile; a narrower block's tile has as many more rows, so
that every tile holds ``ROW_STEP * COLUMNS`` elements.  Parts cover whole tiles (each a
multiple of every row block the kernels run)."""
PROGRAMS_PER_SM = 4
"""Part programs aimed at per SM, over the column blocks, to keep loads in flight."""


def column_block(n: int) -> int:
    """The columns a program sums: N rounded up to a power of two, within
    [:data:`NARROWEST_COLUMNS`, :data:`COLUMNS`] (8192x8x8192's N = 8: 16)."""
    return min(COLUMNS, max(NARROWEST_COLUMNS, 1 << max(n - 1, 0).bit_length()))


def row_block(n: int) -> int:
    """The rows of a program's tile at N: 32 at 128 columns, 256 at 16 (gemm NOTES: prediction 59)."""
    return ROW_STEP * COLUMNS // column_block(n)


def part_rows(m: int, n: int, sms: int) -> int:
    """Rows each part of an (M, N) row sum covers: about enough parts for :data:`PROGRAMS_PER_SM`
    programs an SM over N's column blocks, rounded to whole tiles (:func:`row_block`)."""
    column_blocks = max(1, -(-n // column_block(n)))
    parts = max(1, -(-PROGRAMS_PER_SM * sms // column_blocks))
    rows = -(-m // parts)
    step = row_block(n)
    return max(step, round(rows / step) * step)


def part_count(m: int, rows: int) -> int:
    """How many parts of ``rows`` rows cover M rows (one at least: an empty sum is one part of
    zeros); with one, the parts kernel writes the output itself."""
    return max(1, -(-m // rows))


def row_parts(m: int, n: int, sms: int) -> tuple[int, int]:
    """How both kernels cut an (M, N) row sum on ``sms`` SMs: the rows of a part
    (:func:`part_rows`) and the number of parts (:func:`part_count`)."""
    rows = part_rows(m, n, sms)
    return rows, part_count(m, rows)
