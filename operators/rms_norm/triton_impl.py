"""RMS normalization in Triton: the forward, the one-pass backward, custom ops and autograd.

For ``x`` of shape ``(M, N)`` and ``weight`` of shape ``(N,)``, with all math in fp32::

    rstd = 1 / sqrt(mean(x**2, axis=-1) + eps)            # one value per row, saved
    y    = x * rstd * weight

Backward, with ``xhat = x * rstd`` and ``g = dy * weight``::

    dx = rstd * (g - xhat * mean(g * xhat, axis=-1))
    dw = sum over rows of dy * xhat

The forward reads ``x`` once from DRAM and writes ``y``.  The backward reads ``x``, ``dy`` and
``rstd`` and writes ``dx`` in one pass; each program accumulates ``dw`` over its rows in fp32
registers and stores one partial row, which a second small kernel sums.  Which kernel runs and
how it is launched is a plan (:mod:`operators.rms_norm.triton_plans`); besides the plain
one-pass kernel, a prefetching one (the next block of rows loaded ahead) runs most 4096-wide
rows and 8192-wide fp32 ones, and the variants for wider rows live in
:mod:`operators.rms_norm.triton_wide`.  The host functions are ``torch.library`` custom ops
(``opbench::rms_norm_fwd``, ``opbench::rms_norm_bwd``) with autograd, so ``torch.compile``
traces through them; :mod:`operators.rms_norm.triton_direct` calls the same
host functions (:func:`rms_norm_forward`, :func:`rms_norm_backward`) without the dispatcher.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from operators.rms_norm import triton_wide
from operators.rms_norm.custom_ops import define_rms_norm_ops
from operators.rms_norm.strategy import check_inputs
from operators.rms_norm.triton_plans import (
    BwdKernel,
    BwdPlan,
    FwdPlan,
    bwd_plan,
    fwd_plan,
    grid_dependency_control,
    let_dw_sum_launch,
    persistent_grid,
    wait_for_dw_partials,
)

_SUM_ROWS_TILE = 4096
"""Values each program of the partial-``dw`` sum loads at once."""


@triton.jit
def _rms_norm_fwd_kernel(
    x_ptr, w_ptr, y_ptr, rstd_ptr, M, N: tl.constexpr, eps,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, NUM_STAGES: tl.constexpr,
):
    """Normalize blocks of ``BLOCK_M`` rows, taking blocks ``pid, pid + programs, ...``.

    Per row: ``rstd = rsqrt(sum(x^2) / N + eps)``, ``y = x * rstd * w``, ``y`` in ``y``'s dtype,
    ``rstd`` fp32 [M].  ``BLOCK_N >= N``; the row loop prefetches ``NUM_STAGES - 1`` blocks.
    """
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < N
    step = tl.num_programs(0) * BLOCK_M
    for row_start in tl.range(tl.program_id(0) * BLOCK_M, M, step, num_stages=NUM_STAGES):
        rows = row_start + tl.arange(0, BLOCK_M)
        row_mask = rows < M
        mask = row_mask[:, None] & col_mask[None, :]
        offsets = rows.to(tl.int64)[:, None] * N + cols[None, :]

        x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps)
        w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
        y = x * rstd[:, None] * w[None, :]
        tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)
        tl.store(rstd_ptr + rows, rstd, mask=row_mask)


@triton.jit
def _rms_norm_fwd_looped_kernel(x_ptr, w_ptr, y_ptr, rstd_ptr, eps, N: tl.constexpr, CHUNK: tl.constexpr,
                                NUM_STAGES: tl.constexpr):
    """Normalize row ``pid`` in two loops over ``CHUNK``-wide column chunks.

    The first loop accumulates ``sum(x^2)`` (its loads marked to stay in L2), then
    ``rstd = rsqrt(sum(x^2) / N + eps)``; the second reads ``x`` again, from L2 when it stayed
    there (marked to leave it), and stores ``y = x * rstd * w``.  Only a chunk is live at a time,
    so many programs fit on an SM whatever the width.  One program per row: grid ``(M,)``.
    """
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * N
    acc = tl.zeros([CHUNK], dtype=tl.float32)
    for start in tl.range(0, N, CHUNK, num_stages=NUM_STAGES):
        cols = start + tl.arange(0, CHUNK)
        x = tl.load(x_row + cols, mask=cols < N, other=0.0, eviction_policy="evict_last").to(tl.float32)
        acc += x * x
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
    for start in tl.range(0, N, CHUNK, num_stages=NUM_STAGES):
        cols = start + tl.arange(0, CHUNK)
        x = tl.load(x_row + cols, mask=cols < N, other=0.0, eviction_policy="evict_first").to(tl.float32)
        w = tl.load(w_ptr + cols, mask=cols < N, other=0.0, eviction_policy="evict_last").to(tl.float32)
        tl.store(y_ptr + row * N + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=cols < N)
    tl.store(rstd_ptr + row, rstd)


@triton.jit
def _rms_norm_bwd_kernel(
    dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, dw_partial_ptr, M, N: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, NUM_STAGES: tl.constexpr, USE_PDL: tl.constexpr,
):
    """One-pass backward over blocks of ``BLOCK_M`` whole rows, strided across programs.

    Per row: ``xhat = x * rstd``, ``g = dy * w``, ``dx = rstd * (g - xhat * sum(g * xhat) / N)``.
    The program's ``sum(dy * xhat)`` over its rows is fp32 row ``pid`` of ``dw_partial``
    [programs, N].  ``BLOCK_N >= N``; the row loop has ``NUM_STAGES`` pipeline stages.  ``N`` is
    compiled in, so rows whose width is a multiple of 8 but not 16 still load 16 bytes at a time.
    ``USE_PDL``: let the ``dw`` sum launch early (:func:`let_dw_sum_launch`).
    """
    let_dw_sum_launch(USE_PDL)
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < N
    dw = tl.zeros([BLOCK_N], dtype=tl.float32)

    step = tl.num_programs(0) * BLOCK_M
    for row_start in tl.range(pid * BLOCK_M, M, step, num_stages=NUM_STAGES):
        rows = row_start + tl.arange(0, BLOCK_M)
        row_mask = rows < M
        mask = row_mask[:, None] & col_mask[None, :]
        offsets = rows.to(tl.int64)[:, None] * N + cols[None, :]
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0)
        w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)

        xhat = x * rstd[:, None]
        g = dy * w[None, :]
        c = tl.sum(g * xhat, axis=1) / N
        dx = rstd[:, None] * (g - xhat * c[:, None])
        tl.store(dx_ptr + offsets, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += tl.sum(dy * xhat, axis=0)

    tl.store(dw_partial_ptr + pid.to(tl.int64) * N + cols, dw, mask=col_mask)


@triton.jit
def _rms_norm_bwd_prefetch_kernel(
    dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, dw_partial_ptr, M, N: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, USE_PDL: tl.constexpr,
):
    """The one-pass backward with the next block of rows loaded into registers ahead of use.

    Per row ``xhat = x * rstd``, ``g = dy * w``, ``dx = rstd * (g - xhat * sum(g * xhat) / N)``;
    the program's ``sum(dy * xhat)`` over its rows is fp32 row ``pid`` of ``dw_partial`` [programs, N].
    Blocks of ``BLOCK_M`` rows, padded to ``BLOCK_N >= N``, go to programs ``pid, pid + programs, ...``.
    Each step issues the loads of its next block (kept in the input dtype) before it reduces and
    stores the current one, so the reduction and the ``dx`` stores overlap the next block's DRAM
    latency without a trip through shared memory.  Precondition: ``programs * BLOCK_M * N < 2**31``
    (the step is an int32 product; an int64 step was part of a measured regression: "A regression
    found and undone" in ``results/h200/rms_norm/NOTES.md``).
    ``USE_PDL``: let the ``dw`` sum launch early (:func:`let_dw_sum_launch`).
    """
    let_dw_sum_launch(USE_PDL)
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < N
    dw = tl.zeros([BLOCK_N], dtype=tl.float32)
    step = tl.num_programs(0) * BLOCK_M

    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    mask = (rows < M)[:, None] & col_mask[None, :]
    offsets = rows.to(tl.int64)[:, None] * N + cols[None, :]
    x_next = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    dy_next = tl.load(dy_ptr + offsets, mask=mask, other=0.0)
    for row_start in tl.range(pid * BLOCK_M, M, step, num_stages=1):
        rows = row_start + tl.arange(0, BLOCK_M)
        row_mask = rows < M
        mask = row_mask[:, None] & col_mask[None, :]
        offsets = rows.to(tl.int64)[:, None] * N + cols[None, :]
        x = x_next.to(tl.float32)
        dy = dy_next.to(tl.float32)
        next_mask = (rows + step < M)[:, None] & col_mask[None, :]
        x_next = tl.load(x_ptr + offsets + step * N, mask=next_mask, other=0.0)
        dy_next = tl.load(dy_ptr + offsets + step * N, mask=next_mask, other=0.0)
        rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0)
        w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)

        xhat = x * rstd[:, None]
        g = dy * w[None, :]
        c = tl.sum(g * xhat, axis=1) / N
        dx = rstd[:, None] * (g - xhat * c[:, None])
        tl.store(dx_ptr + offsets, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += tl.sum(dy * xhat, axis=0)

    tl.store(dw_partial_ptr + pid.to(tl.int64) * N + cols, dw, mask=col_mask)


@triton.jit
def _sum_rows_kernel(partial_ptr, out_ptr, P, N, BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr,
                     USE_PDL: tl.constexpr):
    """``out[j] = sum_i partial[i, j]`` over the fp32 rows of ``partial`` [P, N], cast to ``out``'s dtype.

    With ``USE_PDL`` it is launched as a programmatic dependent of the kernel that wrote
    ``partial``: its programs may start while that kernel runs and wait for it to finish before reading.
    """
    wait_for_dw_partials(USE_PDL)
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    acc = tl.zeros([BLOCK_P, BLOCK_N], dtype=tl.float32)
    for start in range(0, P, BLOCK_P):
        rows = start + tl.arange(0, BLOCK_P)
        mask = (rows < P)[:, None] & col_mask[None, :]
        acc += tl.load(partial_ptr + rows.to(tl.int64)[:, None] * N + cols[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + cols, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty), mask=col_mask)


def launch_fwd(
    x: torch.Tensor, weight: torch.Tensor, eps: float, plan: FwdPlan
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the forward on contiguous 2-D ``x`` as ``plan`` says; returns ``y`` and fp32 ``rstd``."""
    m, n = x.shape
    y = torch.empty_like(x)
    rstd = torch.empty(m, dtype=torch.float32, device=x.device)
    if plan.chunk is not None:
        _rms_norm_fwd_looped_kernel[(m,)](x, weight, y, rstd, eps, N=n, CHUNK=plan.chunk,
                                          NUM_STAGES=plan.num_stages, num_warps=plan.num_warps)
        return y, rstd
    _rms_norm_fwd_kernel[(triton.cdiv(m, plan.block_m),)](
        x, weight, y, rstd, m, n, eps, BLOCK_M=plan.block_m, BLOCK_N=triton.next_power_of_2(n),
        NUM_STAGES=plan.num_stages, num_warps=plan.num_warps,
    )
    return y, rstd


def _sum_rows_tile(rows: int) -> tuple[int, int]:
    """``(BLOCK_P, BLOCK_N)`` of the partial-``dw`` sum over ``rows`` partial rows.

    A program loads ``_SUM_ROWS_TILE`` values (32 per thread over 4 warps), as many of the
    rows as fit at once, so the sum waits on one memory round trip rather than one per step
    of rows; columns stay at least 8 wide (one 32-byte sector of fp32).
    """
    block_n = max(8, min(256, _SUM_ROWS_TILE // triton.next_power_of_2(rows)))
    return min(triton.next_power_of_2(rows), _SUM_ROWS_TILE // block_n), block_n


def sum_partial_rows(dw_partial: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Sum the fp32 partial ``dw`` rows into a tensor like ``weight``.

    On an sm_90+ GPU the sum is a programmatic dependent launch, whose programs start while
    the kernel launched before it on the stream (the backward kernel that wrote ``dw_partial``)
    is still running and wait for it to finish before reading.
    """
    programs, n = dw_partial.shape
    dw = torch.empty_like(weight)
    block_p, block_n = _sum_rows_tile(programs)
    use_pdl = grid_dependency_control(dw_partial.device)
    launch = dict(launch_pdl=True) if use_pdl else {}
    _sum_rows_kernel[(triton.cdiv(n, block_n),)](
        dw_partial, dw, programs, n, BLOCK_P=block_p, BLOCK_N=block_n, USE_PDL=use_pdl, num_warps=4, **launch
    )
    return dw


def one_pass_kernel(plan: BwdPlan, use_pdl: bool) -> tuple[triton.JITFunction, dict]:
    """The kernel of a one-pass ``plan`` and its launch keywords (constexprs and ``num_warps``),
    ``USE_PDL`` being ``use_pdl`` (:func:`grid_dependency_control` of the device)."""
    if plan.kernel is BwdKernel.ONE_PASS_KEPT:
        return triton_wide.kept_input_kernel(plan, use_pdl)
    if plan.kernel is BwdKernel.ONE_PASS_PREFETCH:
        return _rms_norm_bwd_prefetch_kernel, dict(BLOCK_M=plan.block_m, BLOCK_N=plan.block_n,
                                                   USE_PDL=use_pdl, num_warps=plan.num_warps)
    if plan.kernel is not BwdKernel.ONE_PASS:
        raise ValueError(f"not a one-pass plan: {plan}")
    return _rms_norm_bwd_kernel, dict(BLOCK_M=plan.block_m, BLOCK_N=plan.block_n, NUM_STAGES=plan.num_stages,
                                      USE_PDL=use_pdl, num_warps=plan.num_warps)


def _launch_one_pass_bwd(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor,
    dx: torch.Tensor, plan: BwdPlan,
) -> torch.Tensor:
    """Run the one-pass backward into ``dx``; returns the partial ``dw`` rows."""
    m, n = x.shape
    kernel, meta = one_pass_kernel(plan, grid_dependency_control(x.device))
    if plan.rows_per_program is not None:
        programs = triton.cdiv(m, plan.rows_per_program)
    else:
        # The partial-dw buffer is sized from the grid; ``rstd`` (fp32 too) stands in for it
        # while the grid is worked out, which compiles the kernel but does not run it.
        probe_args = (grad_out, x, weight, rstd, dx, rstd, m, n)
        programs = persistent_grid(kernel, probe_args, meta, x.device, triton.cdiv(m, plan.block_m))
    if plan.kernel is BwdKernel.ONE_PASS_PREFETCH and programs * plan.block_m * n >= 2**31:
        raise ValueError(f"a prefetching backward of {programs} programs over {n}-wide rows would step "
                         f"past 2**31 elements; give it a persistent grid (rows_per_program=None)")
    dw_partial = torch.empty(programs, n, dtype=torch.float32, device=x.device)
    kernel[(programs,)](grad_out, x, weight, rstd, dx, dw_partial, m, n, **meta)
    return dw_partial


_BWD_LAUNCHERS = {
    BwdKernel.ONE_PASS: _launch_one_pass_bwd,
    BwdKernel.ONE_PASS_PREFETCH: _launch_one_pass_bwd,
    BwdKernel.ONE_PASS_KEPT: _launch_one_pass_bwd,
    BwdKernel.ROW_SPLIT: triton_wide.launch_row_split,
    BwdKernel.TWO_PASS: triton_wide.launch_two_pass,
}
"""The host launcher of each :class:`BwdKernel`: ``(grad_out, x, weight, rstd, dx, plan)`` to the
partial ``dw`` rows."""


def launch_bwd_partials(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor, plan: BwdPlan
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the backward's main kernels as ``plan`` says; returns ``dx`` and the fp32 partial ``dw`` rows."""
    dx = torch.empty_like(x)
    return dx, _BWD_LAUNCHERS[plan.kernel](grad_out, x, weight, rstd, dx, plan)


def launch_bwd(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor, plan: BwdPlan
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the backward on contiguous 2-D tensors as ``plan`` says; returns ``dx`` and ``dw``."""
    dx, dw_partial = launch_bwd_partials(grad_out, x, weight, rstd, plan)
    return dx, sum_partial_rows(dw_partial, weight)


def rms_norm_forward(x: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``y`` and the fp32 ``rstd`` of 2-D ``x`` with the plan for its shape (no dispatcher, no autograd)."""
    x, weight = x.contiguous(), weight.contiguous()
    return launch_fwd(x, weight, eps, fwd_plan(*x.shape))


def rms_norm_backward(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(dx, dw)`` with the plan for ``x``'s shape and dtype (no dispatcher, no autograd)."""
    grad_out, x, weight = grad_out.contiguous(), x.contiguous(), weight.contiguous()
    return launch_bwd(grad_out, x, weight, rstd, bwd_plan(*x.shape, x.dtype))


rms_norm_fwd, rms_norm_bwd = define_rms_norm_ops("opbench", rms_norm_forward, rms_norm_backward)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Llama-style RMS norm of the rows of 2-D ``x`` scaled by ``weight``; differentiable."""
    check_inputs(x, weight)
    y, _ = rms_norm_fwd(x.contiguous(), weight, eps)
    return y
