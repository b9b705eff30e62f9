"""run.py as a user runs it: every mode end to end, result files, listings and bad input."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli.args import integer, option_parse
from harness.cli.main import main
from harness.operator import Option
from harness.report.results import read_json
from tests.helpers import BUILTIN_OPERATORS, ROOT, run_cli


def test_every_mode_end_to_end_writes_json_and_csv(tmp_path: Path) -> None:
    out = tmp_path / "exp.json"
    result = run_cli(
        "--op", "exp", "--mode", "fwd,bwd,fwd_bwd,fwd_no_grad", "--shape", "1003",
        "--only", "eager,triton,helion,torch_compile",
        "--metrics", "accuracy,latency,speedup,gbps,pct_peak,compile_time",
        "--rep", "2", "--warmup", "0", "--output-json", str(out), "--csv",
        "--output-dir", str(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    for mode in ("fwd", "bwd", "fwd_bwd", "fwd_no_grad"):
        assert f"exp {mode} float32" in result.stdout
    header, records = read_json(out)
    assert header["device"] == "cpu" and header["copy_gbps"] > 0
    assert {"torch", "triton", "helion", "python", "git_commit", "command"} <= set(header)
    cells = {(r.mode, r.backend, r.metric): r for r in records}
    assert len(cells) == 4 * 4 * 6
    for mode in ("fwd", "bwd", "fwd_bwd", "fwd_no_grad"):
        for backend in ("eager", "triton", "helion", "torch_compile"):
            assert cells[(mode, backend, "accuracy")].value == 1.0
            latency = cells[(mode, backend, "latency")]
            assert latency.p20 <= latency.p50 <= latency.p80 and latency.n_samples >= 10
    tables = [p for p in tmp_path.iterdir() if re.fullmatch(r"exp_bwd_fp32_\d{8}T\d{6}Z\.csv", p.name)]
    assert len(tables) == 1, "one timestamped table per mode, named like the default result file"
    rows = list(csv.reader(tables[0].open(), delimiter=";"))
    assert rows[0][:2] == ["numel", "eager-accuracy"] and rows[-1][0] == "average"


def test_bwd_alias_and_only_select_mode_and_backends(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = run_cli("--op", "exp", "--bwd", "--only", "triton", "--shape", "500",
                     "--metrics", "accuracy,speedup", "--rep", "1", "--warmup", "0",
                     "--output-json", str(out))
    assert result.returncode == 0, result.stderr
    _, records = read_json(out)
    assert {r.mode for r in records} == {"bwd"}
    assert {r.backend for r in records} == {"eager", "triton"}


def test_help_with_an_operator_lists_its_options() -> None:
    shown = run_cli("--op", "addmm", "--help")
    assert shown.returncode == 0
    assert "addmm options:" in shown.stdout and "--bias {1d,2d}" in shown.stdout


def test_listings() -> None:
    rows = run_cli("--list-ops").stdout.splitlines()[2:]
    assert [row.split()[0] for row in rows] == BUILTIN_OPERATORS
    assert rows[0].split()[1] == "MxNxK" and rows[0].endswith("--bias --alpha --beta")
    assert ("exp: eager (baseline), triton, triton_direct (with --only), triton_compiled (with --only), "
            "helion, helion_op (with --only), helion_compiled (with --only), torch_compile"
            ) in run_cli("--list-backends").stdout
    metrics = run_cli("--list-metrics").stdout
    for name in ("latency", "speedup", "accuracy", "gbps", "pct_peak", "tflops", "peak_mem", "walltime"):
        assert name in metrics


def test_variant_backends_run_only_when_named(tmp_path: Path) -> None:
    """The dispatch and compiled variants stay out of a default sweep; ``--only`` runs them."""
    plain, named = tmp_path / "plain.json", tmp_path / "named.json"
    plain_run = run_cli("--op", "exp", "--shape", "1003", "--metrics", "accuracy", "--output-json",
                        str(plain))
    assert plain_run.returncode == 0, plain_run.stderr
    assert {r.backend for r in read_json(plain)[1]} == {"eager", "triton", "helion", "torch_compile"}
    result = run_cli("--op", "exp", "--shape", "1003", "--only", "triton,triton_direct",
                     "--metrics", "accuracy", "--output-json", str(named))
    assert result.returncode == 0, result.stderr
    assert {r.backend for r in read_json(named)[1]} == {"triton", "triton_direct"}


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--op", "nope"], ", ".join(BUILTIN_OPERATORS)),
        (["--op", "exp", "--only", "cuda_magic"], "triton"),
        (["--op", "exp", "--metrics", "latency,joy"], "gbps"),
        (["--op", "exp", "--mode", "sideways"], "fwd_no_grad"),
        (["--op", "exp", "--shape", "12,x"], "1 comma-separated"),
        (["--op", "exp", "--shape", "4,4"], "1 comma-separated"),
        (["--op", "exp", "--precision", "fp64"], "bf16"),
        (["--op", "exp", "--device", "tpu"], "cuda"),
        (["--op", "exp", "--cudagraph"], "--device cuda"),
        (["--op", "exp", "--device", "cpu", "--l2-flush", "dirty"], "needs --device cuda"),
        (["--op", "exp", "--no-save", "--output-json", "r.json"], "give one of them"),
        (["--op", "exp", "--csv", "-", "--output-json", "-"], "both write to stdout"),
        (["--op", "exp", "--gather-timeout", "5"], "under torchrun only"),
        (["--op", "exp", "--bias", "2d"], "--bias is an option of addmm: --op exp does not name it"),
        (["--op", "exp", "--bia=2d", "--nope"], "--bias is an option of addmm: --op exp does not name it; "
                                                "unrecognized too: --nope"),
        (["--bias", "2d"], "--bias is an option of addmm: name it with --op addmm"),
        (["--op", "exp", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        (["--op", "exp", "--num-inputs", "0"], "at least 1"),
        (["--op", "exp", "--repeats", "0"], "at least 1"),
        (["--op", "exp", "--baseline", "nope"], "torch_compile"),
        (["--op", "rms_norm", "--shape", "4096"], "2 comma-separated"),
        (["--op", "addmm", "--bias", "3d"], "'1d', '2d'"),
        (["--op", "addmm", "--alpha", "nan"], "finite"),
        (["--op", "exp", "--metrics", ","], "names nothing"),
        (["--op", "exp", "--rtol", "-1"], ">= 0"),
        (["--op", "exp", "--skip", "eager"], "speedup baseline"),
        (["--op", "exp", "--only", "eager,triton", "--skip", "helion"],
         "--skip helion: --only does not name it, so there is nothing to skip (--only eager,triton)"),
        (["--op", "exp", "--only", "triton", "--skip", "eager"], "speedup baseline"),
        (["--op", "exp", "--only", "eager", "--skip", "triton,helion"], "--only does not name them"),
        (["--op", "exp", "--output-json", "tests"], "is a folder"),
        (["--op", "exp", "--seed", str(2**64 - 1)], "must be within -9223372036854775808.."),
        (["--op", "exp", "--seed", str(-(2**63) - 1)], "must be within -9223372036854775808.."),
        (["--op", "exp", "--profile", "README.md"], "give a folder"),
        (["--op", "exp", "--profile", "README.md/traces"], "README.md is a file; give a folder"),
    ],
)
def test_bad_input_is_one_line_naming_valid_choices_exit_2(args: list[str], names: str) -> None:
    result = run_cli(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("run.py: error:")
    assert names in lines[0]
    assert "Traceback" not in result.stderr


def _installed_command() -> str:
    """The ``opbench`` command ``pip install`` put beside this interpreter (a virtual environment's
    bin), else the one on PATH."""
    beside = Path(sys.executable).parent / "opbench"
    found = str(beside) if beside.exists() else shutil.which("opbench")
    if found is None:
        pytest.skip("the opbench command is not installed (pip install -e .)")
    return found


def test_a_mistyped_subcommand_names_the_valid_ones() -> None:
    result = run_cli("shwo", "results.json")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "run.py: error: unknown subcommand 'shwo' (valid: compare, export, merge, plot, show, split, "
        "tritonbench, tune; a benchmark run starts with its options, e.g. --op)")


def test_installed_command_names_itself_in_errors_and_help() -> None:
    command = _installed_command()
    result = subprocess.run([command, "tune", "--op", "nope"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip() == "opbench: error: unknown op 'nope' (valid: addmm, exp, gemm, rms_norm)"
    helps = {}
    for subcommand in ("", "tune", "compare", "tritonbench", "show", "export", "plot", "merge", "split"):
        shown = subprocess.run([command, *subcommand.split(), "--help"], capture_output=True, text=True,
                               timeout=120)
        assert shown.returncode == 0, shown.stderr
        assert "run.py" not in shown.stdout and "``" not in shown.stdout
        helps[subcommand] = shown.stdout
    assert "\n  opbench --op exp --list-backends\n" in helps[""]
    assert "torchrun --nproc-per-node 8 --no-python opbench --op gemm" in helps[""]


def test_json_file_is_valid_after_each_shape(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = run_cli("--op", "exp", "--shape", "100", "--shape", "200", "--only", "eager",
                     "--rep", "1", "--warmup", "0", "--output-json", str(out))
    assert result.returncode == 0, result.stderr
    payload = json.loads(out.read_text())
    assert sorted({r["x_val"] for r in payload["records"]}) == [100, 200]


PRINTING_BACKEND = """
import torch
from harness.operator import register_benchmark

