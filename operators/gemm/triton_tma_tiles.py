"""One output tile of the gemm's TMA kernels: load operand tiles, accumulate over a range of
k-blocks, apply the epilogue and store::

    acc = sum over k-blocks kb in [k_first, k_last) of A[m-block, kb] @ B[kb, n-block]   (fp32)
    C[m-block, n-block] = alpha * acc + beta * bias

Shared by the data-parallel loop of :mod:`operators.gemm.triton_impl` and the stream-K phase of
:mod:`operators.gemm.triton_stream_k`.
"""

from __future__ import annotations

import triton
import triton.language as tl

from operators.gemm.triton_tiles import epilogue


@triton.jit
def load_tile(desc, off_rows, off_cols, TRANS: tl.constexpr):
    """Load the ``[off_rows, off_cols]`` tile; a transposed operand's descriptor is swapped."""
    if TRANS:
        tile = desc.load([off_cols, off_rows]).T
    else:
        tile = desc.load([off_rows, off_cols])
    return tile


@triton.jit
def accumulate(a_desc, b_desc, off_m, off_n, k_first, k_last, A_TRANS: tl.constexpr,
               B_TRANS: tl.constexpr, DOT_PRECISION: tl.constexpr, BLOCK_M: tl.constexpr,
               BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """``A[off_m:+BLOCK_M, :] @ B[:, off_n:+BLOCK_N]`` over k-blocks ``[k_first, k_last)``, in fp32."""
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for ki in range(k_first, k_last):
        a = load_tile(a_desc, off_m, ki * BLOCK_K, A_TRANS)
        b = load_tile(b_desc, ki * BLOCK_K, off_n, B_TRANS)
        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
    return acc


@triton.jit
def _store_tile(c_desc, acc, bias_ptr, off_m, off_n, M, N, stride_bias_m, stride_bias_n, alpha,
                beta, BIAS_KIND: tl.constexpr, ROWS: tl.constexpr, COLS: tl.constexpr):
    """Apply the epilogue to a (ROWS, COLS) accumulator at ``[off_m, off_n]`` and TMA-store it."""
    offs_m = off_m + tl.arange(0, ROWS)
    offs_n = off_n + tl.arange(0, COLS)
    out = epilogue(acc, bias_ptr, offs_m, offs_n, M, N, stride_bias_m, stride_bias_n, alpha, beta,
                   BIAS_KIND)
    c_desc.store([off_m, off_n], out.to(c_desc.dtype))


@triton.jit
def store_output(c_desc, acc, bias_ptr, off_m, off_n, M, N, stride_bias_m, stride_bias_n, alpha,
                 beta, BIAS_KIND: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 EPILOGUE_SUBTILE: tl.constexpr):
    """Store the output tile, as two (BLOCK_M, BLOCK_N / 2) halves when ``EPILOGUE_SUBTILE``."""
    if EPILOGUE_SUBTILE:
        halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
        left, right = tl.split(halves)
        _store_tile(c_desc, left, bias_ptr, off_m, off_n, M, N, stride_bias_m, stride_bias_n,
                    alpha, beta, BIAS_KIND, BLOCK_M, BLOCK_N // 2)
        _store_tile(c_desc, right, bias_ptr, off_m, off_n + BLOCK_N // 2, M, N, stride_bias_m,
                    stride_bias_n, alpha, beta, BIAS_KIND, BLOCK_M, BLOCK_N // 2)
    else:
        _store_tile(c_desc, acc, bias_ptr, off_m, off_n, M, N, stride_bias_m, stride_bias_n,
                    alpha, beta, BIAS_KIND, BLOCK_M, BLOCK_N)
