"""Both backends' split-K and skinny gemm paths against float64, forward and every gradient,
through Triton's CPU interpreter, with the plans their forward and two backward matmuls ran;
their custom ops under opcheck and a full-graph compile.

The cases (:data:`~tests.operators.gemm_helpers.REGIME_CASES`) take every regime under the
interpreter's limits and 3 SMs: no dim a multiple of 16, a K of 300 cut into 3 parts.  Helion
runs its default config there (the interpreted dtypes have no stored configs).
"""

from harness.device import prepare_backends

prepare_backends("cpu")

from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from types import ModuleType  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from operators.gemm import helion_dispatch, helion_impl, helion_ops, triton_dispatch, triton_impl  # noqa: E402
from operators.gemm.strategy import Regime  # noqa: E402
from tests.operators.gemm_helpers import (  # noqa: E402
    REGIME_CASES,
    RegimePlan,
    assert_close,
    check,
    float64_reference,
    plans_in_run_order,
    randn,
    regime_plan,
)


@dataclass
class Backend:
    """A backend's host module (its ``fused_matmul`` and the ``plan`` it calls), its dispatch's
    ``plan``, the module of its custom-op ``matmul`` and ``addmm`` and the ops' namespace, and the
    plans its matmuls ran in a test."""

    host: ModuleType
    plan: Callable
    ops: ModuleType
    namespace: str
    ran: list[RegimePlan] = field(default_factory=list)


BACKENDS = {
    "triton": (triton_impl, triton_dispatch.plan, triton_impl, "opbench"),
    "helion": (helion_impl, helion_dispatch.plan, helion_ops, "opbench_helion"),
}
DTYPES = [torch.float32, torch.float16]


pytestmark = pytest.mark.usefixtures("allow_tf32")


@pytest.fixture(params=list(BACKENDS))
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Backend:
    """Each backend in turn, recording the plan of every matmul it runs."""
    chosen = Backend(*BACKENDS[request.param])

    def recording(*args):
        plan = chosen.plan(*args)
        chosen.ran.append(regime_plan(plan.regime, plan.split_k, plan.swap))
        return plan

    monkeypatch.setattr(chosen.host, "plan", recording)
    return chosen


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", REGIME_CASES)
def test_matmul_paths_match_float64(backend: Backend, case: str, dtype: torch.dtype):
    m, n, k = REGIME_CASES[case][0]
    check(backend.ops.matmul, torch.matmul, [randn(m, k, dtype=dtype), randn(k, n, dtype=dtype)])
    assert backend.ran == plans_in_run_order(case)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("bias_dims", [1, 2])
@pytest.mark.parametrize("case", REGIME_CASES)
def test_addmm_paths_apply_alpha_and_beta_once_forward_and_backward(backend: Backend, case: str,
                                                                   bias_dims: int, dtype: torch.dtype):
    m, n, k = REGIME_CASES[case][0]
    bias = randn(n, dtype=dtype) if bias_dims == 1 else randn(m, n, dtype=dtype)

    def run(b, x, y):
        return backend.ops.addmm(b, x, y, alpha=1.5, beta=-0.75)

    def reference(b, x, y):
        return torch.addmm(b, x, y, alpha=1.5, beta=-0.75)

    check(run, reference, [bias, randn(m, k, dtype=dtype), randn(k, n, dtype=dtype)])
    assert backend.ran == plans_in_run_order(case)


def test_split_paths_read_transposed_operands_in_place(backend: Backend):
    a, b, bias = torch.randn(300, 24).T, torch.randn(20, 300).T, torch.randn(20)
    out = backend.host.fused_matmul(a, b, bias, alpha=0.5, beta=2.0)
    assert_close(out, 0.5 * a.double() @ b.double() + 2.0 * bias.double())
    assert backend.ran == [regime_plan(Regime.SPLIT_K, 3)]


@pytest.mark.parametrize("case", REGIME_CASES)
def test_regime_path_custom_ops_pass_opcheck(backend: Backend, case: str):
    ops = getattr(torch.ops, backend.namespace)
    (m, n, k), expected = REGIME_CASES[case]
    a, b = randn(m, k), randn(k, n)
    torch.library.opcheck(ops.matmul.default, (a, b))
    torch.library.opcheck(ops.addmm.default, (randn(n), a, b, 1.5, 0.5))
    torch.library.opcheck(ops.addmm.default, (randn(m, n), a, b, 2.0, -1.0))
    assert set(expected) <= set(backend.ran)  # the forward's and both gradients' regimes were checked


def test_a_full_bias_at_beta_one_passes_opcheck_and_compiles(backend: Backend):
    """addmm's ``--bias 2d`` defaults (alpha = beta = 1), which the regime cases' scaled calls skip."""
    ops = getattr(torch.ops, backend.namespace)
    bias, a, b = randn(20, 12), randn(20, 9), randn(9, 12)
    torch.library.opcheck(ops.addmm.default, (bias, a, b, 1.0, 1.0))
    compiled = torch.compile(lambda *t: backend.ops.addmm(*t).sum(), fullgraph=True, backend="aot_eager")
    compiled(bias, a, b).backward()
    assert_close(bias.grad, torch.ones(20, 12, dtype=torch.float64))


def test_split_paths_compile_without_graph_breaks(backend: Backend):
    def loss(bias, x, y, v):
        return (backend.ops.addmm(bias, x, y, alpha=1.5, beta=0.5) + backend.ops.matmul(v, y)).sum()

    (m, n, k), _ = REGIME_CASES["split_k"]
    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
    inputs = [randn(n), randn(m, k), randn(k, n), randn(1, k)]
    compiled(*inputs).backward()

    def reference(bias, x, y, v):
        return torch.addmm(bias, x, y, alpha=1.5, beta=0.5) + v @ y

    _, ref_grads = float64_reference(reference, inputs, torch.ones(m, n))
    for tensor, ref_grad in zip(inputs, ref_grads, strict=True):
        assert_close(tensor.grad, ref_grad)
