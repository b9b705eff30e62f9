"""16-byte vectors, the widest global load or store of one GPU thread (a 16-byte ``cp.async`` or
``st.global.v4``): whether sizes and strides are whole numbers of them.  Where one is not, a
pointer-indexed kernel's masked or strided accesses go one element at a time (gemm NOTES:
predictions 50 and 53)."""

from __future__ import annotations

from collections.abc import Iterable

VECTOR_BYTES = 16


def whole_vectors(values: Iterable[int], element_size: int) -> bool:
    """Whether each value (a size or stride, in elements of ``element_size`` bytes) is a whole
    number of 16-byte vectors."""
    step = VECTOR_BYTES // element_size
    return all(value % step == 0 for value in values)
