"""The exp operator: y = exp(x) on a flat tensor; backward dx = dy * y."""

from __future__ import annotations

from collections.abc import Callable

import torch

from harness.operator import (
    Backend,
    BenchmarkOperator,
    Mode,
    Shape,
    TritonbenchAdapter,
    TritonbenchCall,
    register_benchmark,
)
from operators.skips import interpreter_bf16_skip

CUDA_SIZES = [2**p for p in (12, 16, 20, 24, 26, 28)] + [10_000_019]
CPU_SIZES = [4096, 65536, 100_003]


def from_tritonbench_vector_exp(x: torch.Tensor) -> TritonbenchCall:
    """tritonbench's ``vector_exp`` tuple ``(x,)``: our ``exp`` (handed back as ``{"output": y}``,
    the form its metrics read)."""
    return TritonbenchCall("exp", (x,))


class ExpOperator(BenchmarkOperator):
    """Elementwise exponential; x_val is the number of elements."""

    name = "exp"
    tritonbench_adapters = {
        "vector_exp": TritonbenchAdapter(from_tritonbench_vector_exp, output_key="output"),
    }
    helion_tuning = "operators.exp.helion_tuning"
    x_val_label = "numel"
    whole_direction_kernels = {"_exp_fwd_kernel": Mode.FWD, "_helion_exp_fwd": Mode.FWD,
                               "_exp_bwd_kernel": Mode.BWD, "_helion_exp_bwd": Mode.BWD}

    def default_shapes(self) -> list[Shape]:
        return [(n,) for n in (CPU_SIZES if self.device == "cpu" else CUDA_SIZES)]

    def make_inputs(self, shape: Shape) -> tuple[torch.Tensor]:
        return (torch.randn(shape, device=self.device, dtype=self.dtype),)

    def bytes_moved(self, shape: Shape, mode: Mode) -> int:
        size = shape[0] * torch.tensor([], dtype=self.dtype).element_size()
        # fwd: read x, write y.  bwd: read dy and y, write dx.
        passes = {Mode.FWD: 2, Mode.FWD_NO_GRAD: 2, Mode.BWD: 3, Mode.FWD_BWD: 5}[mode]
        return passes * size

    def traffic(self, shape: Shape, mode: Mode) -> dict[str, int]:
        # fwd reads one tensor and writes one (a copy's pattern); bwd reads two and writes one.
        size = shape[0] * torch.tensor([], dtype=self.dtype).element_size()
        fwd, bwd = {"copy": 2 * size}, {"read2_write1": 3 * size}
        return {Mode.FWD: fwd, Mode.FWD_NO_GRAD: fwd, Mode.BWD: bwd, Mode.FWD_BWD: {**fwd, **bwd}}[mode]

    def flops(self, shape: Shape, mode: Mode) -> int:
        return shape[0] * {Mode.FWD: 1, Mode.FWD_NO_GRAD: 1, Mode.BWD: 1, Mode.FWD_BWD: 2}[mode]

    def skip_reason(self, backend: Backend) -> str | None:
        return interpreter_bf16_skip(self.device, self.dtype, backend)

    @register_benchmark(baseline=True)
    def eager(self, x: torch.Tensor) -> Callable[[], torch.Tensor]:
        return lambda: torch.exp(x)

    @register_benchmark()
    def triton(self, x: torch.Tensor) -> Callable[[], torch.Tensor]:
        from operators.exp.triton_impl import exp

        return lambda: exp(x)

    @register_benchmark(enabled=False)
    def triton_direct(self, x: torch.Tensor) -> Callable[[], torch.Tensor]:
        from operators.exp.triton_direct import exp

        return lambda: exp(x)

    @register_benchmark(enabled=False)
    def triton_compiled(self, x: torch.Tensor) -> Callable[[], torch.Tensor]:
        from operators.compile_support import compiled
        from operators.exp.triton_impl import exp

        fn = compiled(exp)
        return lambda: fn(x)

    @register_benchmark()
    def helion(self, x: torch.Tensor) -> Callable[[], torch.Tensor]:
        from operators.exp.helion_impl import exp

        return lambda: exp(x)

    @register_benchmark(enabled=False)
    def helion_op(self, x: torch.Tensor) -> Callable[[], torch.Tensor]:
        from operators.exp.helion_ops import exp

        return lambda: exp(x)

    @register_benchmark(enabled=False)
    def helion_compiled(self, x: torch.Tensor) -> Callable[[], torch.Tensor]:
        from operators.compile_support import compiled
        from operators.exp.helion_ops import exp

        fn = compiled(exp)
        return lambda: fn(x)

    @register_benchmark()
    def torch_compile(self, x: torch.Tensor) -> Callable[[], torch.Tensor]:
        from operators.compile_support import compiled

        fn = compiled(torch.exp)
        return lambda: fn(x)
