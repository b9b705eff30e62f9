"""``run.py tune`` stores only the fastest candidate whose outputs match Helion's default config.

Runs the real exp Helion kernel through Triton's CPU interpreter with the CPU timer.
"""

from __future__ import annotations

import helion
import torch

from harness.device import prepare_backends
from harness.settings import TimerSettings
from harness.timing import make_timer
from harness.tuning.configs import TuningJob
from harness.tuning.tuner import tune_job
from operators.exp import helion_impl
from tests.helpers import run_cli

CANDIDATES = [helion.Config(block_sizes=[block, block], num_warps=4, num_stages=1) for block in (512, 1024)]


class _OffByOneFor:
    """Wraps a Helion kernel so that one block size returns ``exp(x) + 1``: a miscompiled config."""

    def __init__(self, kernel: object, block: int, leave_unwritten: bool = False):
        self.kernel, self.block, self.leave_unwritten = kernel, block, leave_unwritten

    def bind(self, args: tuple) -> _OffByOneFor:
        self.bound = self.kernel.bind(args)
        self.config_spec = self.bound.config_spec
        return self

    def set_config(self, config: helion.Config) -> None:
        self.bad = config.config["block_sizes"] == [self.block, self.block]
        self.bound.set_config(config)

    def __call__(self, *args: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.bad and self.leave_unwritten:
            return args[1], args[3]
        result = self.bound(*args)
        return tuple(out + 1 for out in result) if self.bad else result


def _job(kernel: object) -> TuningJob:
    x = torch.randn(helion_impl.ALIGN + 3000)
    return TuningJob(kernel=kernel, key="exp_fwd|float32|test",
                     make_args=lambda: helion_impl.split_at_bulk(x, torch.empty_like(x)),
                     candidates=CANDIDATES)


def test_tune_times_every_correct_candidate_and_keeps_the_fastest() -> None:
    prepare_backends("cpu")
    best, log = tune_job(_job(helion_impl.exp_fwd), make_timer("cpu", TimerSettings(warmup_ms=0, rep_ms=0)))
    assert best is not None and best["block_sizes"] in ([512, 512], [1024, 1024])
    assert sum(" us " in line for line in log) == 2


def test_tune_rejects_a_candidate_whose_output_is_wrong_or_unwritten() -> None:
    prepare_backends("cpu")
    for leave_unwritten in (False, True):
        kernel = _OffByOneFor(helion_impl.exp_fwd, 1024, leave_unwritten)
        best, log = tune_job(_job(kernel), make_timer("cpu", TimerSettings(warmup_ms=0, rep_ms=0)))
        assert best["block_sizes"] == [512, 512]
        rejected = [line for line in log if "differs from the default config's" in line]
        assert len(rejected) == 1 and "[1024, 1024]" in rejected[0]


def test_tune_without_a_gpu_is_refused_in_one_line() -> None:
    result = run_cli("tune", "--op", "exp")
    assert result.returncode == 2
    assert result.stderr.strip() == "run.py: error: tune needs a GPU (stored configs are per GPU model)"
