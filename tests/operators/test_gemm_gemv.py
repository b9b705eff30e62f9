"""The Triton gemm's matrix-vector path (:mod:`operators.gemm.triton_gemv`): which problems the
dispatch sends there, its output against float64 with each bias kind and the gradients of a
decode matmul and addmm that run it, through Triton's CPU interpreter, at odd sizes, in fp32
and fp16."""

from harness.device import prepare_backends

prepare_backends("cpu")

import pytest  # noqa: E402
import torch  # noqa: E402

from operators.gemm import triton_configs, triton_dispatch, triton_gemv, triton_impl  # noqa: E402
from operators.gemm.strategy import Regime  # noqa: E402
from operators.gemm.triton_dispatch import Kernel, Plan  # noqa: E402
from tests.helpers import CountedLaunches  # noqa: E402
from tests.operators.gemm_helpers import assert_close, check, h200_plan, randn  # noqa: E402

TOL = {torch.float32: 1e-5, torch.float16: 2e-3}
"""Of the output's largest magnitude: fp16 rounds the output itself."""


pytestmark = pytest.mark.usefixtures("allow_tf32")


@pytest.fixture
def gemv_launches(monkeypatch: pytest.MonkeyPatch) -> CountedLaunches:
    counted = CountedLaunches(triton_gemv._gemv_kernel)
    monkeypatch.setattr(triton_gemv, "_gemv_kernel", counted)
    return counted


def test_one_row_over_an_operand_read_along_k_takes_the_gemv_kernel():
    assert h200_plan(1, 4096, 4096, row_dot=True) == Plan(Regime.SKINNY, Kernel.GEMV)
    assert h200_plan(4096, 1, 4096, row_dot=True) == Plan(Regime.SKINNY, Kernel.GEMV, swap=True)
    assert h200_plan(1, 2097, 4096, row_dot=True).kernel is Kernel.GEMV  # 132 programs of 16 columns
    # A row-major weight streams along N, as the split-K kernel reads it; two rows pad a tile less.
    assert h200_plan(1, 4096, 4096, row_dot=False).kernel is Kernel.SPLIT_K
    assert h200_plan(2, 4096, 4096, row_dot=True).kernel is Kernel.SPLIT_K


@pytest.mark.parametrize(("m", "n", "k"), [(1, 2096, 4096), (1, 512, 4096), (1, 64, 65536), (1, 1, 1 << 20),
                                           (2096, 1, 4096)])
def test_a_row_too_short_to_give_every_sm_a_gemv_program_splits_k_instead(m: int, n: int, k: int):
    # The GEMV does not split K: under 132 programs of 16 columns the split-K kernel cuts K.
    plan = h200_plan(m, n, k, row_dot=True)
    assert plan.kernel is Kernel.SPLIT_K and plan.split_k > 1


def test_the_interpreter_s_route_counts_programs_of_4_columns_on_its_3_sms():
    cpu = torch.device("cpu")
    assert triton_dispatch.plan(1, 8, 77, "tf32", cpu, True).kernel is Kernel.SPLIT_K
    assert triton_dispatch.plan(1, 9, 77, "tf32", cpu, True).kernel is Kernel.GEMV


def test_only_the_tiled_kernels_have_a_tiled_pick():
    with pytest.raises(ValueError, match="gemv is not a tiled kernel"):
        triton_impl.autotuned_tiled_pick(Kernel.GEMV)


def test_the_row_dot_layouts_are_told_by_the_operand_read_along_k():
    w = torch.randn(45, 77)
    assert triton_dispatch.reads_rows_along_k(torch.randn(1, 77), w.T)  # x @ w.T
    assert not triton_dispatch.reads_rows_along_k(torch.randn(1, 77), torch.randn(77, 45))
    assert triton_dispatch.reads_rows_along_k(torch.randn(37, 77), torch.randn(77, 1))  # w @ x.T
    assert not triton_dispatch.reads_rows_along_k(torch.randn(77, 37).T, torch.randn(77, 1))


