"""The committed H200 baselines under ``results/baselines/h200/`` are files the CI gate can use.

The workflow gates every ``<op>_<mode>.json`` it finds there; a misnamed, truncated or
mixed file would make it fail (or silently gate nothing) on the GPU runner.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import cli
from harness.operator import Mode
from harness.results import read_json
from operators import OPERATORS

BASELINES = sorted((Path(__file__).parent.parent / "results" / "baselines" / "h200").glob("*.json"))
MODES = {mode.value for mode in Mode}


def test_every_operator_has_a_baseline_for_every_mode():
    names = {path.stem for path in BASELINES}
    for op in OPERATORS:
        assert {f"{op}_{mode}" for mode in MODES} <= names, op


@pytest.mark.parametrize("path", BASELINES, ids=lambda path: path.stem)
def test_baseline_is_one_operator_and_mode_from_the_h200_with_repeats(path):
    header, records = read_json(path)
    op, mode = next((op, path.stem[len(op) + 1:]) for op in OPERATORS if path.stem.startswith(f"{op}_"))
    assert mode in MODES
    assert header["device_name"] == "NVIDIA H200"
    assert {(r.op, r.mode) for r in records} == {(op, mode)}
    latencies = [r for r in records if r.metric == "latency"]
    assert latencies and all(r.status == "ok" and len(r.repeats) == 7 for r in latencies)
    assert all(r.value == 1.0 for r in records if r.metric == "accuracy")


@pytest.mark.parametrize("path", BASELINES, ids=lambda path: path.stem)
def test_baseline_compares_clean_against_itself(path, capsys):
    assert cli.main(["compare", str(path), str(path)]) == 0
    assert " 0 regression" in capsys.readouterr().out
