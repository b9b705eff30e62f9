"""Without a GPU: every config of the Triton split-K kernel's two lists compiles for sm_90 (the
H100 and H200) in bf16 at its regime's tiles, within a block's shared memory, the TMA
configs' B tiles arrive by TMA and every config's pointer loads (A's, and B's in the pointer
configs) are asynchronous copies, i.e. pipelined.

Run in a process of its own by ``tests/operators/test_gemm_triton_regimes.py`` (the test session
has set Triton up for its CPU interpreter, whose kernels cannot be compiled); prints each
config's shared memory and exits 1 when one does not compile, needs more than a block has, or
loads B otherwise than its config says.
"""

from __future__ import annotations

import itertools
import sys

import triton
from triton.compiler import ASTSource

from operators.gemm import triton_splitk
from operators.gemm.triton_configs import SKINNY_CONFIGS, SPLIT_K_CONFIGS
from tests.operators.sm90.helion_sm90 import SM90, SM90_MAX_SHARED, report

TILES = {"split_k": (SPLIT_K_CONFIGS, [(128, 128)]),
         "skinny": (SKINNY_CONFIGS, [(16, 32), (16, 64), (64, 32)])}
"""Each list with the (BLOCK_M, BLOCK_N) tiles its regime runs it at on the H200."""
POINTERS = ("a_ptr", "b_ptr", "c_ptr", "bias_ptr")


def compiled(config: triton.Config, block_m: int, block_n: int,
             b_trans: bool) -> triton.compiler.CompiledKernel:
    """The split-K parts kernel (4 parts, no bias) compiled for sm_90 with ``config``."""
    fn = triton_splitk._matmul_split_k_kernel
    tma = config.kwargs["TMA_LOADS"]
    box = [block_n, config.kwargs["BLOCK_K"]] if b_trans else [config.kwargs["BLOCK_K"], block_n]
    signature = {name: "*bf16" for name in POINTERS} | {"part_ptr": "*fp32", "alpha": "fp32", "beta": "fp32"}
    signature["b_desc"] = f"tensordesc<bf16[{box[0]}, {box[1]}]>" if tma else "constexpr"
    constexprs = dict(A_TRANS=False, B_TRANS=b_trans, BIAS_KIND=0, DOT_PRECISION="tf32", SPLIT_K=4,
                      B_TMA=tma, BLOCK_M=block_m, BLOCK_N=block_n, **config.kwargs)
    if not tma:
        constexprs["b_desc"] = None
    # Unit strides reach the compiler as constants on the GPU (Triton's launcher specializes them).
    constexprs.update(stride_ak=1, stride_cn=1, **({"stride_bk": 1} if b_trans else {"stride_bn": 1}))
    for name in fn.arg_names:
        signature.setdefault(name, "constexpr" if name in constexprs else "i32")
    # As Triton's launcher marks pointers and integers divisible by 16 on the GPU (the sweep's
    # shapes): without the marks no mask is known constant along a run, and no load is pipelined.
    divisible = (*POINTERS, "part_ptr", "M", "N", "K", "stride_am", "stride_cm",
                 "stride_bn" if b_trans else "stride_bk")
    aligned = {(fn.arg_names.index(name),): [["tt.divisibility", 16]] for name in divisible}
    source = ASTSource(fn, signature, constexprs=constexprs, attrs=aligned)
    return triton.compile(source, target=SM90, options={"num_warps": config.num_warps,
                                                          "num_stages": config.num_stages})


def main() -> int:
    failed = False
    for regime, (configs, tiles) in TILES.items():
        for config, (block_m, block_n), b_trans in itertools.product(configs, tiles, (False, True)):
            label = (f"{regime} {block_m}x{block_n} BK{config.kwargs['BLOCK_K']}/s{config.num_stages}/"
                     f"w{config.num_warps}{' tma' if config.kwargs['TMA_LOADS'] else ''}"
                     f"{' B.T' if b_trans else ''}")
            kernels: list[triton.compiler.CompiledKernel] = []

            def shared(config=config, block_m=block_m, block_n=block_n, b_trans=b_trans,
                       kernels=kernels) -> int:
                kernels.append(compiled(config, block_m, block_n, b_trans))
                return kernels[0].metadata.shared

            size = report(label, shared)
            if kernels:
                ttgir = kernels[0].asm["ttgir"]
                tma_loads = "async_tma_copy_global_to_local" in ttgir
                if tma_loads != config.kwargs["TMA_LOADS"]:
                    print(f"{label}: B is loaded {'by' if tma_loads else 'without'} TMA, against its config")
                    failed = True
                if "async_copy_global_to_local" not in ttgir:
                    print(f"{label}: the pointer loads are not asynchronous copies (not pipelined)")
                    failed = True
            failed |= size is None or size > SM90_MAX_SHARED
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())
