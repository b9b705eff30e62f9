"""Which rms_norm strategy a shape takes: one table, shared by the Triton and Helion backends,
with the input check of both backends' public functions (:func:`check_inputs`).

A strategy names a regime of shapes.  Each backend maps a strategy to its own kernels:
``triton_plans.BWD_PLANS`` to a launch plan, ``helion_impl.BWD_KERNELS`` to its kernels (by the
names their configs are stored under, keyed by width) and how they are launched.  Where the two
backends run different kernels for one regime, their mappings say so.  Probe numbers refer to
``results/h200/rms_norm/NOTES.md``.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass

import torch
import triton


class FwdStrategy(enum.Enum):
    """How the forward normalizes a row."""

    WHOLE_ROWS = "whole_rows"
    """Blocks of whole rows held in registers."""
    LOOPED = "looped"
    """One row a program, in two loops over column chunks: the row sum, then ``y`` from ``x`` read again."""


class BwdStrategy(enum.Enum):
    """How the backward computes ``dx`` and the partial ``dw`` rows."""

    ROW_BLOCKS = "row_blocks"
    """One pass over blocks of whole rows."""
    ONE_ROW = "one_row"
    """One pass, one short row a step, many programs per SM."""
    PREFETCH = "prefetch"
    """One pass, one row a step, the next row loaded ahead."""
    STAGED = "staged"
    """One pass, one row a step, the row loop software-pipelined."""
    WHOLE_ROW = "whole_row"
    """One pass, one row a step in fp32."""
    KEPT_INPUT = "kept_input"
    """One pass, one row a step, ``x`` and ``dy`` kept in bf16 and converted twice, fixed grid."""
    KEPT_INPUT_FEW_ROWS = "kept_input_few_rows"
    """:attr:`KEPT_INPUT` on too few rows for its fixed grid."""
    ROW_SPLIT = "row_split"
    """Each row in column parts, one program each, adding up the row sum through share cells."""
    ROW_SPLIT_WIDE = "row_split_wide"
    """:attr:`ROW_SPLIT` on rows 65536 wide and more, where Helion has no stored row-split config
    and runs :attr:`TWO_PASS`."""
    SHARED_ROWS = "shared_rows"
    """Rows of :attr:`ROW_SPLIT`'s widths that the row split cannot take: Helion shares each row
    among tiles that each reduce it whole, Triton runs :attr:`TWO_PASS`."""
    TWO_PASS = "two_pass"
    """A row-sum pass, then column stripes over groups of rows (reads ``x`` and ``dy`` twice)."""


class Dtypes(enum.Enum):
    """The element types a rule applies to."""

    ANY = "any"
    BF16 = "bf16"
    SIXTEEN_BIT = "16-bit"
    THIRTY_TWO_BIT = "32-bit"

    def include(self, dtype: torch.dtype) -> bool:
        """Whether ``dtype`` is one of these types."""
        if self is Dtypes.BF16:
            return dtype == torch.bfloat16
        if self is Dtypes.SIXTEEN_BIT:
            return dtype.itemsize == 2
        if self is Dtypes.THIRTY_TWO_BIT:
            return dtype.itemsize == 4
        return True


WIDEST = 1 << 62
"""Stands for no upper bound on the padded width."""


@dataclass(frozen=True)
class Rule:
    """Shapes that take ``strategy``: padded width (``N`` rounded up to a power of two) within
    ``widths``, ``N >= min_n`` and a multiple of ``n_multiple_of``, ``dtype`` in ``dtypes``
    and at least ``min_rows`` rows."""

    strategy: FwdStrategy | BwdStrategy
    reason: str
    widths: tuple[int, int] = (1, WIDEST)
    dtypes: Dtypes = Dtypes.ANY
    n_multiple_of: int = 1
    min_n: int = 1
    min_rows: int = 0

    def matches(self, m: int, n: int, dtype: torch.dtype) -> bool:
        """Whether an ``(m, n)`` input of ``dtype`` takes this rule."""
        low, high = self.widths
        return (low <= triton.next_power_of_2(n) <= high and n >= self.min_n and n % self.n_multiple_of == 0
                and m >= self.min_rows and self.dtypes.include(dtype))


FWD_RULES: tuple[Rule, ...] = (
    Rule(FwdStrategy.LOOPED, min_n=2048,
         reason="only a chunk is live: 1.2-8.3 points ahead of whole rows, 2048 to 32768 wide (probe 30)"),
    Rule(FwdStrategy.WHOLE_ROWS,
         reason="narrower rows: looping gained nothing at 1024 wide (probe 30)"),
)
"""The forward's strategy: the first rule that matches."""

