"""Matrix multiplication with a fused addmm epilogue, in Triton, for the gemm and addmm operators.

:func:`fused_matmul` runs the kernel :mod:`operators.gemm.triton_dispatch` picks: a tiled kernel
below, the split-K kernel of :mod:`operators.gemm.triton_splitk` (few tiles over a long K; skinny
problems) or the matrix-vector one of :mod:`operators.gemm.triton_gemv` (one row read along K).
A tiled kernel computes one output tile ``C[m0:m0+BM, n0:n0+BN]`` per step::

    acc = sum over k-blocks of A[m-block, k-block] @ B[k-block, n-block]     (fp32)
    C   = alpha * acc + beta * bias                                           (bias optional)

``bias`` is absent, a row vector broadcast over the rows (``(N,)``) or a full ``(M, N)`` matrix.

* ``_matmul_tma_kernel`` is the Hopper kernel: operand and output tiles move through TMA tensor
  descriptors, programs visit output tiles in grouped order (``GROUP_M`` row-blocks sweep all
  column-blocks, so concurrently running tiles share operands in L2) and, when ``PERSISTENT``,
  a grid of one program per SM walks the tile list with a flattened tile x k loop so that the
  next tile's loads overlap the current tile's epilogue.  A transposed (column-major) operand
  gets a descriptor over its row-major transpose; the kernel loads that tile and transposes it
  in shared memory before the dot, so the backward pass needs no copies.
  Operands whose row pitch or base is not 16-byte aligned (e.g. K=4097 in bf16) are first
  copied to a padded-pitch buffer, and outputs always have a padded pitch
  (:mod:`operators.gemm.alignment`: a tensor of its own, not contiguous when N is unaligned).
* ``_matmul_pointer_kernel`` is the fallback for dims smaller than a tile, for exact fp32
  (torch's float32 matmul precision "highest", computed without tensor cores) and for GPUs
  without TMA: masked pointer loads with arbitrary strides, same tile order and epilogue.

Configs are chosen by ``triton.autotune`` per shape, layout and bias kind on the first call, timed
as the benchmark times (:mod:`operators.gemm.autotune_timer`);
under Triton's CPU interpreter (no timers) one small config runs instead.  The public functions
:func:`matmul` and :func:`addmm` call the custom ops ``opbench::matmul`` and ``opbench::addmm``, whose
autograd (and :mod:`operators.gemm.triton_direct`'s, undispatched) runs the kernels on transposed operands::

    grad_a = alpha * grad @ b.T        grad_b = alpha * a.T @ grad
    grad_bias = beta * grad            (summed over rows for a row-vector bias:
                                        :func:`~operators.gemm.triton_row_sum.summed_rows`)
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from operators.gemm.alignment import aligned_operand, output_buffer
from operators.gemm.autotune_timer import flushed_bench
from operators.gemm.custom_ops import define_matmul_ops
from operators.gemm.strategy import sm_count
from operators.gemm.triton_configs import (
    ACTIVE_TMA_CONFIGS,
    GEMV_CONFIGS,
    INTERPRETED,
    INTERPRETER_POINTER_CONFIGS,
    POINTER_CONFIGS,
    SPLIT_K_CONFIGS,
    TMA_CONFIGS,
    TUNING_KEY,
    boxes_fit,
    prune_pointer,
    prune_tma,
)
from operators.gemm.triton_dispatch import Kernel, plan, reads_rows_along_k
from operators.gemm.triton_gemv import gemv
from operators.gemm.triton_row_sum import summed_rows
from operators.gemm.triton_splitk import split_k_matmul
from operators.gemm.triton_tiles import bias_kind, epilogue, tile_coords
from operators.gemm.vectors import VECTOR_BYTES, whole_vectors

# ---------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------


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
def _store_output(c_desc, acc, bias_ptr, off_m, off_n, M, N, stride_bias_m, stride_bias_n, alpha,
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


@triton.jit
def _load_tile(desc, off_rows, off_cols, TRANS: tl.constexpr):
    """Load the ``[off_rows, off_cols]`` tile; a transposed operand's descriptor is swapped."""
    if TRANS:
        tile = desc.load([off_cols, off_rows]).T
    else:
        tile = desc.load([off_rows, off_cols])
    return tile


@triton.jit
def _accumulate(a_desc, b_desc, off_m, off_n, K, A_TRANS: tl.constexpr, B_TRANS: tl.constexpr,
                DOT_PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                BLOCK_K: tl.constexpr):
    """``A[off_m:+BLOCK_M, :] @ B[:, off_n:+BLOCK_N]`` in fp32, one k-block per step."""
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for ki in range(tl.cdiv(K, BLOCK_K)):
        a = _load_tile(a_desc, off_m, ki * BLOCK_K, A_TRANS)
        b = _load_tile(b_desc, ki * BLOCK_K, off_n, B_TRANS)
        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
    return acc


