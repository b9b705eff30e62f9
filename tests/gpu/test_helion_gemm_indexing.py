"""On a GPU: a tiled Helion gemm with a contiguous side (here K or N, all row-major) that is not a
whole number of 16-byte vectors loads by tensor descriptor, whatever its bucket's stored config
says, and its cell says so; against float64 (gemm NOTES: 53)."""

from __future__ import annotations

import pytest
import torch

from tests.gpu.helion_gemm import checked_matmul_notes

FIXED = "indexing='tensor_descriptor' fixed by the call over "


@pytest.mark.parametrize("shape", [(1000, 999, 1001), (3000, 2500, 2100), (2048, 2048, 2048),
                                   (1000, 1000, 1000), (2049, 2048, 2048)],
                         ids=lambda s: "x".join(map(str, s)))
def test_sizes_of_part_vectors_load_by_tensor_descriptor(shape: tuple[int, int, int]) -> None:
    notes = checked_matmul_notes(shape, torch.bfloat16)
    # The stored small and medium configs load by pointer, so an odd K or N overrides them; M is
    # no contiguous side of a row-major x.
    whole_vectors = all(size % 8 == 0 for size in shape[1:])
    assert any(FIXED in note for note in notes) != whole_vectors, notes
