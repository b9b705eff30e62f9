"""The committed H200 baselines under ``results/baselines/h200/`` are files the CI gate can use.

The workflow gates every ``<op>_<mode>.json`` it finds there; a misnamed, truncated or
mixed file would make it fail (or silently gate nothing) on the GPU runner.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys

import pytest

from harness.compare.verdicts import Settings, judge
from harness.operator import Mode
from harness.registry import operator_names
from harness.report.results import read_json
from harness.settings import FLUSHES
from tests.helpers import ROOT

BASELINE_DIR = ROOT / "results" / "baselines" / "h200"
BASELINES = sorted(BASELINE_DIR.glob("*.json"))
SECOND_RUNS = sorted((BASELINE_DIR / "second_run").glob("*.json"))
"""Second runs of a baseline's commit, which give the gate each cell's run-to-run noise."""
OWN_BACKENDS = {"eager", "triton", "helion", "torch_compile"}
"""The suite's own implementations: never skipped in a baseline (only a peer the job lacks is)."""
MODES = {mode.value for mode in Mode}


def test_an_operator_with_baselines_has_one_for_every_mode():
    """A gated operator is gated in every mode; a new operator has none until its H200 baselines
    are taken (the workflow then prints that it is not gated), so CPU CI does not wait on a GPU."""
    names = {path.stem for path in BASELINES}
    gated = [op for op in operator_names() if any(name.startswith(f"{op}_") for name in names)]
    readme = (ROOT / "README.md").read_text().split("Committed H200 baselines", 1)[1]
    listed = re.findall(r"^\| (\w+)(?: \(without torch_compile\))? \| [0-9a-f]{7}", readme, re.M)
    assert sorted(gated) == sorted(listed), "the README's baseline table lists the gated operators"
    for op in gated:
        assert {f"{op}_{mode}" for mode in MODES} <= names, op


@pytest.mark.parametrize("path", BASELINES, ids=lambda path: path.stem)
def test_baseline_is_one_operator_and_mode_from_the_h200_with_repeats(path):
    """Every cell timed 7 times and accurate; the only skipped cells are peers the job does not
    install (rms_norm's default sweep names them), which the gate does not judge."""
    header, records = read_json(path)
    op, mode = next((op, path.stem[len(op) + 1:]) for op in operator_names()
                    if path.stem.startswith(f"{op}_"))
    assert mode in MODES
    assert header["device_name"] == "NVIDIA H200"
    assert {(r.op, r.mode) for r in records} == {(op, mode)}
    latencies = [r for r in records if r.metric == "latency" and r.status != "skipped"]
    assert latencies and all(r.status == "ok" and len(r.repeats) == 7 for r in latencies)
    skipped = [r for r in records if r.status == "skipped"]
    assert all("is not installed" in r.error and r.backend not in OWN_BACKENDS for r in skipped)
    assert all(r.value == 1.0 for r in records if r.metric == "accuracy" and r.status != "skipped")


@pytest.mark.parametrize("path", BASELINES, ids=lambda path: path.stem)
def test_baseline_catches_a_25_percent_slowdown_of_one_backend_there_only(path):
    """The gate's defaults, on the real repeats of each baseline: every triton cell slowed by
    25% is a regression (noisy or not), and no other backend's cell changes verdict."""
    _, records = read_json(path)
    slowed = [copy.deepcopy(r) for r in records]
    for record in slowed:
        if record.backend == "triton" and record.metric == "latency" and record.repeats:
            record.repeats = [1.25 * ms for ms in record.repeats]
            record.value *= 1.25
    rows = judge([records], slowed, Settings(0.05, 0.10, 0.10, 0.25, 0.01, 2000))
    triton = {row.verdict for row in rows if row.key[4] == "triton"}
    others = {row.verdict for row in rows if row.key[4] != "triton"}
    assert triton == {"regression"}
    assert others <= {"unchanged", "noisy"} and "unchanged" in others


WORKFLOW = ROOT / ".github" / "workflows" / "perf-regression.yml"
def _workflow_flush(path) -> str:
    """The ``--l2-flush`` the workflow's own one-liner picks to rerun the baseline at ``path``."""
    code = re.search(r'flush=\$\(python -c "([^"]+)"', WORKFLOW.read_text()).group(1)
    return subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.mark.parametrize("path", BASELINES, ids=lambda path: path.stem)
def test_the_workflow_reruns_each_baseline_with_the_clean_flush(path):
    """Every committed baseline was retaken with the flush that leaves L2 clean (issue 16)."""
    assert _workflow_flush(path) == "clean"


