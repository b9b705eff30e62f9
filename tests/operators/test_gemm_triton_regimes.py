"""The Triton gemm's regimes: which kernel the dispatch picks for a shape, and the split-K path's
exact fp32 dots through Triton's CPU interpreter (both backends' split-K and skinny paths
against float64 are in ``test_gemm_regime_paths.py``).

Dispatch tests use the H200's numbers (132 SMs, :data:`~operators.gemm.strategy.GPU_LIMITS`,
the GPU routes).  The interpreter's scaled-down dispatch (3 SMs, 32x32 split-K tiles, 16-wide
skinny tiles, BLOCK_K 16) cuts the K of 300 of the shared cases into 3 parts of 7, 7 and 5
k-blocks.
"""

from harness.device import prepare_backends

prepare_backends("cpu")

from pathlib import Path  # noqa: E402
from types import SimpleNamespace  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402

from operators.addmm.operator import AddmmOperator  # noqa: E402
from operators.gemm import strategy, triton_configs, triton_dispatch, triton_impl, triton_splitk  # noqa: E402
from operators.gemm.operator import GemmOperator  # noqa: E402
from operators.gemm.strategy import GPU_LIMITS, Regime  # noqa: E402
from operators.gemm.triton_dispatch import Kernel, Plan  # noqa: E402
from tests.helpers import run_compiling  # noqa: E402
from tests.operators.gemm_helpers import H200_SMS, REGIME_CASES, assert_close, h200_plan  # noqa: E402

pytestmark = pytest.mark.usefixtures("allow_tf32")


# ---------------------------------------------------------------------------------------------
# Dispatch at the H200's scale
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("m", [20120, 34579, 34839])
def test_reference_addmm_backward_splits_only_the_long_k_weight_gradient(m: int):
    n, k = 512, 1536
    assert h200_plan(m, n, k).kernel is Kernel.TMA
    assert h200_plan(m, k, n).kernel is Kernel.TMA  # grad_mat1 = grad @ mat2.T: (M, K), 512 deep
    assert h200_plan(k, n, m) == Plan(Regime.SPLIT_K, Kernel.SPLIT_K, 128, 128, split_k=5)  # mat1.T @ grad


@pytest.mark.parametrize(("shape", "parts"), [((1024, 128, 2048), 8), ((128, 128, 3072), 12)])
def test_parts_are_at_least_four_steps_of_64_whatever_block_k_the_configs_list(shape, parts: int):
    # 8 tiles and 1 tile on 132 SMs would take 16 parts; 2048 / 256 and 3072 / 256 bound them.
    assert h200_plan(*shape) == Plan(Regime.SPLIT_K, Kernel.SPLIT_K, 128, 128, split_k=parts)
    assert min(c.kwargs["BLOCK_K"] for c in triton_configs.SPLIT_K_CONFIGS) < 64


@pytest.mark.parametrize("shape", [(2048, 1024, 8192), (1408, 1408, 4096)])
def test_few_tiles_that_fill_their_waves_unsplit_stay_on_the_tiled_kernel(shape: tuple[int, int, int]):
    # 128 and 121 tiles of 128x128 on 132 SMs: over 90% of a wave without cutting K.
    assert h200_plan(*shape) == Plan(Regime.TILED, Kernel.TMA)
    assert h200_plan(*shape, tma=False) == Plan(Regime.TILED, Kernel.POINTER)


@pytest.mark.parametrize(("m", "block_m"), [(1, 16), (16, 16), (33, 64), (64, 64)])
def test_decode_shapes_take_the_skinny_path_with_a_block_covering_m(m: int, block_m: int):
    assert h200_plan(m, 4096, 4096) == Plan(Regime.SKINNY, Kernel.SPLIT_K, block_m, 32, split_k=1)


def test_skinny_n_is_computed_transposed_over_parts_of_2048_within_four_waves():
    assert h200_plan(8192, 8, 8192) == Plan(Regime.SKINNY, Kernel.SPLIT_K, 16, 64, split_k=4, swap=True)
    assert h200_plan(8192, 8, 16384).split_k == 4  # 8 parts would be 1024 programs, 7.8 waves
    assert h200_plan(65536, 8, 8192).split_k == 1  # 1024 tiles are 7.8 waves unsplit
    assert h200_plan(8192, 8, 2047) == Plan(Regime.SKINNY, Kernel.SPLIT_K, 16, 64, split_k=1, swap=True)
    assert h200_plan(8, 8192, 8192).split_k == 1  # M skinny: B streams along N, over all of K


