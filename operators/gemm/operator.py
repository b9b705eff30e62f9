"""The gemm operator: out = a @ b for a (M, K) and b (K, N); x_val is (M, N, K).

The peer ``quack`` (quack's GEMM, :mod:`operators.gemm.peers`, also addmm's) runs when
``--only`` names it, and is skipped with its reason where it cannot run.

Inputs and tolerance.  With ``dy`` of unit variance (drawn by the harness), the output and
both gradients are sums of products: ``out`` over K, ``grad_a = dy @ b.T`` over N and
``grad_b = a.T @ dy`` over M.  Drawing ``a = randn * sqrt(N / K)`` and
``b = randn * sqrt(M / K)`` gives all three the same typical magnitude ``T = sqrt(M * N / K)``,
so one tolerance fits every compared tensor::

    rtol = r,   atol = r * T

where ``r`` is the dtype's default ``rtol`` (fp16 5e-3, bf16 2e-2, fp32 1e-4), except fp32 on
CUDA, where ``r`` is 5e-3: Helion computes fp32 dots in TF32 (inputs rounded to 10 mantissa
bits, like fp16), as do Triton and Inductor once ``torch.set_float32_matmul_precision("high")``
allows it.  Triton's CPU interpreter computes fp32 dots exactly, so fp32 on the CPU keeps 1e-4.

Why ``T`` and not K: the rounding error of a length-L dot product grows like ``sqrt(L)``, and
so does ``T`` (each term is about ``T / sqrt(L)``), so relative to ``T`` the error does not grow
with K (nor with M and N, the backward's reduction lengths).  Written for unscaled ``randn``
inputs (``T = sqrt(K)``) this is the familiar "tolerance grows like sqrt(K)".  The absolute
term matters for entries near zero (sums that cancel), where ``rtol * |ref|`` allows nothing:
emulating TF32 rounding on the CPU for 256^3, 2048^3 and 8192x512x1536, the worst entry of
the output and of both gradients was about a quarter of ``r * T``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import torch

from harness.operator import (
    DEFAULT_TOLERANCES,
    Backend,
    BenchmarkOperator,
    KernelWork,
    Mode,
    Shape,
    TritonbenchAdapter,
    TritonbenchCall,
    register_benchmark,
)
from operators.gemm import peers
from operators.skips import interpreter_bf16_skip

CUDA_SHAPES: list[Shape] = [
    (1024, 1024, 1024),
    (2048, 2048, 2048),
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (8192, 4096, 4096),
    (8192, 14336, 4096),
    (8192, 4096, 14336),
    (20120, 512, 1536),
    (34579, 512, 1536),
    (34839, 512, 1536),
    (1000, 1000, 1000),
    (4097, 4097, 4097),
    (256, 256, 256),
    (1, 4096, 4096),
    (16, 4096, 4096),
    (128, 4096, 4096),
    (3000, 5000, 7000),
    (8192, 8, 8192),
]
"""The default CUDA sweep of gemm and addmm, (M, N, K): square sizes, LLM projections, the
reference addmm shapes (N=512, K=1536), unaligned 4097^3, decode (M = 1, 16, 128 against a
4096x4096 weight), an uneven large problem and a matrix-vector product with 8 columns."""
CPU_SHAPES: list[Shape] = [(64, 48, 80), (37, 45, 29), (100, 60, 90)]
TF32_RTOL = 5e-3


def typical_magnitude(m: int, n: int, k: int) -> float:
    """``T = sqrt(M * N / K)``: the size of the output and both gradients for inputs from :func:`operands`."""
    return math.sqrt(m * n / k)


def operands(m: int, n: int, k: int, device: str, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """``a`` (M, K) and ``b`` (K, N), scaled so that ``a @ b`` and its gradients are all about ``T``."""
    a = torch.randn(m, k, device=device) * math.sqrt(n / k)
    b = torch.randn(k, n, device=device) * math.sqrt(m / k)
    return a.to(dtype), b.to(dtype)


def matmul_tolerance(device: str, dtype: torch.dtype, magnitude: float) -> tuple[float, float]:
    """``(rtol, atol)`` for matmul results of typical size ``magnitude`` (see the module docstring)."""
    rtol = TF32_RTOL if dtype == torch.float32 and device == "cuda" else DEFAULT_TOLERANCES[dtype][0]
    return rtol, rtol * magnitude


def compile_options(device: str) -> dict[str, Any]:
    """``torch.compile`` keyword arguments for the matmul backends.

    On CUDA: ``mode="max-autotune-no-cudagraphs"`` restricted to Inductor's own Triton
    templates (no cuBLAS fallback), spelled as options since ``torch.compile`` refuses both
    ``mode`` and ``options``.  On the CPU a plain compile: max-autotune needs a GPU.
    """
    if device != "cuda":
        return {}
    return {"options": {
        "max_autotune": True,
        "coordinate_descent_tuning": True,
        "triton.cudagraphs": False,
        "max_autotune_gemm_backends": "TRITON",
    }}


def matmul_flops(shape: Shape, mode: Mode) -> int:
    """2*M*N*K per matmul: one forward, two backward (``grad_a`` and ``grad_b``)."""
    m, n, k = shape
    return 2 * m * n * k * {Mode.FWD: 1, Mode.FWD_NO_GRAD: 1, Mode.BWD: 2, Mode.FWD_BWD: 3}[mode]


MATMUL_KERNEL = re.compile(r"matmul|gemm|gemv|nvjet|xmma|cutlass|triton_tem_")
"""Names of kernels that compute one whole matmul a launch: ours (Triton's and Helion's, the
split-K kernel included), cuBLAS's and Inductor's templates; never a reduction of split-K parts."""


def matmul_kernel_work(shape: Shape, element_size: int, kernel: str) -> KernelWork | None:
    """One launch of a matmul kernel of a gemm or addmm call: every matmul of it, forward or
    backward, does ``2 * M * N * K`` flops over operands and a product of the sizes (M, K), (K, N)
    and (M, N), each moved once at the fewest."""
    if not MATMUL_KERNEL.search(kernel) or "reduc" in kernel.lower():
        return None
    m, n, k = shape
    return KernelWork((m * k + k * n + m * n) * element_size, 2 * m * n * k)


def from_tritonbench_gemm(a: torch.Tensor, w: torch.Tensor,
                          bias: torch.Tensor | None = None) -> TritonbenchCall:
    """tritonbench's ``gemm`` tuple ``(a, w, bias)``: our ``gemm``, or with a row bias ``(N,)``
    our ``addmm`` with the row bias, ``a @ w + bias``, what its baseline computes."""
    if bias is None:
        return TritonbenchCall("gemm", (a, w))
    n = w.shape[1]
    if tuple(bias.shape) != (n,):
        raise ValueError(f"gemm: a bias of shape {tuple(bias.shape)} does not add to N={n} columns "
                         f"(give --bias {n})")
    return TritonbenchCall("addmm", (bias, a, w), {"bias": "1d"})


class GemmOperator(BenchmarkOperator):
    """Dense matrix multiplication; x_val is (M, N, K)."""

    name = "gemm"
    tritonbench_adapters = {"gemm": TritonbenchAdapter(from_tritonbench_gemm)}
    helion_tuning = "operators.gemm.helion_tuning"
    x_val_label = "MxNxK"
    compute_bound = True
    review_speedup = 1.1  # cuBLAS is the baseline: more than 10% over it needs a second look

    def default_shapes(self) -> list[Shape]:
        return CPU_SHAPES if self.device == "cpu" else CUDA_SHAPES

    def make_inputs(self, shape: Shape) -> tuple[torch.Tensor, torch.Tensor]:
        return operands(*shape, self.device, self.dtype)

    def bytes_moved(self, shape: Shape, mode: Mode) -> int:
        m, n, k = shape
        size = torch.tensor([], dtype=self.dtype).element_size()
        # fwd: read a and b, write out.  bwd: read dy, a and b, write grad_a and grad_b.
        fwd = (m * k + k * n + m * n) * size
        bwd = (m * n + 2 * m * k + 2 * k * n) * size
        return {Mode.FWD: fwd, Mode.FWD_NO_GRAD: fwd, Mode.BWD: bwd, Mode.FWD_BWD: fwd + bwd}[mode]

    def flops(self, shape: Shape, mode: Mode) -> int:
        return matmul_flops(shape, mode)

    def kernel_work(self, shape: Shape, mode: Mode, kernel: str) -> KernelWork | None:
        return matmul_kernel_work(shape, self.dtype.itemsize, kernel)

    def tolerance(self, shape: Shape, tensor: str) -> tuple[float, float]:
        return matmul_tolerance(self.device, self.dtype, typical_magnitude(*shape))

    def skip_reason(self, backend: Backend) -> str | None:
        return (interpreter_bf16_skip(self.device, self.dtype, backend)
                or peers.skip_reason(backend.name, self.device, self.dtype))

    @register_benchmark(baseline=True)
    def eager(self, a: torch.Tensor, b: torch.Tensor) -> Callable[[], torch.Tensor]:
        return lambda: torch.matmul(a, b)

    @register_benchmark()
    def triton(self, a: torch.Tensor, b: torch.Tensor) -> Callable[[], torch.Tensor]:
        from operators.gemm.triton_impl import matmul

        return lambda: matmul(a, b)

    @register_benchmark(enabled=False)
    def triton_direct(self, a: torch.Tensor, b: torch.Tensor) -> Callable[[], torch.Tensor]:
        from operators.gemm.triton_direct import matmul

        return lambda: matmul(a, b)

    @register_benchmark(enabled=False)
    def triton_compiled(self, a: torch.Tensor, b: torch.Tensor) -> Callable[[], torch.Tensor]:
        from operators.compile_support import compiled
        from operators.gemm.triton_impl import matmul

        fn = compiled(matmul)
        return lambda: fn(a, b)

    @register_benchmark()
    def helion(self, a: torch.Tensor, b: torch.Tensor) -> Callable[[], torch.Tensor]:
        from operators.gemm.helion_impl import matmul

        return lambda: matmul(a, b)

    @register_benchmark(enabled=False)
    def helion_op(self, a: torch.Tensor, b: torch.Tensor) -> Callable[[], torch.Tensor]:
        from operators.gemm.helion_ops import matmul

        return lambda: matmul(a, b)

    @register_benchmark(enabled=False)
    def helion_compiled(self, a: torch.Tensor, b: torch.Tensor) -> Callable[[], torch.Tensor]:
        from operators.compile_support import compiled
        from operators.gemm.helion_ops import matmul

        fn = compiled(matmul)
        return lambda: fn(a, b)

    @register_benchmark()
    def torch_compile(self, a: torch.Tensor, b: torch.Tensor) -> Callable[[], torch.Tensor]:
        from operators.compile_support import compiled

        fn = compiled(torch.matmul, **compile_options(self.device))
        return lambda: fn(a, b)

    # --- peers: other libraries' kernels (operators/gemm/peers.py), run when --only names them
    @register_benchmark(enabled=False)
    def quack(self, a: torch.Tensor, b: torch.Tensor) -> Callable[[], torch.Tensor]:
        peers.check_quack_shape(a, b)
        return lambda: peers.matmul(a, b)
