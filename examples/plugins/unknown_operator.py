"""Example plugin that cannot load: it adds a backend to an operator that does not exist
(``run.py`` refuses it in one line)."""

from collections.abc import Callable

import torch

from harness.operator import BenchmarkOperator, register_benchmark


@register_benchmark(operator="expp")
def fast(self: BenchmarkOperator, x: torch.Tensor) -> Callable[[], torch.Tensor]:
    return lambda: x
