"""Synthetic result files for the ``run.py compare`` tests, and running the gate on them.

Each cell's repeats are 7 repeat medians drawn around 1 ms with 0.5% relative noise (a fixed
seed per file), as ``run.py --repeats 7`` records them on a quiet GPU.  Baseline and current
draws are independent, like two CI runs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.cli import main as cli
from harness.report.results import Record, write_json

DEVICE = "NVIDIA H200"


X_VALS = (4096, 65536, 1048576)


BACKENDS = ("eager", "triton", "helion", "torch_compile")


CellId = tuple[str, str]  # (x_val as shown, backend)


def sweep(seed: int, scale: dict[str, float] | None = None, noise: dict[str, float] | None = None,
          ms: float = 1.0, repeats: int = 7, x_vals: tuple[int, ...] = X_VALS) -> list[Record]:
    """Accuracy and latency records of every (x_val, backend); ``scale`` slows backends down."""
    rng = np.random.default_rng(seed)
    records = []
    for x_val in x_vals:
        for backend in BACKENDS:
            factor = (scale or {}).get(backend, 1.0)
            medians = ms * factor * rng.normal(1.0, (noise or {}).get(backend, 0.005), repeats)
            common = dict(op="exp", mode="fwd", dtype="bfloat16", x_val=x_val, backend=backend)
            records.append(Record(**common, metric="accuracy", value=1.0, unit="bool"))
            records.append(Record(**common, metric="latency", value=float(np.median(medians)), unit="ms",
                                  repeats=[float(m) for m in medians]))
    return records


def find(records: list[Record], x_val: int, backend: str, metric: str) -> Record:
    return next(r for r in records if (r.x_val, r.backend, r.metric) == (x_val, backend, metric))


HEADER = {"device": "cuda", "device_name": DEVICE, "git_commit": "0" * 40, "repeats": 7, "options": {},
          "timer": {"warmup_ms": 25.0, "rep_ms": 100.0, "cudagraph": False},
          "tolerance": {"rtol": None, "atol": None}, "isolate": False}


def write(path: Path, records: list[Record], device: str = DEVICE, **header: object) -> str:
    """A result file of ``records``; its header's ``repeats`` is their cells' (1 without repeats)."""
    repeats = next((len(r.repeats) for r in records if r.metric == "latency" and r.repeats), 1)
    write_json(path, {**HEADER, "device_name": device, "repeats": repeats, **header}, records)
    return str(path)


def run_compare(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``run.py compare ARGS`` in-process: (exit status, stdout, stderr)."""
    try:
        code = cli.main(["compare", *args])
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def markdown_verdicts(text: str) -> dict[CellId, tuple[str, str]]:
    """(verdict, note) per cell, read from the collapsed all-cells table of the markdown summary."""
    table = text.split("<details>")[1]
    verdicts = {}
    for line in table.splitlines():
        cols = [c.strip() for c in line.strip("|").split("|")]
        if len(cols) == 12 and cols[0] == "exp":
            verdicts[(cols[3], cols[4])] = (cols[10], cols[11])
    return verdicts


def gate(tmp_path: Path, capsys: pytest.CaptureFixture[str], baseline: list[Record],
         current: list[Record], *options: str) -> tuple[int, dict[CellId, tuple[str, str]]]:
    """Compare two record lists through the command line: (exit status, verdict per cell)."""
    summary = tmp_path / "summary.md"
    code, _, err = run_compare(capsys, write(tmp_path / "base.json", baseline),
                               write(tmp_path / "cur.json", current), "--markdown", str(summary), *options)
    assert code in (0, 1), err
    return code, markdown_verdicts(summary.read_text())


def backend_verdicts(verdicts: dict[CellId, tuple[str, str]], backend: str) -> set[str]:
    return {verdict for (_, b), (verdict, _) in verdicts.items() if b == backend}