@triton.autotune(
    configs=ACTIVE_TMA_CONFIGS,
    key=TUNING_KEY,
    prune_configs_by={"early_config_prune": prune_tma},
    do_bench=flushed_bench,
)
@triton.jit
def _matmul_tma_kernel(
    a_desc, b_desc, c_desc, bias_ptr,
    M, N, K, stride_bias_m, stride_bias_n, alpha, beta,
    A_TRANS: tl.constexpr, B_TRANS: tl.constexpr, BIAS_KIND: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    PERSISTENT: tl.constexpr, EPILOGUE_SUBTILE: tl.constexpr,
):
    """C = alpha * A @ B + beta * bias with TMA loads and stores.

    ``A_TRANS``: ``a_desc`` describes A.T (K, M); ``B_TRANS``: ``b_desc`` describes B.T (N, K).
    ``PERSISTENT``: program p computes tiles p, p + G, p + 2G, ... of the G programs in a
    flattened (tile x k-block) loop; otherwise each program computes one tile.
    ``EPILOGUE_SUBTILE`` applies the epilogue to and stores two (BM, BN/2) halves, halving the
    shared memory for the output tile and the bias layout conversion.
    """
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    if PERSISTENT:
        start = tl.program_id(0)
        step = tl.num_programs(0)
        # The epilogue keeps its own tile counter: values shared by the prologue and epilogue
        # of a flattened, software-pipelined loop confuse Triton's pipeliner.
        tile_id_c = start - step
        for tile_id in tl.range(start, num_pid_m * num_pid_n, step, flatten=True):
            pid_m, pid_n = tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
            acc = _accumulate(a_desc, b_desc, pid_m * BLOCK_M, pid_n * BLOCK_N, K, A_TRANS,
                              B_TRANS, DOT_PRECISION, BLOCK_M, BLOCK_N, BLOCK_K)
            tile_id_c += step
            pid_m, pid_n = tile_coords(tile_id_c, num_pid_m, num_pid_n, GROUP_M)
            _store_output(c_desc, acc, bias_ptr, pid_m * BLOCK_M, pid_n * BLOCK_N, M, N,
                          stride_bias_m, stride_bias_n, alpha, beta, BIAS_KIND, BLOCK_M,
                          BLOCK_N, EPILOGUE_SUBTILE)
    else:
        pid_m, pid_n = tile_coords(tl.program_id(0), num_pid_m, num_pid_n, GROUP_M)
        acc = _accumulate(a_desc, b_desc, pid_m * BLOCK_M, pid_n * BLOCK_N, K, A_TRANS, B_TRANS,
                          DOT_PRECISION, BLOCK_M, BLOCK_N, BLOCK_K)
        _store_output(c_desc, acc, bias_ptr, pid_m * BLOCK_M, pid_n * BLOCK_N, M, N,
                      stride_bias_m, stride_bias_n, alpha, beta, BIAS_KIND, BLOCK_M, BLOCK_N,
                      EPILOGUE_SUBTILE)


@triton.jit
def _promised_multiple(x, VECTOR: tl.constexpr):
    """``x``, which the host promises is a multiple of ``VECTOR``, written so that Triton's
    alignment analysis sees it (a ``tl.multiple_of`` hint on a kernel argument is dropped)."""
    if VECTOR > 1:
        x = x // VECTOR * VECTOR
    return x


@triton.autotune(
    configs=INTERPRETER_POINTER_CONFIGS if INTERPRETED else POINTER_CONFIGS,
    key=[*TUNING_KEY, "VECTOR"],
    prune_configs_by={"early_config_prune": prune_pointer},
    do_bench=flushed_bench,
)
@triton.jit
def _matmul_pointer_kernel(
    a_ptr, b_ptr, c_ptr, bias_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    stride_bias_m, stride_bias_n, alpha, beta,
    A_TRANS: tl.constexpr, B_TRANS: tl.constexpr, BIAS_KIND: tl.constexpr,
    DOT_PRECISION: tl.constexpr, VECTOR: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    """C = alpha * A @ B + beta * bias for one tile per program, with masked strided loads.

    Unit strides reach the compiler as constants (Triton specializes integer arguments equal to
    1; ``A_TRANS``/``B_TRANS`` say which they are).  ``VECTOR``: each operand's contiguous size
    and other stride, and the output's N and row pitch, are multiples of it
    (:func:`pointer_promises`, :func:`vector_elements`), so loads and stores move 16-byte vectors
    where Triton's own specialization (multiples of 16) finds none, as at N = 5000.
    """
    if A_TRANS:
        M, stride_ak = _promised_multiple(M, VECTOR), _promised_multiple(stride_ak, VECTOR)
    else:
        K, stride_am = _promised_multiple(K, VECTOR), _promised_multiple(stride_am, VECTOR)
    if B_TRANS:
        K, stride_bn = _promised_multiple(K, VECTOR), _promised_multiple(stride_bn, VECTOR)
    else:
        stride_bk = _promised_multiple(stride_bk, VECTOR)
    N, stride_cm = _promised_multiple(N, VECTOR), _promised_multiple(stride_cm, VECTOR)
    pid_m, pid_n = tile_coords(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N),
                               GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for ki in range(tl.cdiv(K, BLOCK_K)):
        k_left = K - ki * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    out = epilogue(acc, bias_ptr, offs_m, offs_n, M, N, stride_bias_m, stride_bias_n,
                   alpha, beta, BIAS_KIND)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptrs, out.to(c_ptr.dtype.element_ty), mask=mask)