def test_the_workflow_reruns_a_baseline_from_before_issue_16_with_the_writing_flush(tmp_path):
    """A header without ``timer.flush`` was timed with the flush that writes, so the job reruns
    with that one rather than one that compare would refuse."""
    header, _ = read_json(BASELINES[0])
    old = json.loads(BASELINES[0].read_text())
    del old["header"]["timer"]["flush"]
    path = tmp_path / BASELINES[0].name
    path.write_text(json.dumps(old))
    assert header["timer"]["flush"] == "clean" and _workflow_flush(path) == "dirty"
    assert "dirty" in FLUSHES


def _operator_step(workflow: str, python: str) -> str:
    """The workflow's shell lines that set ``OPS``, with ``python`` in place of the runner's."""
    lines = re.search(r"(ops=\$\(python -c .*?\n.*?\n.*?GITHUB_ENV\")", workflow, re.S).group(1)
    return lines.replace("ops=$(python ", f"ops=$({python} ").replace('"$GITHUB_ENV"', '"$OPS_FILE"')


def test_the_workflow_gates_every_registered_operator_in_every_mode(tmp_path):
    text = WORKFLOW.read_text()
    out = tmp_path / "env"
    subprocess.run(["bash", "-e", "-c", _operator_step(text, sys.executable)], check=True, cwd=ROOT,
                   env={"OPS_FILE": str(out), "PATH": "/usr/bin:/bin"})
    assert out.read_text().split("=", 1)[1].split() == operator_names()
    assert set(re.search(r"MODES: (.+)", text).group(1).split()) == MODES


def test_the_workflow_step_fails_when_the_operators_cannot_be_listed(tmp_path):
    failing = tmp_path / "python"
    failing.write_text("#!/bin/sh\nexit 1\n")
    failing.chmod(0o755)
    out = tmp_path / "env"
    run = subprocess.run(["bash", "-e", "-c", _operator_step(WORKFLOW.read_text(), str(failing))], cwd=ROOT,
                         env={"OPS_FILE": str(out), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
    assert run.returncode != 0 and not out.exists()


@pytest.mark.parametrize("path", SECOND_RUNS, ids=lambda path: path.stem)
def test_a_second_run_is_of_its_baseline_s_commit_and_settings(path):
    first_header, first = read_json(BASELINE_DIR / path.name)
    header, records = read_json(path)
    same = ("git_commit", "device_name", "timer", "tolerance", "repeats", "options", "isolate")
    assert {key: header.get(key) for key in same} == {key: first_header.get(key) for key in same}
    assert {r.cell() for r in records} == {r.cell() for r in first}
    assert all(r.value == 1.0 for r in records if r.metric == "accuracy" and r.status != "skipped")


def _compare_step(workflow: str) -> str:
    """The workflow's compare step's shell lines."""
    step = workflow.split("- name: Compare against the H200 baselines", 1)[1].split("- name:", 1)[0]
    return step.split("run: |", 1)[1]


@pytest.mark.skipif(not SECOND_RUNS, reason="no second baseline run is committed")
def test_the_workflow_judges_against_both_baseline_runs(tmp_path):
    """The gate judges each cell against the slower of its two runs (within the threshold): with
    the first run as the current one, some cells show the second run's median as the baseline."""
    name = SECOND_RUNS[0].stem
    op, mode = next((op, name[len(op) + 1:]) for op in operator_names() if name.startswith(f"{op}_"))
    for entry in ("results", "harness", "operators", "run.py"):
        (tmp_path / entry).symlink_to(ROOT / entry)
    (tmp_path / "current").mkdir()
    (tmp_path / "current" / f"{name}.json").write_text((BASELINE_DIR / f"{name}.json").read_text())
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    env = {"OPS": op, "MODES": mode, "GITHUB_STEP_SUMMARY": str(tmp_path / "summary"),
           "PATH": f"{python.parent}:/usr/bin:/bin"}
    run = subprocess.run(["bash", "-e", "-c", _compare_step(WORKFLOW.read_text())], cwd=tmp_path, env=env,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    _, first = read_json(BASELINE_DIR / f"{name}.json")
    first_ms = {(str(r.x_val), r.backend): r.value for r in first
                if r.metric == "latency" and r.status == "ok"}
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in
            (tmp_path / "current" / f"{name}.md").read_text().splitlines()]
    judged = [(cols[5], first_ms[key]) for cols in rows if len(cols) == 12 and cols[0] == op
              and (key := (_x_val(cols[3]), cols[4])) in first_ms]
    assert judged and any(float(shown) != pytest.approx(ms, rel=1e-3) for shown, ms in judged), \
        "every cell was judged against the first run: the second was not read"


def _x_val(shown: str) -> str:
    """A table's x_val (``1024x1024x1024``) as a record's ``str(x_val)``."""
    return str([int(part) for part in shown.split("x")]) if "x" in shown else shown