print("printed as the plugin loads")

@register_benchmark(operator="exp")
def prints(self, x):
    def call():
        print("printed by a backend")
        return torch.exp(x)
    return call
"""


def test_output_json_dash_prints_the_result_file_alone_on_stdout(tmp_path: Path) -> None:
    """What a backend prints goes to stderr; the file in --output-dir keeps each finished cell."""
    plugin, runs = tmp_path / "prints.py", tmp_path / "runs"
    plugin.write_text(PRINTING_BACKEND)
    result = run_cli("--op", "exp", "--shape", "100", "--shape", "200", "--only", "eager,prints",
                     "--plugin", str(plugin), "--rep", "1", "--warmup", "0", "--output-json", "-",
                     "--output-dir", str(runs))
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["header"]["complete"] is True
    assert sorted({r["x_val"] for r in payload["records"]}) == [100, 200]
    assert "exp fwd float32" in result.stderr
    assert "printed by a backend" in result.stderr and "printed as the plugin loads" in result.stderr
    assert not (ROOT / "-").exists()
    kept = list(runs.iterdir())
    assert len(kept) == 1 and json.loads(kept[0].read_text()) == payload
    assert f"results: {kept[0]}" in result.stderr


def test_output_json_dash_with_no_save_prints_the_result_file_alone(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """In-process too (a caller capturing sys.stdout gets the file), and no file is kept."""
    code = main(["--op", "exp", "--shape", "100", "--only", "eager", "--metrics", "accuracy",
                 "--output-json", "-", "--no-save", "--output-dir", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 0 and json.loads(out)["records"][0]["value"] == 1.0
    assert "exp fwd float32" in err and "results:" not in err and not list(tmp_path.iterdir())


@pytest.mark.parametrize(("args", "line"), [
    (["--op", "exp", "--alpha", "-0.5"], "--alpha is an option of addmm: --op exp does not name it"),
    (["--op", "exp", "--bia=2d", "-x", "--", "-y"],
     "--bias is an option of addmm: --op exp does not name it; unrecognized too: -x"),
    (["--", "--bias"], "unrecognized arguments: -- --bias"),
    (["--op", "exp", "--alpha", "2", "--beta", "3", "--nope"],
     "--alpha, --beta are options of addmm: --op exp does not name them; unrecognized too: --nope"),
])
def test_an_operator_option_s_owner_is_named_and_values_are_no_flags(args: list[str], line: str) -> None:
    result = run_cli(*args)
    assert result.returncode == 2 and result.stderr.strip() == f"run.py: error: {line}"


def test_a_sweep_in_which_every_cell_was_skipped_exits_1() -> None:
    result = run_cli("--op", "exp", "--precision", "bf16", "--only", "triton,helion", "--shape", "4096",
                     "--metrics", "accuracy,latency")
    assert result.returncode == 1
    assert "nothing was measured: every cell was skipped" in result.stderr


def test_a_failed_speedup_baseline_fails_only_its_own_cells(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = run_cli("--plugin", "examples/plugins/faulty_exp_backends.py", "--op", "exp",
                     "--only", "eager,raises", "--baseline", "raises", "--shape", "1000",
                     "--rep", "0", "--warmup", "0", "--output-json", str(out))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == "1 cell(s) failed: exp/fwd/raises/1000"
    _, records = read_json(out)
    speedup = next(r for r in records if (r.backend, r.metric) == ("eager", "speedup"))
    assert speedup.status == "skipped" and "baseline failed" in speedup.error


def test_a_wrong_result_alone_exits_1() -> None:
    result = run_cli("--plugin", "examples/plugins/faulty_exp_backends.py", "--op", "exp", "--only",
                     "eager,wrong_result", "--shape", "1000", "--metrics", "accuracy", "--rep", "0",
                     "--warmup", "0")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == "1 cell(s) failed: exp/fwd/wrong_result/1000"


def test_an_option_with_text_choices_keeps_its_text() -> None:
    assert option_parse(Option("n", 2, help="", choices=("1", "2"))) is None
    assert option_parse(Option("n", 2, help="")) is integer
