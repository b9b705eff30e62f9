"""Under ``--cudagraph`` the check of a timed call replays a captured graph, as the timer does: a
backend that is right when called but wrong inside a capture fails."""

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
'''


def test_a_backend_wrong_only_in_its_captured_graph_fails(tmp_path: Path) -> None:
    plugin, out = tmp_path / "captured.py", tmp_path / "r.json"
    plugin.write_text(PLUGIN)
    result = run_cli("--plugin", str(plugin), "--op", "exp", "--mode", "fwd_no_grad", "--shape", "65536",
                     "--cudagraph", "--only", "eager,wrong_when_captured", "--metrics", "accuracy,latency",
                     "--output-json", str(out))
    assert result.returncode == 1, result.stdout + result.stderr
    accuracy = {r.backend: r for r in read_json(out)[1] if r.metric == "accuracy"}
    assert accuracy["eager"].value == 1.0
    assert accuracy["wrong_when_captured"].value == 0.0
    assert accuracy["wrong_when_captured"].note.startswith("in a timed call")
