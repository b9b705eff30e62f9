"""Split-K matrix multiplication in Triton, for outputs with too few tiles to fill the GPU.

Output tile ``(m-block, n-block)`` and part ``s`` of ``S`` compute, in fp32::

    P = ceil(ceil(K / BLOCK_K) / S)                                  (k-blocks per part)
    part[s] = A[m-block, s*P*BLOCK_K : (s+1)*P*BLOCK_K] @ B[same k-range, n-block]
    C       = alpha * (part[0] + part[1] + ... + part[S-1]) + beta * bias

With ``S == 1`` the one program of a tile applies the epilogue and stores ``C`` itself.  With
``S > 1`` the parts go to an fp32 workspace ``(S, M, N)`` and ``_split_k_reduce_kernel`` adds
them and applies the epilogue once.  Deterministic by construction: a second kernel adds the
parts in a fixed order, where fp32 atomics into one buffer would add them in arrival order
(results changing from run to run in their last bits) and need a zeroed buffer besides.

The split-K regime runs it with 128x128 tiles; the skinny regime (decode: M of 1 to 64) with
a BLOCK_M that covers M and narrow column blocks, where a problem whose N is the small side is
computed transposed, ``out.T = b.T @ a.T`` (:mod:`operators.gemm.triton_dispatch` decides).
Loads are masked pointer loads with arbitrary strides, so sizes need not be multiples of
anything and transposed operands (the backward's) are read in place; configs with
``TMA_LOADS`` read B (the streamed operand of the skinny regime) through a TMA descriptor
instead, where its layout allows one.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from operators.gemm.alignment import is_tma_aligned
from operators.gemm.autotune_timer import flushed_bench
from operators.gemm.strategy import Regime
from operators.gemm.triton_configs import (
    INTERPRETED,
    SPLIT_K_TUNING_KEY,
    prune_split_k,
)
from operators.gemm.triton_dispatch import ACTIVE_ROUTES, Kernel, Plan
from operators.gemm.triton_tiles import epilogue, tile_coords, transposed_problem

REDUCE_BLOCK = (16, 16) if INTERPRETED else (32, 128)
MAX_BLOCK_K = max(c.kwargs["BLOCK_K"] for route in ACTIVE_ROUTES.values() for c in route.configs)
"""The longest k-block of any split-K config: B must be at least this deep for a TMA box."""


@triton.jit
def _matmul_split_k_kernel(
    a_ptr, b_ptr, b_desc, c_ptr, part_ptr, bias_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    stride_bias_m, stride_bias_n, alpha, beta,
    A_TRANS: tl.constexpr, B_TRANS: tl.constexpr, BIAS_KIND: tl.constexpr,
    DOT_PRECISION: tl.constexpr, SPLIT_K: tl.constexpr, B_TMA: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    TMA_LOADS: tl.constexpr,
):
    """Part ``program_id(1)`` of the tile ``program_id(0)`` (grouped order): ``C`` itself when
    ``SPLIT_K == 1``, else the unscaled fp32 part into ``part_ptr``'s ``(SPLIT_K, M, N)``.

    ``TMA_LOADS``: B's tiles come through ``b_desc`` (B, or B.T when ``B_TRANS``; ``B_TMA``
    says the launch passed it), whose zero fill past K ends the last part as the mask does; a
    part is whole k-blocks, so no other part's tiles are read.  A's tiles are always masked
    pointer loads (its box would exceed a decode problem's M).  ``A_TRANS`` only keys the
    autotuner, as in the pointer kernel.
    """
    pid_m, pid_n = tile_coords(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    part = tl.program_id(1)
    k_blocks = tl.cdiv(tl.cdiv(K, BLOCK_K), SPLIT_K)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = part * k_blocks * BLOCK_K + tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for step in range(k_blocks):
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < K), other=0.0)
        if TMA_LOADS:
            k0 = (part * k_blocks + step) * BLOCK_K
            if B_TRANS:
                b = b_desc.load([pid_n * BLOCK_N, k0]).T
            else:
                b = b_desc.load([k0, pid_n * BLOCK_N])
        else:
            b = tl.load(b_ptrs, mask=(offs_k[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
        offs_k += BLOCK_K
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    if SPLIT_K == 1:
        out = epilogue(acc, bias_ptr, offs_m, offs_n, M, N, stride_bias_m, stride_bias_n, alpha,
                       beta, BIAS_KIND)
        c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
        tl.store(c_ptrs, out.to(c_ptr.dtype.element_ty), mask=mask)
    else:
        part_ptrs = part_ptr + part * M * N + offs_m[:, None] * N + offs_n[None, :]
        tl.store(part_ptrs, acc, mask=mask)


@triton.jit
def _split_k_reduce_kernel(
    part_ptr, c_ptr, bias_ptr, M, N, stride_cm, stride_cn, stride_bias_m, stride_bias_n, alpha, beta,
    BIAS_KIND: tl.constexpr, SPLIT_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """``C = alpha * (part[0] + ... + part[SPLIT_K - 1]) + beta * bias`` for one (BLOCK_M, BLOCK_N)
    block, the parts added in that order."""
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    part_ptrs = part_ptr + offs_m[:, None] * N + offs_n[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for part in tl.static_range(SPLIT_K):
        acc += tl.load(part_ptrs + part * M * N, mask=mask, other=0.0)
    out = epilogue(acc, bias_ptr, offs_m, offs_n, M, N, stride_bias_m, stride_bias_n, alpha, beta,
                   BIAS_KIND)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
             out.to(c_ptr.dtype.element_ty), mask=mask)


_TUNED = {
    name: triton.autotune(configs=list(route.configs), key=SPLIT_K_TUNING_KEY,
                          prune_configs_by={"early_config_prune": prune_split_k},
                          do_bench=flushed_bench)(_matmul_split_k_kernel)
    for name, route in ACTIVE_ROUTES.items() if route.kernel is Kernel.SPLIT_K
}
"""The split-K kernel autotuned over each regime's own configs."""


def split_k_matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, bias_kind: int,
                   bias: torch.Tensor | None, alpha: float, beta: float, precision: str,
                   plan: Plan, config: triton.Config | None = None) -> None:
    """Write ``alpha * a @ b + beta * bias`` into ``out`` as ``plan`` (a split-K plan) says.

    ``bias`` is None or the bias broadcast to ``out``'s shape, of kind ``bias_kind``.
    ``config``: run the parts kernel on this config instead of the autotuner's pick (probes).
    """
    if plan.swap:
        a, b, out, bias_kind, bias = transposed_problem(a, b, out, bias)
    (m, k), n = a.shape, b.shape[1]
    bias_arg = out if bias is None else bias
    common = dict(M=m, N=n, stride_cm=out.stride(0), stride_cn=out.stride(1),
                  stride_bias_m=bias_arg.stride(0), stride_bias_n=bias_arg.stride(1), alpha=float(alpha),
                  beta=float(beta), BIAS_KIND=bias_kind, SPLIT_K=plan.split_k)
    part = out if plan.split_k == 1 else torch.empty((plan.split_k, m, n), dtype=torch.float32,
                                                     device=out.device)
    grid = (triton.cdiv(m, plan.block_m) * triton.cdiv(n, plan.block_n), plan.split_k)
    b_trans = b.stride(1) != 1
    b_desc = _b_descriptor(b, b_trans, plan)
    args = dict(a_ptr=a, b_ptr=b, b_desc=b_desc, c_ptr=out, part_ptr=part, bias_ptr=bias_arg, K=k,
                stride_am=a.stride(0), stride_ak=a.stride(1), stride_bk=b.stride(0),
                stride_bn=b.stride(1), A_TRANS=a.stride(1) != 1, B_TRANS=b_trans,
                DOT_PRECISION=precision, B_TMA=b_desc is not None, BLOCK_M=plan.block_m,
                BLOCK_N=plan.block_n, **common)
    if config is None:
        _TUNED[plan.regime][grid](**args)
    else:
        if config.kwargs["TMA_LOADS"] and b_desc is None:
            raise ValueError(f"config {config.kwargs} loads B by TMA, which this B does not allow")
        if config.pre_hook is not None:
            config.pre_hook({**args, **config.kwargs})
        _matmul_split_k_kernel[grid](**args, **config.kwargs, num_warps=config.num_warps,
                                     num_stages=config.num_stages)
    if plan.split_k > 1:
        rows, cols = REDUCE_BLOCK
        _split_k_reduce_kernel[(triton.cdiv(m, rows), triton.cdiv(n, cols))](
            part, out, bias_arg, BLOCK_M=rows, BLOCK_N=cols, **common)


def _b_descriptor(b: torch.Tensor, transposed: bool, plan: Plan) -> TensorDescriptor | None:
    """A row-major descriptor over B (or B.T when ``transposed``) for the TMA configs, or None
    where TMA cannot read it: before Hopper, rows that are not contiguous, repeated (stride 0)
    or not 16-byte aligned in base and pitch, or a box of the plan's tile and the longest
    k-block larger than the operand."""
    rows = b.T if transposed else b
    box = (plan.block_n, MAX_BLOCK_K) if transposed else (MAX_BLOCK_K, plan.block_n)
    if not (INTERPRETED or torch.cuda.get_device_capability(b.device)[0] >= 9) or \
            rows.stride(1) != 1 or rows.stride(0) <= 0 or not is_tma_aligned(b, transposed) or \
            any(d < bd for d, bd in zip(rows.shape, box, strict=True)):
        return None
    return TensorDescriptor(rows, list(rows.shape), [rows.stride(0), 1], [1, 1])


def autotuned_pick(regime: Regime) -> triton.Config | None:
    """The config the autotuner ran for ``regime``'s latest split-K call (None before any; probes)."""
    return getattr(_TUNED[regime], "best_config", None)
