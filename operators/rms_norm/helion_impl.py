"""RMS normalization in Helion: forward and backward kernels, the kernel of each strategy, autograd.

Same math as :mod:`operators.rms_norm.triton_impl` (fp32 inside, ``rstd`` saved per row)::

    y  = x * rstd * weight,        rstd = rsqrt(sum(x**2) / N + eps)
    dx = rstd * (g - xhat * sum(g * xhat) / N),   g = dy * weight, xhat = x * rstd
    dw = sum over rows of dy * xhat

Means are written as ``sum / n`` with ``n = hl.specialize(N)``: ``.mean(-1)`` inside a Helion
kernel divides by the padded block width when ``N`` is not a power of two.  The backward
kernels return fp32 partial ``dw`` rows, which :func:`rms_norm_dw_sum` adds up and casts; the
kernels for rows too wide for one program live in :mod:`operators.rms_norm.helion_wide`.

Every kernel runs with the config stored for it in ``helion_configs.json`` under
``kernel|dtype|bucket`` (:func:`config_keys`), or without one the config of the nearest stored
width (:func:`bucket_place`), or on the GPU fp16 bf16's (:mod:`harness.tuning.choice`: valid for
the kernel, though fp16 may run a branch the bf16 tuning did not time); the tuning candidates are
in :mod:`operators.rms_norm.helion_tuning`.
:mod:`operators.rms_norm.helion_ops` wraps the host functions :func:`rms_norm_forward` and
:func:`rms_norm_backward` as custom ops.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from pathlib import Path

import helion
import helion.language as hl
import torch
import triton
from helion.autotuner import EnumFragment

from harness.tuning.configs import BucketPlace, ConfigStore, config_key
from harness.tuning.launch import call_with_stored_config
from operators.rms_norm.helion_wide import (
    rms_norm_bwd_row_dot,
    rms_norm_bwd_row_split,
    rms_norm_bwd_shared_rows,
    rms_norm_bwd_stripe,
)
from operators.rms_norm.strategy import BwdStrategy, FwdStrategy, bwd_strategy, check_inputs, fwd_strategy

CONFIG_PATH = Path(__file__).with_name("helion_configs.json")

STORED_WIDTHS = (1024, 2048, 4096, 8192, 16384, 32768)
"""The width buckets configs are stored for: those of the rms_norm operator's default CUDA
sweep (N=5120 pads to 8192).  Other widths take the nearest stored width's configs; wider rows'
two-pass backward kernels have none stored at any width and run on Helion's default config."""

INTERPRETER_SMS = 4
"""SMs :func:`sm_grid` counts under the CPU interpreter."""


