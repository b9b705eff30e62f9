"""rms_norm checks of compiled (not interpreted) kernels, each in a process of its own.

The test session runs Triton's CPU interpreter (``conftest.py``), and Triton reads that when
kernels are imported; the scripts in ``tests/gpu_checks`` run in a fresh process without it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def run_check(script: str) -> subprocess.CompletedProcess:
    """Run ``tests/gpu_checks/<script>`` in a fresh process, without the interpreter."""
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "HELION_AUTOTUNE_EFFORT")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), env.get("PYTHONPATH"))))
    return subprocess.run([sys.executable, str(ROOT / "tests" / "gpu_checks" / script)],
                          env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the parts of a row wait for each other")
def test_row_split_parts_meet_on_the_gpu():
    check = run_check("rms_norm_row_split.py")
    assert check.returncode == 0, check.stdout + check.stderr


def test_default_backward_plans_compile_for_sm90_within_shared_memory():
    # The four-stage 8192-wide plan once went to fp32 rows too, which need 288 KiB of shared memory.
    check = run_check("rms_norm_plans_fit_sm90.py")
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.count("B of shared memory") == 15, check.stdout
