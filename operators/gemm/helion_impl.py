"""Matrix multiplication with an addmm epilogue, in Helion, for the gemm and addmm operators.

The tiled kernel, :func:`matmul_kernel`, runs the tiled loop (``acc`` accumulates in fp32 over
k-tiles) and hands the scaled accumulator to an epilogue function passed as an argument::

    out = epilogue(alpha * x @ y, tile, bias, beta)

with :func:`scaled` (no bias), :func:`add_row_bias` (bias (N,) broadcast over the rows) or
:func:`add_full_bias` (bias (M, N)).  :func:`fused_matmul` runs the kernel that
:mod:`operators.gemm.helion_dispatch` picks for the shape's regime: this one (tiled, and
skinny problems whose column blocks fill the GPU), or the split-K pair of
:mod:`operators.gemm.helion_splitk` with the same epilogue in its second kernel.  A skinny
problem whose N is the small side is computed transposed, ``out.T = y.T @ x.T``, its bias
turned with it (a row bias becomes a stride-0 (N, M) one).  The backward pass calls
:func:`fused_matmul` on transposed views (``grad @ y.T`` and ``x.T @ grad``) with ``alpha``
applied in the epilogue, so each of its matmuls takes its own regime; a row-vector bias's
gradient is :func:`summed_rows`.  The host passes
operands and output with 16-byte aligned row pitches (:mod:`operators.gemm.alignment`), so
configs with ``tensor_descriptor`` indexing use TMA even for shapes such as 4097^3 in bf16.

Configs are tuned on the GPU (:mod:`operators.gemm.helion_tuning`) and stored in
``helion_configs.json`` under ``<kernel>|<dtype>|<bucket>``, ``<kernel>`` naming the epilogue
of the tiled kernel (``matmul``, ``addmm_1d``, ``addmm_2d``) or a split-K kernel
(``matmul_split_k``, ``split_k_reduce``) or of the row-bias gradient (``row_sum_parts``,
``row_sum_finish``, whose bucket is the size alone: :func:`row_sum_size`).  The bucket
(:func:`bucket`) is ``<size>|<layout>``:

* size: ``skinny`` in the skinny regime (``decode`` there for an unsplit problem with M below
  the skinny tile's 16 rows), ``wide`` for a split-K problem whose 64x64 tiles fill one wave
  unsplit (128x4096x4096), ``outer`` for a tiled one of K at most 16 (the dX of 8192x8x8192,
  the dW of 16x4096x4096), else by the largest of M, N, K: ``small`` below 2048, ``medium``
  below 4096, else ``large`` (the split-K pair's are ``large`` at any size);
* layout: one letter per operand, ``n`` for row-major, ``t`` for column-major (a transposed
  view).  The forward pass is ``nn``; ``grad @ y.T`` is ``nt``; ``x.T @ grad`` is ``tn``; a
  transposed skinny forward ``tt``.  ``split_k_reduce`` reads its workspace row-major: its
  bucket is the size alone.

``addmm_1d`` runs matmul's loop nest with a row of bias, so without a config of its own it uses
the one stored for ``matmul`` in the same bucket (:func:`config_keys`).  ``addmm_2d`` keeps an
(M, N) bias tile in shared memory besides matmul's buffers, which pushes matmul's large-bucket
config past the H200's 227 KiB a block: it runs on configs of its own only (the arithmetic is in
``results/h200/gemm/NOTES.md``), except in the skinny, decode and outer buckets, whose
pointer-indexed configs stage no bias tile.  A call whose bucket is not stored takes the nearest stored one
(:func:`bucket_place`), fp16 on the GPU bf16's (:mod:`harness.tuning.choice`); skinny and outer
calls run pointer-indexed whatever config they get, and on the GPU a tiled call with a contiguous
side that is not a whole number of 16-byte vectors by tensor descriptor (:func:`fixed_indexing`).
:mod:`operators.gemm.helion_ops` wraps :func:`fused_matmul` as custom ops.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import helion
import helion.language as hl
import torch

from harness.tuning.configs import BucketPlace, ConfigStore, config_key
from harness.tuning.launch import call_with_stored_config
from operators.gemm import autograd
from operators.gemm.alignment import aligned_operand, output_buffer
from operators.gemm.helion_dispatch import Kernel, Plan, plan
from operators.gemm.helion_row_sum import row_sum_finish_kernel, row_sum_parts_kernel
from operators.gemm.helion_splitk import matmul_split_k_kernel, split_k_reduce_kernel
from operators.gemm.row_sum_plan import row_parts
from operators.gemm.strategy import sm_count
from operators.gemm.vectors import whole_vectors

CONFIG_PATH = Path(__file__).with_name("helion_configs.json")
SMALL_LIMIT = 2048
MEDIUM_LIMIT = 4096
SIZE_PLACES = {"decode": 0.0, "skinny": 1.0, "small": 2.0, "wide": 2.25, "medium": 2.75, "large": 3.0,
               "outer": 4.0}
"""Where each size part of a bucket lies, smallest first; a missing bucket takes the nearest stored
size, then one of the same layout: decode takes skinny, skinny small, wide (one wave of 64x64
tiles) small, small wide, medium large, large medium, and outer (K of 16 or less) large."""
POINTER_SIZES = ("decode", "skinny", "outer")
"""The sizes whose configs are pointer-indexed (no bias tile staged): the skinny route's buckets
and the tiled route's outer one."""
POINTER = {"indexing": "pointer"}
"""The config fields of a pointer-indexed call."""
DESCRIPTOR = {"indexing": "tensor_descriptor"}
"""The config fields of a tiled GPU call whose masked pointer loads or stores would go one element
at a time (gemm NOTES: 53)."""


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


