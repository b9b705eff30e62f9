"""The rms_norm peers: skipped with their reason where they cannot run, PyTorch's matching the
reference, and Liger called so that it leaves ``dy`` alone."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from harness.operator import Mode
from operators import peers_support
from operators.rms_norm import peers
from operators.rms_norm.operator import RMSNormOperator
from tests.helpers import assert_accurate, run_cells

SHAPE = (9, 200)
RUNNING = ["eager", "triton", "torch_rms_norm"]


def test_absent_peers_are_skipped_with_their_reason_and_the_others_run(monkeypatch) -> None:
    monkeypatch.setattr(peers_support, "installed", lambda module: False)
    op = RMSNormOperator("cpu", torch.float32)
    cells = run_cells(op, Mode.FWD_BWD, SHAPE, ["accuracy", "latency"], [*RUNNING, "liger", "quack"])
    expected = {"liger": "liger-kernel is not installed (pip install -e '.[peers]')",
                "quack": "quack-kernels is not installed (pip install -e '.[peers]')"}
    for peer, reason in expected.items():
        for metric in ("accuracy", "latency"):
            assert cells[(peer, metric)].status == "skipped"
            assert cells[(peer, metric)].error == reason
    assert_accurate(cells, RUNNING)


def test_installed_peers_name_the_device_they_need(monkeypatch) -> None:
    monkeypatch.setattr(peers_support, "installed", lambda module: True)
    op = RMSNormOperator("cpu", torch.float32)
    reasons = {b.name: op.skip_reason(b) for b in op.backends()}
    assert reasons["liger"].startswith("liger needs a GPU")
    assert reasons["quack"] == "quack needs an sm_90+ GPU"
    assert reasons["torch_rms_norm"] is None


def test_peers_are_backends_of_rms_norm_after_the_four() -> None:
    """A default sweep runs the four implementations, then the peers (the dispatch and compiled
    variants only when ``--only`` names them)."""
    names = [b.name for b in RMSNormOperator.backends() if b.enabled]
    assert names == ["eager", "triton", "helion", "torch_compile", "liger", "quack", "torch_rms_norm"]


@pytest.mark.parametrize("mode", list(Mode), ids=[m.value for m in Mode])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_torch_rms_norm_matches_reference(mode: Mode, dtype: torch.dtype) -> None:
    op = RMSNormOperator("cpu", dtype)
    assert_accurate(run_cells(op, mode, SHAPE, ["accuracy"], ["eager", "torch_rms_norm"]), ["torch_rms_norm"])


def test_liger_is_called_positionally_in_llama_mode_without_in_place(monkeypatch) -> None:
    """``apply`` takes no keywords, and Liger's default ``in_place=True`` writes dx into dy."""
    calls = []
    function = types.SimpleNamespace(apply=lambda *args: calls.append(args) or args[0])
    fake = types.ModuleType("liger_kernel.ops.rms_norm")
    fake.LigerRMSNormFunction = function
    monkeypatch.setitem(sys.modules, "liger_kernel.ops.rms_norm", fake)
    x, weight = torch.randn(4, 8), torch.ones(8)
    peers.liger_rms_norm(x, weight, 1e-6)
    assert calls == [(x, weight, 1e-6, 0.0, "llama", False)]


def _liger_runs_here() -> str | None:
    return peers.skip_reason("liger", "cuda" if torch.cuda.is_available() else "cpu")


@pytest.mark.skipif(_liger_runs_here() is not None, reason=str(_liger_runs_here()))
def test_liger_backward_leaves_dy_unchanged_and_matches_reference() -> None:
    op = RMSNormOperator("cuda", torch.float32)
    x, weight, eps = op.make_inputs((64, 200))
    x.requires_grad_(True)
    weight.requires_grad_(True)
    dy = torch.randn_like(x)
    drawn = dy.clone()
    y = peers.liger_rms_norm(x, weight, eps)
    y.backward(dy)
    assert torch.equal(dy, drawn)
    x64 = x.detach().double().requires_grad_(True)
    w64 = weight.detach().double().requires_grad_(True)
    expected = w64 * (x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps))
    expected.backward(dy.double())
    torch.testing.assert_close(y.double(), expected, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(x.grad.double(), x64.grad, rtol=1e-4, atol=1e-4)


WIDTHS = [(3001, torch.float16, False), (1000, torch.float32, True),
          (4100, torch.bfloat16, False), (4096, torch.bfloat16, True)]


@pytest.mark.parametrize(("n", "dtype", "aligned"), WIDTHS)
def test_quack_refuses_widths_that_break_16_byte_alignment(n: int, dtype: torch.dtype, aligned: bool) -> None:
    x = torch.empty(2, n, dtype=dtype)
    if aligned:
        peers.check_quack_width(x)
    else:
        with pytest.raises(ValueError, match="quack: N must keep 16-byte alignment"):
            peers.check_quack_width(x)