def _bias(kind: str, m: int, n: int, dtype: torch.dtype) -> torch.Tensor | None:
    return {"none": None, "row": torch.randn(n, dtype=dtype), "full": torch.randn(m, n, dtype=dtype),
            "column": torch.randn(m, 1, dtype=dtype)}[kind]


@pytest.mark.parametrize(("m", "n", "k"), [(1, 45, 77), (1, 300, 513), (1, 13, 1), (37, 1, 29)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("bias", ["none", "row", "full", "column"])
def test_gemv_outputs_match_float64_with_the_epilogue(gemv_launches, m: int, n: int, k: int,
                                                      dtype: torch.dtype, bias: str):
    a = torch.randn(m, k, dtype=dtype)
    b = torch.randn(n, k, dtype=dtype).T if m == 1 else torch.randn(k, n, dtype=dtype)
    c = _bias(bias, m, n, dtype)
    out = triton_impl.fused_matmul(a, b, c, alpha=1.5, beta=-0.5)
    want = 1.5 * a.double() @ b.double() + (0 if c is None else -0.5 * c.double())
    scale = max(1.0, want.abs().max().item())
    torch.testing.assert_close(out.double(), want, rtol=0, atol=TOL[dtype] * scale)
    assert gemv_launches.launches == 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_a_decode_linear_layer_s_input_gradient_runs_the_gemv_kernel(gemv_launches, dtype: torch.dtype):
    # x (1, K) @ w (K, N): grad_x = grad @ w.T, one row over w read along K.
    check(triton_impl.matmul, torch.matmul, [randn(1, 201, dtype=dtype), randn(201, 45, dtype=dtype)])
    assert gemv_launches.launches == 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_an_addmm_over_a_transposed_weight_at_m_1_matches_float64_in_every_gradient(gemv_launches,
                                                                                   dtype: torch.dtype):
    # The forward reads w.T along K (GEMV), grad_x = grad @ w reads w along N (split-K).
    w = randn(45, 201, dtype=dtype)
    check(lambda bias, x, w: triton_impl.addmm(bias, x, w.T, alpha=0.5, beta=2.0),
          lambda bias, x, w: torch.addmm(bias, x, w.T, alpha=0.5, beta=2.0),
          [randn(45, dtype=dtype), randn(1, 201, dtype=dtype), w])
    assert gemv_launches.launches == 1


@pytest.mark.parametrize("operand", ["padded_b", "repeated_b", "padded_a"])
def test_gemv_reads_operands_of_any_pitch(gemv_launches, operand: str):
    m, n, k = (37, 1, 29) if operand == "padded_a" else (1, 45, 77)
    a = torch.randn(m, k + 3)[:, :k] if operand == "padded_a" else torch.randn(m, k)
    b = {"padded_b": lambda: torch.randn(n, k + 5)[:, :k].T,  # column-major, a pitch of k + 5
         "repeated_b": lambda: torch.randn(1, k).expand(n, k).T,  # every column the same row
         "padded_a": lambda: torch.randn(k, n)}[operand]()
    assert_close(triton_impl.fused_matmul(a, b), a.double() @ b.double())
    assert gemv_launches.launches == 1


def test_exact_fp32_dots_take_the_gemv_kernel_too(gemv_launches):
    a, b = torch.randn(1, 300), torch.randn(45, 300).T
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        out = triton_impl.fused_matmul(a, b)
    finally:
        torch.set_float32_matmul_precision(previous)
    assert_close(out, a.double() @ b.double())
    assert gemv_launches.launches == 1


def test_a_gemv_call_on_an_explicit_config_matches_float64_and_a_wrong_config_is_refused():
    a, b = torch.randn(1, 300), torch.randn(45, 300).T
    config = triton_configs.INTERPRETER_GEMV_CONFIGS[0]
    assert_close(triton_impl.fused_matmul(a, b, config=config), a.double() @ b.double())
    with pytest.raises(ValueError, match="gemv kernel's"):
        triton_impl.fused_matmul(a, b, config=triton_configs.INTERPRETER_SPLIT_K_CONFIGS[0])
