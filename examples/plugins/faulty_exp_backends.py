"""Example plugin: extra ``exp`` backends, one correct and several broken in ways the harness catches.

    python run.py --op exp --plugin examples/plugins/faulty_exp_backends.py --isolate --timeout 60

Each broken backend (a crash, an exception, a wrong result, a modified input, a hang, a failure
in a later repeat) fails only its own cell; the suite's tests run them.
"""

import atexit
import os
import signal
import time
from collections.abc import Callable

import torch

from harness.operator import BenchmarkOperator, register_benchmark


@register_benchmark(operator="exp")
def exp_via_exp2(self: BenchmarkOperator, x: torch.Tensor) -> Callable[[], torch.Tensor]:
    return lambda: torch.exp2(x * 1.4426950408889634)


@register_benchmark(operator="exp")
def kills_itself(self: BenchmarkOperator, x: torch.Tensor) -> Callable[[], torch.Tensor]:
    def crash():
        os.kill(os.getpid(), signal.SIGKILL)
    return crash


@register_benchmark(operator="exp")
def raises(self: BenchmarkOperator, x: torch.Tensor) -> Callable[[], torch.Tensor]:
    def fail():
        raise RuntimeError("illegal memory access (simulated)")
    return fail


@register_benchmark(operator="exp")
def wrong_result(self: BenchmarkOperator, x: torch.Tensor) -> Callable[[], torch.Tensor]:
    return lambda: torch.exp(x) + 1.0


@register_benchmark(operator="exp")
def modifies_input(self: BenchmarkOperator, x: torch.Tensor) -> Callable[[], torch.Tensor]:
    def scribble():
        x.data.mul_(1.5)
        return torch.exp(x)
    return scribble


@register_benchmark(operator="exp")
def hangs(self: BenchmarkOperator, x: torch.Tensor) -> Callable[[], torch.Tensor]:
    def sleep():
        time.sleep(600)
    return sleep


@register_benchmark(operator="exp")
def fails_in_second_repeat(self: BenchmarkOperator, x: torch.Tensor) -> Callable[[], torch.Tensor]:
    """Correct for its first 15 calls, then raises: with ``--warmup 0 --rep 0`` a repeat is 11
    calls (an estimate and 10 samples), so the first repeat finishes and a later one fails."""
    calls = 0

    def flaky():
        nonlocal calls
        calls += 1
        if calls > 15:
            raise RuntimeError("device lost (simulated)")
        return torch.exp(x)
    return flaky


@register_benchmark(operator="exp")
def hangs_after_first_call(self: BenchmarkOperator, x: torch.Tensor) -> Callable[[], torch.Tensor]:
    """Right on its first call, then hangs: a hang while timing (``--timeout``)."""
    calls = 0

    def call():
        nonlocal calls
        calls += 1
        if calls > 1:
            time.sleep(600)
        return torch.exp(x)
    return call


@register_benchmark(operator="exp")
def slow_setup(self: BenchmarkOperator, x: torch.Tensor) -> Callable[[], torch.Tensor]:
    """Takes 8 s to set up (as a compile would), then runs fast: within ``--startup-timeout``."""
    time.sleep(8)
    return lambda: torch.exp(x)


@register_benchmark(operator="exp")
def poisons_context(self: BenchmarkOperator, x: torch.Tensor) -> Callable[[], torch.Tensor]:
    """Fails with the message of a sticky CUDA error, as an out-of-bounds kernel would on a GPU."""
    def fail():
        raise RuntimeError("CUDA error: an illegal memory access was encountered (simulated)")
    return fail


@register_benchmark(operator="exp")
def dies_on_rank_1(self: BenchmarkOperator, x: torch.Tensor) -> Callable[[], torch.Tensor]:
    """Kills its process when run by torchrun's rank 1 (a crash in one GPU's kernel)."""
    def call():
        if os.environ.get("RANK") == "1":
            os.kill(os.getpid(), signal.SIGKILL)
        return torch.exp(x)
    return call


@register_benchmark(operator="exp")
def hangs_on_rank_1(self: BenchmarkOperator, x: torch.Tensor) -> Callable[[], torch.Tensor]:
    """Hangs when run by torchrun's rank 1 (a GPU that stops answering)."""
    def call():
        if os.environ.get("RANK") == "1":
            time.sleep(600)
        return torch.exp(x)
    return call


@register_benchmark(operator="exp")
def slow_to_exit(self: BenchmarkOperator, x: torch.Tensor) -> Callable[[], torch.Tensor]:
    """Healthy, but its process takes 30 s to exit (as a worker's interpreter shutdown can, after
    torch.compile or Helion): the cell's ``--timeout`` ends with its result, not its exit."""
    atexit.register(time.sleep, 30)
    return lambda: torch.exp(x)
