"""Example plugin: replaces ``exp``'s baseline backend ``eager`` with another implementation
(which stays the baseline that ``speedup`` divides by)."""

from collections.abc import Callable

import torch

from harness.operator import BenchmarkOperator, register_benchmark


@register_benchmark(operator="exp")
def eager(self: BenchmarkOperator, x: torch.Tensor) -> Callable[[], torch.Tensor]:
    return lambda: torch.exp2(x * 1.4426950408889634)
