"""The global memory instructions of a kernel's sm_90 PTX, for the scripts beside it that check
how wide a kernel's loads and stores are."""

from __future__ import annotations

import re

COPIES = r"cp\.async\.c[ag]\.shared\.global \[[^]]*\], \[[^]]*\], (0x[0-9a-f]+)"
"""A ``cp.async`` copy, its byte count captured."""


def memory_instructions(ptx: str) -> dict[str, list[str]]:
    """The byte counts of ``ptx``'s ``cp.async`` copies, and its ``ld.global`` and ``st.global``
    instructions (with their vector widths)."""
    return {"cp.async": re.findall(COPIES, ptx),
            "ld.global": re.findall(r"ld\.global[.a-z0-9]*", ptx),
            "st.global": re.findall(r"st\.global[.a-z0-9]*", ptx)}


def vectorized(ops: dict[str, list[str]]) -> bool:
    """Whether every load is a 16-byte ``cp.async`` and every store a 16-byte ``st.global.v4.b32``."""
    return (bool(ops["cp.async"]) and set(ops["cp.async"]) == {"0x10"} and not ops["ld.global"]
            and set(ops["st.global"]) == {"st.global.v4.b32"})
