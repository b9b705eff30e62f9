"""Matrix multiplication with an addmm epilogue, in Helion, for the gemm and addmm operators.

Three kernels share one tiled loop (``acc`` accumulates in fp32 over k-tiles) and differ in
the epilogue, since Helion kernels cannot capture closures::

    matmul_kernel(x, y, alpha, out)                out = alpha * x @ y
    addmm_1d_kernel(bias, x, y, alpha, beta, out)  out = alpha * x @ y + beta * bias[None, :]
    addmm_2d_kernel(bias, x, y, alpha, beta, out)  out = alpha * x @ y + beta * bias  (M, N)

The backward pass calls ``matmul_kernel`` on transposed views (``grad @ y.T`` and
``x.T @ grad``) with ``alpha`` applied in its epilogue.  The host passes operands and output
with 16-byte aligned row pitches (:mod:`operators.gemm.alignment`), so configs with
``tensor_descriptor`` indexing use TMA even for shapes such as 4097^3 in bf16.

Configs are tuned on the GPU and stored in ``helion_configs.json`` under
``<kernel>|<dtype>|<bucket>``.  The bucket (:func:`bucket`) is ``<size>|<layout>``:

* size: ``small`` when the largest of M, N, K is below 2048, else ``large``;
* layout: one letter per operand, ``n`` for row-major, ``t`` for column-major (a transposed
  view).  The forward pass is ``nn``; ``grad @ y.T`` is ``nt``; ``x.T @ grad`` is ``tn``.

The addmm kernels run matmul's loop nest, so without a config of their own they use the one
stored for ``matmul`` in the same bucket (:func:`config_keys`).

:func:`tuning_candidates` and :func:`tuning_args` give the tuner a short list of plausible H200
configs and example arguments per (kernel, bucket).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import helion
import helion.language as hl
import torch

from operators.gemm.alignment import aligned_operand, output_buffer
from operators.helion_configs import TuningJob, call_with_stored_config, config_key

CONFIG_PATH = Path(__file__).with_name("helion_configs.json")
SMALL_LIMIT = 2048
_BUCKET_SIZES = {"small": 1024, "large": 4096}


@helion.kernel(static_shapes=True)
def matmul_kernel(x: torch.Tensor, y: torch.Tensor, alpha: float, out: torch.Tensor) -> torch.Tensor:
    """``out = alpha * x @ y``: x (M, K), y (K, N), out (M, N), fp32 accumulation."""
    m, k = x.size()
    k2, n = y.size()
    assert k == k2, f"size mismatch {k} != {k2}"
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = (alpha * acc).to(out.dtype)
    return out


@helion.kernel(static_shapes=True)
def addmm_1d_kernel(bias: torch.Tensor, x: torch.Tensor, y: torch.Tensor, alpha: float,
                    beta: float, out: torch.Tensor) -> torch.Tensor:
    """``out = alpha * x @ y + beta * bias`` with bias (N,) broadcast over the rows of (M, N)."""
    m, k = x.size()
    k2, n = y.size()
    assert k == k2, f"size mismatch {k} != {k2}"
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        row = bias[tile_n].to(torch.float32)
        out[tile_m, tile_n] = (alpha * acc + beta * row[None, :]).to(out.dtype)
    return out


@helion.kernel(static_shapes=True)
def addmm_2d_kernel(bias: torch.Tensor, x: torch.Tensor, y: torch.Tensor, alpha: float,
                    beta: float, out: torch.Tensor) -> torch.Tensor:
    """``out = alpha * x @ y + beta * bias`` with bias of the output's shape (M, N)."""
    m, k = x.size()
    k2, n = y.size()
    assert k == k2, f"size mismatch {k} != {k2}"
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        tile_bias = bias[tile_m, tile_n].to(torch.float32)
        out[tile_m, tile_n] = (alpha * acc + beta * tile_bias).to(out.dtype)
    return out


KERNELS = {"matmul": matmul_kernel, "addmm_1d": addmm_1d_kernel, "addmm_2d": addmm_2d_kernel}


# ---------------------------------------------------------------------------------------------
# Buckets and stored configs
# ---------------------------------------------------------------------------------------------


def _kernel_operand(t: torch.Tensor) -> torch.Tensor:
    """``t`` row- or column-major with a 16-byte aligned pitch, copying only when it is not."""
    if t.stride(1) != 1 and t.stride(0) != 1:
        t = t.contiguous()
    return aligned_operand(t, transposed=t.stride(1) != 1)


def _layout_letter(t: torch.Tensor) -> str:
    return "n" if t.stride(1) == 1 else "t"


