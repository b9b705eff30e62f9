"""Example plugin: benchmark your own kernel without editing the suite.

    python run.py --op exp --plugin examples/plugins/slow_exp.py --only eager,my_exp

``my_exp`` runs ``torch.exp`` ``OPBENCH_EXP_REPEAT`` times (default 1): setting it to 2 in a
second run makes the backend measurably slower, which ``run.py compare`` must flag as a
regression in exactly that backend's cells.
"""

import os

import torch

from harness.operator import register_benchmark


@register_benchmark(operator="exp")
def my_exp(self, x: torch.Tensor):
    repeat = int(os.environ.get("OPBENCH_EXP_REPEAT", "1"))

    def run() -> torch.Tensor:
        y = torch.exp(x)
        for _ in range(repeat - 1):
            y = torch.exp(x)
        return y

    return run