@pytest.mark.parametrize(("shape", "parts"), [((1024, 8, 2048), 8), ((8, 4, 8192), 16)])
def test_transposed_skinny_problems_with_few_tiles_still_fill_their_waves(shape, parts: int):
    # 16 tiles of 64 columns need 8 parts for 128 programs; one tile takes the most parts.
    assert h200_plan(*shape).split_k == parts


def test_a_transposed_skinny_problem_streams_in_parts_its_tiles_alone_would_not_need():
    # The interpreter's scale: 4 tiles of 16 columns on 3 SMs fill their wave unsplit; parts of
    # 6 k-blocks cut K = 300 into 3 (of 7, 7 and 5 k-blocks), each checked against float64.
    m, n, k = 64, 8, 300
    assert triton_dispatch.plan(m, n, k, "tf32", torch.device("cpu")) == \
        Plan(Regime.SKINNY, Kernel.SPLIT_K, 16, 16, split_k=3, swap=True)
    a, b, bias = torch.randn(m, k), torch.randn(k, n), torch.randn(n)
    assert_close(triton_impl.fused_matmul(a, b, bias, alpha=0.5, beta=2.0),
                 0.5 * a.double() @ b.double() + 2.0 * bias.double())


def test_skinny_problems_with_few_column_blocks_split_k():
    plan = h200_plan(1, 1024, 4096)
    assert (plan.regime, plan.split_k) == (Regime.SKINNY, 4)  # 32 programs x 4 = 128 of 132 SMs


def test_a_short_wide_problem_whose_64x64_tiles_fill_a_wave_runs_tiled_over_the_whole_of_k():
    # 128 tiles of 64x64 on 132 SMs (97%); its 32 tiles of 128x128 would take 4 parts of K.
    assert strategy.regime(128, 4096, 4096, H200_SMS, GPU_LIMITS) is Regime.SPLIT_K
    assert h200_plan(128, 4096, 4096) == Plan(Regime.TILED, Kernel.TMA)
    assert h200_plan(128, 4096, 4096, tma=False) == Plan(Regime.TILED, Kernel.POINTER)
    # More than a wave of 64x64 tiles keeps the split: 192 (addmm's dW), 256 (1000x1000x3001).
    assert h200_plan(1536, 512, 20120).split_k == 5
    assert h200_plan(1000, 1000, 3001).split_k == 2
    assert h200_plan(64, 4096, 4096).regime is Regime.SKINNY


