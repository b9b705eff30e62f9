"""Sweeps over several GPUs: ``--shard K/N`` parts that a merge joins into the whole run, and
``torchrun`` ranks (on the CPU, one process a rank) that give the cells a single process gives,
where a crash or a hang on one rank costs only its own cells."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.operator import Mode
from harness.report.results import Record, read_json, write_json
from harness.settings import TimerSettings
from harness.sweep.shards import deal, estimated_cost, parse_shard
from harness.sweep.spec import Sweep
from operators.exp.operator import ExpOperator
from operators.rms_norm.operator import RMSNormOperator
from tests.helpers import ROOT, cpu_settings, run_cli

PLUGIN = "examples/plugins/faulty_exp_backends.py"
QUICK = ["--metrics", "accuracy,latency", "--rep", "1", "--warmup", "0"]
SHAPES = [arg for n in (1000, 2000, 3000, 4000, 5000) for arg in ("--shape", str(n))]


def _cells(path: Path) -> dict:
    _, records = read_json(path)
    return {(r.mode, r.x_val, r.backend, r.metric): r for r in records}


def _torchrun(nproc: int, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """``torchrun --standalone`` (a free port, so that test workers running at once do not meet)."""
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
         "run.py", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )


def test_dealing_gives_every_shape_to_one_shard_and_balances_the_cost() -> None:
    settings = cpu_settings(["latency"])
    op = RMSNormOperator("cuda", torch.bfloat16)
    sweeps = [Sweep(op, mode, op.default_shapes(), ["eager", "triton"], "eager", settings) for mode in Mode]
    shards = deal(sweeps, 3)
    units = [unit for shard in shards for unit in shard]
    assert sorted(units) == sorted(set(units)) and len(units) == 4 * len(op.default_shapes())
    assert all(shard == sorted(shard) for shard in shards), "each shard runs in the run's order"
    largest = max(
        range(len(op.default_shapes())), key=lambda j: op.bytes_moved(op.default_shapes()[j], Mode.FWD)
    )
    holders = {k for k, shard in enumerate(shards) for unit in shard if unit.shape == largest}
    assert len(holders) > 1, "the largest shapes of the four modes are spread out, not in one block"


def test_a_unit_costs_its_timer_budgets_unless_its_calls_outlast_them() -> None:
    """Dealing weighs a unit by what the timer spends on it: the same for any call short enough
    for its budgets to hold many samples, more for a call that needs more than the budgets."""
    settings = dataclasses.replace(cpu_settings(["latency"]), timer=TimerSettings.default("cuda"), repeats=7)
    op = ExpOperator("cuda", torch.bfloat16)
    sweep = Sweep(op, Mode.FWD, [], ["eager", "triton"], "eager", settings)
    small, medium, huge = (estimated_cost(sweep, (n,)) for n in (4096, 2**24, 2**36))
    assert small == pytest.approx(medium, rel=0.05), "budgets, not calls, decide a short cell's cost"
    assert huge > 2 * small, "a call of 90 ms costs its fewest samples, more than the budgets"


@pytest.mark.parametrize("text", ["0/2", "3/2", "2", "a/b"])
def test_a_bad_shard_is_refused_in_one_line(text: str) -> None:
    with pytest.raises(ValueError, match="expected K/N"):
        parse_shard(text)
    result = run_cli("--op", "exp", "--shard", text)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1


def test_shards_are_disjoint_and_their_merge_is_the_whole_run(tmp_path: Path) -> None:
    common = ["--op", "exp", "--mode", "fwd,bwd", *SHAPES, "--only", "eager,triton", *QUICK]
    whole = tmp_path / "whole.json"
    assert run_cli(*common, "--output-json", str(whole)).returncode == 0
    parts = []
    for k in (1, 2, 3):
        part = tmp_path / f"part{k}.json"
        result = run_cli(*common, "--shard", f"{k}/3", "--output-json", str(part))
        assert result.returncode == 0, result.stderr
        parts.append(part)
    keys = [set(_cells(part)) for part in parts]
    assert all(keys) and not (keys[0] & keys[1] or keys[0] & keys[2] or keys[1] & keys[2])
    merged = tmp_path / "merged.json"
    result = run_cli("merge", *map(str, parts), "-o", str(merged))
    assert result.returncode == 0, result.stderr
    assert set(_cells(merged)) == set(_cells(whole))
    assert list(_cells(merged)) == list(_cells(whole)), "the merge is in the run's order"
    header, _ = read_json(merged)
    assert sorted(header["shards"]) == ["1/3", "2/3", "3/3"]
    # compare accepts the merged file and judges every cell (its verdicts are CPU timings, which
    # may swing past any threshold on a loaded machine: only a refusal, exit 2, is a failure).
    compared = run_cli("compare", str(whole), str(merged))
    assert compared.returncode in (0, 1), compared.stdout + compared.stderr
    latencies = sum(1 for key in _cells(whole) if key[-1] == "latency")
    assert f"{latencies} cells:" in compared.stdout


@pytest.mark.parametrize("field", ["git_commit", "source_digest", "timer", "options", "parallel_compile"])
def test_merge_refuses_parts_of_other_code_or_settings(tmp_path: Path, field: str) -> None:
    part = tmp_path / "a.json"
    assert (
        run_cli(
            "--op",
            "exp",
            "--shape",
            "1000",
            "--only",
            "eager",
            *QUICK,
            "--shard",
            "1/2",
            "--output-json",
            str(part),
        ).returncode
        == 0
    )
    header, records = read_json(part)
    other = tmp_path / "b.json"
    changed = {"git_commit": "f" * 40, "source_digest": "e" * 64, "timer": {**header["timer"], "rep_ms": 7.0},
               "options": {"bias": "2d"}, "parallel_compile": 16}
    write_json(other, {**header, field: changed[field]}, [])
    result = run_cli("merge", str(part), str(other), "-o", str(tmp_path / "m.json"))
    assert result.returncode == 2 and f"differ in {field}" in result.stderr
    twin = tmp_path / "twin.json"
    write_json(twin, {**header, "shard": "2/2"}, records)
    overlap = run_cli("merge", str(part), str(twin), "-o", str(tmp_path / "m.json"))
    assert overlap.returncode == 2 and "both hold accuracy of exp/fwd/float32/1000/eager" in overlap.stderr


def _part(tmp_path: Path, name: str, shard: str | None, **header: object) -> Path:
    """A result file of one cell whose header says it is ``shard`` (plus ``header``'s fields)."""
    path = tmp_path / f"{name}.json"
    record = Record("exp", "fwd", "float32", 1000 + len(name), "eager", "accuracy", 1.0, "bool")
    write_json(path, {"git_commit": "0" * 40, "shard": shard, "complete": True, **header}, [record])
    return path


@pytest.mark.parametrize(("shards", "says"), [
    (["1/2"], "missing 2/2"),
    (["1/2", "3/3"], "shards of different counts"),
    (["1/3", "2/3", "2/3"], "missing 3/3"),
    (["1/2", None], "only some parts are --shard parts"),
])
def test_merge_refuses_an_incomplete_or_mixed_set_of_shards(
        tmp_path: Path, shards: list[str | None], says: str) -> None:
    parts = [str(_part(tmp_path, "p" * (i + 1), shard)) for i, shard in enumerate(shards)]
    result = run_cli("merge", *parts, "-o", str(tmp_path / "m.json"))
    assert result.returncode == 2 and says in result.stderr, result.stderr


def test_merge_refuses_a_partial_part_or_parts_of_other_plans_or_versions(tmp_path: Path) -> None:
    whole = _part(tmp_path, "a", "1/2")
    partial = _part(tmp_path, "bb", "2/2", complete=False)
    result = run_cli("merge", str(whole), str(partial), "-o", str(tmp_path / "m.json"))
    assert result.returncode == 2 and "is a partial run" in result.stderr
    for field, says in (("plan", "shards of different plans"), ("torch", "differ in torch")):
        other = _part(tmp_path, "cc", "2/2", **{field: {"metrics": ["accuracy"]}})
        result = run_cli("merge", str(whole), str(other), "-o", str(tmp_path / "m.json"))
        assert result.returncode == 2 and says in result.stderr, result.stderr
    malformed = _part(tmp_path, "dd", "2of2")
    result = run_cli("merge", str(whole), str(malformed), "-o", str(tmp_path / "m.json"))
    assert result.returncode == 2 and "malformed shards" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_separate_runs_of_disjoint_shapes_merge_whatever_their_plans(tmp_path: Path) -> None:
    first = _part(tmp_path, "a", None, plan={"metrics": ["accuracy"], "sweeps": []})
    second = _part(tmp_path, "bb", None, plan={"metrics": ["latency"], "sweeps": []})
    result = run_cli("merge", str(first), str(second), "-o", str(tmp_path / "m.json"))
    assert result.returncode == 0, result.stderr


def test_a_finished_run_says_so_in_its_header_and_a_sharded_one_records_the_whole_plan(
        tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert run_cli("--op", "exp", "--shape", "1000", "--shape", "2000", "--only", "eager", *QUICK,
                   "--shard", "1/2", "--output-json", str(out)).returncode == 0
    header, records = read_json(out)
    assert header["complete"] is True
    (sweep,) = header["plan"]["sweeps"]
    assert sweep["shapes"] == [[1000], [2000]] and sweep["backends"] == ["eager"]
    assert len({r.x_val for r in records}) == 1, "the shard ran half the plan"


def test_a_run_of_several_modes_splits_into_the_baseline_of_each(tmp_path: Path) -> None:
    """One run of two modes, split: each file holds its (op, mode) alone, and compare takes it as
    the baseline of a run of that mode only."""
    whole = tmp_path / "whole.json"
    common = ["--op", "exp", "--shape", "1000", "--shape", "2000", "--only", "eager,triton", *QUICK]
    assert run_cli(*common, "--mode", "fwd,bwd", "--output-json", str(whole)).returncode == 0
    result = run_cli("split", str(whole), "-o", str(tmp_path / "baselines"))
    assert result.returncode == 0, result.stderr
    files = {path.name: read_json(path) for path in (tmp_path / "baselines").glob("*.json")}
    assert sorted(files) == ["exp_bwd.json", "exp_fwd.json"]
    whole_header, _ = read_json(whole)
    for name, (header, records) in files.items():
        mode = name.removesuffix(".json").split("_", 1)[1]
        assert {r.mode for r in records} == {mode} and header["split"] == {"op": "exp", "mode": mode}
        assert {k: v for k, v in header.items() if k != "split"} == whole_header
    assert sum(len(records) for _, records in files.values()) == len(_cells(whole))
    current = tmp_path / "bwd.json"
    assert run_cli(*common, "--mode", "bwd", "--output-json", str(current)).returncode == 0
    compared = run_cli("compare", str(tmp_path / "baselines" / "exp_bwd.json"), str(current),
                       "--fail-on-missing")
    assert compared.returncode in (0, 1), compared.stdout + compared.stderr
    assert "4 cells:" in compared.stdout and " 0 missing," in compared.stdout
    merged = tmp_path / "merged.json"
    parts = [str(tmp_path / "baselines" / name) for name in sorted(files)]
    assert run_cli("merge", *parts, "-o", str(merged)).returncode == 0
    assert "split" not in read_json(merged)[0], "a merge of split files is no longer one (op, mode)"


def test_each_operator_s_split_file_keeps_only_its_own_options(tmp_path: Path) -> None:
    """A run of gemm and addmm records addmm's options for both; gemm's file must match a run of
    gemm alone, which has none, or compare refuses it as the baseline of the CI job's gemm run."""
    common = ["--mode", "fwd", "--shape", "24,16,8", "--only", "eager", *QUICK]
    both, alone = tmp_path / "both.json", tmp_path / "gemm.json"
    assert run_cli("--op", "gemm,addmm", *common, "--output-json", str(both)).returncode == 0
    assert run_cli("--op", "gemm", *common, "--output-json", str(alone)).returncode == 0
    assert run_cli("split", str(both), "-o", str(tmp_path / "b")).returncode == 0
    assert read_json(tmp_path / "b" / "gemm_fwd.json")[0]["options"] == {}
    assert read_json(tmp_path / "b" / "addmm_fwd.json")[0]["options"] == read_json(both)[0]["options"] != {}
    compared = run_cli("compare", str(tmp_path / "b" / "gemm_fwd.json"), str(alone))
    assert compared.returncode in (0, 1), compared.stdout + compared.stderr


def test_split_refuses_bad_input_in_one_line(tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    write_json(empty, {"device": "cpu"}, [])
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    whole = tmp_path / "whole.json"
    assert run_cli("--op", "exp", "--shape", "1000", "--only", "eager", *QUICK,
                   "--output-json", str(whole)).returncode == 0
    for args, reason in (([str(tmp_path / "absent.json"), "-o", str(tmp_path)], "cannot read"),
                         ([str(empty), "-o", str(tmp_path)], "no records to split"),
                         ([str(whole), "-o", str(a_file)], "not a folder")):
        result = run_cli("split", *args)
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert reason in result.stderr


def test_two_torchrun_ranks_give_the_cells_and_verdicts_of_one_process(tmp_path: Path) -> None:
    common = ["--op", "exp", "--mode", "fwd,bwd", *SHAPES[:6], "--only", "eager,triton", *QUICK]
    single, ranked = tmp_path / "single.json", tmp_path / "ranked.json"
    assert run_cli(*common, "--output-json", str(single)).returncode == 0
    result = _torchrun(2, *common, "--output-json", str(ranked))
    assert result.returncode == 0, result.stderr[-3000:]
    one, two = _cells(single), _cells(ranked)
    assert set(one) == set(two)
    assert {k: r.value for k, r in one.items() if k[3] == "accuracy"} == {
        k: r.value for k, r in two.items() if k[3] == "accuracy"
    }
    header, records = read_json(ranked)
    assert [gpu["rank"] for gpu in header["gpus"]] == [0, 1] and header["world_size"] == 2
    assert header["complete"] is True and header["plan"] == read_json(single)[0]["plan"]
    assert {r.gpu for r in records} == {f"{gpu['gpu']}" for gpu in header["gpus"]}
    assert "exp bwd float32" in result.stdout


def _two_ranks_with_a_faulty_backend(tmp_path: Path, backend: str, *extra: str) -> dict:
    """exp at two shapes on two ranks, beside eager, a plugin ``backend`` that misbehaves on rank 1:
    the run exits 1 and its cells are returned."""
    out = tmp_path / "r.json"
    result = _torchrun(2, "--plugin", PLUGIN, "--op", "exp", *SHAPES[:4], "--only", f"eager,{backend}",
                       *QUICK, *extra, "--output-json", str(out))
    assert result.returncode == 1, result.stderr[-3000:]
    return _cells(out)


def test_a_crash_on_one_rank_costs_only_its_cell(tmp_path: Path) -> None:
    cells = _two_ranks_with_a_faulty_backend(tmp_path, "dies_on_rank_1")
    died = [k for k, r in cells.items() if r.status == "error"]
    assert died and all(k[2] == "dies_on_rank_1" and "worker process died" in cells[k].error for k in died)
    assert all(cells[("fwd", n, "eager", "accuracy")].value == 1.0 for n in (1000, 2000))
    assert any(cells[("fwd", n, "dies_on_rank_1", "accuracy")].value == 1.0 for n in (1000, 2000))


def test_a_rank_that_hangs_is_given_up_on_and_the_others_are_kept(tmp_path: Path) -> None:
    cells = _two_ranks_with_a_faulty_backend(tmp_path, "hangs_on_rank_1", "--gather-timeout", "20")
    lost = [k for k, r in cells.items() if r.status == "error"]
    assert lost and all("rank 1 stopped reporting" in cells[k].error for k in lost)
    assert any(cells[("fwd", n, "hangs_on_rank_1", "accuracy")].value == 1.0 for n in (1000, 2000))


@pytest.mark.parametrize("precompile", [[], ["--parallel-compile", "2"]])
def test_a_shard_with_no_work_exits_0_saying_so(tmp_path: Path, precompile: list[str]) -> None:
    """A CI matrix of more parts than shapes: the empty part is no failure."""
    out = tmp_path / "empty.json"
    result = run_cli("--op", "exp", "--shape", "1000", "--only", "eager", *QUICK, "--shard", "2/3",
                     *precompile, "--output-json", str(out))
    assert result.returncode == 0, result.stderr
    assert "no cells fell to this part" in result.stderr
    header, records = read_json(out)
    assert records == [] and header["complete"] is True


def test_the_pieces_split_from_a_merged_sharded_run_merge_back(tmp_path: Path) -> None:
    parts = []
    for k in (1, 2):
        part = tmp_path / f"p{k}.json"
        assert run_cli("--op", "exp", "--mode", "fwd,bwd", "--shape", "1000", "--shape", "2000", "--only",
                       "eager", *QUICK, "--shard", f"{k}/2", "--output-json", str(part)).returncode == 0
        parts.append(str(part))
    merged = tmp_path / "m.json"
    assert run_cli("merge", *parts, "-o", str(merged)).returncode == 0
    assert run_cli("split", str(merged), "-o", str(tmp_path / "sp")).returncode == 0
    back = run_cli("merge", str(tmp_path / "sp" / "exp_fwd.json"), str(tmp_path / "sp" / "exp_bwd.json"),
                   "-o", str(tmp_path / "back.json"))
    assert back.returncode == 0, back.stderr
    assert set(_cells(tmp_path / "back.json")) == set(_cells(merged))
