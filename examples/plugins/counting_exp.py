"""Example plugin: an ``exp`` backend that counts its calls, to see how often a run calls a kernel.

    OPBENCH_COUNT_FILE=n.txt python run.py --op exp --plugin examples/plugins/counting_exp.py --only counted

``counted`` is ``torch.exp``; each call appends one ``.`` to the file that the environment
variable ``OPBENCH_COUNT_FILE`` names (required; the variable reaches ``--isolate`` workers too),
so the file's length is the number of calls.  The suite's tests check with it that an accuracy
run calls a backend only for its two checks.
"""

import os
from collections.abc import Callable
from pathlib import Path

import torch

from harness.operator import BenchmarkOperator, register_benchmark


@register_benchmark(operator="exp")
def counted(self: BenchmarkOperator, x: torch.Tensor) -> Callable[[], torch.Tensor]:
    count = Path(os.environ["OPBENCH_COUNT_FILE"])

    def call() -> torch.Tensor:
        with count.open("a") as f:
            f.write(".")
        return torch.exp(x)

    return call