def test_tma_configs_run_only_where_their_boxes_fit_the_problem(monkeypatch):
    monkeypatch.setattr(triton_configs, "shared_memory_bytes", lambda device_index: 232448 - 2048)
    args = {"a_desc": SimpleNamespace(base=torch.empty(1, dtype=torch.bfloat16)), "BIAS_KIND": 0,
            "stride_bias_m": 4096}
    kept = triton_configs.prune_tma(list(triton_configs.TMA_CONFIGS), args, M=128, N=4096, K=4096)
    assert kept and all(c.kwargs["BLOCK_M"] <= 128 for c in kept)
    for dtype in (torch.bfloat16, torch.float32):  # the whole-K route's 64x64 tile, in either
        args = {"a_desc": SimpleNamespace(base=torch.empty(1, dtype=dtype)), "BIAS_KIND": 2,
                "stride_bias_m": 4096}
        kept = triton_configs.prune_tma(list(triton_configs.TMA_CONFIGS), args, M=128, N=4096, K=4096)
        assert any(c.kwargs["BLOCK_M"] == c.kwargs["BLOCK_N"] == 64 for c in kept), dtype

    def fitting(m: int, n: int, k: int) -> list[tuple[int, int, int]]:
        return [(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"])
                for c in triton_configs.TMA_CONFIGS if triton_configs.boxes_fit(c, m, n, k)]

    assert len(fitting(4096, 4096, 4096)) == len(triton_configs.TMA_CONFIGS)
    assert set(fitting(128, 4096, 4096)) == {(128, 256, 64), (128, 128, 64), (128, 64, 64),
                                             (64, 256, 64), (128, 128, 32), (64, 128, 32),
                                             (64, 128, 128), (64, 64, 128), (64, 32, 128),
                                             (64, 64, 64)}
    assert set(fitting(4096, 4096, 32)) == {(128, 128, 32), (64, 128, 32)}
    assert fitting(4096, 4096, 16) == fitting(63, 4096, 4096) == []


@pytest.mark.parametrize("shape", [(4096, 4096, 4096), (8192, 14336, 4096), (3000, 5000, 7000),
                                   (1000, 1000, 1000), (256, 256, 256), (20120, 1536, 512)])
def test_large_or_short_k_problems_stay_on_the_tiled_kernel(shape: tuple[int, int, int]):
    assert h200_plan(*shape) == Plan(Regime.TILED, Kernel.TMA)
    assert h200_plan(*shape, tma=False) == Plan(Regime.TILED, Kernel.POINTER)


def test_the_sm_count_decides_whether_tiles_are_few():
    assert strategy.regime(1536, 512, 20120, H200_SMS, GPU_LIMITS) is Regime.SPLIT_K
    assert strategy.regime(1536, 512, 20120, 48, GPU_LIMITS) is Regime.TILED
    assert strategy.regime(1536, 512, 2047, H200_SMS, GPU_LIMITS) is Regime.TILED


def test_split_count_fills_waves_within_the_limits():
    assert strategy.split_count(132, 1 << 20, 132, 256) == 1
    assert strategy.split_count(48, 20120, 132, 256) == 5  # 240 of 264: the first >= 90%
    assert strategy.split_count(66, 20120, 132, 256) == 2
    assert strategy.split_count(1, 1 << 20, 132, 256) == strategy.MAX_SPLIT
    assert strategy.split_count(48, 600, 132, 256) == 2  # parts of at least 256
    assert strategy.split_count(48, 200, 132, 256) == 1


def test_a_split_k_problem_left_with_one_part_runs_tiled_and_other_regimes_keep_theirs():
    assert strategy.settled_regime(Regime.SPLIT_K, 1) is Regime.TILED
    assert strategy.settled_regime(Regime.SPLIT_K, 2) is Regime.SPLIT_K
    assert strategy.settled_regime(Regime.SKINNY, 1) is Regime.SKINNY
    assert strategy.settled_regime(Regime.TILED, 1) is Regime.TILED


def test_every_regime_has_a_route_and_every_rule_and_route_a_reason():
    assert set(triton_dispatch.ROUTES) == set(Regime) == {rule.regime for rule in strategy.RULES}
    assert all(rule.reason for rule in strategy.RULES)
    assert all(route.reason for route in triton_dispatch.ROUTES.values())
    assert all(route.swapped_reason for route in triton_dispatch.ROUTES.values() if route.swapped_block_n)
    for route in triton_dispatch.ROUTES.values():
        assert (route.kernel is Kernel.SPLIT_K) == bool(route.configs)


def test_new_default_shapes_are_in_both_sweeps_and_take_their_regimes():
    expected = {(1, 4096, 4096): Regime.SKINNY, (16, 4096, 4096): Regime.SKINNY,
                (128, 4096, 4096): Regime.TILED, (3000, 5000, 7000): Regime.TILED,
                (8192, 8, 8192): Regime.SKINNY}
    for op in (GemmOperator("cuda", torch.bfloat16), AddmmOperator("cuda", torch.bfloat16)):
        assert set(expected) <= set(op.default_shapes()), op.name
    assert {shape: h200_plan(*shape).regime for shape in expected} == expected


def test_split_k_configs_fit_the_h200_in_bf16_and_are_pruned_in_fp32(monkeypatch):
    monkeypatch.setattr(triton_configs, "shared_memory_bytes", lambda device_index: 232448 - 2048)

    def kept(configs, dtype: torch.dtype, block_m: int, block_n: int) -> int:
        args = {"a_ptr": torch.empty(1, dtype=dtype)}
        return len(triton_configs.prune_split_k(list(configs), args, BLOCK_M=block_m, BLOCK_N=block_n,
                                                B_TMA=True))

    assert kept(triton_configs.SPLIT_K_CONFIGS, torch.bfloat16, 128, 128) == 6
    assert kept(triton_configs.SKINNY_CONFIGS, torch.bfloat16, 64, 32) == 9
    assert kept(triton_configs.SPLIT_K_CONFIGS, torch.float32, 128, 128) == 3
    assert kept(triton_configs.SKINNY_CONFIGS, torch.float32, 64, 32) == 6


def test_sm_count_comes_from_the_device_on_a_gpu(monkeypatch):
    assert strategy.sm_count(torch.device("cpu")) == strategy.INTERPRETER_SMS
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda index: SimpleNamespace(multi_processor_count=132 + index))
    strategy._device_sms.cache_clear()
    try:
        assert strategy.sm_count(torch.device("cuda", 1)) == 133
    finally:
        strategy._device_sms.cache_clear()


