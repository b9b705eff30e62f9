"""How addmm's bias gradient ``beta * grad.sum(0)`` is cut into row parts: one rule for the
Triton and Helion kernels (:mod:`operators.gemm.triton_row_sum`, :mod:`operators.gemm.helion_row_sum`)."""

from __future__ import annotations

COLUMNS = 128
"""The column block the parts are counted in: 256 contiguous bytes a row in bf16."""
ROW_STEP = 32
"""Parts cover whole steps of this many rows (a multiple of every row block the kernels run)."""
PROGRAMS_PER_SM = 4
"""Part programs aimed at per SM, over the column blocks, to keep loads in flight."""


def part_rows(m: int, n: int, sms: int) -> int:
    """Rows each part of an (M, N) row sum covers: about enough parts for :data:`PROGRAMS_PER_SM`
    programs an SM over N's :data:`COLUMNS`-wide blocks, rounded to whole :data:`ROW_STEP` steps."""
    column_blocks = max(1, -(-n // COLUMNS))
    parts = max(1, -(-PROGRAMS_PER_SM * sms // column_blocks))
    rows = -(-m // parts)
    return max(ROW_STEP, round(rows / ROW_STEP) * ROW_STEP)


def part_count(m: int, rows: int) -> int:
    """How many parts of ``rows`` rows cover M rows (one at least: an empty sum is one part of
    zeros); with one, the parts kernel writes the output itself."""
    return max(1, -(-m // rows))
