"""Without a GPU: the stored config each tiled Helion ``addmm_2d`` call of the default CUDA sweep
chooses on the H200 compiles for sm_90 (the H100 and H200) within a block's shared memory, and
matmul's large-bucket config with the same (M, N) bias does not (the H200's ``OutOfResources``).

Run in a process of its own by ``tests/operators/test_addmm.py``, as the test session has set
Triton up for its CPU interpreter, whose kernels cannot be compiled.  Compiles Helion's
generated Triton code with Triton's own compiler and ptxas; prints each config's shared
memory; exits 1 when a chosen config is not one of its bucket's keys, does not compile or needs
more than 232,448 bytes, or when matmul's config would pass.  (The split-K kernels' configs are
checked by ``helion_regimes_fit_sm90.py``.)
"""

from __future__ import annotations

import functools
import sys

import helion
import torch

from harness.tuning.choice import choose_config
from harness.tuning.configs import load_store
from operators.gemm import helion_impl, helion_tuning
from operators.gemm.helion_dispatch import ROUTES, Kernel, choose
from operators.gemm.operator import CUDA_SHAPES
from operators.gemm.strategy import GPU_LIMITS
from tests.operators.sm90.helion_sm90 import H200_SMS, SM90_MAX_SHARED, report
from tests.operators.sm90.helion_sm90 import shared_memory as kernel_shared_memory


def shared_memory(kernel_name: str, bucket: str, config: helion.Config) -> int:
    """Bytes of shared memory the bf16 kernel ``kernel_name`` needs on sm_90 with ``config``."""
    args = helion_tuning.tuning_args(kernel_name, bucket, torch.bfloat16, "cpu")
    return kernel_shared_memory(helion_impl.matmul_kernel, args, config)


def forward_buckets() -> list[str]:
    """The buckets in which the forward of the default CUDA sweep's shapes (row-major operands)
    runs the tiled kernel on the H200, an N-skinny one transposed."""
    buckets = set()
    for m, n, k in CUDA_SHAPES:
        chosen = choose(m, n, k, sms=H200_SMS, limits=GPU_LIMITS, routes=ROUTES)
        x, y = torch.empty(m, k, device="meta"), torch.empty(k, n, device="meta")
        if chosen.kernel is Kernel.TILED:
            buckets.add(helion_impl.bucket(*((y.mT, x.mT) if chosen.swap else (x, y)), chosen.size))
    return sorted(buckets)


def main() -> int:
    stored = load_store(helion_impl.CONFIG_PATH)
    failed = False
    for bucket in forward_buckets():
        keys = helion_impl.config_keys("addmm_2d", torch.bfloat16, bucket)
        choice = choose_config(stored, keys, helion_impl.bucket_place)
        config = helion.Config(**stored[choice.key])
        shared = report(f"addmm_2d {bucket} on {choice.key}",
                        functools.partial(shared_memory, "addmm_2d", bucket, config))
        failed |= choice.note is not None or shared is None or shared > SM90_MAX_SHARED
    matmul_key = helion_impl.config_key("matmul", torch.bfloat16, "large|nn")
    shared = shared_memory("addmm_2d", "large|nn", helion.Config(**stored[matmul_key]))
    print(f"addmm_2d large|nn on {matmul_key}: {shared} bytes of shared memory")
    return int(failed or shared <= SM90_MAX_SHARED)


if __name__ == "__main__":
    sys.exit(main())
