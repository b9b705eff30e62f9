"""Without a GPU: the Triton tiled pointer kernel compiled for sm_90 in bf16 moves 16-byte
vectors (every load a 16-byte ``cp.async``, every store a 16-byte ``st.global``) when its
``VECTOR`` argument is 8, for shapes whose sizes and pitches Triton itself does not take to be
multiples of 16 (8192x8x8192's dX, 3000x5000x7000's forward and dW), and one element at a time
when it is 1.
Guards the promise against being dropped, as a ``tl.multiple_of`` hint on a kernel argument is.

Run in a process of its own by ``tests/operators/test_gemm_pointer_vectors.py`` (the test
session has set Triton up for its CPU interpreter); prints each case's memory instructions and
exits 1 when one loads or stores otherwise than expected.
"""

from __future__ import annotations

import sys

import triton
from triton.compiler import ASTSource

from operators.gemm import triton_impl
from tests.operators.sm90.helion_sm90 import SM90
from tests.operators.sm90.ptx_memory import memory_instructions, vectorized

CASES = {
    "8192,8192,8,t (dX of 8192x8x8192)": (
        {"A_TRANS": False, "B_TRANS": True, "stride_ak": 1, "stride_bk": 1},
        ("M", "N", "stride_cm"), (64, 128, 16, 3, 4)),
    "3000,5000,7000": ({"A_TRANS": False, "B_TRANS": False, "stride_ak": 1, "stride_bn": 1}, (),
                       (128, 256, 64, 3, 8)),
    "7000,5000,3000,ta (dW of 3000x5000x7000)": ({"A_TRANS": True, "B_TRANS": False, "stride_am": 1,
                                                  "stride_bn": 1}, (), (128, 128, 64, 4, 8)),
}
"""Per shape: the layout and unit strides, the arguments Triton takes to be multiples of 16
(8192 and its multiples; 3000, 5000 and 7000 are not), and a config (tile, stages, warps)."""


def memory_ops(layout: dict, divisible: tuple[str, ...], tile: tuple[int, ...],
               vector: int) -> dict[str, list[str]]:
    """The pointer kernel's global memory instructions in its PTX: the byte counts of its
    ``cp.async`` copies, its ``ld.global`` and its ``st.global`` (with their vector widths)."""
    fn = triton_impl._matmul_pointer_kernel.fn
    bm, bn, bk, stages, warps = tile
    constexprs = dict(BIAS_KIND=0, DOT_PRECISION="tf32", VECTOR=vector, BLOCK_M=bm, BLOCK_N=bn,
                      BLOCK_K=bk, GROUP_M=8, stride_cn=1, stride_bias_n=1, **layout)
    signature = {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", "bias_ptr": "*bf16",
                 "alpha": "fp32", "beta": "fp32"}
    for name in fn.arg_names:
        signature.setdefault(name, "constexpr" if name in constexprs else "i32")
    aligned = {(fn.arg_names.index(name),): [["tt.divisibility", 16]]
               for name in ("a_ptr", "b_ptr", "c_ptr", "bias_ptr", *divisible)}
    source = ASTSource(fn, signature, constexprs=constexprs, attrs=aligned)
    options = {"num_warps": warps, "num_stages": stages}
    return memory_instructions(triton.compile(source, target=SM90, options=options).asm["ptx"])


def main() -> int:
    failed = False
    for shape, (layout, divisible, tile) in CASES.items():
        for vector in (1, 8):
            ops = memory_ops(layout, divisible, tile, vector)
            counts = {kind: sorted(set(found)) for kind, found in ops.items()}
            print(f"{shape}, VECTOR={vector}: {counts}")
            one_element = "ld.global.b16" in ops["ld.global"]
            if (vector == 8 and not vectorized(ops)) or (vector == 1 and not one_element):
                expected = "16-byte loads and stores" if vector == 8 else "one-element loads"
                print(f"{shape}, VECTOR={vector}: expected {expected}")
                failed = True
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())