@helion.kernel
def rms_norm_fwd(
    x: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """RMS-normalize the rows of ``x`` [M, N] by ``weight`` [N].

    Returns ``y`` [M, N] in ``x.dtype`` and ``rstd`` fp32 [M].  Whether a row is normalized whole
    or in two loops over column chunks (the row sum, then ``y`` from ``x`` read again, mostly from
    L2) is the stored config's ``reduction_loops``.
    """
    m, n = x.size()
    n = hl.specialize(n)
    y = torch.empty_like(x)
    rstd = torch.empty([m], dtype=torch.float32, device=x.device)
    for tile_m in hl.tile(m):
        x_tile = x[tile_m, :].to(torch.float32)
        rstd_tile = torch.rsqrt((x_tile * x_tile).sum(-1) / n + eps)
        y[tile_m, :] = (x_tile * rstd_tile[:, None] * weight[:].to(torch.float32)).to(y.dtype)
        rstd[tile_m] = rstd_tile
    return y, rstd


@helion.kernel
def rms_norm_bwd(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor,
    sm_grid: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradients of :func:`rms_norm_fwd`: ``dx`` [M, N] and partial ``dw`` fp32 [P, N].

    ``P = programs_per_sm * len(sm_grid)`` programs (``sm_grid``: :func:`sm_grid`, one element
    per SM) stride over the rows: program ``p`` takes rows ``p, p + P, ...``, one a step, and per
    row ``xhat = x * rstd``, ``g = dy * w``, ``dx = rstd * (g - xhat * sum(g * xhat) / N)``; it
    accumulates ``sum(dy * xhat)`` over its rows in fp32 registers and stores it as row ``p`` of
    the partial ``dw``.  The row loop can be pipelined (``range_num_stages``).  bf16 rows wider
    than 8192 keep ``x`` and ``dy`` in bf16 and convert them again (bit pattern, which the
    compiler cannot merge with the first conversion) for ``dx`` and ``dw``: only the bf16 copies
    stay live across the row sum (probe 11).
    """
    m, n = x.size()
    n = hl.specialize(n)
    # strategy's KEPT_INPUT width, as a literal: a module constant would become a kernel argument.
    keep_bf16 = x.dtype == torch.bfloat16 and n > 8192
    programs = sm_grid.size(0) * hl.register_tunable("programs_per_sm", EnumFragment(choices=(1, 2, 4, 8)))
    dx = torch.empty_like(x)
    dw_partial = torch.empty([programs, n], dtype=torch.float32, device=x.device)
    for tile_p in hl.tile(programs, block_size=1):
        dw_acc = hl.zeros([n], dtype=torch.float32)
        for row in hl.grid(tile_p.begin, m, programs):
            rstd_row = rstd[row]
            w = weight[:].to(torch.float32)
            if keep_bf16:
                x_raw = x[row, :]
                dy_raw = grad_out[row, :]
                c = (dy_raw.to(torch.float32) * w * x_raw.to(torch.float32)).sum(-1) * rstd_row / n
                xhat = (x_raw.view(torch.int16).to(torch.int32) << 16).view(torch.float32) * rstd_row
                dy_row = (dy_raw.view(torch.int16).to(torch.int32) << 16).view(torch.float32)
                dx[row, :] = (rstd_row * (dy_row * w - xhat * c)).to(dx.dtype)
            else:
                dy_row = grad_out[row, :].to(torch.float32)
                xhat = x[row, :].to(torch.float32) * rstd_row
                g = dy_row * w
                dx[row, :] = (rstd_row * (g - xhat * ((g * xhat).sum(-1) / n))).to(dx.dtype)
            dw_acc += dy_row * xhat
        dw_partial[tile_p.begin, :] = dw_acc
    return dx, dw_partial


@helion.kernel
def rms_norm_dw_sum(dw_partial: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``dw[j] = sum_i dw_partial[i, j]`` over the fp32 partial rows [B, N], cast to ``weight``'s dtype."""
    _, n = dw_partial.size()
    dw = torch.empty_like(weight)
    for tile_n in hl.tile(n):
        dw[tile_n] = dw_partial[:, tile_n].sum(0).to(dw.dtype)
    return dw


KERNELS = {
    "rms_norm_fwd": rms_norm_fwd,
    "rms_norm_bwd": rms_norm_bwd,
    "rms_norm_bwd_row_dot": rms_norm_bwd_row_dot,
    "rms_norm_bwd_stripe": rms_norm_bwd_stripe,
    "rms_norm_bwd_shared_rows": rms_norm_bwd_shared_rows,
    "rms_norm_bwd_row_split": rms_norm_bwd_row_split,
    "rms_norm_dw_sum": rms_norm_dw_sum,
}
"""The Helion kernels of rms_norm by the name their configs are stored under."""

FWD_KERNELS: dict[FwdStrategy, str] = {
    FwdStrategy.WHOLE_ROWS: "rms_norm_fwd",  # its stored config may loop all the same
    FwdStrategy.LOOPED: "rms_norm_fwd",  # the stored configs loop from 1024 wide (probe 30)
}
"""Helion's forward kernel of each strategy: one kernel, whose stored config decides whether it loops."""


@dataclass(frozen=True)
class BwdKernels:
    """How Helion's backward runs a strategy on ``(dy, x, weight, rstd)``.

    ``names``: its kernels in launch order, by the names their configs are stored under
    (``rms_norm_dw_sum`` follows them all).  ``sm_grid``: the kernel sizes its grid from the SM
    count, and :func:`sm_grid` is its last argument.  ``parts_wait``: the kernel's programs wait
    for each other (parts of a row), so under the CPU interpreter, which runs programs one after
    another, each row is one part.  ``two_pass``: the row-dot kernel, then the stripe kernel with
    the first's ``c`` as its last argument.
    """

    names: tuple[str, ...]
    sm_grid: bool = False
    parts_wait: bool = False
    two_pass: bool = False

    def __post_init__(self) -> None:
        if len(self.names) != 1 + self.two_pass or (self.parts_wait and not self.sm_grid):
            raise ValueError(f"not a Helion backward: {self}")


ONE_PASS_BWD = BwdKernels(("rms_norm_bwd",), sm_grid=True)
ROW_SPLIT_BWD = BwdKernels(("rms_norm_bwd_row_split",), sm_grid=True, parts_wait=True)
SHARED_ROWS_BWD = BwdKernels(("rms_norm_bwd_shared_rows",))
TWO_PASS_BWD = BwdKernels(("rms_norm_bwd_row_dot", "rms_norm_bwd_stripe"), two_pass=True)

BWD_KERNELS: dict[BwdStrategy, BwdKernels] = {
    BwdStrategy.ROW_BLOCKS: ONE_PASS_BWD,  # one row a step, whatever the width
    BwdStrategy.ONE_ROW: ONE_PASS_BWD,
    BwdStrategy.PREFETCH: ONE_PASS_BWD,  # its stored configs pipeline the row loop instead
    BwdStrategy.STAGED: ONE_PASS_BWD,  # pipelined as its stored config says
    BwdStrategy.WHOLE_ROW: ONE_PASS_BWD,
    BwdStrategy.KEPT_INPUT: ONE_PASS_BWD,  # which keeps bf16 input itself from 8193 wide
    BwdStrategy.KEPT_INPUT_FEW_ROWS: ONE_PASS_BWD,  # its grid is sized from the SM count anyway
    BwdStrategy.ROW_SPLIT: ROW_SPLIT_BWD,
    BwdStrategy.ROW_SPLIT_WIDE: TWO_PASS_BWD,  # no row-split config stored that wide
    BwdStrategy.SHARED_ROWS: SHARED_ROWS_BWD,  # each tile of a row reduces it whole
    BwdStrategy.TWO_PASS: TWO_PASS_BWD,
}
"""Helion's backward of each strategy."""

MANY_ROWS_CONFIGS = {"rms_norm_dw_sum": (1024, 2048)}
"""Kernels with a second stored config per width for many rows, as ``(from, tuned on)`` rows
(partial ``dw`` rows for the sum): from ``from`` rows they take the config stored under the
width's key plus ``|rows<tuned on>``, when there is one.  The sum's width configs load all 256
rows they were tuned on at once, slow on 2048 rows (probe 5 in ``results/h200/rms_norm/NOTES.md``)."""


def bwd_kernel_names(m: int, n: int, dtype: torch.dtype) -> list[str]:
    """The backward kernels that run an ``(m, n)`` input of ``dtype``, in launch order."""
    return [*BWD_KERNELS[bwd_strategy(m, n, dtype)].names, "rms_norm_dw_sum"]


def takes_sm_grid(name: str) -> bool:
    """Whether kernel ``name`` sizes its grid from the SM count (its last argument is :func:`sm_grid`)."""
    return any(kernels.sm_grid and name in kernels.names for kernels in BWD_KERNELS.values())


def width_bucket(n: int) -> str:
    """The stored-config bucket for rows of width ``n``: ``n`` padded to a power of two.

    The backward kernels keep a padded row per tile, so rows of one bucket use the same
    registers and the same config (``"n8192"`` holds N=5120 and N=8192).
    """
    return f"n{triton.next_power_of_2(n)}"


def fwd_width_bucket(n: int) -> str:
    """The stored-config bucket of :func:`rms_norm_fwd` for rows of width ``n``: the largest power
    of two not above ``n``, at most the widest of ``STORED_WIDTHS``.

    Its stored configs loop over column chunks, so a 5120-wide row takes the 4096 bucket's
    2048-wide chunks (three, the last half masked) rather than the 8192 bucket's 4096-wide ones
    (two, the second three quarters masked), and rows wider than 32768 the 32768 bucket's.
    """
    return f"n{min(1 << (n.bit_length() - 1), max(STORED_WIDTHS))}"


def bucket_place(name: str) -> BucketPlace | None:
    """Where bucket ``name`` (``n<width>``, maybe ``|rows<rows>`` after it) lies: log2 of the
    width, and the rows suffix, which a stand-in config had better share."""
    width, _, rows = name.partition("|")
    match = re.fullmatch(r"n([1-9][0-9]*)", width)
    return (math.log2(int(match[1])), rows) if match else None


CONFIG_STORE = ConfigStore(CONFIG_PATH, bucket_place)


def config_keys(name: str, dtype: torch.dtype, n: int, rows: int) -> tuple[str, ...]:
    """Stored-config keys of kernel ``name`` on ``rows`` rows of width ``n`` in ``dtype``, in
    order of preference: the many-rows config (see ``MANY_ROWS_CONFIGS``), then the width's."""
    bucket = fwd_width_bucket(n) if name == "rms_norm_fwd" else width_bucket(n)
    width_key = config_key(name, dtype, bucket)
    if name not in MANY_ROWS_CONFIGS or rows < MANY_ROWS_CONFIGS[name][0]:
        return (width_key,)
    return (f"{width_key}|rows{MANY_ROWS_CONFIGS[name][1]}", width_key)


def _run(name: str, x: torch.Tensor, *args: object) -> object:
    """Kernel ``name`` on ``args`` with the config stored for ``x``'s dtype, width and rows."""
    keys = config_keys(name, x.dtype, x.size(1), x.size(0))
    return call_with_stored_config(KERNELS[name], CONFIG_STORE, keys, *args)


@functools.cache
def sm_grid(device: torch.device) -> torch.Tensor:
    """An empty tensor with one element per SM of ``device`` (``INTERPRETER_SMS`` on the CPU):
    the kernels that take it (:attr:`BwdKernels.sm_grid`) size their grid from its length."""
    if device.type != "cuda":
        return torch.empty(INTERPRETER_SMS, dtype=torch.int8, device=device)
    count = torch.cuda.get_device_properties(device).multi_processor_count
    return torch.empty(count, dtype=torch.int8, device=device)


def bwd_partials(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The backward's main kernels for ``x``'s shape: ``dx`` and the fp32 partial ``dw`` rows."""
    args = (grad_out, x, weight, rstd)
    kernels = BWD_KERNELS[bwd_strategy(*x.shape, x.dtype)]
    if kernels.two_pass:
        row_dot, stripe = kernels.names
        return _run(stripe, x, *args, _run(row_dot, x, *args))
    (name,) = kernels.names
    grid = (sm_grid(x.device),) if kernels.sm_grid else ()
    if kernels.parts_wait and x.device.type != "cuda":
        return _one_part_a_row(name, *args, *grid)
    return _run(name, x, *args, *grid)


def sum_partial_rows(dw_partial: torch.Tensor, weight: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``dw`` like ``weight`` from the fp32 partial rows of the backward of a ``dtype`` input, by
    :func:`rms_norm_dw_sum` with its stored config for that many partial rows; one row is only
    cast (the configs' reduction loop has nothing to loop over, which Helion refuses)."""
    if dw_partial.size(0) == 1:
        return dw_partial[0].to(weight.dtype, copy=True)
    keys = config_keys("rms_norm_dw_sum", dtype, dw_partial.size(1), dw_partial.size(0))
    return call_with_stored_config(rms_norm_dw_sum, CONFIG_STORE, keys, dw_partial, weight)


def _one_part_a_row(name: str, *args: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Kernel ``name``, whose one block size is the part of a row (:func:`rms_norm_bwd_row_split`),
    with each row one part, for the CPU interpreter: its programs run one after another, so a
    part would wait forever for a later program."""
    bound = KERNELS[name].bind(args)
    bound.set_config(helion.Config(block_sizes=[triton.next_power_of_2(args[1].size(1))], num_warps=4))
    return bound(*args)


def rms_norm_forward(x: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``y`` and the fp32 ``rstd`` of contiguous 2-D ``x`` by the forward kernel of its width."""
    return _run(FWD_KERNELS[fwd_strategy(x.size(1))], x, x, weight, eps)


def rms_norm_backward(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(dx, dw)`` by the backward kernels of ``x``'s shape, then the partial-``dw`` sum."""
    dx, dw_partial = bwd_partials(grad_out.contiguous(), x, weight, rstd)
    return dx, sum_partial_rows(dw_partial, weight, x.dtype)


class RMSNormFunction(torch.autograd.Function):
    """Autograd wiring: the forward saves ``x``, ``weight`` and ``rstd`` for the backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        y, rstd = rms_norm_forward(x, weight, eps)
        ctx.save_for_backward(x, weight, rstd)
        return y

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
        x, weight, rstd = ctx.saved_tensors
        dx, dw = rms_norm_backward(grad_out, x, weight, rstd)
        return dx, dw, None


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Llama-style RMS norm of the rows of 2-D ``x`` scaled by ``weight``; differentiable."""
    check_inputs(x, weight)
    return RMSNormFunction.apply(x.contiguous(), weight.contiguous(), eps)
