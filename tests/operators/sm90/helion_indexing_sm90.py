"""Without a GPU: which sides of a tiled Helion matmul break its pointer loads into single elements
on sm_90, the reason for :func:`operators.gemm.helion_impl.fixed_indexing`'s rule (gemm NOTES: 53).

The medium bucket's stored pointer config (bf16, 128x256x64), compiled for each case with the
operands and output the host hands the kernel (16-byte pitches): an odd M under a row-major x
keeps every load a 16-byte ``cp.async`` and every store 16 bytes, as 2048^3 does; an odd
contiguous side (x's K or y's N row-major, x's M or y's K column-major, the output's N) gives
one-element loads or stores.  Run in a
process of its own by ``tests/operators/test_gemm_helion_regimes.py``; prints each case's memory
instructions and exits 1 when a case the rule leaves alone moves anything narrower than 16 bytes,
or a case it fixes moves no single element.
"""

from __future__ import annotations

import sys

import helion
import torch

from harness.tuning.configs import load_store
from operators.gemm import helion_impl
from operators.gemm.alignment import aligned_operand, output_buffer
from operators.gemm.helion_dispatch import Kernel, Plan
from operators.gemm.strategy import Regime
from tests.operators.sm90.helion_sm90 import compiled
from tests.operators.sm90.ptx_memory import memory_instructions, vectorized

CASES = [((2048, 2048, 2048), "nn"), ((2049, 2048, 2048), "nn"), ((2048, 2048, 2049), "tn"),
         ((2048, 2048, 2049), "nn"), ((2048, 2049, 2048), "nn"), ((2049, 2048, 2048), "tn"),
         ((2048, 2048, 2049), "nt"), ((2048, 2049, 2048), "nt")]
"""(M, N, K) and layout (``t``: a column-major operand); the rule fixes tensor descriptors for all
but the first three."""


SINGLE = "ld.global.b16"
"""A one-element bf16 load (its store: ``st.global.b16``)."""


def operand(rows: int, cols: int, column_major: bool) -> torch.Tensor:
    """A bf16 (rows, cols) operand with a 16-byte pitch, as the host hands the tiled kernel."""
    t = torch.empty(cols, rows, dtype=torch.bfloat16).T if column_major else \
        torch.empty(rows, cols, dtype=torch.bfloat16)
    return aligned_operand(t, transposed=column_major)


def memory_ops(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor,
               config: helion.Config) -> dict[str, list[str]]:
    """The byte counts of ``out = x @ y``'s ``cp.async`` copies and its ``ld.global`` and
    ``st.global`` instructions, in its sm_90 PTX."""
    args = (x, y, 1.0, 0.0, None, out, helion_impl.scaled)
    return memory_instructions(compiled(helion_impl.matmul_kernel, args, config).asm["ptx"])


def main() -> int:
    key = helion_impl.config_key("matmul", torch.bfloat16, "medium|nn")
    config = helion.Config(**load_store(helion_impl.CONFIG_PATH)[key])
    if config.config["indexing"] != "pointer":
        print(f"{key} no longer loads by pointer: pick another pointer config to check")
        return 1
    failed = False
    for (m, n, k), layout in CASES:
        x, y = operand(m, k, layout[0] == "t"), operand(k, n, layout[1] == "t")
        out = output_buffer(m, n, torch.bfloat16, "cpu")
        ops = memory_ops(x, y, out, config)
        vectors = vectorized(ops)
        single = SINGLE in ops["ld.global"] or SINGLE.replace("ld", "st") in ops["st.global"]
        fixed = helion_impl.fixed_indexing(Plan(Regime.TILED, Kernel.TILED, None, 1, k), x, y, out, gpu=True)
        print(f"{m}x{n}x{k} {layout}: {({kind: sorted(set(found)) for kind, found in ops.items()})}, "
              f"fixed {fixed}")
        if (fixed is None and not vectors) or (fixed is not None and not single):
            print(f"{m}x{n}x{k} {layout}: expected {'16-byte' if fixed is None else 'one-element'} accesses")
            failed = True
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())
