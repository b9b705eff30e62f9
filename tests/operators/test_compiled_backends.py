"""The compiled and call-path variants of every operator's kernels (``triton_direct``,
``triton_compiled``, ``helion_op``, ``helion_compiled``) against the float64 reference, through
Triton's CPU interpreter, and their bf16 skips there.

Shapes are tiny and odd (no dim a multiple of 16, rms_norm's 200 not a power of two); ``fwd_bwd``
checks outputs and every gradient, ``fwd_no_grad`` the compiled inference graph.  A graph break
under ``fullgraph=True`` is its cell's error, with Dynamo's reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from harness.operator import BenchmarkOperator, Mode
from harness.report.results import read_json
from operators.addmm.operator import AddmmOperator
from operators.exp.operator import ExpOperator
from operators.gemm.operator import GemmOperator
from operators.rms_norm.operator import RMSNormOperator
from tests.helpers import assert_accurate, run_cells, run_cli

VARIANTS = ["triton_direct", "triton_compiled", "helion_op", "helion_compiled"]
CASES: dict[str, tuple[type[BenchmarkOperator], dict[str, Any], tuple[int, ...]]] = {
    "exp": (ExpOperator, {}, (1001,)),
    "gemm": (GemmOperator, {}, (20, 12, 9)),
    "addmm_2d": (AddmmOperator, {"bias": "2d", "alpha": 1.5, "beta": -0.5}, (20, 12, 9)),
    "rms_norm": (RMSNormOperator, {}, (9, 200)),
}


@pytest.mark.parametrize("mode", [Mode.FWD_BWD, Mode.FWD_NO_GRAD], ids=lambda m: m.value)
@pytest.mark.parametrize("case", list(CASES))
def test_variants_match_reference(case: str, mode: Mode) -> None:
    cls, options, shape = CASES[case]
    cells = run_cells(cls("cpu", torch.float32, options), mode, shape, ["accuracy"], VARIANTS)
    assert_accurate(cells, VARIANTS)


def test_compiled_backends_record_their_compile_time() -> None:
    cells = run_cells(ExpOperator("cpu", torch.float32), Mode.FWD, (1001,), ["compile_time"],
                      ["triton_compiled", "helion_compiled"])
    for backend in ("triton_compiled", "helion_compiled"):
        compile_time = cells[(backend, "compile_time")]
        assert compile_time.status == "ok", compile_time.error
        assert compile_time.value > 0 and compile_time.unit == "ms"


def test_every_operator_registers_the_variants() -> None:
    for cls, _, _ in CASES.values():
        assert set(VARIANTS) <= {b.name for b in cls.backends()}, cls.name


def test_bf16_on_cpu_skips_the_variants_with_reason() -> None:
    cells = run_cells(ExpOperator("cpu", torch.bfloat16), Mode.FWD, (512,), ["accuracy"],
                      ["eager", *VARIANTS])
    for backend in VARIANTS:
        assert cells[(backend, "accuracy")].status == "skipped"
        assert "interpreter" in cells[(backend, "accuracy")].error
    assert cells[("eager", "accuracy")].value == 1.0


def test_a_graph_break_is_that_cells_error_with_dynamos_reason(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = run_cli("--plugin", "examples/plugins/graph_break_exp.py", "--op", "exp",
                     "--mode", "fwd,fwd_no_grad", "--only", "eager,triton_compiled,graph_break",
                     "--shape", "1000", "--metrics", "accuracy", "--output-json", str(out))
    assert result.returncode == 1, result.stderr
    _, records = read_json(out)
    cells = {(r.mode, r.backend): r for r in records}
    for mode in ("fwd", "fwd_no_grad"):
        broken = cells[(mode, "graph_break")]
        assert broken.status == "error"
        assert broken.error.startswith("GraphBreakError: ") and "torch._dynamo.graph_break()" in broken.error
        assert cells[(mode, "triton_compiled")].value == 1.0 and cells[(mode, "eager")].value == 1.0
    assert "graph_break: GraphBreakError: " in result.stdout, "the table's footnote names the break"


def test_each_build_keeps_its_own_graph_however_many_shapes_follow() -> None:
    """Building a compiled backend never makes one built before it compile again (a reset of
    Dynamo's caches did, inside that backend's timed repeats), and a sweep's shapes, each built
    anew, never reach Dynamo's recompile limit (8)."""
    from operators.compile_support import compiled

    compiles: list[int] = []

    def counting(graph: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        compiles.append(1)
        return graph.forward

    first, x = compiled(torch.exp, backend=counting), torch.randn(7)
    first(x)
    for size in range(9, 21):
        compiled(torch.exp, backend=counting)(torch.randn(size))
    first(x)
    assert len(compiles) == 1 + 12
