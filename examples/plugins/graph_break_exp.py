"""Example plugin: an ``exp`` backend compiled as the ``*_compiled`` backends are
(``torch.compile(fullgraph=True)``) around a call that Dynamo cannot trace whole.

    python run.py --op exp --plugin examples/plugins/graph_break_exp.py \
        --only eager,triton_compiled,graph_break

Its cells fail with Dynamo's reason for the break; every other cell runs.
"""

from collections.abc import Callable

import torch

from harness.operator import BenchmarkOperator, register_benchmark
from operators.compile_support import compiled


def _exp_with_a_break(x: torch.Tensor) -> torch.Tensor:
    torch._dynamo.graph_break()
    return torch.exp(x)


@register_benchmark(operator="exp")
def graph_break(self: BenchmarkOperator, x: torch.Tensor) -> Callable[[], torch.Tensor]:
    fn = compiled(_exp_with_a_break)
    return lambda: fn(x)
