"""16-byte aligned row pitches for the gemm kernels' TMA tensor descriptors.

A TMA descriptor needs a 16-byte aligned base address and row pitch; a bf16 (4097, 4097)
matrix has rows of 8194 bytes, so the kernels would fall back to pointer loads, several times
slower (``results/h200/gemm/NOTES.md``, "Second round": padding for TMA).  Instead:

* **Operands** (:func:`aligned_operand`) are copied, only when misaligned, into a tensor whose
  rows are padded to a multiple of 16 bytes (``torch.empty_strided``), with the original shape
  and values and an aligned pitch.  The padding is never read: descriptors
  (Triton's host-side ones and Helion's ``tensor_descriptor`` indexing) carry the logical shape
  with the padded stride, and TMA zero-fills boxes that cross the logical edge, so the buffer is
  left uninitialized.  A column-major operand (a transposed view, as in the backward) is padded
  along its contiguous dimension, i.e. its row-major transpose is.
* **Outputs** (:func:`output_buffer`) are allocated with an aligned pitch from the start: a TMA
  store clips at the logical edge, so this costs no copy and the result has the right shape,
  dtype and values.  It is a tensor of its own, not a view, so autograd lets callers modify
  it in place; it is merely not contiguous when N is unaligned (``.view(-1)`` then fails, as
  for any strided tensor; ``.reshape`` copies).  The layout is a pure function of
  (M, N, dtype), so fake (meta) kernels can reproduce it for torch.compile.  When a gradient
  of a leaf comes back in this layout, ``AccumulateGrad`` makes the contiguous copy it would
  make anyway.

Cost: one read and one write of each misaligned operand, nothing for aligned ones and for outputs.
"""

from __future__ import annotations

import math

import torch

TMA_ALIGN_BYTES = 16


def padded_pitch(cols: int, element_size: int, pitch_bytes: int = TMA_ALIGN_BYTES) -> int:
    """The smallest row pitch, in elements, of at least ``cols`` elements and a multiple of
    ``pitch_bytes`` (16: TMA's alignment)."""
    step = pitch_bytes // math.gcd(pitch_bytes, element_size)
    return -(-cols // step) * step


def _row_major(t: torch.Tensor, transposed: bool) -> torch.Tensor:
    return t.T if transposed else t


def is_tma_aligned(t: torch.Tensor, transposed: bool) -> bool:
    """Whether a TMA descriptor can describe ``t`` (row-major) or, when ``transposed``, its
    row-major transpose: 16-byte aligned base address and row pitch."""
    rows = _row_major(t, transposed)
    pitch_bytes = rows.stride(0) * rows.element_size()
    return rows.data_ptr() % TMA_ALIGN_BYTES == 0 and pitch_bytes % TMA_ALIGN_BYTES == 0


def aligned_operand(t: torch.Tensor, transposed: bool) -> torch.Tensor:
    """``t`` itself when :func:`is_tma_aligned`, else a copy of the same shape and layout
    (row-major, or column-major when ``transposed``) whose rows (columns) start 16-byte aligned.
    """
    return t if is_tma_aligned(t, transposed) else padded_copy(t, transposed)


def padded_copy(t: torch.Tensor, transposed: bool, pitch_bytes: int = TMA_ALIGN_BYTES) -> torch.Tensor:
    """A copy of ``t`` of the same shape and layout (row-major, or column-major when
    ``transposed``) whose rows (columns) are a multiple of ``pitch_bytes`` apart."""
    rows = _row_major(t, transposed)
    padded = output_buffer(rows.shape[0], rows.shape[1], rows.dtype, rows.device, pitch_bytes)
    padded.copy_(rows)
    return _row_major(padded, transposed)


def output_buffer(rows: int, cols: int, dtype: torch.dtype, device: torch.device | str,
                  pitch_bytes: int = TMA_ALIGN_BYTES) -> torch.Tensor:
    """An uninitialized row-major (rows, cols) tensor whose row pitch is a multiple of
    ``pitch_bytes`` (16: TMA's alignment)."""
    pitch = padded_pitch(cols, dtype.itemsize, pitch_bytes)
    return torch.empty_strided((rows, cols), (pitch, 1), dtype=dtype, device=device)
