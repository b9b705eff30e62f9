"""Without a GPU: every default rms_norm backward launch of the one-pass kernels compiles for
sm_90 (the H100 and H200) and fits an SM's shared memory.

Run in a process of its own by ``tests/operators/test_rms_norm_triton.py``, as the test session
has set Triton up for its CPU interpreter, whose kernels cannot be compiled.  Compiles each default
``bwd_plan`` for widths 1024-16384 (and the odd 3001 and 5000) and bf16, fp16 and fp32 with
Triton's own compiler and ptxas; prints each plan's shared memory; exits 1 when one does not
compile or needs more than 227 KiB (the most a block may have on sm_90).
"""

from __future__ import annotations

import sys

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from operators.rms_norm import triton_impl

SM90 = GPUTarget("cuda", 90, 32)
SM90_MAX_SHARED = 227 * 1024
POINTER = {torch.bfloat16: "*bf16", torch.float16: "*fp16", torch.float32: "*fp32"}
FP32_POINTERS = ("rstd_ptr", "dw_partial_ptr")


def signature(kernel: triton.JITFunction, dtype: torch.dtype) -> dict[str, str]:
    """Argument types of a one-pass backward kernel on rows of ``dtype``."""
    types = {}
    for param in kernel.params:
        if param.is_constexpr:
            types[param.name] = "constexpr"
        elif param.name.endswith("_ptr"):
            types[param.name] = "*fp32" if param.name in FP32_POINTERS else POINTER[dtype]
        else:
            types[param.name] = "i32"
    return types


def aligned(kernel: triton.JITFunction) -> dict[tuple[int], list[list]]:
    """Pointers marked 16-byte aligned, as Triton's launcher marks torch's allocations: without
    the mark no load may be an asynchronous copy, so pipelined loops would need no shared memory."""
    return {(index,): [["tt.divisibility", 16]] for index, param in enumerate(kernel.params)
            if param.name.endswith("_ptr")}


def main() -> int:
    failed = False
    for dtype in POINTER:
        for width in (1024, 2048, 3001, 4096, 5000, 8192, 16384):
            plan = triton_impl.bwd_plan(4096, width, dtype)
            kernel, meta = triton_impl.one_pass_kernel(plan, use_pdl=True)  # as on an sm_90 GPU
            num_warps = meta.pop("num_warps")
            if any(param.name == "N" and param.is_constexpr for param in kernel.params):
                meta["N"] = width
            label = f"{dtype} {width}: {plan}"
            try:
                source = ASTSource(kernel, signature(kernel, dtype), constexprs=meta, attrs=aligned(kernel))
                compiled = triton.compile(source, target=SM90, options={"num_warps": num_warps})
                shared = compiled.metadata.shared
            except Exception as exc:  # reported, so every plan is checked
                print(f"{label}: {type(exc).__name__}: {exc}"[:400])
                failed = True
                continue
            print(f"{label}: {shared} B of shared memory")
            failed |= shared > SM90_MAX_SHARED
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())