def bucket(x: torch.Tensor, y: torch.Tensor) -> str:
    """The config bucket of ``x @ y``: ``small|large`` by the largest dim, then the layout."""
    size = "small" if max(*x.shape, y.shape[1]) < SMALL_LIMIT else "large"
    return f"{size}|{_layout_letter(x)}{_layout_letter(y)}"


def config_keys(name: str, dtype: torch.dtype, bucket_name: str) -> tuple[str, ...]:
    """Stored-config keys for kernel ``name`` in a bucket, in order of preference: an addmm
    kernel's own, then matmul's (the same loop nest with a different epilogue)."""
    own = config_key(name, dtype, bucket_name)
    return (own,) if name == "matmul" else (own, config_key("matmul", dtype, bucket_name))


def _launch(name: str, bias: torch.Tensor | None, x: torch.Tensor, y: torch.Tensor,
            *scalars: float) -> torch.Tensor:
    """Run kernel ``name`` on ``([bias,] x, y, *scalars, out)`` with its stored config."""
    x, y = _kernel_operand(x), _kernel_operand(y)
    out = output_buffer(x.shape[0], y.shape[1], x.dtype, x.device)
    keys = config_keys(name, x.dtype, bucket(x, y))
    args = (x, y, *scalars, out) if bias is None else (bias, x, y, *scalars, out)
    return call_with_stored_config(KERNELS[name], CONFIG_PATH, keys, *args)