def _kernel_operand(t: torch.Tensor, chosen: Plan) -> torch.Tensor:
    """``t`` row- or column-major and, for a route whose config may load by tensor descriptor, with
    a 16-byte aligned pitch, copying only when it is not (pointer loads take any pitch)."""
    if t.stride(1) != 1 and t.stride(0) != 1:
        t = t.contiguous()
    if chosen.pointer or chosen.kernel is not Kernel.TILED:
        return t
    return aligned_operand(t, transposed=t.stride(1) != 1)


def _layout_letter(t: torch.Tensor) -> str:
    return "n" if t.stride(1) == 1 else "t"


def bucket(x: torch.Tensor, y: torch.Tensor, size: str | None = None) -> str:
    """The config bucket of ``x @ y``: ``size`` (the regime's, e.g. ``skinny``), else ``small``,
    ``medium`` or ``large`` by the largest dim; then the layout."""
    if size is None:
        largest = max(*x.shape, y.shape[1])
        size = "small" if largest < SMALL_LIMIT else "medium" if largest < MEDIUM_LIMIT else "large"
    return f"{size}|{_layout_letter(x)}{_layout_letter(y)}"


def bucket_place(name: str) -> BucketPlace | None:
    """Where bucket ``name`` (``<size>|<layout>``) lies: the size's place in :data:`SIZE_PLACES`, and
    the layout, which a stand-in config had better share."""
    size, _, layout = name.partition("|")
    return (SIZE_PLACES[size], layout) if size in SIZE_PLACES else None


CONFIG_STORE = ConfigStore(CONFIG_PATH, bucket_place)


def config_keys(name: str, dtype: torch.dtype, bucket_name: str) -> tuple[str, ...]:
    """Stored-config keys for kernel ``name`` in a bucket, in order of preference: its own, then
    for ``addmm_1d`` matmul's (the same loop nest with a row of bias in the epilogue), and in the
    skinny, decode and outer buckets for ``addmm_2d`` too (pointer loads: no bias tile in shared
    memory)."""
    own = config_key(name, dtype, bucket_name)
    shares = name == "addmm_1d" or (name == "addmm_2d" and bucket_name.partition("|")[0] in POINTER_SIZES)
    return (own, config_key("matmul", dtype, bucket_name)) if shares else (own,)


def _row_extent(t: torch.Tensor) -> int:
    """The length of ``t``'s contiguous side: its columns row-major, its rows column-major."""
    return t.shape[1] if t.stride(1) == 1 else t.shape[0]


def fixed_indexing(chosen: Plan, x: torch.Tensor, y: torch.Tensor, out: torch.Tensor,
                   gpu: bool) -> dict[str, str] | None:
    """The config fields the tiled kernel's call ``out = x @ y`` fixes over its stored config:
    pointer loads on a pointer route; on the ``gpu``, tensor-descriptor loads where the contiguous
    side of x, y or ``out`` is not a whole number of 16-byte vectors, which a pointer config would
    load or store one element at a time under its edge mask; else none.  A 2-D bias, read once a
    tile in the epilogue, is not looked at."""
    if chosen.pointer:
        return POINTER
    sides = (_row_extent(x), _row_extent(y), _row_extent(out))
    if gpu and not whole_vectors(sides, x.element_size()):
        return DESCRIPTOR
    return None


