"""Without a GPU: the shared memory a Helion kernel's config needs on sm_90 (the H100 and H200).

For the scripts beside it, which ``tests/operators`` runs in processes of their own
(:func:`tests.helpers.run_compiling`), as a test session has set Triton up for its CPU
interpreter, whose kernels cannot be compiled: Helion generates the Triton code of a config,
and Triton's own compiler and ptxas compile it for sm_90.
"""

from __future__ import annotations

import importlib.util
import inspect
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import helion
import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

SM90 = GPUTarget("cuda", 90, 32)
SM90_MAX_SHARED = 232448
"""The most shared memory a block may have on sm_90 (227 KiB)."""
H200_SMS = 132
POINTER = {torch.bfloat16: "*bf16", torch.float16: "*fp16", torch.float32: "*fp32"}


def shared_memory(kernel: Any, args: tuple, config: helion.Config) -> int:
    """Bytes of shared memory Helion ``kernel`` needs on sm_90 with ``config``, called on ``args``."""
    return compiled(kernel, args, config).metadata.shared


def compiled(kernel: Any, args: tuple, config: helion.Config) -> Any:
    """Helion ``kernel`` with ``config``, called on ``args``, compiled by Triton for sm_90."""
    kernel.reset()  # a fresh bound kernel: generated code depends on earlier binds
    code = kernel.bind(args).to_triton_code(config)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"generated_{kernel.name}.py"
        path.write_text(code)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    generated = getattr(module, f"_helion_{kernel.name}")
    named = inspect.signature(kernel.fn).bind(*args).arguments
    tensors = {name: value.dtype for name, value in named.items() if isinstance(value, torch.Tensor)}
    signature = {p.name: "constexpr" if p.is_constexpr else POINTER[tensors[p.name]] if p.name in tensors
                 else "fp32" for p in generated.params}
    constexprs = {"_NUM_SM": H200_SMS} if "_NUM_SM" in signature else {}
    # Triton's launcher marks 16-byte aligned pointers so: without the mark, no load may be an
    # asynchronous copy and pointer-indexed loops are not pipelined at all.
    aligned = {(index,): [["tt.divisibility", 16]] for index, param in enumerate(generated.params)
               if param.name in tensors}
    source = ASTSource(generated, signature, constexprs=constexprs, attrs=aligned)
    return triton.compile(source, target=SM90,
                          options={"num_warps": config.num_warps, "num_stages": config.num_stages})


def report(label: str, measure: Callable[[], int]) -> int | None:
    """Print ``label`` with the bytes ``measure()`` returns, or with its error (then None), so a
    script checks every config before it fails."""
    try:
        shared = measure()
    except Exception as exc:  # reported, so every config is checked
        print(f"{label}: {type(exc).__name__}: {exc}"[:400])
        return None
    print(f"{label}: {shared} bytes of shared memory")
    return shared