def _scaled_matmul(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    return _launch("matmul", None, x, y, float(alpha))


def _addmm_forward(bias: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, alpha: float,
                   beta: float) -> torch.Tensor:
    m, n = mat1.shape[0], mat2.shape[1]
    if tuple(bias.shape) == (n,):
        return _launch("addmm_1d", bias, mat1, mat2, float(alpha), float(beta))
    full = bias if tuple(bias.shape) == (m, n) else bias.expand(m, n).contiguous()
    return _launch("addmm_2d", full, mat1, mat2, float(alpha), float(beta))


# ---------------------------------------------------------------------------------------------
# Autograd
# ---------------------------------------------------------------------------------------------


class MatmulFunction(torch.autograd.Function):
    """``a @ b``; the backward runs the forward kernel on transposed operands."""

    @staticmethod
    def forward(ctx: Any, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(a, b)
        return _scaled_matmul(a, b, 1.0)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        a, b = ctx.saved_tensors
        grad_a = _scaled_matmul(grad, b.T, 1.0) if ctx.needs_input_grad[0] else None
        grad_b = _scaled_matmul(a.T, grad, 1.0) if ctx.needs_input_grad[1] else None
        return grad_a, grad_b


class AddmmFunction(torch.autograd.Function):
    """``beta * bias + alpha * mat1 @ mat2``; alpha is applied in the backward's epilogue."""

    @staticmethod
    def forward(ctx: Any, bias: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor,
                alpha: float, beta: float) -> torch.Tensor:
        ctx.save_for_backward(mat1, mat2)
        ctx.bias_shape, ctx.alpha, ctx.beta = bias.shape, alpha, beta
        return _addmm_forward(bias, mat1, mat2, alpha, beta)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        mat1, mat2 = ctx.saved_tensors
        grad_bias = grad_mat1 = grad_mat2 = None
        if ctx.needs_input_grad[0]:
            grad_bias = grad.sum_to_size(ctx.bias_shape) * ctx.beta
        if ctx.needs_input_grad[1]:
            grad_mat1 = _scaled_matmul(grad, mat2.T, ctx.alpha)
        if ctx.needs_input_grad[2]:
            grad_mat2 = _scaled_matmul(mat1.T, grad, ctx.alpha)
        return grad_bias, grad_mat1, grad_mat2, None, None


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for 2-D tensors of one floating dtype, differentiable."""
    return MatmulFunction.apply(a, b)


def addmm(bias: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, alpha: float = 1.0,
          beta: float = 1.0) -> torch.Tensor:
    """``beta * bias + alpha * mat1 @ mat2`` with ``bias`` of shape (N,) or (M, N)."""
    return AddmmFunction.apply(bias, mat1, mat2, alpha, beta)


# ---------------------------------------------------------------------------------------------
# Tuning support
# ---------------------------------------------------------------------------------------------


def _candidate(blocks: list[int], warps: int, stages: int, indexing: str = "tensor_descriptor",
               pid_type: str = "flat", flatten: bool | None = None) -> helion.Config:
    """A config for the [tile_m, tile_n, tile_k] loop nest; ``flatten`` fuses a persistent
    tile loop with the k loop so the next tile's loads overlap this tile's epilogue."""
    return helion.Config(block_sizes=blocks, num_warps=warps, num_stages=stages,
                         l2_groupings=[8], indexing=indexing, pid_type=pid_type,
                         range_flattens=[flatten, None], range_unroll_factors=[0, 0],
                         range_num_stages=[0, 0])


_PERSISTENT = "persistent_interleaved"
_LARGE_CANDIDATES = [
    _candidate([128, 256, 64], warps=8, stages=3),
    _candidate([128, 256, 64], warps=8, stages=4),
    _candidate([128, 256, 64], warps=8, stages=3, pid_type=_PERSISTENT),
    _candidate([128, 256, 64], warps=8, stages=3, pid_type=_PERSISTENT, flatten=True),
    _candidate([128, 256, 64], warps=8, stages=3, pid_type="persistent_blocked"),
    _candidate([256, 128, 64], warps=8, stages=3),
    _candidate([256, 128, 64], warps=8, stages=4),
    _candidate([128, 128, 64], warps=8, stages=4),
    _candidate([128, 128, 64], warps=8, stages=5, pid_type=_PERSISTENT),
    _candidate([128, 128, 64], warps=4, stages=4),
    _candidate([64, 256, 64], warps=4, stages=4),
    _candidate([128, 256, 64], warps=8, stages=3, indexing="pointer"),
    _candidate([128, 128, 64], warps=8, stages=4, indexing="pointer"),
]
_SMALL_CANDIDATES = [
    _candidate([128, 128, 64], warps=8, stages=4),
    _candidate([128, 128, 64], warps=4, stages=4),
    _candidate([64, 128, 64], warps=4, stages=4),
    _candidate([128, 64, 64], warps=4, stages=4),
    _candidate([64, 64, 64], warps=4, stages=4),
    _candidate([64, 128, 64], warps=4, stages=4, pid_type=_PERSISTENT),
    _candidate([128, 128, 64], warps=8, stages=3, pid_type=_PERSISTENT, flatten=True),
    _candidate([64, 128, 64], warps=4, stages=4, indexing="pointer"),
    _candidate([64, 64, 32], warps=4, stages=4, indexing="pointer"),
]


def tuning_candidates(kernel_name: str, bucket: str) -> list[helion.Config]:
    """Plausible H200 configs for ``kernel_name`` (a key of :data:`KERNELS`) in ``bucket``."""
    assert kernel_name in KERNELS, f"unknown kernel {kernel_name}"
    size = bucket.split("|")[0]
    return list(_SMALL_CANDIDATES if size == "small" else _LARGE_CANDIDATES)


def _operand(rows: int, cols: int, transposed: bool, dtype: torch.dtype,
             device: torch.device | str) -> torch.Tensor:
    """A (rows, cols) random operand, column-major (a transposed view) when ``transposed``."""
    if transposed:
        return torch.randn(cols, rows, dtype=dtype, device=device).T
    return torch.randn(rows, cols, dtype=dtype, device=device)


def tuning_args(kernel_name: str, bucket: str, dtype: torch.dtype,
                device: torch.device | str) -> tuple:
    """Example arguments of ``kernel_name`` for ``bucket`` (e.g. ``large|nt``: 4096^3, y = b.T)."""
    size, layout = bucket.split("|")
    m = n = k = _BUCKET_SIZES[size]
    x = _operand(m, k, layout[0] == "t", dtype, device)
    y = _operand(k, n, layout[1] == "t", dtype, device)
    out = output_buffer(m, n, dtype, device)
    if kernel_name == "matmul":
        return x, y, 1.0, out
    bias_shape = (n,) if kernel_name == "addmm_1d" else (m, n)
    bias = torch.randn(bias_shape, dtype=dtype, device=device)
    return bias, x, y, 1.0, 1.0, out


def tuning_jobs(dtype: torch.dtype, device: str) -> list[TuningJob]:
    """Every stored-config slot the gemm and addmm sweeps use for ``dtype``, with its candidates.

    Per size bucket: ``matmul`` in the forward layout (``nn``) and the two backward layouts
    (``nt``, ``tn``; addmm's backward runs ``matmul`` too), and both addmm kernels forward.
    Arguments are made only when a job is tuned.
    """
    slots = [("matmul", f"{size}|{layout}") for size in _BUCKET_SIZES for layout in ("nn", "nt", "tn")]
    slots += [(name, f"{size}|nn") for name in ("addmm_1d", "addmm_2d") for size in _BUCKET_SIZES]
    return [
        TuningJob(
            kernel=KERNELS[name],
            key=config_key(name, dtype, bucket_name),
            make_args=functools.partial(tuning_args, name, bucket_name, dtype, device),
            candidates=tuning_candidates(name, bucket_name),
        )
        for name, bucket_name in slots
    ]
