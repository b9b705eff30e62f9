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
import textwrap

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


def _step(workflow: str, name: str) -> str:
    """The shell script of the workflow's step ``name``, as the runner gets it (dedented)."""
    step = workflow.split(f"- name: {name}", 1)[1].split("- name:", 1)[0]
    return textwrap.dedent(step.split("run: |\n", 1)[1])


def _shim(folder, python: str = sys.executable) -> str:
    """A ``PATH`` whose ``python`` is ``python``."""
    shim = folder / "bin" / "python"
    shim.parent.mkdir(parents=True, exist_ok=True)
    shim.write_text(f'#!/bin/sh\nexec "{python}" "$@"\n')
    shim.chmod(0o755)
    return f"{shim.parent}:/usr/bin:/bin"


def _linked_repo(tmp_path, baselines: list | None = None):
    """``tmp_path`` with the repo's code linked in and ``baselines`` under
    ``results/baselines/h200/`` (default: the committed ones, their second runs too); its
    ``gate/``, the base branch's checkout in the workflow, is the folder itself."""
    tmp_path.mkdir(exist_ok=True)
    for entry in ("harness", "operators", "run.py"):
        (tmp_path / entry).symlink_to(ROOT / entry)
    folder = tmp_path / "results" / "baselines" / "h200"
    folder.mkdir(parents=True)
    for path in BASELINES if baselines is None else baselines:
        (folder / path.name).symlink_to(path)
    if baselines is None and SECOND_RUNS:
        (folder / "second_run").symlink_to(BASELINE_DIR / "second_run")
    (tmp_path / "gate").symlink_to(".")
    return tmp_path


def _run_step(folder, name: str, python: str = sys.executable, **env: str) -> subprocess.CompletedProcess:
    """The workflow's step ``name`` run by bash in ``folder``, with ``python`` as its python."""
    script = _step(WORKFLOW.read_text(), name)
    return subprocess.run(["bash", "-e", "-c", script], cwd=folder,
                          env={"PATH": _shim(folder, python), **env}, capture_output=True, text=True)


def _list_gated(folder, python: str = sys.executable) -> subprocess.CompletedProcess:
    return _run_step(folder, "List the gated baselines", python)


def test_the_workflow_gates_every_committed_baseline_by_its_records(tmp_path):
    run = _list_gated(_linked_repo(tmp_path))
    assert run.returncode == 0, run.stderr
    expected = [f"{path.stem} {records[0].op} {records[0].mode}\n"
                for path in BASELINES for records in [read_json(path)[1]]]
    assert (tmp_path / "gated.txt").read_text() == "".join(expected)
    assert {line.split()[2] for line in expected} <= MODES


def test_the_workflow_names_each_registered_pair_without_a_baseline(tmp_path):
    kept = [path for path in BASELINES if path.stem != "exp_bwd"]
    run = _list_gated(_linked_repo(tmp_path, kept))
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["::notice::no H200 baseline for exp bwd: not gated"]


def test_the_workflow_step_fails_without_baselines_or_when_the_operators_cannot_be_listed(tmp_path):
    """No baseline to gate fails the step; so does a failing import while naming the registered
    pairs without one (the shim's python fails every script that imports the registry)."""
    assert _list_gated(_linked_repo(tmp_path / "none", [])).returncode != 0
    failing = tmp_path / "failing"
    failing.write_text('#!/bin/sh\nscript=$(mktemp)\ncat > "$script"\n'
                       'if grep -q harness.registry "$script"; then exit 1; fi\n'
                       f'exec "{sys.executable}" "$script"\n')
    failing.chmod(0o755)
    repo = _linked_repo(tmp_path / "repo")
    listed = _list_gated(repo, str(failing))
    assert listed.returncode != 0 and (repo / "gated.txt").read_text().count("\n") == len(BASELINES)


def _compare_in(tmp_path, name: str, op: str, mode: str,
                current: str | None = None) -> subprocess.CompletedProcess:
    """The workflow's compare step in ``tmp_path`` (the repo linked in), gating baseline ``name``
    as (``op``, ``mode``) on ``current``, the text of its current run (None: no current run)."""
    _linked_repo(tmp_path)
    (tmp_path / "current").mkdir()
    if current is not None:
        (tmp_path / "current" / f"{name}.json").write_text(current)
    (tmp_path / "gated.txt").write_text(f"{name} {op} {mode}\n")
    return _run_step(tmp_path, "Compare against the H200 baselines",
                     GITHUB_STEP_SUMMARY=str(tmp_path / "summary"))


def test_a_baseline_without_a_current_run_fails_the_workflow(tmp_path):
    """A baseline whose operator was renamed or removed gets no current file: the job fails."""
    name = BASELINES[0].stem
    run = _compare_in(tmp_path, name, "renamed_op", "fwd")
    assert run.returncode != 0
    assert "compare could not run" in (tmp_path / "summary").read_text()


@pytest.mark.parametrize("path", SECOND_RUNS, ids=lambda path: path.stem)
def test_a_second_run_is_of_its_baseline_s_commit_and_settings(path):
    first_header, first = read_json(BASELINE_DIR / path.name)
    header, records = read_json(path)
    same = ("git_commit", "device_name", "timer", "tolerance", "repeats", "options", "isolate")
    assert {key: header.get(key) for key in same} == {key: first_header.get(key) for key in same}
    assert {r.cell() for r in records} == {r.cell() for r in first}
    assert all(r.value == 1.0 for r in records if r.metric == "accuracy" and r.status != "skipped")


@pytest.mark.skipif(not SECOND_RUNS, reason="no second baseline run is committed")
def test_the_workflow_judges_against_both_baseline_runs(tmp_path):
    """The gate judges each cell against the slower of its two runs (within the threshold): with
    the first run as the current one, some cells show the second run's median as the baseline."""
    name = SECOND_RUNS[0].stem
    _, first = read_json(BASELINE_DIR / f"{name}.json")
    op = first[0].op
    run = _compare_in(tmp_path, name, op, first[0].mode, (BASELINE_DIR / f"{name}.json").read_text())
    assert run.returncode == 0, run.stdout + run.stderr
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


def test_a_pull_request_is_judged_by_its_base_branchs_baselines_and_compare() -> None:
    """A pull request could loosen its own copy of the baselines or of compare: the job reads both
    from the base branch's checkout (gate/)."""
    workflow = WORKFLOW.read_text()
    checkout = workflow.split("- name: Check out the gate of the base branch", 1)[1].split("- name:", 1)[0]
    assert "ref: ${{ github.event.pull_request.base.sha || github.sha }}" in checkout
    assert "path: gate" in checkout
    steps = ("List the gated baselines", "Benchmark with 7 repeats", "Compare against the H200 baselines")
    for name in steps:
        assert "results/baselines" not in _step(workflow, name).replace("gate/results/baselines", "")
    assert "python gate/run.py compare" in _step(workflow, "Compare against the H200 baselines")
