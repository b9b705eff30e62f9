"""Example plugin (GPU only): an ``exp`` kernel that writes far outside its output, a real
illegal memory access that poisons the process's CUDA context.

    python run.py --op exp --plugin examples/plugins/out_of_bounds_exp.py \
        --only eager,triton,writes_out_of_bounds

The sweep must survive it with or without ``--isolate``: the culprit's cell fails with the CUDA
error, and every other cell, of this shape and the next ones, is still measured and tabled.
"""

from collections.abc import Callable

import torch
import triton
import triton.language as tl

from harness.operator import BenchmarkOperator, register_benchmark

BLOCK_SIZE = 1024


@triton.jit
def exp_out_of_bounds_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    """y[i - 2**40] = exp(x[i]): every store lands a terabyte before the output."""
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets - (1 << 40), tl.exp(x.to(tl.float32)), mask=mask)


@register_benchmark(operator="exp")
def writes_out_of_bounds(self: BenchmarkOperator, x: torch.Tensor) -> Callable[[], torch.Tensor]:
    y = torch.empty_like(x)

    def run() -> torch.Tensor:
        grid = (triton.cdiv(x.numel(), BLOCK_SIZE),)
        exp_out_of_bounds_kernel[grid](x, y, x.numel(), BLOCK_SIZE=BLOCK_SIZE)
        return y

    return run
