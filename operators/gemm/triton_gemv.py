"""Matrix-vector products in Triton: one output row whose long operand is read along K.

For ``a`` (1, K) and ``b`` (K, N) stored column-major (``b.T`` row-major, the backward's
``grad @ w.T`` at M = 1), each output is the dot product of two contiguous vectors; in fp32::

    acc[k, n] += a[k0 + k] * b[k0 + k, n]          over k-blocks k0 of BLOCK_K, BLOCK_N columns a program
    C[0, n]    = alpha * (sum over k of acc[k, n]) + beta * bias[n]

The products run on the CUDA cores: a tensor-core tile is at least 16 rows, 15 of them padding
here, and the time is the read of ``b`` either way.  Each program keeps a BLOCK_K x BLOCK_N
block of ``b`` in flight and adds across k once, after the loop, so the k-order of the sums is
fixed (the same bits every run).  An (M, 1) output whose ``a`` is row-major is the same
product transposed (:mod:`operators.gemm.triton_dispatch` swaps it).  Loads and stores are
masked, with 64-bit offsets into the operands and the output (the bias's are 32-bit, as in the
other gemm kernels' shared epilogue): any K, N and strides.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from operators.gemm.autotune_timer import flushed_bench
from operators.gemm.triton_configs import ACTIVE_GEMV_CONFIGS, GEMV_TUNING_KEY
from operators.gemm.triton_tiles import epilogue, transposed_problem


@triton.autotune(configs=ACTIVE_GEMV_CONFIGS, key=GEMV_TUNING_KEY, do_bench=flushed_bench)
@triton.jit
def _gemv_kernel(
    a_ptr, b_ptr, c_ptr, bias_ptr, N, K,
    stride_ak, stride_bk, stride_bn, stride_cn, stride_bias_m, stride_bias_n, alpha, beta,
    BIAS_KIND: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """``C[0, cols] = alpha * a @ b[:, cols] + beta * bias[0, cols]`` for the ``BLOCK_N`` columns of
    ``program_id(0)``."""
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    col_offsets = offs_n[None, :].to(tl.int64) * stride_bn
    acc = tl.zeros((BLOCK_K, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + offs_k
        a = tl.load(a_ptr + ks.to(tl.int64) * stride_ak, mask=ks < K, other=0.0)
        b = tl.load(b_ptr + ks[:, None].to(tl.int64) * stride_bk + col_offsets,
                    mask=(ks[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc += a.to(tl.float32)[:, None] * b.to(tl.float32)
    row = tl.sum(acc, axis=0)[None, :]
    out = epilogue(row, bias_ptr, tl.arange(0, 1), offs_n, 1, N, stride_bias_m, stride_bias_n,
                   alpha, beta, BIAS_KIND)
    tl.store(c_ptr + offs_n[None, :].to(tl.int64) * stride_cn, out.to(c_ptr.dtype.element_ty),
             mask=offs_n[None, :] < N)


def gemv(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, bias_kind: int, bias: torch.Tensor | None,
         alpha: float, beta: float, swap: bool = False, config: triton.Config | None = None) -> None:
    """Write ``alpha * a @ b + beta * bias`` into ``out``: (1, N) for ``a`` (1, K), or with ``swap``
    (M, 1) for ``b`` (K, 1), computed as ``out.T = b.T @ a.T``.  ``bias`` None or broadcast to
    ``out``'s shape, of kind ``bias_kind``.  ``config``: run on it instead of the autotuner's
    pick (probes)."""
    if swap:
        a, b, out, bias_kind, bias = transposed_problem(a, b, out, bias)
    k, n = b.shape
    bias_arg = out if bias is None else bias
    args = dict(a_ptr=a, b_ptr=b, c_ptr=out, bias_ptr=bias_arg, N=n, K=k, stride_ak=a.stride(1),
                stride_bk=b.stride(0), stride_bn=b.stride(1), stride_cn=out.stride(1),
                stride_bias_m=bias_arg.stride(0), stride_bias_n=bias_arg.stride(1), alpha=float(alpha),
                beta=float(beta), BIAS_KIND=bias_kind)
    if config is None:
        _gemv_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK_N"]),)](**args)
        return
    _gemv_kernel.fn[(triton.cdiv(n, config.kwargs["BLOCK_N"]),)](
        **args, **config.kwargs, num_warps=config.num_warps, num_stages=config.num_stages)


def autotuned_pick() -> triton.Config | None:
    """The config the autotuner ran for the latest call (None before any; probes)."""
    return getattr(_gemv_kernel, "best_config", None)
