"""The bandwidth ceilings: each pattern's Triton kernel moves the right values, and a ceiling is
the fastest of its pattern's calls."""

from __future__ import annotations

import pytest
import torch

from harness.measure import ceilings
from harness.measure.ceiling_kernels import BLOCK, pattern_call
from harness.metrics.cell_data import SampleStats
from harness.settings import TimerSettings


@pytest.mark.parametrize("numel", [BLOCK, 2 * BLOCK + 477])
def test_pattern_kernels_compute_what_their_pytorch_calls_do(numel: int) -> None:
    a, b = torch.randn(numel), torch.randn(numel)
    for name, inputs, expected in [("copy", (a,), a), ("read2_write1", (a, b), a + b)]:
        call, out = pattern_call(name, inputs)
        call()
        torch.testing.assert_close(out, expected, rtol=0, atol=0)
    call, partials = pattern_call("read", (a,))
    call()
    assert partials.numel() == -(-numel // BLOCK)
    torch.testing.assert_close(partials.double().sum(), a.double().sum(), rtol=1e-6, atol=1e-4)
    torch.testing.assert_close(partials[-1], a[(partials.numel() - 1) * BLOCK:].sum(), rtol=1e-5, atol=1e-5)


def test_a_ceiling_is_the_fastest_of_its_patterns_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    slow, fast = (lambda: None), (lambda: None)
    monkeypatch.setattr(ceilings, "_pattern_calls", lambda name, numel, device: ([slow, fast], 4e9))

    class Timer:
        def measure(self, call):
            ms = 2.0 if call is slow else 1.0
            return SampleStats(ms, ms, ms, 10)

    assert ceilings._best_gbps("copy", 1, "cuda", Timer()) == pytest.approx(4000.0)


def test_traffic_ceilings_are_measured_for_the_patterns_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = []
    monkeypatch.setattr(ceilings, "_best_gbps", lambda name, numel, device, timer: asked.append(name) or 1.0)
    settings = TimerSettings.default("cpu")
    assert ceilings.measure_traffic_gbps("cpu", settings, ("copy",)) == {"copy": 1.0}
    assert asked == ["copy"]
    assert set(ceilings.measure_traffic_gbps("cpu", settings)) == set(ceilings.TRAFFIC_PATTERNS)
