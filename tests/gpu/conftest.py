"""Tests of compiled kernels on a GPU: skipped where there is none, where this process runs
Triton's CPU interpreter (a whole-suite run does: its kernels were set up for the interpreter), or
in a pytest-xdist worker (workers sharing the GPU would skew the timings these tests check)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from harness.device import prepare_backends

HERE = Path(__file__).parent
REASON = "run `python -m pytest tests/gpu` on its own (no -n) on a GPU machine"


def _runnable() -> bool:
    return (torch.cuda.is_available() and "TRITON_INTERPRET" not in os.environ
            and "PYTEST_XDIST_WORKER" not in os.environ)


def pytest_sessionstart(session: pytest.Session) -> None:
    if _runnable():
        prepare_backends("cuda")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _runnable():
        return
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.skip(reason=REASON))
