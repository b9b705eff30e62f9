"""Under ``--cudagraph`` the check of a timed call replays a captured graph, as the timer does: a
backend that is right when called but wrong inside a capture fails, forward or backward, and so
does a graph that replays a result stashed before its capture."""

from __future__ import annotations

from pathlib import Path

from harness.report.results import read_json
from tests.helpers import run_cli

PLUGIN = '''
import torch
from harness.operator import register_benchmark


@register_benchmark(operator="exp")
def wrong_when_captured(self, x):
    return lambda: torch.empty_like(x) if torch.cuda.is_current_stream_capturing() else torch.exp(x)


class ExpWrongBackwardWhenCaptured(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        return torch.empty_like(dy) if torch.cuda.is_current_stream_capturing() else dy * y


@register_benchmark(operator="exp")
def wrong_backward_when_captured(self, x):
    return lambda: ExpWrongBackwardWhenCaptured.apply(x)


@register_benchmark(operator="exp")
def replays_a_stash(self, x):
    stash = {}

    def call():
        if torch.cuda.is_current_stream_capturing():
            return stash["y"].clone()
        stash["y"] = torch.exp(x)
        return stash["y"]
    return call
'''


def run_graphed(tmp_path: Path, mode: str, shape: str, backends: str) -> dict:
    """Run the plugin's backends under ``--cudagraph``; one of them must fail (exit 1): the
    records by (backend, metric)."""
    plugin, out = tmp_path / "captured.py", tmp_path / "r.json"
    plugin.write_text(PLUGIN)
    result = run_cli("--plugin", str(plugin), "--op", "exp", "--mode", mode, "--shape", shape,
                     "--cudagraph", "--only", backends, "--metrics", "accuracy,latency",
                     "--output-json", str(out))
    assert result.returncode == 1, result.stdout + result.stderr
    return {(r.backend, r.metric): r for r in read_json(out)[1]}


def test_a_backend_wrong_only_in_its_captured_graph_fails(tmp_path: Path) -> None:
    records = run_graphed(tmp_path, "fwd_no_grad", "65536", "eager,wrong_when_captured,replays_a_stash")
    accuracy = {backend: r for (backend, metric), r in records.items() if metric == "accuracy"}
    assert accuracy["eager"].value == 1.0
    assert accuracy["wrong_when_captured"].value == 0.0
    assert accuracy["wrong_when_captured"].note.startswith("in a timed call")
    assert accuracy["replays_a_stash"].value == 0.0
    assert accuracy["replays_a_stash"].note.startswith("in a timed call")


def test_forward_backward_replays_its_captured_graph_and_is_checked(tmp_path: Path) -> None:
    records = run_graphed(tmp_path, "fwd_bwd", "65537", "eager,triton,wrong_backward_when_captured")
    for backend in ("eager", "triton"):
        assert records[backend, "accuracy"].value == 1.0, records[backend, "accuracy"].note
        assert records[backend, "latency"].value > 0
    wrong = records["wrong_backward_when_captured", "accuracy"]
    assert wrong.value == 0.0
    assert wrong.note.startswith("in a timed call")
