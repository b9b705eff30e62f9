"""``--plugin``: files that add backends or operators, and the one-line errors of those that cannot load.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.report.results import read_json
from tests.helpers import BUILTIN_OPERATORS, run_cli

PLUGIN = "examples/plugins/faulty_exp_backends.py"


def _cells(path: Path) -> dict:
    _, records = read_json(path)
    return {(r.backend, r.metric): r for r in records}


def test_plugin_adds_a_backend_to_a_builtin_operator(tmp_path: Path) -> None:
    listing = run_cli("--plugin", PLUGIN, "--op", "exp", "--list-backends")
    assert "exp_via_exp2" in listing.stdout
    out = tmp_path / "r.json"
    result = run_cli("--plugin", PLUGIN, "--op", "exp", "--only", "eager,exp_via_exp2",
                     "--shape", "1000", "--rep", "1", "--warmup", "0", "--output-json", str(out))
    assert result.returncode == 0, result.stderr
    assert _cells(out)[("exp_via_exp2", "accuracy")].value == 1.0


def test_plugin_adds_a_new_operator(tmp_path: Path) -> None:
    plugin = "examples/plugins/new_operator.py"
    listed = run_cli("--plugin", plugin, "--list-ops").stdout.splitlines()
    assert any(row.split()[0] == "scale2" for row in listed[2:])
    out = tmp_path / "r.json"
    result = run_cli("--plugin", plugin, "--op", "scale2", "--mode", "fwd,bwd", "--rep", "1",
                     "--warmup", "0", "--output-json", str(out), "--metrics", "accuracy,gbps")
    assert result.returncode == 0, result.stderr
    _, records = read_json(out)
    accuracy = [r for r in records if r.metric == "accuracy"]
    assert len(accuracy) == 2 * 2 * 2 and all(r.value == 1.0 for r in accuracy)


def test_missing_plugin_file_is_bad_input() -> None:
    result = run_cli("--plugin", "no/such/plugin.py", "--op", "exp")
    assert result.returncode == 2
    assert result.stderr.strip() == "run.py: error: --plugin no/such/plugin.py: no such file"


def test_a_plugin_that_replaces_the_baseline_backend_stays_the_baseline(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = run_cli("--plugin", "examples/plugins/replaces_eager.py", "--op", "exp",
                     "--only", "eager,triton", "--shape", "1000", "--rep", "1", "--warmup", "0",
                     "--output-json", str(out))
    assert result.returncode == 0, result.stderr
    cells = _cells(out)
    assert cells[("eager", "speedup")].value == 1.0 and cells[("triton", "speedup")].value > 0


@pytest.mark.parametrize(("plugin", "reason"), [
    ("README.md", "failed to load (SyntaxError: "),
    ("examples/plugins/unknown_operator.py", f"no operator 'expp' (valid: {', '.join(BUILTIN_OPERATORS)})"),
])
def test_a_plugin_that_cannot_load_is_one_line_of_bad_input(plugin: str, reason: str) -> None:
    result = run_cli("--plugin", plugin, "--op", "exp")
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and reason in result.stderr



@pytest.mark.parametrize(("edit", "count"), [("baseline=True", 0), ("register_benchmark()", 2)])
def test_an_operator_without_exactly_one_baseline_is_refused_when_it_loads(
        tmp_path: Path, edit: str, count: int) -> None:
    text = Path("examples/plugins/new_operator.py").read_text()
    plugin = tmp_path / "plugin.py"
    plugin.write_text(text.replace(edit, "" if count == 0 else "register_benchmark(baseline=True)"))
    result = run_cli("--plugin", str(plugin), "--op", "scale2", "--metrics", "accuracy", "--no-save")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    must = "Scale2 must mark exactly one backend @register_benchmark(baseline=True)"
    assert f"{must}, not {count}" in result.stderr


def test_an_option_without_parse_is_read_as_its_defaults_type(tmp_path: Path) -> None:
    text = Path("examples/plugins/new_operator.py").read_text()
    plugin = tmp_path / "plugin.py"
    plugin.write_text(text.replace("BenchmarkOperator, Mode,", "BenchmarkOperator, Mode, Option,")
                      .replace('    name = "scale2"\n', '    name = "scale2"\n'
                               '    command_line_options = (Option("factor", 2, help="unused"),)\n'))
    refused = run_cli("--plugin", str(plugin), "--op", "scale2", "--factor", "two", "--no-save")
    assert refused.returncode == 2
    assert refused.stderr.strip() == "run.py: error: argument --factor: 'two' is not an integer"
    out = tmp_path / "r.json"
    result = run_cli("--plugin", str(plugin), "--op", "scale2", "--factor", "3", "--shape", "1000",
                     "--metrics", "accuracy", "--output-json", str(out))
    assert result.returncode == 0, result.stderr
    assert read_json(out)[0]["options"] == {"factor": 3}
