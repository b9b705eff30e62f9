"""The addmm operator: out = beta * bias + alpha * (mat1 @ mat2); x_val is (M, N, K).

``bias`` is a row vector (N,) broadcast over the rows (``--bias 1d``, the default) or a full
(M, N) matrix (``--bias 2d``); ``--alpha`` and ``--beta`` default to 1.  The Triton and Helion
backends are the gemm kernels with their fused epilogue (:mod:`operators.gemm`); the peer
``quack`` (run when ``--only`` names it) is quack's GEMM (:mod:`operators.gemm.peers`).

Inputs and tolerance follow the gemm operator: ``mat1`` and ``mat2`` are drawn so that the
product and both of its gradients have the typical magnitude ``T = sqrt(M * N / K)``, and
``bias`` is ``randn * T``.  Each compared tensor gets its tolerance from its own typical size
(:meth:`AddmmOperator.expected_magnitude`, handed to
:func:`operators.gemm.operator.matmul_tolerance`): the output ``T * hypot(alpha, beta)``, the
matrices' gradients ``|alpha| * T``, and the bias gradient ``|beta|`` times ``sqrt(M)`` for a
1-D bias (a column sum of ``dy``) or times 1 for a 2-D one.  So a gradient that ignores
``alpha`` or ``beta`` fails even when the other scale is much larger.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from harness.operator import (
    Backend,
    BenchmarkOperator,
    KernelWork,
    Mode,
    Option,
    Shape,
    TritonbenchAdapter,
    TritonbenchCall,
    finite_number,
    register_benchmark,
)
from operators.gemm import peers
from operators.gemm.operator import (
    CPU_SHAPES,
    CUDA_SHAPES,
    compile_options,
    matmul_flops,
    matmul_kernel_work,
    matmul_tolerance,
    operands,
    typical_magnitude,
)
from operators.skips import interpreter_bf16_skip

DEFAULT_OPTIONS: dict[str, Any] = {"bias": "1d", "alpha": 1.0, "beta": 1.0}
ROW_SUM_PARTS_KERNELS = ("_row_sum_parts_kernel", "_helion_row_sum_parts_kernel")
"""The first kernel of our row-vector bias gradient (Triton's, Helion's): its launch reads ``grad``."""

Inputs = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def from_tritonbench_addmm(bias: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor) -> TritonbenchCall:
    """tritonbench's ``addmm`` tuple ``(a, mat1, mat2)``, ``a`` the bias: our ``addmm`` with the
    full ``(M, N)`` bias (a row ``(N,)`` bias takes the row option)."""
    return TritonbenchCall("addmm", (bias, mat1, mat2), {"bias": "2d" if bias.dim() == 2 else "1d"})


class AddmmOperator(BenchmarkOperator):
    """Matrix multiplication with a scaled bias; x_val is (M, N, K)."""

    name = "addmm"
    tritonbench_adapters = {"addmm": TritonbenchAdapter(from_tritonbench_addmm)}
    helion_tuning = "operators.gemm.helion_tuning"
    x_val_label = "MxNxK"
    compute_bound = True
    review_speedup = 1.1  # cuBLAS is the baseline: more than 10% over it needs a second look

    command_line_options = (
        Option("bias", DEFAULT_OPTIONS["bias"], choices=("1d", "2d"),
               help="bias shape: 1d (N,) broadcast over rows, or 2d (M, N); default 1d"),
        Option("alpha", DEFAULT_OPTIONS["alpha"], parse=finite_number,
               help="scale of mat1 @ mat2 (default 1.0)"),
        Option("beta", DEFAULT_OPTIONS["beta"], parse=finite_number, help="scale of bias (default 1.0)"),
    )

    def _option(self, name: str) -> Any:
        value = self.options.get(name)
        return DEFAULT_OPTIONS[name] if value is None else value

    @property
    def alpha(self) -> float:
        return float(self._option("alpha"))

    @property
    def beta(self) -> float:
        return float(self._option("beta"))

    @property
    def full_bias(self) -> bool:
        """Whether the bias is a full (M, N) matrix rather than a row vector (N,)."""
        return self._option("bias") == "2d"

    def default_shapes(self) -> list[Shape]:
        return CPU_SHAPES if self.device == "cpu" else CUDA_SHAPES

    def make_inputs(self, shape: Shape) -> Inputs:
        m, n, k = shape
        mat1, mat2 = operands(m, n, k, self.device, self.dtype)
        bias_shape = (m, n) if self.full_bias else (n,)
        bias = torch.randn(bias_shape, device=self.device) * typical_magnitude(m, n, k)
        return bias.to(self.dtype), mat1, mat2

    def bytes_moved(self, shape: Shape, mode: Mode) -> int:
        m, n, k = shape
        size = torch.tensor([], dtype=self.dtype).element_size()
        bias = m * n if self.full_bias else n
        # fwd: read bias, mat1 and mat2, write out.
        # bwd: read dy, mat1 and mat2, write the gradients of bias, mat1 and mat2.
        fwd = (bias + m * k + k * n + m * n) * size
        bwd = (m * n + 2 * m * k + 2 * k * n + bias) * size
        return {Mode.FWD: fwd, Mode.FWD_NO_GRAD: fwd, Mode.BWD: bwd, Mode.FWD_BWD: fwd + bwd}[mode]

    def flops(self, shape: Shape, mode: Mode) -> int:
        # The matmuls' flops; scaling and adding the bias (a few per output element) is negligible.
        return matmul_flops(shape, mode)

    def kernel_work(self, shape: Shape, mode: Mode, kernel: str) -> KernelWork | None:
        """A matmul launch as gemm's, which in a forward-only call also reads the bias (its
        epilogue's; under split-K the reduce kernel reads it instead); the first kernel of our
        row-vector bias gradient reads the whole of ``grad`` (M, N)."""
        if kernel in ROW_SUM_PARTS_KERNELS:
            m, n, _ = shape
            return KernelWork(m * n * self.dtype.itemsize)
        work = matmul_kernel_work(shape, self.dtype.itemsize, kernel)
        if work is not None and mode in (Mode.FWD, Mode.FWD_NO_GRAD):
            return KernelWork(self.bytes_moved(shape, Mode.FWD), work.flops)
        return work

    def expected_magnitude(self, shape: Shape, tensor: str) -> float:
        """The typical size of a compared tensor's entries (see the module docstring)."""
        m, _, _ = shape
        product = typical_magnitude(*shape)
        if tensor == "output[0]":
            return product * math.hypot(self.alpha, self.beta)
        if tensor == "grad[0]":
            return abs(self.beta) * (1.0 if self.full_bias else math.sqrt(m))
        return abs(self.alpha) * product

    def tolerance(self, shape: Shape, tensor: str) -> tuple[float, float]:
        return matmul_tolerance(self.device, self.dtype, self.expected_magnitude(shape, tensor))

    def skip_reason(self, backend: Backend) -> str | None:
        return (interpreter_bf16_skip(self.device, self.dtype, backend)
                or peers.skip_reason(backend.name, self.device, self.dtype))

    @register_benchmark(baseline=True)
    def eager(self, bias: torch.Tensor, mat1: torch.Tensor,
              mat2: torch.Tensor) -> Callable[[], torch.Tensor]:
        alpha, beta = self.alpha, self.beta
        return lambda: torch.addmm(bias, mat1, mat2, alpha=alpha, beta=beta)

    @register_benchmark()
    def triton(self, bias: torch.Tensor, mat1: torch.Tensor,
               mat2: torch.Tensor) -> Callable[[], torch.Tensor]:
        from operators.gemm.triton_impl import addmm

        alpha, beta = self.alpha, self.beta
        return lambda: addmm(bias, mat1, mat2, alpha, beta)

    @register_benchmark(enabled=False)
    def triton_direct(self, bias: torch.Tensor, mat1: torch.Tensor,
                      mat2: torch.Tensor) -> Callable[[], torch.Tensor]:
        from operators.gemm.triton_direct import addmm

        alpha, beta = self.alpha, self.beta
        return lambda: addmm(bias, mat1, mat2, alpha, beta)

    @register_benchmark(enabled=False)
    def triton_compiled(self, bias: torch.Tensor, mat1: torch.Tensor,
                        mat2: torch.Tensor) -> Callable[[], torch.Tensor]:
        from operators.compile_support import compiled
        from operators.gemm.triton_impl import addmm

        alpha, beta = self.alpha, self.beta
        fn = compiled(addmm)
        return lambda: fn(bias, mat1, mat2, alpha, beta)

    @register_benchmark()
    def helion(self, bias: torch.Tensor, mat1: torch.Tensor,
               mat2: torch.Tensor) -> Callable[[], torch.Tensor]:
        from operators.gemm.helion_impl import addmm

        alpha, beta = self.alpha, self.beta
        return lambda: addmm(bias, mat1, mat2, alpha, beta)

    @register_benchmark(enabled=False)
    def helion_op(self, bias: torch.Tensor, mat1: torch.Tensor,
                  mat2: torch.Tensor) -> Callable[[], torch.Tensor]:
        from operators.gemm.helion_ops import addmm

        alpha, beta = self.alpha, self.beta
        return lambda: addmm(bias, mat1, mat2, alpha, beta)

    @register_benchmark(enabled=False)
    def helion_compiled(self, bias: torch.Tensor, mat1: torch.Tensor,
                        mat2: torch.Tensor) -> Callable[[], torch.Tensor]:
        from operators.compile_support import compiled
        from operators.gemm.helion_ops import addmm

        alpha, beta = self.alpha, self.beta
        fn = compiled(addmm)
        return lambda: fn(bias, mat1, mat2, alpha, beta)

    @register_benchmark()
    def torch_compile(self, bias: torch.Tensor, mat1: torch.Tensor,
                      mat2: torch.Tensor) -> Callable[[], torch.Tensor]:
        from operators.compile_support import compiled

        alpha, beta = self.alpha, self.beta

        def scaled_addmm(bias: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor) -> torch.Tensor:
            return torch.addmm(bias, mat1, mat2, alpha=alpha, beta=beta)

        fn = compiled(scaled_addmm, **compile_options(self.device))
        return lambda: fn(bias, mat1, mat2)

    # --- peers: other libraries' kernels (operators/gemm/peers.py), run when --only names them
    @register_benchmark(enabled=False)
    def quack(self, bias: torch.Tensor, mat1: torch.Tensor,
              mat2: torch.Tensor) -> Callable[[], torch.Tensor]:
        peers.check_quack_shape(mat1, mat2)
        alpha, beta = self.alpha, self.beta
        return lambda: peers.addmm(bias, mat1, mat2, alpha, beta)
