"""``TORCH_TRACE``: a compiled backend's structured compile logs (what ``tlparse`` reads) land in its
folder, under ``--isolate`` in a folder per cell."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import run_cli


@pytest.mark.parametrize("isolate, folder", [(False, ""), (True, "exp_fwd_100_torch_compile")])
def test_torch_trace_writes_the_compile_logs_of_a_compiled_cell(tmp_path: Path, isolate: bool,
                                                                folder: str) -> None:
    result = run_cli("--op", "exp", "--shape", "100", "--only", "torch_compile", "--metrics", "accuracy",
                     "--no-save", *(["--isolate"] if isolate else []),
                     env={**os.environ, "TORCH_TRACE": str(tmp_path)})
    assert result.returncode == 0, result.stdout + result.stderr
    logs = list((tmp_path / folder).glob("dedicated_log_torch_trace_*.log"))
    assert len(logs) == 1 and '"dynamo_start"' in logs[0].read_text()
