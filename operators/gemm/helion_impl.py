"""Matrix multiplication with an addmm epilogue, in Helion, for the gemm and addmm operators.

One kernel, :func:`matmul_kernel`, runs the tiled loop (``acc`` accumulates in fp32 over
k-tiles) and hands the scaled accumulator to an epilogue function passed as an argument::

    out = epilogue(alpha * x @ y, tile, bias, beta)

with :func:`scaled` (no bias), :func:`add_row_bias` (bias (N,) broadcast over the rows) or
:func:`add_full_bias` (bias (M, N)).  The backward pass calls the kernel on transposed views
(``grad @ y.T`` and ``x.T @ grad``) with ``alpha`` applied in the epilogue.  The host passes
operands and output with 16-byte aligned row pitches (:mod:`operators.gemm.alignment`), so
configs with ``tensor_descriptor`` indexing use TMA even for shapes such as 4097^3 in bf16.

Configs are tuned on the GPU (:mod:`operators.gemm.helion_tuning`) and stored in
``helion_configs.json`` under ``<kernel>|<dtype>|<bucket>``, ``<kernel>`` naming the epilogue
(``matmul``, ``addmm_1d``, ``addmm_2d``).  The bucket (:func:`bucket`) is ``<size>|<layout>``:

* size: ``small`` when the largest of M, N, K is below 2048, else ``large``;
* layout: one letter per operand, ``n`` for row-major, ``t`` for column-major (a transposed
  view).  The forward pass is ``nn``; ``grad @ y.T`` is ``nt``; ``x.T @ grad`` is ``tn``.

``addmm_1d`` runs matmul's loop nest with a row of bias, so without a config of its own it uses
the one stored for ``matmul`` in the same bucket (:func:`config_keys`).  ``addmm_2d`` keeps an
(M, N) bias tile in shared memory besides matmul's buffers, which pushes matmul's large-bucket
config past the H200's 227 KiB a block: it runs on configs of its own only (the arithmetic is in
``results/h200/gemm/NOTES.md``).  A call whose bucket is not stored takes the nearest stored one
(:func:`bucket_place`).  :mod:`operators.gemm.helion_ops` wraps :func:`fused_matmul` as custom ops.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import helion
import helion.language as hl
import torch

from harness.tuning.configs import BucketPlace, ConfigStore, config_key
from harness.tuning.launch import call_with_stored_config
from operators.gemm.alignment import aligned_operand, output_buffer

CONFIG_PATH = Path(__file__).with_name("helion_configs.json")
SMALL_LIMIT = 2048
SIZES = ("small", "large")
"""The size part of a bucket, smallest first."""


def scaled(acc: torch.Tensor, tile: tuple, bias: torch.Tensor | None, beta: float) -> torch.Tensor:
    """Epilogue of a plain (scaled) matmul: the scaled accumulator itself."""
    return acc


def add_row_bias(acc: torch.Tensor, tile: tuple, bias: torch.Tensor, beta: float) -> torch.Tensor:
    """Epilogue adding ``beta * bias`` for a bias (N,) broadcast over the rows."""
    return acc + beta * bias[tile[1]].to(torch.float32)


def add_full_bias(acc: torch.Tensor, tile: tuple, bias: torch.Tensor, beta: float) -> torch.Tensor:
    """Epilogue adding ``beta * bias`` for a bias of the output's shape (M, N)."""
    return acc + beta * bias[tile[0], tile[1]].to(torch.float32)


@helion.kernel(static_shapes=True)
def matmul_kernel(x: torch.Tensor, y: torch.Tensor, alpha: float, beta: float, bias: torch.Tensor | None,
                  out: torch.Tensor, epilogue: Callable[..., torch.Tensor]) -> torch.Tensor:
    """``out = epilogue(alpha * x @ y, tile, bias, beta)``: x (M, K), y (K, N), out (M, N), fp32 accumulation.

    ``epilogue`` is one of :data:`EPILOGUES`, a module-level function (each compiles its own kernel).
    """
    m, k = x.size()
    k2, n = y.size()
    assert k == k2, f"size mismatch {k} != {k2}"
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = epilogue(alpha * acc, (tile_m, tile_n), bias, beta).to(out.dtype)
    return out


EPILOGUES = {"matmul": scaled, "addmm_1d": add_row_bias, "addmm_2d": add_full_bias}
"""The epilogue of each stored-config kernel name."""


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


def bucket_place(name: str) -> BucketPlace | None:
    """Where bucket ``name`` (``<size>|<layout>``) lies: the size's index in :data:`SIZES`, and
    the layout, which a stand-in config had better share."""
    size, _, layout = name.partition("|")
    return (SIZES.index(size), layout) if size in SIZES else None


CONFIG_STORE = ConfigStore(CONFIG_PATH, bucket_place)


def config_keys(name: str, dtype: torch.dtype, bucket_name: str) -> tuple[str, ...]:
    """Stored-config keys for kernel ``name`` in a bucket, in order of preference: its own, then
    for ``addmm_1d`` matmul's (the same loop nest with a row of bias in the epilogue)."""
    own = config_key(name, dtype, bucket_name)
    return (own, config_key("matmul", dtype, bucket_name)) if name == "addmm_1d" else (own,)


def _launch(name: str, x: torch.Tensor, y: torch.Tensor, alpha: float, beta: float = 0.0,
            bias: torch.Tensor | None = None) -> torch.Tensor:
    """Run the kernel with epilogue ``name`` on ``x @ y`` with its stored config."""
    x, y = _kernel_operand(x), _kernel_operand(y)
    out = output_buffer(x.shape[0], y.shape[1], x.dtype, x.device)
    keys = config_keys(name, x.dtype, bucket(x, y))
    return call_with_stored_config(matmul_kernel, CONFIG_STORE, keys, x, y, float(alpha), float(beta), bias,
                                   out, EPILOGUES[name])


def _scaled_matmul(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    return _launch("matmul", x, y, alpha)


def fused_matmul(x: torch.Tensor, y: torch.Tensor, bias: torch.Tensor | None = None, alpha: float = 1.0,
                 beta: float = 1.0) -> torch.Tensor:
    """``alpha * x @ y + beta * bias`` (``bias`` None, (N,) or broadcastable to (M, N)), without
    autograd; the result's row pitch is padded to 16 bytes (:func:`~operators.gemm.alignment.output_buffer`).
    """
    return _scaled_matmul(x, y, alpha) if bias is None else _addmm_forward(bias, x, y, alpha, beta)


def _addmm_forward(bias: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, alpha: float,
                   beta: float) -> torch.Tensor:
    m, n = mat1.shape[0], mat2.shape[1]
    if tuple(bias.shape) == (n,):
        return _launch("addmm_1d", mat1, mat2, alpha, beta, bias)
    full = bias if tuple(bias.shape) == (m, n) else bias.expand(m, n).contiguous()
    return _launch("addmm_2d", mat1, mat2, alpha, beta, full)


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
