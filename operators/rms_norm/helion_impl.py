"""RMS normalization in Helion: forward and backward kernels, autograd and tuning candidates.

Same math as :mod:`operators.rms_norm.triton_impl` (fp32 inside, ``rstd`` saved per row)::

    y  = x * rstd * weight,        rstd = rsqrt(sum(x**2) / N + eps)
    dx = rstd * (g - xhat * sum(g * xhat) / N),   g = dy * weight, xhat = x * rstd
    dw = sum over rows of dy * xhat

Means are written as ``sum / n`` with ``n = hl.specialize(N)``: ``.mean(-1)`` inside a Helion
kernel divides by the padded block width when ``N`` is not a power of two.

The forward's stored H200 configs from 1024 wide loop over column chunks
(``reduction_loops``, with eviction hints): the row sum, then ``y`` from ``x`` read again,
mostly from L2, so only a chunk is live (probe 30 in ``results/h200/rms_norm/NOTES.md``).

The backward kernels return partial ``dw`` rows (:func:`rms_norm_bwd`, up to 16384 wide: one
per program of a grid sized from the SM count, the programs striding over the rows; the
wider-row kernels: one per group of rows); :func:`rms_norm_dw_sum` sums them and casts the
sum to the weight's dtype in one kernel.  From 16384 wide, :func:`rms_norm_bwd` keeps bf16
``x`` and ``dy`` in bf16 and converts them twice (through the bit pattern the second time),
so the row and the ``dw`` accumulator fit in registers.  Rows padded wider than
``BWD_MAX_WIDTH`` do not fit in one SM's registers next to a ``dw`` accumulator.  Up to
``SHARED_ROWS_MAX_WIDTH``, 16-bit rows with ``N`` a multiple of 16 take
:func:`rms_norm_bwd_row_split`, whose column parts of a row add up its sum through slots in
global memory; other rows :func:`rms_norm_bwd_shared_rows`, which gives each row's column
stripes to tiles that each reduce the whole row (the repeated reads mostly hit L2).  Wider
rows take the split backward: :func:`rms_norm_bwd_row_dot` computes each row's
``c = rstd * sum(dy * w * x) / N``, then :func:`rms_norm_bwd_stripe` walks column stripes
over groups of rows, writing ``dx`` and keeping each stripe's ``dw`` in registers (it reads
``x`` and ``dy`` twice, but streams).

Configs are stored per ``(kernel, dtype, bucket)``.  For the backward kernels the bucket is
the row width padded to the next power of two (``"n8192"`` holds N=5120 and N=8192): they
keep a padded row per tile, so rows in one bucket use the same registers and the same config.
The forward's looped configs walk a row in chunks instead, and its bucket is the largest
power of two not above the width (:func:`fwd_width_bucket`: ``"n4096"`` holds N=5120).
"""

from __future__ import annotations

import functools
from pathlib import Path

import helion
import helion.language as hl
import torch
import triton
from helion.autotuner import EnumFragment

from harness.tuning.configs import TuningJob, call_with_stored_config, config_key

CONFIG_PATH = Path(__file__).with_name("helion_configs.json")

BWD_MAX_WIDTH = 16384
"""Widest padded row :func:`rms_norm_bwd` handles."""

SHARED_ROWS_MAX_WIDTH = 32768
"""Widest padded row :func:`rms_norm_bwd_row_split` and :func:`rms_norm_bwd_shared_rows`
handle; wider rows take the split backward."""

TUNING_WIDTHS = (1024, 2048, 4096, 8192, 16384, 32768)
"""The width buckets of the rms_norm operator's default CUDA sweep (N=5120 pads to 8192)."""

TUNING_NUMEL = 2**25
"""Rows x width of the arguments the configs are timed on (see ``TUNING_MIN_ROWS``)."""

INTERPRETER_SMS = 4
"""SMs :func:`sm_slots` counts under the CPU interpreter."""

TUNING_MIN_ROWS = 4096
"""Configs are timed on ``max(TUNING_NUMEL // width, TUNING_MIN_ROWS)`` rows: never fewer rows
than the default sweep's M = 4096 (a config tuned on 1024 x 32768 once lost to the Triton
geometry at 4096 x 32768)."""

