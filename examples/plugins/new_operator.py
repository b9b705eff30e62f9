"""Example plugin: a whole new operator, ``scale2`` (y = 2x), with two backends.

    python run.py --plugin examples/plugins/new_operator.py --op scale2
"""

import torch

from harness.operator import BenchmarkOperator, Mode, register_benchmark
from harness.registry import register_operator


@register_operator
class Scale2(BenchmarkOperator):
    """Doubling a vector; x_val is the number of elements."""

    name = "scale2"
    x_val_label = "numel"

    def default_shapes(self):
        return [(1000,), (4097,)]

    def make_inputs(self, shape):
        return (torch.randn(shape, device=self.device, dtype=self.dtype),)

    def bytes_moved(self, shape, mode):
        return 2 * shape[0] * 4 if mode in (Mode.FWD, Mode.FWD_NO_GRAD) else None

    @register_benchmark(baseline=True)
    def eager(self, x):
        return lambda: x * 2

    @register_benchmark()
    def added(self, x):
        return lambda: x + x
