"""The rms_norm operator: Llama-style RMS normalization of the rows of x (M, N), times weight (N,).

Forward, per row::

    y = x * rsqrt(mean(x**2) + eps) * weight

The backward gives dx and dweight; the Triton and Helion kernels save the fp32 ``rstd`` of
every row in the forward and read it back in the backward.  The peers ``liger``, ``quack`` and
``torch_rms_norm`` run other libraries' kernels (:mod:`operators.rms_norm.peers`); one that is
not installed or cannot run on the device is skipped with its reason.

Inputs and tolerance.  ``dweight`` sums ``dy * xhat`` over the M rows, so its entries are
about ``sqrt(M)`` in size, while ``y`` and ``dx`` scale with ``weight``.  The weight is drawn
as ``sqrt(M) * (1 + 0.1 * randn)`` (its size changes no kernel's work) so that every compared
tensor has the same typical magnitude ``T = sqrt(M)``, and the tolerance is the dtype's
``rtol`` with ``atol = rtol * T``.  The default ``atol`` does not fit: the eager baseline
rounds ``dy * xhat`` to the input dtype before summing the rows (as HF's ``LlamaRMSNorm``
does in fp16), which leaves an error of about ``1e-3 * T`` in fp16 even in entries of
``dweight`` that are near zero, where the relative tolerance does not help.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from harness.operator import (
    DEFAULT_TOLERANCES,
    Backend,
    BenchmarkOperator,
    Mode,
    Shape,
    TritonbenchAdapter,
    TritonbenchCall,
    register_benchmark,
)
from operators.rms_norm import peers
from operators.skips import interpreter_bf16_skip

EPS = 1e-6
CUDA_SHAPES: list[Shape] = [(4096, n) for n in (1024, 2048, 4096, 5120, 8192, 16384, 32768)] + [
    (16384, 8192),
    (32768, 4096),
]
CPU_SHAPES: list[Shape] = [(64, 200), (128, 256), (33, 1000)]


def llama_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """HF ``LlamaRMSNorm``: the math in fp32 (or float64 for float64 inputs), cast back, times weight."""
    compute_dtype = torch.promote_types(x.dtype, torch.float32)
    h = x.to(compute_dtype)
    variance = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(variance + eps)
    return weight * h.to(x.dtype)


TRITONBENCH_EPS = 1e-6
"""The eps of tritonbench's rms_norm, fixed in every version."""


def from_tritonbench_rms_norm(hidden: int, x: torch.Tensor,
                              weight: torch.Tensor | None = None) -> TritonbenchCall:
    """tritonbench's ``rms_norm`` tuple ``(H, x)`` (each of its backends builds a weight of ones):
    our ``rms_norm`` on ``(x, ones(H), 1e-6)``, the weight in ``x``'s dtype requiring grad like
    the ``nn.Parameter`` its baseline builds, so that ``--bwd`` has a gradient to compute when
    ``x`` needs none; a weight given as a third element is used as it is."""
    if x.shape[-1] != hidden:
        raise ValueError(f"rms_norm: H={hidden} but x is {tuple(x.shape)}")
    if weight is None:
        weight = torch.ones(hidden, dtype=x.dtype, device=x.device, requires_grad=True)
    return TritonbenchCall("rms_norm", (x, weight, TRITONBENCH_EPS))


