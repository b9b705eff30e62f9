"""What the gemm probes share: their dtype and timer, and a log that checks each variant
against float64, times it and rewrites the probe's JSON after every variant (so a probe stopped
early keeps what it finished)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence

import torch
import triton

from harness.device import prepare_backends
from harness.settings import TimerSettings
from harness.timing import make_timer
from operators.gemm.triton_configs import NO_BIAS
from operators.gemm.triton_dispatch import Kernel, Plan
from operators.gemm.triton_impl import tiled_matmul
from operators.gemm.triton_splitk import split_k_matmul

DTYPE = torch.bfloat16
"""The dtype every gemm probe runs in."""
TIMER = TimerSettings(warmup_ms=5, rep_ms=25)
"""The budgets every gemm probe times with (flushed, as the benchmark)."""

Run = Callable[[str, Callable[[], torch.Tensor]], None]
"""Check one variant's call against float64 and time it: ``run(variant, call)``."""


class VariantLog:
    """The records of a probe on the GPU, written to ``out`` after each variant."""

    def __init__(self, out: str):
        prepare_backends("cuda")
        self.timer = make_timer("cuda", TIMER)
        self.out = out
        self.records: list[dict] = []

    def runner(self, shape: str, want: torch.Tensor, flop: float) -> Run:
        """The ``run`` of one shape, whose float64 result is ``want``.

        A variant is timed, then called once more and checked, and that output is then filled
        with NaN: the memory the next variant's output may reuse holds no right answer, so a
        kernel that writes nothing fails its check.
        """
        def run(variant: str, call: Callable[[], torch.Tensor]) -> None:
            record: dict = {"shape": shape, "variant": variant}
            try:
                record["us"] = self.timer.measure(call).p50 * 1e3
                record["tflops"] = flop / record["us"] / 1e6
                got = call()
                record["max_abs_err"] = (got.double() - want).abs().max().item()
                got.fill_(float("nan"))
            except Exception as exc:  # a variant's failure is its record's, never the probe's
                record["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
            self.records.append(record)
            print(json.dumps(record), flush=True)
            with open(self.out, "w") as f:
                json.dump({"device": torch.cuda.get_device_name(), "records": self.records}, f, indent=1)
        return run


def split_k_call(a: torch.Tensor, b: torch.Tensor, plan: Plan,
                 config: triton.Config | None) -> Callable[[], torch.Tensor]:
    """``a @ b`` on Triton's split-K kernel as ``plan`` says, on ``config`` (None: the
    autotuner's pick), into an output of its own that starts as NaN."""
    out = torch.full((a.shape[0], b.shape[1]), float("nan"), device=a.device, dtype=a.dtype)

    def call() -> torch.Tensor:
        split_k_matmul(a, b, out, NO_BIAS, None, 1.0, 0.0, "tf32", plan, config)
        return out
    return call


def tiled_into(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, kernel: Kernel,
               config: triton.Config | None) -> torch.Tensor:
    """``out = a @ b`` on Triton's tiled ``kernel`` (TMA or pointer), whatever the plan of the
    shape, on ``config`` (None: the autotuner's pick)."""
    tiled_matmul(a, b, out, NO_BIAS, None, 1.0, 0.0, "tf32", kernel, config)
    return out


def plan_label(plan: Plan) -> str:
    """The kernel a plan runs, with its K parts when it splits K."""
    return f"{plan.kernel.value}, {plan.split_k} parts" if plan.split_k > 1 else plan.kernel.value


def operand(rows: int, cols: int, transposed: bool) -> torch.Tensor:
    """A random (rows, cols) operand, row-major or a transposed view of a row-major one."""
    if transposed:
        return torch.randn(cols, rows, device="cuda", dtype=DTYPE).mT
    return torch.randn(rows, cols, device="cuda", dtype=DTYPE)


def probe_matmuls(doc: str, shapes: Sequence[str],
                  probe_shape: Callable[[torch.Tensor, torch.Tensor, Run], None]) -> None:
    """A probe's command line: ``--out FILE`` and shapes ``M,N,K`` (default ``shapes``), where
    ``,t`` reads B through a transposed view (the backward's ``grad @ w.T``) and ``,ta`` reads
    A so (``a.T @ grad``); ``probe_shape`` runs the variants of each, logged to FILE."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--shape", action="append", help=f"M,N,K[,t|,ta] (default: {' '.join(shapes)})")
    args = parser.parse_args()
    log = VariantLog(args.out)
    for text in args.shape or shapes:
        m, n, k = map(int, text.split(",")[:3])
        a, b = operand(m, k, text.endswith(",ta")), operand(k, n, text.endswith(",t"))
        probe_shape(a, b, log.runner(text, a.double() @ b.double(), 2.0 * m * n * k))
