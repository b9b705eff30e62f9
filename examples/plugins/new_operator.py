"""Example plugin: a whole new operator, ``scale2`` (y = 2x), with two backends.

    python run.py --plugin examples/plugins/new_operator.py --op scale2
"""

from collections.abc import Callable

import torch

from harness.operator import BenchmarkOperator, Mode, Shape, register_benchmark
from harness.registry import register_operator


@register_operator
class Scale2(BenchmarkOperator):
    """Doubling a vector; x_val is the number of elements."""

    name = "scale2"
    x_val_label = "numel"

    def default_shapes(self) -> list[Shape]:
        return [(1000,), (4097,)]

    def make_inputs(self, shape: Shape) -> tuple[torch.Tensor]:
        return (torch.randn(shape, device=self.device, dtype=self.dtype),)

    def bytes_moved(self, shape: Shape, mode: Mode) -> int | None:
        """x read and y written once forward; the backward's bytes are not modelled."""
        return 2 * shape[0] * self.dtype.itemsize if mode in (Mode.FWD, Mode.FWD_NO_GRAD) else None

    @register_benchmark(baseline=True)
    def eager(self, x: torch.Tensor) -> Callable[[], torch.Tensor]:
        return lambda: x * 2

    @register_benchmark()
    def added(self, x: torch.Tensor) -> Callable[[], torch.Tensor]:
        return lambda: x + x
