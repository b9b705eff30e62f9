"""Example plugin: benchmark your own kernel without editing the suite.

    python run.py --op exp --plugin examples/plugins/slow_exp.py --only eager,my_exp

``my_exp`` is ``torch.exp`` followed by ``torch.exp`` again over the first
``OPBENCH_EXP_SLOWDOWN`` fraction of its input (default 0: no second call): the call moves that
fraction more bytes, so at large, memory-bound sizes it takes about that much longer (0.07:
about 7%; 1: about twice), and at small sizes the second launch adds its own microseconds.  A
second run with the variable set is how to try the regression gate: ``run.py compare`` must
flag exactly that backend's cells.
"""

import math
import os
from collections.abc import Callable

import torch

from harness.operator import BenchmarkOperator, register_benchmark


@register_benchmark(operator="exp")
def my_exp(self: BenchmarkOperator, x: torch.Tensor) -> Callable[[], torch.Tensor]:
    extra = math.ceil(x.numel() * float(os.environ.get("OPBENCH_EXP_SLOWDOWN", "0")))
    if extra == 0:
        return lambda: torch.exp(x)
    head = x.detach().reshape(-1)[:extra]
    scratch = torch.empty_like(head)

    def run() -> torch.Tensor:
        y = torch.exp(x)
        torch.exp(head, out=scratch)
        return y

    return run