# ---------------------------------------------------------------------------------------------
# The split-K path's exact fp32 dots through the interpreter
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["split_k", "skinny_n"])
def test_split_paths_compute_exact_fp32_dots(case: str):
    (m, n, k), _ = REGIME_CASES[case]
    a, b, bias = torch.randn(m, k), torch.randn(k, n), torch.randn(m, n)
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        assert triton_dispatch.plan(m, n, k, "ieee", a.device).kernel is Kernel.SPLIT_K
        out = triton_impl.fused_matmul(a, b, bias, alpha=2.0, beta=0.5)
    finally:
        torch.set_float32_matmul_precision(previous)
    assert_close(out, 2.0 * a.double() @ b.double() + 0.5 * bias.double())


def test_a_split_k_call_on_an_explicit_config_matches_the_autotuned_one():
    # The probe's path (operators/gemm/probes/split_k_configs.py): a transposed first operand,
    # other part counts than the plan's, the config given rather than picked.
    (m, n, k), _ = REGIME_CASES["split_k"]
    a, b = torch.randn(k, m).mT, torch.randn(k, n)
    want = a.double() @ b.double()
    chosen = triton_dispatch.plan(m, n, k, "tf32", a.device)
    config = triton_configs.INTERPRETER_SPLIT_K_CONFIGS[0]
    for split in (chosen.split_k, chosen.split_k + 1):
        out = torch.empty(m, n)
        variant = Plan(Regime.SPLIT_K, Kernel.SPLIT_K, chosen.block_m, chosen.block_n, split)
        triton_splitk.split_k_matmul(a, b, out, triton_configs.NO_BIAS, None, 1.0, 0.0, "tf32", variant,
                                     config)
        assert_close(out, want)
    triton_impl.fused_matmul(a, b)
    assert triton_splitk.autotuned_pick(Regime.SPLIT_K) == config


# ---------------------------------------------------------------------------------------------
# TMA loads of B in the split-K kernel
# ---------------------------------------------------------------------------------------------


