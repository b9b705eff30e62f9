"""The run header of a result file: when, which code (commit and source digest), which machine,
driver and package versions, and which command."""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from harness.report.source_digest import source_digest


def _package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _git_commit() -> str | None:
    """The checked-out commit; ``OPBENCH_GIT_COMMIT`` names it where the tree has no git history."""
    if os.environ.get("OPBENCH_GIT_COMMIT"):
        return os.environ["OPBENCH_GIT_COMMIT"]
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
            cwd=Path(__file__).resolve().parent,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and len(commit) == 40 else None


def _cpu_model() -> str | None:
    """The CPU's model name from ``/proc/cpuinfo`` (Linux), e.g. ``AMD EPYC 9654``."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            names = (line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
            return next(names, None)
    except OSError:
        return None


def make_header(device: str, argv: list[str], device_facts: dict[str, Any]) -> dict[str, Any]:
    """The run header: when, which code, which machine and versions, which command."""
    if device == "cuda":
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        device_name = props.name
        driver = _nvidia_driver()
    else:
        device_name = _cpu_model() or platform.processor() or platform.machine()
        driver = None
    return {
        "date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": _git_commit(),
        "source_digest": source_digest(),
        "device": device,
        "device_name": device_name,
        "driver": driver,
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "triton": _package_version("triton"),
        "helion": _package_version("helion"),
        "python": platform.python_version(),
        "command": " ".join(argv),
        **device_facts,
    }


def _nvidia_driver() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().splitlines()[0] if out.stdout.strip() else None


def python_argv() -> list[str]:
    """This process's command line as the header records it: the script's name, then its arguments."""
    return [Path(sys.argv[0]).name, *sys.argv[1:]]
