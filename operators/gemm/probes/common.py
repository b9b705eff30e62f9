"""What the gemm probes share: their dtype and timer, and a log that checks each variant
against float64, times it and rewrites the probe's JSON after every variant (so a probe stopped
early keeps what it finished)."""

from __future__ import annotations

import json
from collections.abc import Callable

import torch

from harness.device import prepare_backends
from harness.settings import TimerSettings
from harness.timing import make_timer

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