def _operand(rows: int, cols: int, transposed: bool, dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(cols, rows, dtype=dtype).mT if transposed else torch.randn(rows, cols, dtype=dtype)


@pytest.mark.parametrize(("shape", "a_trans", "b_trans", "dtype"), [
    ((24, 40, 300), False, False, torch.float32),   # split-K, 3 parts, K not a multiple of BLOCK_K
    ((24, 48, 296), True, True, torch.float16),     # split-K over transposed operands
    ((3, 48, 300), False, False, torch.float32),    # skinny M: B streams along N
    ((40, 3, 296), False, True, torch.float16),     # skinny N, computed transposed in 3 parts
    ((40, 3, 300), False, False, torch.float32),
])
def test_tma_loads_of_b_match_float64_with_the_epilogue(shape, a_trans: bool, b_trans: bool,
                                                       dtype: torch.dtype):
    m, n, k = shape
    a, b = _operand(m, k, a_trans, dtype), _operand(k, n, b_trans, dtype)
    bias = torch.randn(m, n, dtype=dtype)
    chosen = triton_dispatch.plan(m, n, k, "tf32", a.device)
    assert chosen.kernel is Kernel.SPLIT_K and (chosen.split_k > 1 or chosen.regime is Regime.SKINNY)
    out = torch.full((m, n), float("nan"), dtype=dtype)
    triton_splitk.split_k_matmul(a, b, out, triton_configs.FULL_BIAS, bias, 1.5, -0.5, "tf32", chosen,
                                 triton_configs.INTERPRETER_SPLIT_K_TMA_CONFIG)
    assert_close(out, 1.5 * a.double() @ b.double() - 0.5 * bias.double())


def _unaligned(rows: int, cols: int, dtype: torch.dtype) -> torch.Tensor:
    """A row-major (rows, cols) tensor whose base is 2 bytes past a 16-byte boundary."""
    return torch.randn(rows * cols + 1, dtype=dtype)[1:].view(rows, cols)


TMA_CASE = (24, 40, 300)
"""A split-K problem (3 parts on the interpreter's 3 SMs) whose B, (300, 40), holds a 16x32 box."""


@pytest.mark.parametrize("b_kind", ["aligned", "pitch", "base", "strided", "repeated"])
def test_tma_configs_run_only_where_b_has_a_descriptor(monkeypatch, b_kind: str):
    monkeypatch.setattr(triton_configs, "shared_memory_bytes", lambda device_index: 232448 - 2048)
    m, n, k = TMA_CASE
    b = {"aligned": lambda: torch.randn(k, n, dtype=torch.float16),
         "pitch": lambda: torch.randn(n, k, dtype=torch.float16).mT,  # rows of 600 bytes
         "base": lambda: _unaligned(k, n, torch.float16),
         "strided": lambda: torch.randn(k, 4 * n, dtype=torch.float16)[:, ::4],  # neither stride 1
         "repeated": lambda: torch.randn(1, n, dtype=torch.float16).expand(k, n)}[b_kind]()
    a = torch.randn(m, k, dtype=torch.float16)
    chosen = triton_dispatch.plan(m, n, k, "tf32", a.device)
    assert chosen.kernel is Kernel.SPLIT_K and chosen.split_k == 3
    out = torch.full((m, n), float("nan"), dtype=torch.float16)
    call = (a, b, out, triton_configs.NO_BIAS, None, 1.0, 0.0, "tf32", chosen,
            triton_configs.INTERPRETER_SPLIT_K_TMA_CONFIG)
    if b_kind == "aligned":
        triton_splitk.split_k_matmul(*call)
        assert_close(out, a.double() @ b.double())
        return
    with pytest.raises(ValueError, match="loads B by TMA"):
        triton_splitk.split_k_matmul(*call)
    assert_close(triton_impl.fused_matmul(a, b), a.double() @ b.double())


def test_tma_configs_are_pruned_unless_the_launch_passes_a_descriptor(monkeypatch):
    monkeypatch.setattr(triton_configs, "shared_memory_bytes", lambda device_index: 232448 - 2048)
    configs = [triton_configs.INTERPRETER_SPLIT_K_CONFIGS[0], triton_configs.INTERPRETER_SPLIT_K_TMA_CONFIG]
    args = {"a_ptr": torch.empty(1, dtype=torch.float16)}
    assert triton_configs.prune_split_k(configs, args, BLOCK_M=32, BLOCK_N=32, B_TMA=False) == configs[:1]
    assert triton_configs.prune_split_k(configs, args, BLOCK_M=32, BLOCK_N=32, B_TMA=True) == configs


def test_the_autotuner_never_runs_a_tma_pick_on_a_b_without_a_descriptor(monkeypatch):
    # Two configs, the TMA one first and every timing equal, so the autotuner picks it for an
    # aligned B; a B of the same shape and strides on an unaligned base must be tuned apart.
    monkeypatch.setattr(triton_configs, "shared_memory_bytes", lambda device_index: 232448 - 2048)
    configs = [triton_configs.INTERPRETER_SPLIT_K_TMA_CONFIG, triton_configs.INTERPRETER_SPLIT_K_CONFIGS[0]]
    tuned = triton.autotune(configs=configs, key=triton_configs.SPLIT_K_TUNING_KEY,
                            prune_configs_by={"early_config_prune": triton_configs.prune_split_k},
                            do_bench=lambda call, quantiles=None, **_: [1.0] * len(quantiles or [1]))(
        triton_splitk._matmul_split_k_kernel)
    monkeypatch.setitem(triton_splitk._TUNED, Regime.SPLIT_K, tuned)
    m, n, k = TMA_CASE
    a = torch.randn(m, k, dtype=torch.float16)
    aligned, unaligned = torch.randn(k, n, dtype=torch.float16), _unaligned(k, n, torch.float16)
    for b, picked_tma in ((aligned, True), (unaligned, False)):
        assert_close(triton_impl.fused_matmul(a, b), a.double() @ b.double())
        assert tuned.best_config.kwargs["TMA_LOADS"] is picked_tma


def test_split_k_configs_compile_for_sm90_within_shared_memory_and_load_b_as_listed():
    checked = run_compiling(Path(__file__).with_name("sm90") / "split_k_fits_sm90.py")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    listed = len(triton_configs.SPLIT_K_CONFIGS) + 3 * len(triton_configs.SKINNY_CONFIGS)
    assert checked.stdout.count("bytes of shared memory") == 2 * listed, checked.stdout
    assert any(c.kwargs["TMA_LOADS"] for c in triton_configs.SKINNY_CONFIGS + triton_configs.SPLIT_K_CONFIGS)
