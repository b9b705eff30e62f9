"""rms_norm's kernel choices by shape: both backends decide what ``rms_norm_decisions.json`` says.

The file holds, per (dtype, M, N), Triton's forward and backward plans, the Triton launches
those plans make, and the Helion kernels with their stored-config keys.  It was first written
from bc65cd0's code (before the strategy table), to show the restructure changed no decision;
a change of a decision on purpose rewrites it (``python -m tests.operators.test_rms_norm_strategy``)
and says why in ``results/h200/rms_norm/NOTES.md``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest
import torch

from operators.rms_norm import helion_impl, helion_tuning, strategy, triton_impl, triton_plans, triton_wide

DECISIONS = json.loads(Path(__file__).with_name("rms_norm_decisions.json").read_text())
ROWS = DECISIONS["rows"]
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def row_id(row: list) -> str:
    return f"{row[0]}-{row[1]}x{row[2]}"


class LaunchRecorder:
    """Stands in for a jitted kernel: records ``kernel[grid](*args, **keywords)`` without running it.

    ``USE_PDL`` is left out: it is the launch device's decision, not the plan's (False on meta
    tensors; ``test_rms_norm_triton`` tests it), so the digests recorded before it existed still hold.
    """

    def __init__(self, name: str, launches: list):
        self.name, self.launches = name, launches

    def __getitem__(self, grid: tuple):
        def launch(*args: object, **keywords: object) -> None:
            described = [["tensor", list(a.shape), str(a.dtype).removeprefix("torch.")]
                         if isinstance(a, torch.Tensor) else a for a in args]
            keywords.pop("USE_PDL", None)
            self.launches.append([self.name, list(grid), described, dict(sorted(keywords.items()))])

        return launch


def triton_launches(monkeypatch: pytest.MonkeyPatch, m: int, n: int, dtype: torch.dtype) -> list:
    """The Triton launches of the default forward and backward plans on meta tensors."""
    launches: list = []
    for module in (triton_impl, triton_wide):
        for name in dir(module):
            if name.endswith("_kernel") and hasattr(type(getattr(module, name)), "__getitem__"):
                monkeypatch.setattr(module, name, LaunchRecorder(name, launches))
    x = torch.empty(m, n, dtype=dtype, device="meta")
    weight = torch.empty(n, dtype=dtype, device="meta")
    rstd = torch.empty(m, dtype=torch.float32, device="meta")
    triton_impl.launch_fwd(x, weight, 1e-6, triton_impl.fwd_plan(m, n))
    fwd = list(launches)
    launches.clear()
    triton_impl.launch_bwd(x, x, weight, rstd, triton_impl.bwd_plan(m, n, dtype))
    return [fwd, launches]


def launch_digest(launches: list) -> str:
    return hashlib.sha256(json.dumps(launches, sort_keys=True).encode()).hexdigest()[:16]


def plan_fields(plan: object) -> list:
    """A plan's fields as bc65cd0 recorded them: a backward kernel by its name then (the two-pass
    kernel was "split"), a forward plan with the ``persistent`` flag it had (no strategy set it)."""
    fields = list(dataclasses.astuple(plan))
    if isinstance(plan, triton_plans.FwdPlan):
        fields.insert(3, False)
    if isinstance(fields[0], triton_plans.BwdKernel):
        fields[0] = {"two_pass": "split"}.get(fields[0].value, fields[0].value)
    return fields


def helion_keys(m: int, n: int, dtype: torch.dtype) -> list[list[str]]:
    names = ["rms_norm_fwd", *helion_impl.bwd_kernel_names(m, n, dtype)]
    return [[name, *helion_impl.config_keys(name, dtype, n, m)] for name in names]


@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_triton_plans_are_the_recorded_ones(row: list) -> None:
    dtype_name, m, n, fwd, bwd = row[:5]
    assert plan_fields(triton_impl.fwd_plan(m, n)) == fwd
    assert plan_fields(triton_impl.bwd_plan(m, n, DTYPES[dtype_name])) == bwd


@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_triton_launches_are_the_recorded_ones(monkeypatch: pytest.MonkeyPatch, row: list) -> None:
    dtype_name, m, n = row[:3]
    launches = triton_launches(monkeypatch, m, n, DTYPES[dtype_name])
    assert launch_digest(launches) == row[7], launches


@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_helion_kernels_and_config_keys_are_the_recorded_ones(row: list) -> None:
    dtype_name, m, n = row[:3]
    dtype = DTYPES[dtype_name]
    assert helion_keys(m, n, dtype) == row[5]
    assert helion_tuning.kernels_for_width(n, dtype) == row[6]


def test_each_backend_maps_every_strategy_to_its_kernels() -> None:
    assert set(triton_plans.FWD_PLANS) == set(helion_impl.FWD_KERNELS) == set(strategy.FwdStrategy)
    assert set(triton_plans.BWD_PLANS) == set(helion_impl.BWD_KERNELS) == set(strategy.BwdStrategy)
    assert {rule.strategy for rule in strategy.BWD_RULES} == set(strategy.BwdStrategy)
    assert all(rule.reason for rule in strategy.FWD_RULES + strategy.BWD_RULES)


def _rewrite(commit: str) -> None:
    """Write the decisions of the current code for every recorded (dtype, M, N)."""
    rows = []
    for dtype_name, m, n, *_ in ROWS:
        dtype = DTYPES[dtype_name]
        with pytest.MonkeyPatch.context() as monkeypatch:
            digest = launch_digest(triton_launches(monkeypatch, m, n, dtype))
        rows.append([dtype_name, m, n, plan_fields(triton_impl.fwd_plan(m, n)),
                     plan_fields(triton_impl.bwd_plan(m, n, dtype)), helion_keys(m, n, dtype),
                     helion_tuning.kernels_for_width(n, dtype), digest])
    lines = ",\n".join(f"  {json.dumps(row)}" for row in rows)
    text = (f'{{\n "commit": {json.dumps(commit)},\n "fields": {json.dumps(DECISIONS["fields"])},\n'
            f' "rows": [\n{lines}\n ]\n}}\n')
    Path(__file__).with_name("rms_norm_decisions.json").write_text(text)


if __name__ == "__main__":
    import sys

    from harness.device import prepare_backends

    prepare_backends("cpu")
    _rewrite(sys.argv[1] if len(sys.argv) > 1 else "working tree")
