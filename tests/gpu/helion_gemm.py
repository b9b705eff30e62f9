"""For the GPU tests of Helion's gemm: one checked call and the notes it leaves."""

from __future__ import annotations

import torch

from harness.notes import collecting
from operators.gemm import helion_impl
from operators.gemm.operator import matmul_tolerance, operands, typical_magnitude


def checked_matmul_notes(shape: tuple[int, int, int], dtype: torch.dtype) -> list[str]:
    """The notes of Helion's ``a @ b`` on fresh (M, N, K) ``shape`` operands in ``dtype``, its
    result asserted against float64."""
    a, b = operands(*shape, "cuda", dtype)
    notes: list[str] = []
    with collecting(notes):
        out = helion_impl.fused_matmul(a, b)
    rtol, atol = matmul_tolerance("cuda", dtype, typical_magnitude(*shape))
    torch.testing.assert_close(out.double(), a.double() @ b.double(), rtol=rtol, atol=atol)
    return notes
