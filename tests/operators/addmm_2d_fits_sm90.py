"""Without a GPU: the stored config each Helion ``addmm_2d`` call of the default CUDA sweep
chooses compiles for sm_90 (the H100 and H200) within a block's shared memory, and matmul's
large-bucket config with the same (M, N) bias does not (the H200's ``OutOfResources``).

Run in a process of its own by ``tests/operators/test_addmm.py``, as the test session has set
Triton up for its CPU interpreter, whose kernels cannot be compiled.  Compiles Helion's
generated Triton code with Triton's own compiler and ptxas; prints each config's shared
memory; exits 1 when a chosen config is not its bucket's own, does not compile or needs more
than 232,448 bytes, or when matmul's config would pass.
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path

import helion
import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from harness.tuning.choice import choose_config
from harness.tuning.configs import load_store
from operators.gemm import helion_impl, helion_tuning
from operators.gemm.operator import CUDA_SHAPES

SM90 = GPUTarget("cuda", 90, 32)
SM90_MAX_SHARED = 232448
H200_SMS = 132
TENSORS = ("x", "y", "bias", "out")


def shared_memory(kernel_name: str, bucket: str, config: helion.Config) -> int:
    """Bytes of shared memory the bf16 kernel ``kernel_name`` needs on sm_90 with ``config``."""
    args = helion_tuning.tuning_args(kernel_name, bucket, torch.bfloat16, "cpu")
    helion_impl.matmul_kernel.reset()  # a fresh bound kernel: generated code depends on earlier binds
    code = helion_impl.matmul_kernel.bind(args).to_triton_code(config)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "generated_matmul.py"
        path.write_text(code)
        spec = importlib.util.spec_from_file_location("generated_matmul", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    kernel = module._helion_matmul_kernel
    signature = {p.name: "constexpr" if p.is_constexpr else "*bf16" if p.name in TENSORS else "fp32"
                 for p in kernel.params}
    constexprs = {"_NUM_SM": H200_SMS} if "_NUM_SM" in signature else {}
    compiled = triton.compile(ASTSource(kernel, signature, constexprs=constexprs), target=SM90,
                              options={"num_warps": config.num_warps, "num_stages": config.num_stages})
    return compiled.metadata.shared


def forward_buckets() -> list[str]:
    """The buckets the forward of the default CUDA sweep's shapes falls in (row-major operands)."""
    meta = {(m, n, k): helion_impl.bucket(torch.empty(m, k, device="meta"), torch.empty(k, n, device="meta"))
            for m, n, k in CUDA_SHAPES}
    return sorted(set(meta.values()))


def main() -> int:
    stored = load_store(helion_impl.CONFIG_PATH)
    failed = False
    for bucket in forward_buckets():
        keys = helion_impl.config_keys("addmm_2d", torch.bfloat16, bucket)
        choice = choose_config(stored, keys, helion_impl.bucket_place)
        label = f"addmm_2d {bucket} on {choice.key}"
        try:
            shared = shared_memory("addmm_2d", bucket, helion.Config(**stored[choice.key]))
        except Exception as exc:  # reported, so every bucket is checked
            print(f"{label}: {type(exc).__name__}: {exc}"[:400])
            failed = True
            continue
        print(f"{label}: {shared} bytes of shared memory")
        failed |= choice.note is not None or shared > SM90_MAX_SHARED
    matmul_key = helion_impl.config_key("matmul", torch.bfloat16, "large|nn")
    shared = shared_memory("addmm_2d", "large|nn", helion.Config(**stored[matmul_key]))
    print(f"addmm_2d large|nn on {matmul_key}: {shared} bytes of shared memory")
    return int(failed or shared <= SM90_MAX_SHARED)


if __name__ == "__main__":
    sys.exit(main())