# ---------------------------------------------------------------------------------------------
# Launchers
# ---------------------------------------------------------------------------------------------


def _as_strided_2d(t: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """Return ``(t, transposed)`` with ``t`` row- or column-major (copying only other layouts)."""
    if t.stride(1) == 1:
        return t, False
    if t.stride(0) == 1:
        return t, True
    return t.contiguous(), False


def _descriptor(t: torch.Tensor, transposed: bool) -> TensorDescriptor:
    """A row-major descriptor over ``t`` or ``t.T``; its block shape is set per config."""
    rows = t.T if transposed else t
    return TensorDescriptor(rows, list(rows.shape), [rows.stride(0), 1], [1, 1])


def _grid(device: torch.device):
    """Grid for either schedule: one program per tile, or at most one per SM when persistent."""
    sms = sm_count(device)

    def grid(meta: dict) -> tuple[int]:
        tiles = triton.cdiv(meta["M"], meta["BLOCK_M"]) * triton.cdiv(meta["N"], meta["BLOCK_N"])
        return (min(tiles, sms) if meta.get("PERSISTENT") else tiles,)

    return grid


def _dot_precision(dtype: torch.dtype) -> str:
    """fp32 operands use TF32 tensor cores only when torch's matmul precision allows it."""
    if dtype == torch.float32 and torch.get_float32_matmul_precision() == "highest":
        return "ieee"
    return "tf32"


_CONFIG_KEYS = {kernel: set(configs[0].kwargs) for kernel, configs in (
    (Kernel.TMA, TMA_CONFIGS), (Kernel.POINTER, POINTER_CONFIGS), (Kernel.SPLIT_K, SPLIT_K_CONFIGS),
    (Kernel.GEMV, GEMV_CONFIGS))}
"""The meta-parameters a given config must set, per kernel."""


def fused_matmul(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None,
                 alpha: float = 1.0, beta: float = 1.0, *,
                 config: triton.Config | None = None) -> torch.Tensor:
    """``alpha * a @ b + beta * bias`` for 2-D ``a`` (M, K), ``b`` (K, N), without autograd,
    by the kernel that :func:`~operators.gemm.triton_dispatch.plan` picks for the shape.

    The result's row pitch is padded to 16 bytes (:func:`~operators.gemm.alignment.output_buffer`).
    ``config``: run the kernel on this config of its list instead of the autotuner's pick (probes).
    """
    assert a.dim() == 2 and b.dim() == 2 and a.shape[1] == b.shape[0], "shapes do not match"
    assert a.dtype == b.dtype, "operand dtypes differ"
    (m, k), n = a.shape, b.shape[1]
    out = output_buffer(m, n, a.dtype, a.device)
    if m == 0 or n == 0:
        return out
    kind, bias_view = bias_kind(bias, m, n)
    precision = _dot_precision(a.dtype)
    chosen = plan(m, n, k, precision, a.device, reads_rows_along_k(a, b))
    if config is not None and set(config.kwargs) != _CONFIG_KEYS[chosen.kernel]:
        raise ValueError(f"config {config.kwargs} is not a {chosen.kernel.value} kernel's, which this "
                         f"shape runs: its keys are {sorted(_CONFIG_KEYS[chosen.kernel])}")
    if chosen.kernel is Kernel.GEMV:
        gemv(a, b, out, kind, bias_view, alpha, beta, chosen.swap, config)
    elif chosen.kernel is Kernel.SPLIT_K:
        split_k_matmul(a, b, out, kind, bias_view, alpha, beta, precision, chosen, config)
    else:
        tiled_matmul(a, b, out, kind, bias_view, alpha, beta, precision, chosen.kernel, config)
    return out


def tiled_matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, kind: int,
                 bias_view: torch.Tensor | None, alpha: float, beta: float, precision: str,
                 kernel: Kernel, config: triton.Config | None = None) -> None:
    """``out = alpha * a @ b + beta * bias`` on tiled ``kernel`` (TMA or pointer), whatever the
    plan of the shape: on ``config`` (None: the autotuner's pick).  ``kind`` and ``bias_view``
    as :func:`~operators.gemm.triton_tiles.bias_kind` gives them; ``out`` as
    :func:`~operators.gemm.alignment.output_buffer` allocates it.  The TMA kernel needs every
    dim at least its config's block (a TMA box may not exceed the tensor)."""
    if kernel not in (Kernel.TMA, Kernel.POINTER):
        raise ValueError(f"tiled_matmul runs the tma or pointer kernel, not {kernel.value}")
    (m, k), n = a.shape, b.shape[1]
    if kernel is Kernel.TMA and config is not None and not boxes_fit(config, m, n, k):
        raise ValueError(f"config {config.kwargs} has a TMA box larger than the {m}x{n}x{k} problem")
    a, a_trans = _as_strided_2d(a)
    b, b_trans = _as_strided_2d(b)
    bias_arg = out if bias_view is None else bias_view
    common = dict(M=m, N=n, K=k, stride_bias_m=bias_arg.stride(0), stride_bias_n=bias_arg.stride(1),
                  alpha=float(alpha), beta=float(beta), A_TRANS=a_trans, B_TRANS=b_trans,
                  BIAS_KIND=kind, DOT_PRECISION=precision)
    grid = _grid(a.device)
    if kernel is Kernel.TMA:
        a_desc = _descriptor(aligned_operand(a, a_trans), a_trans)
        b_desc = _descriptor(aligned_operand(b, b_trans), b_trans)
        _run(_matmul_tma_kernel, grid, config, a_desc=a_desc, b_desc=b_desc,
             c_desc=_descriptor(out, False), bias_ptr=bias_arg, **common)
    else:
        _run(_matmul_pointer_kernel, grid, config, a_ptr=a, b_ptr=b, c_ptr=out, bias_ptr=bias_arg,
             VECTOR=vector_elements(a.element_size(), pointer_promises(a, b, out, a_trans, b_trans)),
             stride_am=a.stride(0), stride_ak=a.stride(1), stride_bk=b.stride(0),
             stride_bn=b.stride(1), stride_cm=out.stride(0), stride_cn=out.stride(1), **common)