TUNING_PARTIAL_ROWS = 256
"""Partial ``dw`` rows :func:`rms_norm_dw_sum`'s width-bucket configs are timed on: about
what :func:`rms_norm_bwd` leaves with two programs per SM (264 on the H200's 132 SMs; 132 to
1056 with one to eight)."""

MANY_ROWS_SLOTS = {"rms_norm_dw_sum": (1024, 2048)}
"""Kernels with a second stored config per width for inputs of many rows, as ``(from, tuned
on)`` rows (partial ``dw`` rows for the sum): from ``from`` rows they take the config stored
under the width's key plus ``|rows<tuned on>``, when there is one.  The sum's width configs
load all 256 rows they were tuned on at once (22.8 us on 2048 rows, probe 5); the shared-rows
and split backwards leave one partial row per group of rows, 512 and more from 32768 rows.
(:func:`rms_norm_bwd` and :func:`rms_norm_bwd_row_split` leave one per program or group of
programs, however many rows there are, and need no slot.)

Configs are stored for padded widths up to 32768 (``TUNING_WIDTHS``); wider rows, which take
the split backward, have none for it, and on a GPU their backward raises
``MissingConfigError`` (their forward takes the n32768 config, see :func:`fwd_width_bucket`)."""


@helion.kernel
def rms_norm_fwd(
    x: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """RMS-normalize the rows of ``x`` [M, N] by ``weight`` [N].

    Returns ``y`` [M, N] in ``x.dtype`` and ``rstd`` fp32 [M].
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
    sm_slots: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradients of :func:`rms_norm_fwd`: ``dx`` [M, N] and partial ``dw`` fp32 [P, N].

    ``P = programs_per_sm * len(sm_slots)`` programs (``sm_slots`` has one element per SM)
    stride over the rows: program ``p`` takes rows ``p, p + P, ...``, one a step, and per row
    ``xhat = x * rstd``, ``g = dy * w``, ``dx = rstd * (g - xhat * sum(g * xhat) / N)``; it
    accumulates ``sum(dy * xhat)`` over its rows in fp32 registers and stores it as row ``p``
    of the partial ``dw``.  The row loop can be pipelined (``range_num_stages``).  bf16 rows
    wider than 8192 keep ``x`` and ``dy`` in bf16 and convert them again (bit pattern, which
    the compiler cannot merge with the first conversion) for ``dx`` and ``dw``: only the
    bf16 copies stay live across the row sum.
    """
    m, n = x.size()
    n = hl.specialize(n)
    keep_bf16 = x.dtype == torch.bfloat16 and n > 8192
    programs = sm_slots.size(0) * hl.register_tunable("programs_per_sm", EnumFragment(choices=(1, 2, 4, 8)))
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
def rms_norm_bwd_row_dot(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor
) -> torch.Tensor:
    """First kernel of the split backward: ``c = rstd * sum(dy * w * x) / N`` per row, fp32 [M]."""
    m, n = x.size()
    n = hl.specialize(n)
    c = torch.empty([m], dtype=torch.float32, device=x.device)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m], dtype=torch.float32)
        for tile_n in hl.tile(n):
            dy_tile = grad_out[tile_m, tile_n].to(torch.float32)
            g = dy_tile * weight[None, tile_n].to(torch.float32)
            acc += (g * x[tile_m, tile_n].to(torch.float32)).sum(-1)
        c[tile_m] = acc * rstd[tile_m] / n
    return c