BWD_RULES: tuple[Rule, ...] = (
    Rule(BwdStrategy.ROW_BLOCKS, widths=(1, 512),
         reason="narrow rows: a block of rows gives each step 2048 values or more"),
    Rule(BwdStrategy.ONE_ROW, widths=(1024, 2048),
         reason="Helion's geometry, one row a step: 31.8 -> 16.5 us at 4096x1024 (prediction 27)"),
    Rule(BwdStrategy.PREFETCH, widths=(4096, 4096), n_multiple_of=16,
         reason="one program per SM keeps DRAM busy loading its next row (probe 7); stages lost (probe 23)"),
    Rule(BwdStrategy.ONE_ROW, widths=(4096, 4096), dtypes=Dtypes.SIXTEEN_BIT,
         reason="no 16-byte loads: Helion's geometry, 49.2 -> 26.1 us at 3000x3001 (prediction 29)"),
    Rule(BwdStrategy.PREFETCH, widths=(4096, 4096),
         reason="fp32 rows of other widths: as the aligned ones until measured"),
    Rule(BwdStrategy.PREFETCH, widths=(8192, 8192), dtypes=Dtypes.THIRTY_TWO_BIT,
         reason="fp32 rows four stages deep overflow sm_90 shared memory (NOTES: 'fp32 rows 8192 wide')"),
    Rule(BwdStrategy.STAGED, widths=(8192, 8192),
         reason="four pipeline stages ran 2.4-2.9 points ahead of the prefetch (probe 23)"),
    Rule(BwdStrategy.KEPT_INPUT, widths=(16384, 16384), dtypes=Dtypes.BF16, min_rows=4096,
         reason="fp32 copies of the row spill, bf16 ones fit: 84% against 60% of copy (probe 11)"),
    Rule(BwdStrategy.KEPT_INPUT_FEW_ROWS, widths=(16384, 16384), dtypes=Dtypes.BF16,
         reason="fewer than 4096 rows leave SMs idle on the fixed grid of 32-row programs"),
    Rule(BwdStrategy.WHOLE_ROW, widths=(16384, 16384),
         reason="fp16's two conversions merge into one live fp32 copy: keeping its input gains nothing"),
    Rule(BwdStrategy.ROW_SPLIT, widths=(32768, 32768), dtypes=Dtypes.SIXTEEN_BIT, n_multiple_of=16,
         reason="a row and its dw no longer fit one SM: 81% against 57% for two passes (probe 18)"),
    Rule(BwdStrategy.ROW_SPLIT_WIDE, widths=(65536, 131072), dtypes=Dtypes.SIXTEEN_BIT, n_multiple_of=16,
         reason="up to 16 parts of 8192: 70% against 56% for two passes at 4096x65536 (probe 19)"),
    Rule(BwdStrategy.SHARED_ROWS, widths=(32768, 32768),
         reason="the row split spills on fp32 rows and unvectorized loads, N not a multiple of 16"),
    Rule(BwdStrategy.TWO_PASS, widths=(65536, WIDEST),
         reason="two passes stream: 57% against 45% re-reading blocks of rows from L2 (probe 2)"),
)
"""The backward's strategy: the first rule that matches (every shape matches one)."""


def check_inputs(x: torch.Tensor, weight: torch.Tensor) -> None:
    """Raise ``ValueError`` unless ``x`` is 2-D (M, N) and ``weight`` is (N,)."""
    if x.dim() != 2:
        raise ValueError(f"rms_norm expects a 2-D input (M, N), got shape {tuple(x.shape)}")
    if weight.shape != x.shape[1:]:
        raise ValueError(f"weight shape {tuple(weight.shape)} does not match N={x.shape[1]}")


@functools.lru_cache(maxsize=1024)
def fwd_strategy(n: int) -> FwdStrategy:
    """The forward strategy for rows of width ``n`` (any number of rows, any dtype).

    Cached, as it runs on every call: after changing ``FWD_RULES``, call ``fwd_strategy.cache_clear()``.
    """
    return _first_match(FWD_RULES, 1, n, torch.float32)


@functools.lru_cache(maxsize=1024)
def bwd_strategy(m: int, n: int, dtype: torch.dtype) -> BwdStrategy:
    """The backward strategy for an ``(m, n)`` input of ``dtype``.

    Cached, as it runs on every call: after changing ``BWD_RULES``, call ``bwd_strategy.cache_clear()``.
    """
    return _first_match(BWD_RULES, m, n, dtype)


def _first_match(rules: tuple[Rule, ...], m: int, n: int, dtype: torch.dtype) -> FwdStrategy | BwdStrategy:
    for rule in rules:
        if rule.matches(m, n, dtype):
            return rule.strategy
    raise LookupError(f"no rms_norm strategy for a ({m}, {n}) input of {dtype}")
