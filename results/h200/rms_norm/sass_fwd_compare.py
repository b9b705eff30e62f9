"""Compile the Triton and Helion-style rms_norm forward kernels for sm_90a without a GPU.

Reports, per kernel and launch geometry, the registers and spill bytes ``ptxas -v`` gives
and the SASS instruction counts where the two kernels differ.  ``helion_style_fwd`` has the
shape of Helion's generated forward (one row per program, sizes baked in, no masks, int32
offsets), so the comparison separates code differences from launch differences::

    python results/h200/rms_norm/sass_fwd_compare.py
"""

from __future__ import annotations

import collections
import os
import re
import subprocess
import tempfile

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from operators.rms_norm import triton_impl

TOOLS = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
TARGET = GPUTarget("cuda", 90, 32)
TRITON_SIGNATURE = {"x_ptr": "*bf16", "w_ptr": "*bf16", "y_ptr": "*bf16", "rstd_ptr": "*fp32", "M": "i32",
                    "N": "i32", "eps": "fp32", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr",
                    "NUM_STAGES": "constexpr"}
HELION_SIGNATURE = {"x": "*bf16", "weight": "*bf16", "y": "*bf16", "rstd": "*fp32", "eps": "fp32",
                    "N": "constexpr"}


@triton.jit
def helion_style_fwd(x, weight, y, rstd, eps, N: tl.constexpr):
    """One row per program: ``rstd = rsqrt(sum(x^2) / N + eps)``, ``y = x * rstd * w``."""
    row = tl.program_id(0) + tl.zeros([1], tl.int32)
    cols = tl.arange(0, N)
    offsets = row[:, None] * N + cols[None, :]
    xf = tl.load(x + offsets).to(tl.float32)
    r = tl.rsqrt(tl.sum(xf * xf, 1) / N + eps)
    w = tl.load(weight + cols).to(tl.float32)
    tl.store(y + offsets, (xf * r[:, None] * w[None, :]).to(tl.bfloat16))
    tl.store(rstd + row, r)


def compile_for_h200(fn, signature: dict, constexprs: dict, num_warps: int, divisible: tuple[int, ...]):
    """``triton.compile`` for sm_90 with the given pointer/int arguments known divisible by 16."""
    attrs = {(i,): [["tt.divisibility", 16]] for i in divisible}
    source = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    return triton.compile(source, target=TARGET, options={"num_warps": num_warps, "num_stages": 1})


def ptxas_usage(kernel) -> str:
    """Registers and spill bytes of the kernel's PTX assembled for sm_90a."""
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(kernel.asm["ptx"])
    command = [os.path.join(TOOLS, "ptxas"), "-v", "--gpu-name", "sm_90a", f.name, "-o", os.devnull]
    log = subprocess.run(command, capture_output=True, text=True).stderr
    regs = re.search(r"Used (\d+) registers", log).group(1)
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log).groups()
    return f"{regs} registers, spill stores/loads {spills[0]}/{spills[1]} bytes"


def sass_opcodes(kernel) -> collections.Counter:
    """Counts of SASS opcodes (without modifiers) in the kernel's cubin."""
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(kernel.asm["cubin"])
    command = [os.path.join(TOOLS, "cuobjdump"), "-sass", f.name]
    sass = subprocess.run(command, capture_output=True, text=True).stdout
    return collections.Counter(m.group(1).split(".")[0] for m in
                               re.finditer(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", sass))


def main() -> None:
    for n, warps in ((16384, 8), (16384, 32), (32768, 16), (32768, 32)):
        ours = compile_for_h200(triton_impl._rms_norm_fwd_kernel, TRITON_SIGNATURE,
                                {"BLOCK_M": 1, "BLOCK_N": n, "NUM_STAGES": 1}, warps, (0, 1, 2, 3, 5))
        helion = compile_for_h200(helion_style_fwd, HELION_SIGNATURE, {"N": n}, warps, (0, 1, 2, 3))
        ours_ops, helion_ops = sass_opcodes(ours), sass_opcodes(helion)
        print(f"N={n}, {warps} warps")
        print(f"  triton: {ptxas_usage(ours)}, {sum(ours_ops.values())} SASS instructions")
        print(f"  helion-style: {ptxas_usage(helion)}, {sum(helion_ops.values())} SASS instructions")
        differing = {op: (ours_ops[op], helion_ops[op]) for op in sorted(ours_ops | helion_ops)
                     if ours_ops[op] != helion_ops[op]}
        print(f"  differing opcodes (triton, helion-style): {differing}")


if __name__ == "__main__":
    main()