def _launch(name: str, x: torch.Tensor, y: torch.Tensor, alpha: float, beta: float = 0.0,
            bias: torch.Tensor | None = None) -> torch.Tensor:
    """Run ``x @ y`` with epilogue ``name`` as :func:`~operators.gemm.helion_dispatch.plan` says,
    each kernel on its stored config (its indexing as :func:`fixed_indexing` fixes it); ``bias`` is
    None, (N,) or (M, N)."""
    (m, k), n = x.shape, y.shape[1]
    if m == 1 and n == 1:  # Helion 1.5.0 generates no 1x1 product (gemm NOTES, "1x1 products"): two rows
        two_rows = torch.nn.functional.pad(x, (0, 0, 0, 1))
        two_bias = bias if bias is None or bias.dim() == 1 else bias.expand(2, 1)
        out = output_buffer(1, 1, x.dtype, x.device)
        return out.copy_(_launch(name, two_rows, y, alpha, beta, two_bias)[:1])
    chosen = plan(m, n, k, x.device)
    x, y = _kernel_operand(x, chosen), _kernel_operand(y, chosen)
    out = output_buffer(m, n, x.dtype, x.device)
    target = out
    if chosen.swap:
        x, y, target = y.mT, x.mT, out.mT
        if bias is not None:
            bias, name = bias.expand(m, n).mT, "addmm_2d"
    if chosen.kernel is Kernel.TILED:
        keys = config_keys(name, x.dtype, bucket(x, y, chosen.size))
        fixed = fixed_indexing(chosen, x, y, target, x.is_cuda)
        call_with_stored_config(matmul_kernel, CONFIG_STORE, keys, x, y, float(alpha), float(beta), bias,
                                target, EPILOGUES[name], fixed=fixed)
    else:
        _split_k(name, x, y, float(alpha), float(beta), bias, target, chosen)
    return out


def _split_k(name: str, x: torch.Tensor, y: torch.Tensor, alpha: float, beta: float,
             bias: torch.Tensor | None, out: torch.Tensor, chosen: Plan) -> None:
    """``out = epilogue(alpha * x @ y, ...)`` by the split-K pair, the parts pointer-indexed."""
    parts = torch.empty((chosen.split_k, x.shape[0], y.shape[1]), dtype=torch.float32, device=x.device)
    bucket_name = bucket(x, y, chosen.size)
    parts_key = config_key("matmul_split_k", x.dtype, bucket_name)
    call_with_stored_config(matmul_split_k_kernel, CONFIG_STORE, parts_key, x, y, parts, chosen.part_k,
                            fixed=POINTER)
    reduce_key = config_key("split_k_reduce", x.dtype, bucket_name.partition("|")[0])
    call_with_stored_config(split_k_reduce_kernel, CONFIG_STORE, reduce_key, parts, alpha, beta, bias, out,
                            EPILOGUES[name])


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


def row_sum_size(m: int, n: int) -> str:
    """The bucket of the row sum of an (M, N) gradient: its size alone, ``small`` below
    :data:`SMALL_LIMIT` in both dims, else ``large``."""
    return "small" if max(m, n) < SMALL_LIMIT else "large"


def summed_rows(grad: torch.Tensor, beta: float) -> torch.Tensor:
    """``beta * grad.sum(0)`` for a 2-D ``grad`` (M, N), summed in fp32 in row parts
    (:mod:`operators.gemm.helion_row_sum`), in ``grad``'s dtype: (N,); addmm's row-bias gradient.
    One part (M of at most a part's rows) runs the parts kernel alone, into the output."""
    m, n = grad.shape
    out = torch.empty(n, dtype=grad.dtype, device=grad.device)
    if m == 0 or n == 0:
        return out.zero_()
    size = row_sum_size(m, n)
    rows, count = row_parts(m, n, sm_count(grad.device))
    parts_key = config_key("row_sum_parts", grad.dtype, size)
    if count == 1:  # the output itself
        call_with_stored_config(row_sum_parts_kernel, CONFIG_STORE, parts_key, grad, out.view(1, n),
                                rows, float(beta))
        return out
    parts = torch.empty((count, n), dtype=torch.float32, device=grad.device)
    call_with_stored_config(row_sum_parts_kernel, CONFIG_STORE, parts_key, grad, parts, rows, 1.0)
    finish_key = config_key("row_sum_finish", grad.dtype, size)
    call_with_stored_config(row_sum_finish_kernel, CONFIG_STORE, finish_key, parts, float(beta), out)
    return out


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for 2-D tensors of one floating dtype, differentiable (:mod:`operators.gemm.autograd`)."""
    return autograd.matmul(a, b, fused_matmul)


def addmm(bias: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, alpha: float = 1.0,
          beta: float = 1.0) -> torch.Tensor:
    """``beta * bias + alpha * mat1 @ mat2`` with ``bias`` of shape (N,) or (M, N), differentiable."""
    return autograd.addmm(bias, mat1, mat2, alpha, beta, fused_matmul, summed_rows)
