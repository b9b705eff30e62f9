"""Without a GPU: every stored config of the Helion gemm's skinny and split-K routes compiles for
sm_90 (the H100 and H200) within a block's shared memory, with each epilogue that runs on it.

Run in a process of its own by ``tests/operators/test_gemm_helion_regimes.py``, as the test
session has set Triton up for its CPU interpreter, whose kernels cannot be compiled.  Compiles
Helion's generated Triton code (bf16, the slots' tuning arguments, the H200's K split) with
Triton's own compiler and ptxas; prints each config's shared memory; exits 1 when one does not
compile or needs more than 232,448 bytes.
"""

from __future__ import annotations

import functools
import sys

import helion
import torch

from harness.tuning.configs import load_store, split_key
from operators.gemm import helion_impl, helion_tuning
from tests.operators.sm90.helion_sm90 import SM90_MAX_SHARED, report, shared_memory


def checks() -> list[tuple[str, str, str]]:
    """(stored key, kernel name, bucket) of every skinny, decode or split-K config, and for the
    skinny and decode tiled ones each epilogue that shares matmul's config."""
    found = []
    for key in sorted(load_store(helion_impl.CONFIG_PATH)):
        name, dtype, bucket = split_key(key)
        routed = name in helion_tuning.SPLIT_K_KERNELS or bucket.startswith(("skinny", "decode"))
        if dtype != "bfloat16" or not routed:
            continue
        names = ("matmul", "addmm_1d", "addmm_2d") if name == "matmul" else (name,)
        found += [(key, each, bucket) for each in names]
    return found


def main() -> int:
    stored = load_store(helion_impl.CONFIG_PATH)
    failed = False
    for key, name, bucket in checks():
        kernel = helion_tuning.SPLIT_K_KERNELS.get(name, helion_impl.matmul_kernel)
        args = helion_tuning.tuning_args(name, bucket, torch.bfloat16, "cpu")
        config = helion.Config(**stored[key])
        shared = report(f"{name} {bucket} on {key}", functools.partial(shared_memory, kernel, args, config))
        failed |= shared is None or shared > SM90_MAX_SHARED
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())