def pointer_promises(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, a_trans: bool,
                     b_trans: bool) -> tuple[int, ...]:
    """The sizes and strides of ``out = a @ b`` that ``_matmul_pointer_kernel`` promises Triton
    are multiples of its ``VECTOR`` (for :func:`vector_elements`):
    each operand's contiguous size and other stride (``a_trans``/``b_trans``: column-major),
    the output's N and row pitch."""
    (m, k), n = a.shape, b.shape[1]
    a_values = (m, a.stride(1)) if a_trans else (k, a.stride(0))
    b_values = (k, b.stride(1)) if b_trans else (n, b.stride(0))
    return (*a_values, *b_values, n, out.stride(0))


def vector_elements(element_size: int, promised: tuple[int, ...]) -> int:
    """The pointer kernel's ``VECTOR``: the elements in 16 bytes when every ``promised`` value
    (:func:`pointer_promises`) is a multiple of that many, else 1.  Base addresses need no check:
    Triton takes a pointer argument as 16-byte aligned only when it is, and vectorizes by the
    lesser of its and the offsets' alignment."""
    return VECTOR_BYTES // element_size if whole_vectors(promised, element_size) else 1


def _run(tuned: triton.runtime.Autotuner, grid, config: triton.Config | None, **args) -> None:
    """Launch an autotuned kernel on the autotuner's pick, or on ``config`` (its pre-hook run
    as the autotuner would)."""
    if config is None:
        tuned[grid](**args)
        return
    if config.pre_hook is not None:
        config.pre_hook({**args, **config.kwargs})
    tuned.fn[grid](**args, **config.kwargs, num_warps=config.num_warps, num_stages=config.num_stages)


define_matmul_ops("opbench", fused_matmul, summed_rows)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for 2-D tensors of one floating dtype, differentiable, traceable by Dynamo."""
    return torch.ops.opbench.matmul(a, b)


def addmm(bias: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, alpha: float = 1.0,
          beta: float = 1.0) -> torch.Tensor:
    """``beta * bias + alpha * mat1 @ mat2`` with ``bias`` of shape (N,) or (M, N)."""
    return torch.ops.opbench.addmm(bias, mat1, mat2, float(alpha), float(beta))


def autotuned_tiled_pick(kernel: Kernel) -> triton.Config | None:
    """The config the autotuner ran for the latest call of tiled ``kernel`` (None before any; probes)."""
    tiled = {Kernel.TMA: _matmul_tma_kernel, Kernel.POINTER: _matmul_pointer_kernel}
    if kernel not in tiled:
        raise ValueError(f"{kernel.value} is not a tiled kernel: tma or pointer")
    return getattr(tiled[kernel], "best_config", None)
