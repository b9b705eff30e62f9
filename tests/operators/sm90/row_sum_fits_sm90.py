"""Without a GPU: addmm's row-bias gradient kernels compile for sm_90 (the H100 and H200): the
Triton pair at its tiles, and the Helion pair at every stored bf16 config and tuning candidate.

Run in a process of its own by ``tests/operators/test_gemm_row_sum.py`` (the test session has set
Triton up for its CPU interpreter, whose kernels cannot be compiled); prints each kernel's shared
memory and exits 1 when one does not compile or needs more than a block has.
"""

from __future__ import annotations

import sys

import helion
import torch
import triton
from triton.compiler import ASTSource

from harness.tuning.configs import config_key, load_store
from operators.gemm import helion_impl, helion_tuning, triton_row_sum
from tests.operators.sm90.helion_sm90 import SM90, SM90_MAX_SHARED, report, shared_memory


def triton_shared(kernel: triton.JITFunction, signature: dict[str, str], constexprs: dict[str, int]) -> int:
    """Bytes of shared memory a Triton ``kernel`` compiled for sm_90 needs."""
    return triton.compile(ASTSource(kernel, signature, constexprs=constexprs), target=SM90).metadata.shared


def main() -> int:
    sizes = []
    parts_signature = {"grad_ptr": "*bf16", "part_ptr": "*fp32", "M": "i32", "N": "i32",
                       "stride_m": "i32", "stride_n": "i32", "rows_per_part": "i32", "beta": "fp32",
                       "FINAL": "constexpr", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr"}
    finish_signature = {"part_ptr": "*fp32", "out_ptr": "*bf16", "N": "i32", "parts": "i32", "beta": "fp32",
                        "BLOCK_P": "constexpr", "BLOCK_N": "constexpr"}
    for n in (128, 8):  # the widest tile, and the narrowest (gemm NOTES: prediction 59)
        block_m, block_n = triton_row_sum.parts_tile(n)
        for final in (False, True):
            signature = {**parts_signature, "part_ptr": "*bf16" if final else "*fp32"}
            label = f"triton _row_sum_parts_kernel {block_m}x{block_n}{' (final)' if final else ''}"
            sizes.append(report(label, lambda s=signature, f=final, t=(block_m, block_n): triton_shared(
                triton_row_sum._row_sum_parts_kernel, s, {"FINAL": f, "BLOCK_M": t[0], "BLOCK_N": t[1]})))
        block_p, block_n = triton_row_sum.finish_tile(n)
        sizes.append(report(f"triton _row_sum_finish_kernel {block_p}x{block_n}",
                            lambda t=(block_p, block_n): triton_shared(
                                triton_row_sum._row_sum_finish_kernel, finish_signature,
                                {"BLOCK_P": t[0], "BLOCK_N": t[1]})))
    stored = load_store(helion_impl.CONFIG_PATH)
    for name, kernel in helion_tuning.ROW_SUM_KERNELS.items():
        for bucket in ("small", "large"):
            args = helion_tuning.tuning_args(name, bucket, torch.bfloat16, "cpu")
            configs = [helion.Config(**stored[config_key(name, torch.bfloat16, bucket)]),
                       *helion_tuning.tuning_candidates(name, bucket)]
            for i, config in enumerate(configs):
                label = f"helion {name} {bucket} {'stored' if i == 0 else f'candidate {i}'}"
                sizes.append(report(label, lambda k=kernel, a=args, c=config: shared_memory(k, a, c)))
    return 1 if any(size is None or size > SM90_MAX_SHARED for size in sizes) else 0


if __name__ == "__main__":
    sys.exit(main())
