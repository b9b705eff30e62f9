"""rms_norm checks that need a GPU, each in a process of its own set up for it (skipped without one)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the parts of a row wait for each other")
def test_row_split_parts_meet_on_the_gpu():
    # The session runs Triton's interpreter (conftest); the check needs compiled kernels.
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "HELION_AUTOTUNE_EFFORT")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), env.get("PYTHONPATH"))))
    check = subprocess.run([sys.executable, str(ROOT / "tests" / "gpu_checks" / "rms_norm_row_split.py")],
                           env=env, capture_output=True, text=True, timeout=600)
    assert check.returncode == 0, check.stdout + check.stderr