@helion.kernel
def rms_norm_bwd_stripe(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor,
    c: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Second kernel of the split backward: ``dx`` [M, N] and partial ``dw`` fp32 [G, N].

    Each (group of rows, column stripe) tile walks its rows writing
    ``dx = rstd * (dy * w - xhat * c)`` and keeps the stripe's ``sum(dy * xhat)`` in fp32
    registers; it stores that sum in its group's row of the partial ``dw``.
    """
    m, n = x.size()
    n = hl.specialize(n)
    block_g = hl.register_block_size(m)
    dx = torch.empty_like(x)
    dw_partial = torch.empty([helion.cdiv(m, block_g), n], dtype=torch.float32, device=x.device)
    for tile_g, tile_n in hl.tile([m, n], block_size=[block_g, None]):
        w = weight[tile_n].to(torch.float32)
        dw_acc = hl.zeros([tile_n], dtype=torch.float32)
        for tile_m in hl.tile(tile_g.begin, tile_g.end):
            rstd_tile = rstd[tile_m][:, None]
            dy_tile = grad_out[tile_m, tile_n].to(torch.float32)
            xhat = x[tile_m, tile_n].to(torch.float32) * rstd_tile
            dx_tile = rstd_tile * (dy_tile * w[None, :] - xhat * c[tile_m][:, None])
            dx[tile_m, tile_n] = dx_tile.to(dx.dtype)
            dw_acc += (dy_tile * xhat).sum(0)
        dw_partial[tile_g.id, tile_n] = dw_acc
    return dx, dw_partial


SLOTS_PER_ROW = 16
"""Slots per row of :func:`rms_norm_bwd_row_split`'s exchange: the most parts a row can have."""

ROW_SPLIT_MIN_PART = 4096
"""Narrowest part :func:`rms_norm_bwd_row_split` may tune to: rows up to
``SHARED_ROWS_MAX_WIDTH`` have at most 8 parts, within ``SLOTS_PER_ROW`` and any GPU's SMs."""

_PUBLISH_SHARE = """
@triton.jit
def publish_share(slot_ptr, row, part, share, m):
    bits = share.to(tl.uint32, bitcast=True).to(tl.int64) | (1 << 32)
    tl.store(slot_ptr + tl.cast(row, tl.int64) * 16 + part, bits, mask=row < m)
"""
"""Store a part's share of row ``row``'s sum in slot ``(row, part)`` (rows below ``m`` only):
the fp32 bits in the low word and a ready flag in the high word, one 64-bit store, so a
reader that sees the flag sees the share."""

_ROW_SUM_OF_SHARES = """
@triton.jit
def row_sum_of_shares(slot_ptr, row, parts):
    slots = tl.arange(0, 16)
    ptrs = slot_ptr + tl.cast(row, tl.int64) * 16 + slots
    published = tl.load(ptrs, mask=slots < parts, other=1 << 32, volatile=True)
    while tl.min(published >> 32, axis=0) == 0:
        published = tl.load(ptrs, mask=slots < parts, other=1 << 32, volatile=True)
    return tl.sum((published & 0xFFFFFFFF).to(tl.uint32).to(tl.float32, bitcast=True), axis=0)
"""
"""Wait until all ``parts`` slots of row ``row`` hold a share, then add the shares (in slot
order, so every part gets the same sum)."""


@helion.kernel
def rms_norm_bwd_row_split(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor,
    sm_slots: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One-pass backward with each row split into column parts: ``dx`` [M, N] and partial
    ``dw`` fp32 [G, N].

    ``G = len(sm_slots) // parts`` groups of ``parts`` programs, one program per SM at most,
    so all are resident at once on an idle GPU.  Program ``(g, p)`` owns part ``p`` of rows
    ``g, g + G, ...``; the parts of a row add up ``S = sum(dy * w * x)`` through the row's
    slots (:data:`_PUBLISH_SHARE`, :data:`_ROW_SUM_OF_SHARES`, a fresh zeroed buffer each
    call), then ``dx = rstd * (dy * w - xhat * rstd * S / N)`` with ``xhat = x * rstd``, and
    the program's ``sum(dy * xhat)`` lands in its part of row ``g`` of the partial ``dw``.
    Each share is published a row before it is needed: per step the program loads row
    ``r + 2G``, publishes the share of row ``r + G`` (loaded a step ago), then waits for the
    shares of row ``r`` (published a step ago by every part) and finishes it.  Rows stay in
    their input dtype between steps and are converted to fp32 where used.
    """
    m, n = x.size()
    n = hl.specialize(n)
    padded = triton.next_power_of_2(n)
    part = hl.register_block_size(min(ROW_SPLIT_MIN_PART, padded), padded)
    parts = helion.cdiv(n, part)
    groups = sm_slots.size(0) // parts
    slots = torch.zeros([m * SLOTS_PER_ROW], dtype=torch.int64, device=x.device)
    dx = torch.empty_like(x)
    dw_partial = torch.empty([groups, n], dtype=torch.float32, device=x.device)
    for tile_g, tile_p in hl.tile([groups, n], block_size=[1, part]):
        g = tile_g.begin
        part_id = tile_p.id
        w = weight[tile_p].to(torch.float32)
        dw_acc = hl.zeros([tile_p], dtype=torch.float32)
        x_cur = hl.load(x, [g, tile_p], extra_mask=g < m)
        dy_cur = hl.load(grad_out, [g, tile_p], extra_mask=g < m)
        share = (dy_cur.to(torch.float32) * w * x_cur.to(torch.float32)).sum(-1)
        hl.triton_kernel(_PUBLISH_SHARE, args=(slots, g, part_id, share, m), output_like=None)
        x_next = hl.load(x, [g + groups, tile_p], extra_mask=(g + groups) < m)
        dy_next = hl.load(grad_out, [g + groups, tile_p], extra_mask=(g + groups) < m)
        for row in hl.grid(g, m, groups):
            x_after = hl.load(x, [row + 2 * groups, tile_p], extra_mask=(row + 2 * groups) < m)
            dy_after = hl.load(grad_out, [row + 2 * groups, tile_p], extra_mask=(row + 2 * groups) < m)
            share_next = (dy_next.to(torch.float32) * w * x_next.to(torch.float32)).sum(-1)
            hl.triton_kernel(_PUBLISH_SHARE, args=(slots, row + groups, part_id, share_next, m),
                             output_like=None)
            rstd_row = rstd[row]
            row_sum = hl.triton_kernel(_ROW_SUM_OF_SHARES, args=(slots, row, parts), output_like=share)
            xhat = x_cur.to(torch.float32) * rstd_row
            dy_row = dy_cur.to(torch.float32)
            dx[row, tile_p] = (rstd_row * (dy_row * w - xhat * (row_sum * rstd_row / n))).to(dx.dtype)
            dw_acc += dy_row * xhat
            x_cur = x_next
            dy_cur = dy_next
            x_next = x_after
            dy_next = dy_after
        dw_partial[g, tile_p] = dw_acc
    return dx, dw_partial


@helion.kernel
def rms_norm_bwd_shared_rows(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """One-pass backward for wide rows: ``dx`` [M, N] and partial ``dw`` fp32 [G, N].

    Each (column stripe, group of rows) tile walks its rows; per row it reduces the whole row
    to ``s = sum(dy * w * x)``, then writes its stripe of
    ``dx = rstd * (dy * w - xhat * rstd * s / N)`` and adds ``dy * xhat`` to the stripe's
    ``dw`` in registers.  The stripes of a row run side by side, so the row read for ``s``
    by all but one of them mostly comes from L2.
    """
    m, n = x.size()
    n = hl.specialize(n)
    block_g = hl.register_block_size(m)
    dx = torch.empty_like(x)
    dw_partial = torch.empty([helion.cdiv(m, block_g), n], dtype=torch.float32, device=x.device)
    for tile_n, tile_g in hl.tile([n, m], block_size=[None, block_g]):
        w = weight[tile_n].to(torch.float32)
        dw_acc = hl.zeros([tile_n], dtype=torch.float32)
        for tile_m in hl.tile(tile_g.begin, tile_g.end):
            rstd_tile = rstd[tile_m][:, None]
            s = (grad_out[tile_m, :].to(torch.float32) * weight[None, :].to(torch.float32)
                 * x[tile_m, :].to(torch.float32)).sum(-1)
            xhat = x[tile_m, tile_n].to(torch.float32) * rstd_tile
            dy_tile = grad_out[tile_m, tile_n].to(torch.float32)
            c = s[:, None] * rstd_tile / n
            dx[tile_m, tile_n] = (rstd_tile * (dy_tile * w[None, :] - xhat * c)).to(dx.dtype)
            dw_acc += (dy_tile * xhat).sum(0)
        dw_partial[tile_g.id, tile_n] = dw_acc
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
"""The Helion kernels of this module by the name their configs are stored under."""


def width_bucket(n: int) -> str:
    """The stored-config bucket for rows of width ``n``: ``n`` padded to a power of two."""
    return f"n{triton.next_power_of_2(n)}"


def bwd_kernel_names(n: int, dtype: torch.dtype) -> list[str]:
    """The backward kernels that run rows of width ``n`` in ``dtype``, in launch order.

    Rows padded wider than ``BWD_MAX_WIDTH`` take the row split when they are 16-bit and
    ``N`` is a multiple of 16 (as in Triton: three rows of a part stay in registers in the
    input dtype, with vectorized loads), else the shared-rows backward.
    """
    width = triton.next_power_of_2(n)
    if width <= BWD_MAX_WIDTH:
        return ["rms_norm_bwd", "rms_norm_dw_sum"]
    if width <= SHARED_ROWS_MAX_WIDTH:
        row_split = dtype.itemsize == 2 and n % 16 == 0
        return ["rms_norm_bwd_row_split" if row_split else "rms_norm_bwd_shared_rows", "rms_norm_dw_sum"]
    return ["rms_norm_bwd_row_dot", "rms_norm_bwd_stripe", "rms_norm_dw_sum"]


def kernels_for_width(n: int, dtype: torch.dtype) -> list[str]:
    """Names of the kernels that run on rows of width ``n``'s bucket in ``dtype``: the ones to
    tune for it (16-bit rows of the row split's widths whose ``N`` is not a multiple of 16
    take the shared-rows backward)."""
    names = ["rms_norm_fwd", *bwd_kernel_names(n, dtype)]
    if "rms_norm_bwd_row_split" in names:
        names.insert(2, "rms_norm_bwd_shared_rows")
    return names


def fwd_width_bucket(n: int) -> str:
    """The stored-config bucket of :func:`rms_norm_fwd` for rows of width ``n``: the largest
    power of two not above ``n``, at most the widest of ``TUNING_WIDTHS``.

    Its stored configs loop over column chunks, so a 5120-wide row takes the 4096 bucket's
    2048-wide chunks (three, the last half masked) rather than the 8192 bucket's 4096-wide
    ones (two, the second three quarters masked), and rows wider than 32768 the 32768
    bucket's chunks.
    """
    return f"n{min(1 << (n.bit_length() - 1), max(TUNING_WIDTHS))}"


def config_keys(name: str, dtype: torch.dtype, n: int, rows: int) -> tuple[str, ...]:
    """Stored-config keys of kernel ``name`` on ``rows`` rows of width ``n`` in ``dtype``, in
    order of preference: the many-rows slot (see ``MANY_ROWS_SLOTS``), then the width's."""
    bucket = fwd_width_bucket(n) if name == "rms_norm_fwd" else width_bucket(n)
    width_key = config_key(name, dtype, bucket)
    if name not in MANY_ROWS_SLOTS or rows < MANY_ROWS_SLOTS[name][0]:
        return (width_key,)
    return (f"{width_key}|rows{MANY_ROWS_SLOTS[name][1]}", width_key)


def _run(name: str, x: torch.Tensor, *args: object, rows: int | None = None) -> object:
    """Kernel ``name`` on ``args`` with the config stored for ``x``'s dtype, width and rows
    (``rows`` when given: the partial rows of the ``dw`` sum)."""
    keys = config_keys(name, x.dtype, x.size(1), x.size(0) if rows is None else rows)
    return call_with_stored_config(KERNELS[name], CONFIG_PATH, keys, *args)


SM_GRID_KERNELS = frozenset({"rms_norm_bwd", "rms_norm_bwd_row_split"})
"""The kernels that size their grid from the SM count: their last argument is :func:`sm_slots`."""


@functools.cache
def sm_slots(device: torch.device) -> torch.Tensor:
    """An empty tensor with one element per SM of ``device`` (``INTERPRETER_SMS`` on the CPU):
    :func:`rms_norm_bwd` sizes its grid from its length."""
    if device.type != "cuda":
        return torch.empty(INTERPRETER_SMS, dtype=torch.int8, device=device)
    count = torch.cuda.get_device_properties(device).multi_processor_count
    return torch.empty(count, dtype=torch.int8, device=device)


def bwd_partials(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The backward's main kernels for ``x``'s width: ``dx`` and the fp32 partial ``dw`` rows."""
    args = (grad_out, x, weight, rstd)
    first = bwd_kernel_names(x.size(1), x.dtype)[0]
    if first == "rms_norm_bwd_row_dot":
        return _run("rms_norm_bwd_stripe", x, *args, _run(first, x, *args))
    if first == "rms_norm_bwd_row_split" and x.device.type != "cuda":
        return _one_part_row_split(*args, sm_slots(x.device))
    if first in SM_GRID_KERNELS:
        return _run(first, x, *args, sm_slots(x.device))
    return _run(first, x, *args)


def _one_part_row_split(*args: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`rms_norm_bwd_row_split` with each row one part, for the CPU interpreter: its
    programs run one after another, so a part would wait forever for a later program."""
    bound = rms_norm_bwd_row_split.bind(args)
    bound.set_config(helion.Config(block_sizes=[triton.next_power_of_2(args[1].size(1))], num_warps=4))
    return bound(*args)


class RMSNormFunction(torch.autograd.Function):
    """Autograd wiring: the forward saves ``x``, ``weight`` and ``rstd`` for the backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        y, rstd = _run("rms_norm_fwd", x, x, weight, eps)
        ctx.save_for_backward(x, weight, rstd)
        return y

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
        x, weight, rstd = ctx.saved_tensors
        dx, dw_partial = bwd_partials(grad_out.contiguous(), x, weight, rstd)
        return dx, _run("rms_norm_dw_sum", x, dw_partial, weight, rows=dw_partial.size(0)), None


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Llama-style RMS norm of the rows of 2-D ``x`` scaled by ``weight``; differentiable."""
    if x.dim() != 2:
        raise ValueError(f"rms_norm expects a 2-D input (M, N), got shape {tuple(x.shape)}")
    if weight.shape != x.shape[1:]:
        raise ValueError(f"weight shape {tuple(weight.shape)} does not match N={x.shape[1]}")
    return RMSNormFunction.apply(x.contiguous(), weight.contiguous(), eps)


def tuning_args(
    kernel_name: str, m: int, n: int, dtype: torch.dtype, device: str
) -> tuple[object, ...]:
    """Example arguments of shape (m, n) for timing configs of ``KERNELS[kernel_name]``."""
    x = torch.randn(m, n, dtype=dtype, device=device)
    weight = torch.randn(n, dtype=dtype, device=device)
    if kernel_name == "rms_norm_fwd":
        return x, weight, 1e-6
    if kernel_name == "rms_norm_dw_sum":  # ``m`` partial rows
        return torch.randn(m, n, dtype=torch.float32, device=device), weight
    if kernel_name not in KERNELS:
        raise ValueError(f"unknown kernel {kernel_name!r}; expected one of {sorted(KERNELS)}")
    rstd = torch.rsqrt(x.float().pow(2).mean(-1) + 1e-6)
    args = (torch.randn_like(x), x, weight, rstd)
    if kernel_name == "rms_norm_bwd_stripe":
        return (*args, torch.randn(m, dtype=torch.float32, device=device))
    if kernel_name in SM_GRID_KERNELS:
        return (*args, sm_slots(torch.device(device)))
    return args


def tuning_candidates(kernel_name: str, n: int) -> list[helion.Config]:
    """A short list of plausible H200 configs for ``KERNELS[kernel_name]`` on rows of width ``n``.

    The first candidate mirrors the Triton launch heuristics (checked with ``ptxas`` for
    sm_90: no spills, about 32 warps resident per SM); the others vary one knob each, except
    for :func:`rms_norm_bwd`, whose candidates cross programs per SM, warps and pipelining.
    """
    width = triton.next_power_of_2(n)
    candidates = {
        "rms_norm_fwd": _fwd_candidates,
        "rms_norm_bwd": _bwd_candidates,
        "rms_norm_bwd_row_dot": _row_dot_candidates,
        "rms_norm_bwd_stripe": _stripe_candidates,
        "rms_norm_bwd_shared_rows": _shared_rows_candidates,
        "rms_norm_bwd_row_split": _row_split_candidates,
        "rms_norm_dw_sum": _dw_sum_candidates,
    }
    if kernel_name not in candidates:
        raise ValueError(f"unknown kernel {kernel_name!r}; expected one of {sorted(KERNELS)}")
    return candidates[kernel_name](width)


def _fwd_candidates(width: int) -> list[helion.Config]:
    # 32 row values per thread and 4096+ values per tile, the whole row in registers.
    rows = max(1, 4096 // width)
    warps = min(32, max(4, rows * width // 1024))
    base = {"block_sizes": [rows], "num_warps": warps, "reduction_loops": [None]}
    variants = [
        {},
        {"num_warps": min(32, 2 * warps)},
        {"num_warps": max(4, warps // 2)},
        {"indexing": "block_ptr"},
        {"load_eviction_policies": "first"},
        {"pid_type": "persistent_interleaved", "num_sm_multiplier": max(1, 32 // warps),
         "range_num_stages": [2]},
    ]
    if width <= 8192:
        variants.append({"block_sizes": [2 * rows], "num_warps": min(32, 2 * warps)})
    # One row a program in two loops over column chunks of at most half the width, as inductor
    # writes it: the sum of squares, then y from x read again, mostly from L2, with the
    # eviction hints that keep x there for the second loop (loads: x, x again, weight);
    # 4-16 values a thread.
    variants += [
        {"block_sizes": [1], "reduction_loops": [chunk], "num_warps": loop_warps,
         "load_eviction_policies": ["last", "first", "last"]}
        for chunk in (512, 1024, 2048, 4096, 8192) if chunk <= width // 2
        for loop_warps in (4, 8, 16, 32) if 4 <= chunk // (32 * loop_warps) <= 16
    ]
    return _unique(base, variants)


def _bwd_candidates(width: int) -> list[helion.Config]:
    # One row a step, 16 row values per thread (8 at 1024 wide, with the 4-warp floor), so
    # x, dy, weight and the dw accumulator stay in registers, and half the warps; the row
    # loop with no, three or four software-pipeline stages (the 4096- and 8192-wide tuning
    # of 41aef9d: three stages 6-12% ahead of the old tiles, two far behind; four stages
    # need more shared memory than an SM has at 16384 wide); one to eight programs per SM.
    warps = min(32, max(4, width // 512))
    per_sm = (1, 2) if width >= 8192 else (2, 4) if width == 4096 else (4, 8)
    configs = [
        {"programs_per_sm": programs, "num_warps": num_warps, "range_num_stages": [0, stages]}
        for programs in per_sm
        for num_warps in dict.fromkeys((warps, max(4, warps // 2)))
        for stages in ((0, 3, 4) if width < 16384 else (0, 3))
    ]
    return [helion.Config(**config) for config in configs]


def _row_dot_candidates(_width: int) -> list[helion.Config]:
    # Any width (the split backward serves rows wider than 16384): one row per program in
    # column tiles of 16 values per thread, like a plain reduction.
    base = {"block_sizes": [1, 4096], "num_warps": 8}
    variants = [
        {},
        {"block_sizes": [1, 8192], "num_warps": 16},
        {"block_sizes": [2, 4096], "num_warps": 16},
        {"block_sizes": [1, 2048], "num_warps": 4},
        {"range_num_stages": [0, 2]},
    ]
    return _unique(base, variants)


def _stripe_candidates(_width: int) -> list[helion.Config]:
    # Any width. Block sizes: rows per group (one partial dw row each), stripe width, rows per step.
    # 32 values per thread; groups sized so that M = 4096 gives several programs per SM.
    base = {"block_sizes": [256, 1024, 8], "num_warps": 8}
    variants = [
        {},
        {"block_sizes": [128, 1024, 8]},
        {"block_sizes": [512, 1024, 8]},
        {"block_sizes": [256, 2048, 4]},
        {"block_sizes": [256, 512, 16]},
        {"block_sizes": [256, 1024, 4], "num_warps": 4},
    ]
    return _unique(base, variants)


def _shared_rows_candidates(_width: int) -> list[helion.Config]:
    # Block sizes: rows per group (one partial dw row each), the stripe a tile owns, rows per
    # step.  Two 16384-wide stripes with 16 warps was the fastest Triton geometry at 32768
    # (probe 13).
    base = {"block_sizes": [64, 16384, 1], "num_warps": 16}
    variants = [
        {},
        {"num_warps": 32},
        {"block_sizes": [32, 16384, 1]},
        {"block_sizes": [128, 16384, 1]},
        {"block_sizes": [64, 8192, 1]},
        {"pid_type": "persistent_interleaved"},
    ]
    return _unique(base, variants)


def _row_split_candidates(_width: int) -> list[helion.Config]:
    # The part width and warps: Triton's row split ran fastest with 8192-wide parts and 16
    # warps (probe 18: 4096-wide parts with 8 warps lost 20 points).
    return [helion.Config(block_sizes=[part], num_warps=warps)
            for part, warps in ((8192, 16), (8192, 8), (8192, 32), (16384, 32), (4096, 8))]


def _dw_sum_candidates(_width: int) -> list[helion.Config]:
    # Any width: columns per program, and all partial rows loaded at once (no reduction loop)
    # so the sum waits on one memory round trip, as the Triton sum does.
    base = {"block_sizes": [16], "reduction_loops": [None], "num_warps": 4}
    variants = [
        {},
        {"block_sizes": [8]},
        {"block_sizes": [32], "num_warps": 8},
        {"block_sizes": [64], "reduction_loops": [64]},
        {"block_sizes": [32], "reduction_loops": [128]},
    ]
    return _unique(base, variants)


def _dw_sum_many_rows_candidates() -> list[helion.Config]:
    # Thousands of rows: a reduction loop keeps each program's tile at 2-8K values, and more
    # columns per program keep every SM busy when the width is small.
    base = {"block_sizes": [32], "reduction_loops": [128], "num_warps": 4}
    variants = [
        {},
        {"reduction_loops": [256], "num_warps": 8},
        {"block_sizes": [16], "reduction_loops": [256]},
        {"block_sizes": [64], "reduction_loops": [64]},
        {"block_sizes": [8], "reduction_loops": [512], "num_warps": 8},
        {"block_sizes": [16], "reduction_loops": [None]},
    ]
    return _unique(base, variants)


_MANY_ROWS_CANDIDATES = {"rms_norm_dw_sum": _dw_sum_many_rows_candidates}
"""The candidates of each kernel's many-rows slot (``MANY_ROWS_SLOTS``), the same at every width."""


def _unique(base: dict, variants: list[dict]) -> list[helion.Config]:
    configs = []
    for variant in variants:
        config = {**base, **variant}
        if config not in configs:
            configs.append(config)
    return [helion.Config(**config) for config in configs]


def tuning_jobs(dtype: torch.dtype, device: str) -> list[TuningJob]:
    """Every stored-config slot of the default sweep for ``dtype``, with its candidates.

    Per width bucket: the forward and the backward kernels that rows of that width run, timed
    on ``max(TUNING_NUMEL // width, TUNING_MIN_ROWS)`` rows (``rms_norm_dw_sum`` on
    ``TUNING_PARTIAL_ROWS``), and the many-rows slots of ``MANY_ROWS_SLOTS`` on their rows;
    arguments are made only when a job is tuned.
    """
    jobs = [
        TuningJob(
            kernel=KERNELS[name],
            key=config_key(name, dtype, width_bucket(width)),
            make_args=functools.partial(tuning_args, name, _tuning_rows(name, width), width, dtype, device),
            candidates=tuning_candidates(name, width),
        )
        for width in TUNING_WIDTHS
        for name in kernels_for_width(width, dtype)
    ]
    many_rows = [
        TuningJob(
            kernel=KERNELS[name],
            key=config_keys(name, dtype, width, rows)[0],
            make_args=functools.partial(tuning_args, name, rows, width, dtype, device),
            candidates=_MANY_ROWS_CANDIDATES[name](),
        )
        for width in TUNING_WIDTHS
        for name, (_, rows) in MANY_ROWS_SLOTS.items()
        if name in kernels_for_width(width, dtype)
    ]
    return jobs + many_rows


def _tuning_rows(kernel_name: str, width: int) -> int:
    """Rows of the arguments a kernel's width-bucket configs are timed on."""
    if kernel_name == "rms_norm_dw_sum":
        return TUNING_PARTIAL_ROWS
    return max(TUNING_NUMEL // width, TUNING_MIN_ROWS)
