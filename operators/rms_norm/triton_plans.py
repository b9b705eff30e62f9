"""How rms_norm's Triton kernels are launched: plans, the plan of each strategy, grids, PDL.

A :class:`FwdPlan` or :class:`BwdPlan` fixes a launch (kernel, block sizes, warps, pipeline
stages, grid); :func:`fwd_plan` and :func:`bwd_plan` map the shape's strategy
(:mod:`operators.rms_norm.strategy`) to one.  Persistent grids are sized from the compiled
kernel's registers and shared memory, and on sm_90+ the partial-``dw`` sum is a programmatic
dependent launch (``griddepcontrol``).  Probe numbers refer to ``results/h200/rms_norm/NOTES.md``.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from harness.device import triton_interpreted
from operators.rms_norm.strategy import BwdStrategy, FwdStrategy, bwd_strategy, fwd_strategy


class BwdKernel(enum.Enum):
    """The Triton backward kernels a :class:`BwdPlan` can launch."""

    ONE_PASS = "one_pass"
    """Whole rows of padded width ``block_n`` in registers, ``block_m`` a step."""
    ONE_PASS_PREFETCH = "one_pass_prefetch"
    """:attr:`ONE_PASS`, loading the next rows into registers while it works on the current ones."""
    ONE_PASS_KEPT = "one_pass_kept"
    """One row a step with ``x`` and ``dy`` kept in their dtype."""
    ROW_SPLIT = "row_split"
    """Each row in ``block_n``-wide parts, one program each, meeting in global memory."""
    TWO_PASS = "two_pass"
    """A row-sum kernel, then ``block_n``-wide column stripes over groups of ``rows_per_program`` rows."""


@dataclass(frozen=True)
class FwdPlan:
    """A forward launch: blocks of ``block_m`` whole rows, one block a program.

    ``chunk`` plans run the looped kernel instead: one row per program (so ``block_m`` 1) in two
    loops over ``chunk``-wide column chunks, each ``num_stages`` deep.  A whole-row plan's program
    takes one step, which has nothing to pipeline: its ``num_stages`` is 1.
    """

    block_m: int
    num_warps: int
    num_stages: int = 1
    chunk: int | None = None

    def __post_init__(self) -> None:
        if self.chunk is None and self.num_stages != 1:
            raise ValueError(f"a whole-row forward takes one step a program, nothing to pipeline: {self}")
        if self.chunk is not None and self.block_m != 1:
            raise ValueError(f"a looped forward runs one row per program, not {self}")
        if self.chunk is not None and (self.chunk < 1 or self.chunk & (self.chunk - 1)):
            raise ValueError(f"a looped forward's chunk must be a power of two, not {self.chunk}")


@dataclass(frozen=True)
class BwdPlan:
    """A backward launch of ``kernel`` (a :class:`BwdKernel`).

    The one-pass grids are persistent (as many programs as are resident) unless
    ``rows_per_program`` fixes them at ``cdiv(M, rows_per_program)`` programs; the row split
    is always persistent (one part a row under the CPU interpreter).  Only ``ONE_PASS`` and
    ``ONE_PASS_KEPT`` pipeline their row loop (``num_stages``); ``ONE_PASS_KEPT`` and
    ``ROW_SPLIT`` take one row a step.  A plan with a setting its kernel would ignore is refused.
    """

    kernel: BwdKernel
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int = 1
    rows_per_program: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.kernel, BwdKernel):
            valid = ", ".join(kernel.value for kernel in BwdKernel)
            raise ValueError(f"unknown backward kernel {self.kernel!r} (valid: {valid})")
        if self.kernel in (BwdKernel.ONE_PASS_KEPT, BwdKernel.ROW_SPLIT) and self.block_m != 1:
            raise ValueError(f"a {self.kernel.value} backward takes one row a step, not {self}")
        if self.kernel not in (BwdKernel.ONE_PASS, BwdKernel.ONE_PASS_KEPT) and self.num_stages != 1:
            raise ValueError(f"a {self.kernel.value} backward does not pipeline its row loop, not {self}")
        if self.kernel is BwdKernel.ROW_SPLIT and self.rows_per_program is not None:
            raise ValueError(f"a row_split backward runs on a persistent grid, not {self}")


_FWD_LOOPED_PLANS = {2048: (1024, 4), 4096: (2048, 8), 8192: (4096, 16), 16384: (4096, 32), 32768: (8192, 32)}
"""``(chunk, num_warps)`` of the looped forward by the largest power of two not above the
width, the widest entry for all wider rows (the fastest in probe 30)."""


def _tile(block_n: int, values_per_thread: int, min_tile: int) -> tuple[int, int]:
    """``(BLOCK_M, num_warps)`` for a tile of at least ``min_tile`` values of padded rows."""
    block_m = max(1, min_tile // block_n)
    num_warps = min(32, max(4, block_m * block_n // (32 * values_per_thread)))
    return block_m, num_warps


def _looped_plan(n: int) -> FwdPlan:
    """A 5120-wide row takes the 4096 entry: three 2048-wide chunks, the last half masked."""
    chunk, num_warps = _FWD_LOOPED_PLANS[min(1 << (n.bit_length() - 1), max(_FWD_LOOPED_PLANS))]
    return FwdPlan(1, num_warps, chunk=chunk)


def _row_blocks_plan(block_n: int) -> BwdPlan:
    """Blocks of rows, 2048 values or more, 8 a thread."""
    block_m, num_warps = _tile(block_n, values_per_thread=8, min_tile=2048)
    return BwdPlan(BwdKernel.ONE_PASS, block_m, block_n, num_warps, num_stages=2)


def _one_row_plan(block_n: int) -> BwdPlan:
    """One row a step with 4 warps (Helion's tuned geometry), the 2048-wide row loop three stages deep."""
    return BwdPlan(BwdKernel.ONE_PASS, 1, block_n, 4, num_stages=3 if block_n >= 2048 else 1)


FWD_PLANS: dict[FwdStrategy, Callable[[int], FwdPlan]] = {
    FwdStrategy.WHOLE_ROWS: lambda n: FwdPlan(*_tile(triton.next_power_of_2(n), values_per_thread=32,
                                                      min_tile=4096)),  # tiles of 4096+ values
    FwdStrategy.LOOPED: _looped_plan,  # the looped kernel, chunks and warps by width
}
"""Triton's forward plan of each strategy, as a function of the width ``N``."""

_KEPT_PLAN = BwdPlan(BwdKernel.ONE_PASS_KEPT, 1, 16384, 32, rows_per_program=32)
_ROW_SPLIT_PLAN = BwdPlan(BwdKernel.ROW_SPLIT, 1, 8192, 16)
_TWO_PASS_PLAN = BwdPlan(BwdKernel.TWO_PASS, block_m=4, block_n=1024, num_warps=4, rows_per_program=256)

BWD_PLANS: dict[BwdStrategy, Callable[[int], BwdPlan]] = {
    BwdStrategy.ROW_BLOCKS: _row_blocks_plan,  # the plain kernel on blocks of rows, two stages
    BwdStrategy.ONE_ROW: _one_row_plan,  # the plain kernel, one row a step, many programs per SM
    BwdStrategy.PREFETCH: lambda block_n: BwdPlan(BwdKernel.ONE_PASS_PREFETCH, 1, block_n, 16),  # probe 7
    BwdStrategy.STAGED: lambda _: BwdPlan(BwdKernel.ONE_PASS, 1, 8192, 16, num_stages=4),  # probe 23
    BwdStrategy.WHOLE_ROW: lambda _: BwdPlan(BwdKernel.ONE_PASS, 1, 16384, 16),
    BwdStrategy.KEPT_INPUT: lambda _: _KEPT_PLAN,  # 32 warps, 32 rows a program (probe 11)
    BwdStrategy.KEPT_INPUT_FEW_ROWS: lambda _: dataclasses.replace(_KEPT_PLAN, rows_per_program=None),
    BwdStrategy.ROW_SPLIT: lambda _: _ROW_SPLIT_PLAN,  # 8192-wide parts of 16 warps (probe 18)
    BwdStrategy.ROW_SPLIT_WIDE: lambda _: _ROW_SPLIT_PLAN,  # up to 16 parts
    BwdStrategy.SHARED_ROWS: lambda _: _TWO_PASS_PLAN,  # no shared-rows kernel: the row split beat it
    BwdStrategy.TWO_PASS: lambda _: _TWO_PASS_PLAN,  # 1024-wide stripes, 4 rows a step (probe 2)
}
"""Triton's backward plan of each strategy, as a function of the padded width."""


@functools.lru_cache(maxsize=1024)
def fwd_plan(m: int, n: int) -> FwdPlan:
    """The forward launch for an ``(m, n)`` input (cached: it runs on every call)."""
    return FWD_PLANS[fwd_strategy(n)](n)


@functools.lru_cache(maxsize=1024)
def bwd_plan(m: int, n: int, dtype: torch.dtype) -> BwdPlan:
    """The backward launch for an ``(m, n)`` input of ``dtype`` (cached: it runs on every call)."""
    return BWD_PLANS[bwd_strategy(m, n, dtype)](triton.next_power_of_2(n))


_INTERPRETER_PROGRAMS = 4
"""Persistent grid size under Triton's CPU interpreter."""

_resident_programs: dict[tuple, int] = {}


def _specialization(arg: object) -> object:
    """What a compiled kernel may depend on: tensor dtypes, and ints exactly (some are constexprs)."""
    if isinstance(arg, torch.Tensor):
        return arg.dtype
    if isinstance(arg, int):
        return arg
    return type(arg)


def persistent_grid(kernel: triton.JITFunction, args: tuple, meta: dict, device: torch.device,
                    work: int) -> int:
    """Programs for a persistent launch: as many as the GPU holds at once, at most ``work``.

    Residency per SM comes from the compiled kernel's registers and shared memory (as in
    Triton's fused-softmax tutorial), so the grid never spills into a second wave.  Compiling
    does not run the kernel: ``args`` may hold stand-ins of the right dtypes.
    """
    if device.type != "cuda":
        return min(_INTERPRETER_PROGRAMS, work)
    key = (kernel, device, tuple(map(_specialization, args)), tuple(sorted(meta.items())))
    if key not in _resident_programs:
        compiled = kernel.warmup(*args, grid=(1,), **meta)
        compiled._init_handles()
        props = torch.cuda.get_device_properties(device)
        threads = 32 * meta["num_warps"]
        regs = -(-compiled.n_regs // 8) * 8  # registers are allocated 8 per thread at a time
        smem = compiled.metadata.shared + 1024  # the driver reserves 1 KiB per block
        regs_per_sm = getattr(props, "regs_per_multiprocessor", 65536)  # 64K on every sm_50+
        per_sm = min(
            regs_per_sm // (regs * threads),
            props.max_threads_per_multi_processor // threads,
            props.shared_memory_per_multiprocessor // smem,
        )
        _resident_programs[key] = props.multi_processor_count * max(1, per_sm)
    return min(_resident_programs[key], work)


def grid_dependency_control(device: torch.device) -> bool:
    """Whether kernels launched on ``device`` use ``griddepcontrol`` and the ``dw`` sum is a
    programmatic dependent launch: compiled (not Triton's CPU interpreter) for a GPU of compute
    capability 9.0 or later, the first with the instruction.  Passed to the kernels as ``USE_PDL``."""
    if triton_interpreted() or device.type != "cuda":
        return False
    return _capability(torch.cuda.current_device() if device.index is None else device.index) >= (9, 0)


@functools.cache
def _capability(device_index: int) -> tuple[int, int]:
    """The compute capability of GPU ``device_index`` (cached: read on every backward launch)."""
    return torch.cuda.get_device_capability(device_index)


@triton.jit
def let_dw_sum_launch(USE_PDL: tl.constexpr):
    """With ``USE_PDL``, let the partial-``dw`` sum, launched as a programmatic dependent, start its
    programs now; they wait in :func:`wait_for_dw_partials` until this kernel has finished."""
    if USE_PDL:
        gdc_launch_dependents()


@triton.jit
def wait_for_dw_partials(USE_PDL: tl.constexpr):
    """With ``USE_PDL`` (a programmatic dependent launch), wait until the kernel launched before
    it has finished."""
    if USE_PDL:
        gdc_wait()