class RMSNormOperator(BenchmarkOperator):
    """RMS norm over the last dim; x_val is (M, N)."""

    name = "rms_norm"
    tritonbench_adapters = {"rms_norm": TritonbenchAdapter(from_tritonbench_rms_norm)}
    helion_tuning = "operators.rms_norm.helion_tuning"
    x_val_label = "MxN"
    whole_direction_kernels = {
        **dict.fromkeys(("_rms_norm_fwd_kernel", "_rms_norm_fwd_looped_kernel", "_helion_rms_norm_fwd"),
                        Mode.FWD),
        # The backward kernels that do all of its row work in one launch; the two-pass backward
        # (row_dot, then stripe) splits it over two, and the dw sums only add partial rows.
        **dict.fromkeys(("_rms_norm_bwd_kernel", "_rms_norm_bwd_prefetch_kernel", "_rms_norm_bwd_kept_kernel",
                         "_rms_norm_bwd_row_split_kernel", "_helion_rms_norm_bwd",
                         "_helion_rms_norm_bwd_row_split", "_helion_rms_norm_bwd_shared_rows"), Mode.BWD),
    }

    def default_shapes(self) -> list[Shape]:
        return CPU_SHAPES if self.device == "cpu" else CUDA_SHAPES

    def make_inputs(self, shape: Shape) -> tuple[torch.Tensor, torch.Tensor, float]:
        m, n = shape
        x = torch.randn(m, n, device=self.device, dtype=self.dtype)
        weight = math.sqrt(m) * (1 + 0.1 * torch.randn(n, device=self.device))
        return x, weight.to(self.dtype), EPS

    def bytes_moved(self, shape: Shape, mode: Mode) -> int:
        m, n = shape
        size = torch.tensor([], dtype=self.dtype).element_size()
        # fwd: read x and weight, write y and the fp32 rstd of every row.
        fwd = (2 * m * n + n) * size + 4 * m
        # bwd: read x, dy, weight and rstd, write dx and dweight.
        bwd = (3 * m * n + 2 * n) * size + 4 * m
        return {Mode.FWD: fwd, Mode.FWD_NO_GRAD: fwd, Mode.BWD: bwd, Mode.FWD_BWD: fwd + bwd}[mode]

    def traffic(self, shape: Shape, mode: Mode) -> dict[str, int]:
        # fwd reads x and writes y (a copy's pattern); bwd reads x and dy and writes dx.
        fwd, bwd = self.bytes_moved(shape, Mode.FWD), self.bytes_moved(shape, Mode.BWD)
        return {Mode.FWD: {"copy": fwd}, Mode.FWD_NO_GRAD: {"copy": fwd}, Mode.BWD: {"read2_write1": bwd},
                Mode.FWD_BWD: {"copy": fwd, "read2_write1": bwd}}[mode]

    def flops(self, shape: Shape, mode: Mode) -> int:
        m, n = shape
        # About 4 flops per element forward (square, sum, scale twice), 8 backward.
        return m * n * {Mode.FWD: 4, Mode.FWD_NO_GRAD: 4, Mode.BWD: 8, Mode.FWD_BWD: 12}[mode]

    def tolerance(self, shape: Shape, tensor: str) -> tuple[float, float]:
        rtol, _ = DEFAULT_TOLERANCES[self.dtype]
        return rtol, rtol * math.sqrt(shape[0])

    def skip_reason(self, backend: Backend) -> str | None:
        return (interpreter_bf16_skip(self.device, self.dtype, backend)
                or peers.skip_reason(backend.name, self.device))

    @register_benchmark(baseline=True)
    def eager(self, x: torch.Tensor, weight: torch.Tensor, eps: float) -> Callable[[], torch.Tensor]:
        return lambda: llama_rms_norm(x, weight, eps)

    @register_benchmark()
    def triton(self, x: torch.Tensor, weight: torch.Tensor, eps: float) -> Callable[[], torch.Tensor]:
        from operators.rms_norm.triton_impl import rms_norm

        return lambda: rms_norm(x, weight, eps)

    @register_benchmark(enabled=False)
    def triton_direct(self, x: torch.Tensor, weight: torch.Tensor, eps: float) -> Callable[[], torch.Tensor]:
        from operators.rms_norm.triton_direct import rms_norm

        return lambda: rms_norm(x, weight, eps)

    @register_benchmark(enabled=False)
    def triton_compiled(
        self, x: torch.Tensor, weight: torch.Tensor, eps: float
    ) -> Callable[[], torch.Tensor]:
        from operators.compile_support import compiled
        from operators.rms_norm.triton_impl import rms_norm

        fn = compiled(rms_norm)
        return lambda: fn(x, weight, eps)

    @register_benchmark()
    def helion(self, x: torch.Tensor, weight: torch.Tensor, eps: float) -> Callable[[], torch.Tensor]:
        from operators.rms_norm.helion_impl import rms_norm

        return lambda: rms_norm(x, weight, eps)

    @register_benchmark(enabled=False)
    def helion_op(self, x: torch.Tensor, weight: torch.Tensor, eps: float) -> Callable[[], torch.Tensor]:
        from operators.rms_norm.helion_ops import rms_norm

        return lambda: rms_norm(x, weight, eps)

    @register_benchmark(enabled=False)
    def helion_compiled(
        self, x: torch.Tensor, weight: torch.Tensor, eps: float
    ) -> Callable[[], torch.Tensor]:
        from operators.compile_support import compiled
        from operators.rms_norm.helion_ops import rms_norm

        fn = compiled(rms_norm)
        return lambda: fn(x, weight, eps)

    @register_benchmark()
    def torch_compile(
        self, x: torch.Tensor, weight: torch.Tensor, eps: float
    ) -> Callable[[], torch.Tensor]:
        from operators.compile_support import compiled

        fn = compiled(llama_rms_norm)
        return lambda: fn(x, weight, eps)

    # --- peers: other libraries' kernels (operators/rms_norm/peers.py) -------------------
    @register_benchmark()
    def liger(self, x: torch.Tensor, weight: torch.Tensor, eps: float) -> Callable[[], torch.Tensor]:
        return lambda: peers.liger_rms_norm(x, weight, eps)

    @register_benchmark()
    def quack(self, x: torch.Tensor, weight: torch.Tensor, eps: float) -> Callable[[], torch.Tensor]:
        peers.check_quack_width(x)
        return lambda: peers.quack_rms_norm(x, weight, eps)

    @register_benchmark()
    def torch_rms_norm(self, x: torch.Tensor, weight: torch.Tensor,
                       eps: float) -> Callable[[], torch.Tensor]:
        return lambda: peers.torch_rms_norm(x, weight, eps)
