"""The ``quack`` peer of gemm and addmm on the CPU: skipped with its reason, run only when
``--only`` names it, refusing fp32 and sizes that break 16-byte alignment, and its autograd
wiring (alpha, beta, both bias kinds, transposed operands) against float64 in every mode, on a
stand-in for quack's GEMM.  tests/gpu/test_quack_gemm.py runs quack itself."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
import torch

from harness.operator import Mode
from harness.report.results import read_json
from operators import peers_support
from operators.addmm.operator import AddmmOperator
from operators.gemm import peers
from operators.gemm.operator import GemmOperator
from tests.helpers import assert_accurate, run_cells, run_cli

OPERATORS = {"gemm": GemmOperator, "addmm": AddmmOperator}
REASONS = {False: "quack-kernels is not installed (pip install -e '.[peers]')",
           True: "quack needs an sm_90+ GPU"}
"""quack's skip reason on the CPU, by whether quack-kernels is installed."""
ALIGNED = (37, 24, 20)  # (M, N, K): M odd; N and K rows of 16-byte multiples in fp32
ADDMM_OPTIONS = [{"bias": "1d", "alpha": 1.5, "beta": -0.75}, {"bias": "2d", "alpha": -0.5, "beta": 2.0}]


@pytest.mark.parametrize("present", [False, True], ids=["absent", "installed"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", OPERATORS)
def test_quack_on_the_cpu_is_skipped_naming_what_it_lacks(monkeypatch, name: str, dtype: torch.dtype,
                                                         present: bool) -> None:
    monkeypatch.setattr(peers_support, "installed", lambda module: present)
    op = OPERATORS[name]("cpu", dtype)
    reasons = {b.name: op.skip_reason(b) for b in op.backends()}
    assert reasons["quack"] == REASONS[present]
    assert reasons["eager"] is None


def test_quack_refuses_fp32_naming_the_dtypes_it_takes() -> None:
    assert peers.unsupported_dtype(torch.bfloat16) is None
    assert peers.unsupported_dtype(torch.float16) is None
    assert peers.unsupported_dtype(torch.float32) == "quack's GEMM takes bfloat16 or float16, not float32"


@pytest.mark.parametrize(("shape", "dtype", "refused"), [
    ((37, 48, 80), torch.bfloat16, None),
    ((1, 8, 8), torch.float16, None),
    ((37, 45, 80), torch.bfloat16, "(K=80, N=45 in bfloat16)"),
    ((37, 48, 29), torch.bfloat16, "(K=29, N=48 in bfloat16)"),
    ((4097, 4097, 4097), torch.float16, "(K=4097, N=4097 in float16)"),
])
def test_quack_refuses_k_or_n_that_break_16_byte_alignment(shape: tuple[int, int, int], dtype: torch.dtype,
                                                           refused: str | None) -> None:
    m, n, k = shape
    mat1, mat2 = torch.empty(m, k, dtype=dtype), torch.empty(k, n, dtype=dtype)
    if refused is None:
        peers.check_quack_shape(mat1, mat2)
    else:
        with pytest.raises(ValueError) as raised:
            peers.check_quack_shape(mat1, mat2)
        assert str(raised.value) == f"quack: K and N must keep 16-byte alignment {refused}"


def test_quack_runs_only_when_named() -> None:
    """Default sweeps (and so the committed baselines) keep the four implementations."""
    for operator in OPERATORS.values():
        names = [b.name for b in operator.backends()]
        assert names[-1] == "quack"
        assert [b.name for b in operator.backends() if b.enabled] == ["eager", "triton", "helion",
                                                                      "torch_compile"]
    listing = {line.split(":")[0]: line for line in run_cli("--list-backends").stdout.splitlines()}
    for name in OPERATORS:
        assert listing[name].endswith(", torch_compile, quack (with --only)")


@pytest.mark.parametrize("name", OPERATORS)
def test_only_quack_on_the_cpu_is_a_skipped_cell_with_its_reason(tmp_path: Path, name: str) -> None:
    """``--only quack``: eager still runs as the speedup baseline, so the run succeeds."""
    out = tmp_path / "r.json"
    result = run_cli("--op", name, "--only", "quack", "--shape", "64,48,80", "--rep", "1", "--warmup", "0",
                     "--output-json", str(out))
    assert result.returncode == 0, result.stderr
    reason = REASONS[peers_support.installed("quack")]
    assert f"quack: {reason}" in result.stdout
    records = read_json(out)[1]
    assert {r.backend for r in records} == {"eager", "quack"}
    assert all(r.status == "skipped" and r.error == reason for r in records if r.backend == "quack")
    assert all(r.status == "ok" for r in records if r.backend == "eager")


def _checked(*tensors: torch.Tensor) -> None:
    """What quack's GEMM needs of its 2-D operands: one unit stride (either major) and the
    other stride a multiple of 16 bytes."""
    for t in tensors:
        assert t.dim() == 2 and 1 in t.stride(), t.stride()
        assert all(s * t.element_size() % 16 == 0 for s in t.stride() if s != 1), t.stride()


@pytest.fixture
def stand_in_quack(monkeypatch) -> list[str]:
    """``quack.gemm_interface`` replaced by its math (in float64, cast back) with its operand
    checks, and quack's skip lifted; the names of the functions called are collected."""
    calls: list[str] = []

    def gemm(A, B, out=None, bias=None, alpha=1.0):
        _checked(A, B)
        assert isinstance(alpha, float)  # quack reads any other alpha as a device tensor
        calls.append("gemm")
        product = alpha * A.double() @ B.double()
        return (product if bias is None else product + bias.double()).to(A.dtype)

    def gemm_add(A, B, C, out=None, bias=None, alpha=1.0, beta=1.0):
        _checked(A, B, C)
        assert isinstance(alpha, float) and isinstance(beta, float)
        calls.append("gemm_add")
        return (alpha * A.double() @ B.double() + beta * C.double()).to(A.dtype)

    module = types.ModuleType("quack.gemm_interface")
    module.gemm, module.gemm_add = gemm, gemm_add
    monkeypatch.setitem(sys.modules, "quack.gemm_interface", module)
    monkeypatch.setattr(peers, "skip_reason", lambda *args: None)
    return calls


@pytest.mark.parametrize("mode", list(Mode), ids=[m.value for m in Mode])
def test_quack_gemm_wiring_matches_reference_in_every_mode(stand_in_quack: list[str], mode: Mode) -> None:
    cells = run_cells(GemmOperator("cpu", torch.float32), mode, ALIGNED, ["accuracy"], ["eager", "quack"])
    assert_accurate(cells, ["eager", "quack"])
    assert set(stand_in_quack) == {"gemm"}


@pytest.mark.parametrize("mode", list(Mode), ids=[m.value for m in Mode])
@pytest.mark.parametrize("options", ADDMM_OPTIONS, ids=lambda o: o["bias"])
def test_quack_addmm_wiring_matches_reference_in_every_mode(stand_in_quack: list[str], options: dict,
                                                           mode: Mode) -> None:
    """alpha and beta other than 1 and of either sign: a gradient missing one fails its tolerance."""
    op = AddmmOperator("cpu", torch.float32, options)
    cells = run_cells(op, mode, ALIGNED, ["accuracy"], ["eager", "quack"])
    assert_accurate(cells, ["eager", "quack"])
    assert stand_in_quack[0] == ("gemm_add" if options["bias"] == "2d" else "gemm")


@pytest.mark.parametrize("name", OPERATORS)
def test_an_unaligned_shape_fails_its_cell_before_quack_is_called(stand_in_quack: list[str],
                                                                  name: str) -> None:
    cells = run_cells(OPERATORS[name]("cpu", torch.float32), Mode.FWD, (37, 45, 29), ["accuracy"], ["quack"])
    record = cells[("quack", "accuracy")]
    assert record.status == "error"
    assert record.error == "ValueError: quack: K and N must keep 16-byte alignment (K=29, N=45 in float32)"
    assert stand_in_quack == []
