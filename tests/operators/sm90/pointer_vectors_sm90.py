"""Without a GPU: the Triton tiled pointer kernel compiled for sm_90 in bf16 moves 16-byte
vectors (``cp.async`` of 16 bytes, no single-element ``ld.global``) when its ``VECTOR`` argument
is 8, for shapes whose sizes and pitches Triton itself does not take to be multiples of 16
(8192x8x8192's dX, 3000x5000x7000's forward and dW), and one element at a time when it is 1.
Guards the promise against being dropped, as a ``tl.multiple_of`` hint on a kernel argument is.

Run in a process of its own by ``tests/operators/test_gemm_kernels.py`` (the test session has
set Triton up for its CPU interpreter); prints each case's loads and exits 1 when one loads
otherwise than expected.
"""

from __future__ import annotations

import re
import sys

import triton
from triton.compiler import ASTSource

from operators.gemm import triton_impl
from tests.operators.sm90.helion_sm90 import SM90

CASES = {
    "8192,8192,8,t (dX of 8192x8x8192)": (
        {"A_TRANS": False, "B_TRANS": True, "stride_ak": 1, "stride_bk": 1, "stride_cn": 1},
        ("M", "N", "stride_cm"), (64, 128, 16, 3, 4)),
    "3000,5000,7000": ({"A_TRANS": False, "B_TRANS": False, "stride_ak": 1, "stride_bn": 1,
                        "stride_cn": 1}, (), (128, 256, 64, 3, 8)),
    "7000,5000,3000,ta (dW of 3000x5000x7000)": ({"A_TRANS": True, "B_TRANS": False, "stride_am": 1,
                                                  "stride_bn": 1, "stride_cn": 1}, (), (128, 128, 64, 4, 8)),
}
"""Per shape: the layout and unit strides, the arguments Triton
takes to be multiples of 16 (8192 and its multiples; 3000, 5000 and 7000 are not), and a config
(tile, stages, warps)."""
def loads(fn: triton.JITFunction, constexprs: dict, signature: dict, divisible: tuple[str, ...],
          stages: int, warps: int) -> dict[str, int]:
    """How many 16-byte ``cp.async`` and single-element ``ld.global`` ``fn``'s PTX holds."""
    signature = {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", "bias_ptr": "*bf16",
                 "alpha": "fp32", "beta": "fp32", **signature}
    for name in fn.arg_names:
        signature.setdefault(name, "constexpr" if name in constexprs else "i32")
    aligned = {(fn.arg_names.index(name),): [["tt.divisibility", 16]]
               for name in ("a_ptr", "b_ptr", "c_ptr", "bias_ptr", *divisible)}
    source = ASTSource(fn, signature, constexprs=constexprs, attrs=aligned)
    options = {"num_warps": warps, "num_stages": stages}
    ptx = triton.compile(source, target=SM90, options=options).asm["ptx"]
    vector_copies = r"cp\.async\.c[ag]\.shared\.global \[[^]]*\], \[[^]]*\], 0x10"
    return {"cp.async 16": len(re.findall(vector_copies, ptx)),
            "ld.global.b16": len(re.findall(r"ld\.global\.b16", ptx))}


def pointer_loads(layout: dict, divisible: tuple[str, ...], tile: tuple[int, ...],
                  vector: int) -> dict[str, int]:
    """:func:`loads` of the tiled pointer kernel."""
    bm, bn, bk, stages, warps = tile
    constexprs = dict(BIAS_KIND=0, DOT_PRECISION="tf32", VECTOR=vector, BLOCK_M=bm, BLOCK_N=bn,
                      BLOCK_K=bk, GROUP_M=8, stride_bias_n=1, **layout)
    return loads(triton_impl._matmul_pointer_kernel.fn, constexprs, {}, divisible, stages, warps)


def main() -> int:
    failed = False
    for shape, (layout, divisible, tile) in CASES.items():
        for vector in (1, 8):
            counts = pointer_loads(layout, divisible, tile, vector)
            vectors = counts["cp.async 16"] > 0 and counts["ld.global.b16"] == 0
            print(f"{shape}, VECTOR={vector}: {counts}")
            if vectors != (vector == 8):
                expected = "16-byte" if vector == 8 else "one-element"
                print(f"{shape}, VECTOR={vector}: expected {expected} loads")
                failed = True
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())
