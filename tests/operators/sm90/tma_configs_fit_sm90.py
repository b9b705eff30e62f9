"""Without a GPU: every config of the Triton tiled TMA kernel compiles for sm_90 (the H100 and
H200) in bf16 for each bias the launcher passes (:data:`BIASES`), and the estimate by which the
autotuner prunes configs (``triton_configs.config_smem``) keeps each one that fits a block's
shared memory (one it keeps that does not fit costs only a compile: the autotuner skips it).
Compiled by the installed Triton, which may differ from the GPU machine's.

Run in a process of its own by ``tests/operators/test_gemm_kernels.py`` (the test session has
set Triton up for its CPU interpreter, whose kernels cannot be compiled); prints each config's
shared memory and exits 1 when one does not compile, or fits but is pruned.
"""

from __future__ import annotations

import sys

import triton
from triton.compiler import ASTSource

from operators.gemm import triton_impl
from operators.gemm.probes.matmul_configs import describe
from operators.gemm.triton_configs import (
    FULL_BIAS,
    NO_BIAS,
    ROW_BIAS,
    TMA_CONFIGS,
    config_smem,
    converts_bias_tile,
)
from tests.operators.sm90.helion_sm90 import SM90, SM90_MAX_SHARED, report

BUDGET = SM90_MAX_SHARED - 2048
"""What the pruning allows on sm_90 (``triton_configs.shared_memory_bytes``)."""
BIASES = {
    "no bias": (NO_BIAS, {"stride_bias_n": 1}),
    "row bias": (ROW_BIAS, {"stride_bias_n": 1}),
    "full bias": (FULL_BIAS, {"stride_bias_n": 1}),
    "full bias, column-major": (FULL_BIAS, {"stride_bias_m": 1}),
    "full bias, strided": (FULL_BIAS, {}),
}
"""Each bias kind with the strides that reach the compiler as the constant 1 (Triton's launcher
specializes integers equal to 1): the output's or a contiguous bias's unit column stride, a
transposed bias's unit row stride, or neither (e.g. a view of every other column)."""


def compiled(config: triton.Config, bias_kind: int,
             unit_strides: dict[str, int]) -> triton.compiler.CompiledKernel:
    """The TMA kernel compiled for sm_90 with ``config``, row-major bf16 operands."""
    fn = triton_impl._matmul_tma_kernel.fn
    kw = config.kwargs
    bm, bn, bk = kw["BLOCK_M"], kw["BLOCK_N"], kw["BLOCK_K"]
    out_cols = bn // 2 if kw["EPILOGUE_SUBTILE"] else bn
    signature = {"a_desc": f"tensordesc<bf16[{bm}, {bk}]>", "b_desc": f"tensordesc<bf16[{bk}, {bn}]>",
                 "c_desc": f"tensordesc<bf16[{bm}, {out_cols}]>", "bias_ptr": "*bf16",
                 "alpha": "fp32", "beta": "fp32"}
    constexprs = dict(A_TRANS=False, B_TRANS=False, BIAS_KIND=bias_kind, DOT_PRECISION="tf32",
                      **unit_strides, **kw)
    for name in fn.arg_names:
        signature.setdefault(name, "constexpr" if name in constexprs else "i32")
    aligned = {(fn.arg_names.index(name),): [["tt.divisibility", 16]]
               for name in ("bias_ptr", "M", "N", "K", "stride_bias_m") if name not in unit_strides}
    source = ASTSource(fn, signature, constexprs=constexprs, attrs=aligned)
    return triton.compile(source, target=SM90, options={"num_warps": config.num_warps,
                                                          "num_stages": config.num_stages})


def main() -> int:
    failed = False
    for config in TMA_CONFIGS:
        for bias, (bias_kind, unit_strides) in BIASES.items():
            label = f"{describe(config)}, {bias}"
            shared = report(label, lambda config=config, bias_kind=bias_kind, unit_strides=unit_strides:
                            compiled(config, bias_kind, unit_strides).metadata.shared)
            converted_bias = converts_bias_tile(bias_kind, unit_strides.get("stride_bias_m", 0))
            estimate = config_smem(config, 2, True, converted_bias)
            if shared is not None and shared <= BUDGET < estimate:
                print(f"{label}: needs {shared} B, but the pruning estimates {estimate} B")
                failed = True
            failed |= shared is None
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())
