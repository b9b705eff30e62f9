"""The Helion gemm's regimes: which kernel, bucket and K split the dispatch picks for a shape, and
the configs the skinny and split-K routes run on (both backends' paths against float64 are in
``test_gemm_regime_paths.py``).

Dispatch tests use the H200's numbers (132 SMs, :data:`~operators.gemm.strategy.GPU_LIMITS`,
the GPU routes).  Under the interpreter (3 SMs, 32x32 split-K tiles, 16x16 skinny tiles, parts
in steps of 16) a K of 300 is cut into parts of 112, 112 and 76.
"""

from harness.device import prepare_backends

prepare_backends("cpu")

import functools  # noqa: E402
import json  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from harness.notes import collecting  # noqa: E402
from harness.operator import Mode  # noqa: E402
from harness.tuning import launch  # noqa: E402
from harness.tuning.choice import choose_config  # noqa: E402
from harness.tuning.configs import ConfigStore, config_key, load_store, split_key  # noqa: E402
from operators.gemm import helion_dispatch, helion_impl, helion_tuning  # noqa: E402
from operators.gemm.helion_dispatch import Kernel, Plan  # noqa: E402
from operators.gemm.operator import CUDA_SHAPES, GemmOperator  # noqa: E402
from operators.gemm.strategy import GPU_LIMITS, Regime  # noqa: E402
from tests.helpers import (  # noqa: E402
    assert_accurate,
    assert_only_helion_noted,
    run_cells,
    run_compiling,
    store_copy,
)
from tests.operators.gemm_helpers import assert_close, check, randn  # noqa: E402
from tests.operators.sm90 import helion_indexing_sm90  # noqa: E402

H200_SMS = 132


def h200_plan(m: int, n: int, k: int) -> Plan:
    return helion_dispatch.choose(m, n, k, sms=H200_SMS, limits=GPU_LIMITS, routes=helion_dispatch.ROUTES)


def _tiled(size: str | None = None, k: int = 0, swap: bool = False) -> Plan:
    skinny = size in ("skinny", "decode")
    return Plan(Regime.SKINNY if skinny else Regime.TILED, Kernel.TILED, size, 1, k, swap,
                pointer=skinny or size == "outer")


# ---------------------------------------------------------------------------------------------
# Dispatch at the H200's scale
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("m", "part_k"), [(20120, 4032), (34579, 6976), (34839, 6976)])
def test_reference_addmm_backward_splits_only_the_long_k_weight_gradient(m: int, part_k: int):
    n, k = 512, 1536
    assert h200_plan(m, n, k) == _tiled(k=k)
    assert h200_plan(m, k, n) == _tiled(k=n)  # grad_mat1 = grad @ mat2.T: (M, K), 512 deep
    # mat1.T @ grad: 48 tiles x 5 parts = 240 programs on 132 SMs, parts in whole 64-deep k-blocks
    assert h200_plan(k, n, m) == Plan(Regime.SPLIT_K, Kernel.SPLIT_K, "large", 5, part_k)


@pytest.mark.parametrize("m", [16, 33, 64])
def test_skinny_m_shapes_take_the_skinny_route_on_the_tiled_kernel(m: int):
    assert h200_plan(m, 4096, 4096) == _tiled("skinny", k=4096)  # 128+ programs of 16x32


@pytest.mark.parametrize("m", [1, 8, 15])
def test_decode_shapes_below_the_tiles_rows_take_the_skinny_route_on_decode_configs(m: int):
    assert h200_plan(m, 4096, 4096) == _tiled("decode", k=4096)


def test_skinny_n_is_computed_transposed():
    assert h200_plan(8192, 8, 8192) == _tiled("skinny", k=8192, swap=True)


def test_skinny_problems_with_few_column_blocks_split_k():
    # 32 programs x 4 parts = 128 of 132 SMs, parts of 4 k-blocks of 256
    assert h200_plan(1, 1024, 4096) == Plan(Regime.SKINNY, Kernel.SPLIT_K, "skinny", 4, 1024, pointer=True)


def test_a_short_wide_problem_whose_64x64_tiles_fill_a_wave_runs_tiled_on_the_wide_bucket():
    # 128 tiles of 64x64 on 132 SMs (97%); its 32 tiles of 128x128 would take 4 parts of K.
    assert h200_plan(128, 4096, 4096) == _tiled("wide", k=4096)
    assert h200_plan(256, 1024, 8192) == Plan(Regime.SPLIT_K, Kernel.SPLIT_K, "large", 8, 1024)


@pytest.mark.parametrize("shape", [(4096, 4096, 4096), (8192, 14336, 4096), (3000, 5000, 7000),
                                   (1000, 1000, 1000), (256, 256, 256), (20120, 1536, 512),
                                   (4096, 4096, 17)])
def test_large_or_short_k_problems_stay_on_the_tiled_kernel(shape: tuple[int, int, int]):
    assert h200_plan(*shape) == _tiled(k=shape[2])


@pytest.mark.parametrize("shape", [(8192, 8192, 8), (4096, 4096, 1), (1000, 1000, 16), (300, 5000, 3)])
def test_k_of_16_or_less_runs_tiled_on_the_outer_bucket_with_pointer_loads(shape: tuple[int, int, int]):
    assert h200_plan(*shape) == _tiled("outer", k=shape[2])


@pytest.mark.parametrize("shape", [(2048, 1024, 8192), (1408, 1408, 4096)])
def test_few_tiles_that_fill_their_waves_unsplit_are_tiled_as_in_triton(shape: tuple[int, int, int]):
    # 128 and 121 tiles of 128x128 on 132 SMs: the same plan as Triton's dispatch gives.
    assert h200_plan(*shape) == _tiled(k=shape[2])


def test_an_empty_output_is_not_split():
    assert h200_plan(0, 4096, 4096).split_k == h200_plan(4096, 0, 64).split_k == 1


def test_the_default_sweeps_matmuls_take_the_routes_in_the_notes():
    # (fwd, grad_a = dy @ b.T, grad_b = a.T @ dy), as results/h200/gemm/NOTES.md lists them
    # (128x4096x4096 tiled since its prediction 43)
    tiled, skinny, skinny_t = ("tiled", 1), ("skinny", 1), ("skinny transposed", 1)
    expected = {
        **{(m, 512, 1536): [tiled, tiled, ("split_k", 5)] for m in (20120, 34579, 34839)},
        (1, 4096, 4096): [skinny, skinny, tiled],
        (16, 4096, 4096): [skinny, skinny, tiled],
        (128, 4096, 4096): [tiled, tiled, tiled],
        (8192, 8, 8192): [skinny_t, tiled, skinny_t],
        (3000, 5000, 7000): [tiled, tiled, tiled],
    }

    def route(m: int, n: int, k: int) -> tuple[str, int]:
        chosen = h200_plan(m, n, k)
        name = chosen.regime.value + (" transposed" if chosen.swap else "")
        return name, chosen.split_k

    for (m, n, k), routes in expected.items():
        assert [route(m, n, k), route(m, k, n), route(k, n, m)] == routes, (m, n, k)
    others = [shape for shape in CUDA_SHAPES if shape not in expected]
    assert len(others) == 10
    assert all(route(*s) == route(s[0], s[2], s[1]) == route(s[2], s[1], s[0]) == tiled for s in others)


@pytest.mark.parametrize("size", ["skinny", "decode", "small", "medium", "large", "wide", "outer"])
def test_each_tiled_bucket_is_tuned_on_a_shape_that_takes_it(size: str):
    # The skinny configs are timed at M = 16 and the decode ones at M = 1, each in its own bucket.
    m, n, k = helion_tuning._shape("matmul", f"{size}|nn")
    chosen = h200_plan(m, n, k)
    a, b = torch.empty(m, k, device="meta"), torch.empty(k, n, device="meta")
    assert chosen.kernel is Kernel.TILED and helion_impl.bucket(a, b, chosen.size) == f"{size}|nn"


def _operand(rows: int, cols: int, dtype: torch.dtype, column_major: bool) -> torch.Tensor:
    return torch.empty(cols, rows, dtype=dtype, device="meta").T if column_major else \
        torch.empty(rows, cols, dtype=dtype, device="meta")


@pytest.mark.parametrize(("shape", "layout", "dtype", "fixed"), [
    ((2048, 2048, 2048), "nn", torch.bfloat16, None),
    ((2049, 2048, 2048), "nn", torch.bfloat16, None),  # M is no contiguous side: rows mask whole vectors
    ((2048, 2048, 2049), "nn", torch.bfloat16, helion_impl.DESCRIPTOR),  # x's rows
    ((2048, 2049, 2048), "nn", torch.bfloat16, helion_impl.DESCRIPTOR),  # y's rows and the output's
    ((2049, 2048, 2048), "tn", torch.bfloat16, helion_impl.DESCRIPTOR),  # x column-major: its M
    ((2048, 2048, 2049), "tn", torch.bfloat16, None),
    ((2048, 2048, 2049), "nt", torch.bfloat16, helion_impl.DESCRIPTOR),  # y column-major: its K
    ((2048, 2049, 2048), "nt", torch.bfloat16, helion_impl.DESCRIPTOR),  # the output's rows alone
    ((1004, 1004, 1004), "nn", torch.bfloat16, helion_impl.DESCRIPTOR),  # 2008 bytes
    ((1004, 1004, 1004), "nn", torch.float32, None),  # 4016 bytes
])
def test_a_tiled_gpu_call_loads_by_tensor_descriptor_where_a_contiguous_side_is_part_of_a_vector(
        shape: tuple[int, int, int], layout: str, dtype: torch.dtype, fixed: dict | None):
    m, n, k = shape
    x, y = _operand(m, k, dtype, layout[0] == "t"), _operand(k, n, dtype, layout[1] == "t")
    out = _operand(m, n, dtype, False)
    assert helion_impl.fixed_indexing(_tiled(k=k), x, y, out, gpu=True) == fixed
    assert helion_impl.fixed_indexing(_tiled(k=k), x, y, out, gpu=False) is None  # the interpreter's own


def test_the_rule_fixes_tensor_descriptors_exactly_where_sm90_pointer_loads_go_one_element_at_a_time():
    checked = run_compiling(Path(__file__).with_name("sm90") / "helion_indexing_sm90.py")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count(", fixed ") == len(helion_indexing_sm90.CASES)


def test_a_pointer_route_loads_by_pointer_whatever_its_sizes():
    x, y = _operand(16, 4095, torch.bfloat16, False), _operand(4095, 4096, torch.bfloat16, False)
    out = _operand(16, 4096, torch.bfloat16, False)
    for gpu in (True, False):
        assert helion_impl.fixed_indexing(_tiled("skinny", k=4095), x, y, out, gpu) == helion_impl.POINTER


def test_every_regime_has_a_helion_route_with_a_reason():
    assert set(helion_dispatch.ROUTES) == set(Regime) == set(helion_dispatch.INTERPRETER_ROUTES)
    assert all(route.reason for route in helion_dispatch.ROUTES.values())


# ---------------------------------------------------------------------------------------------
# Stored configs and tuning slots of the new routes
# ---------------------------------------------------------------------------------------------


STORED = load_store(helion_impl.CONFIG_PATH)
ROUTE_OF_SIZE = {"skinny": helion_dispatch.ROUTES[Regime.SKINNY],
                 "decode": helion_dispatch.ROUTES[Regime.SKINNY],
                 "large": helion_dispatch.ROUTES[Regime.SPLIT_K]}


def _split_or_skinny_slots() -> list[tuple[str, str]]:
    return [(name, bucket) for name, bucket in helion_tuning.SLOTS
            if name in helion_tuning.SPLIT_K_KERNELS or bucket.startswith(("skinny", "decode"))]


def test_every_split_and_skinny_slot_is_stored_in_bf16_and_every_stored_key_is_a_slot():
    def keys(slots: list[tuple[str, str]]) -> set[str]:
        return {config_key(name, torch.bfloat16, bucket) for name, bucket in slots}

    assert keys(_split_or_skinny_slots()) <= set(STORED) <= keys(helion_tuning.SLOTS)


@pytest.mark.parametrize(("name", "bucket"), _split_or_skinny_slots())
def test_split_and_skinny_configs_keep_their_routes_tile_whole_parts_and_pointer_loads(name: str,
                                                                                       bucket: str):
    candidates = [config.config for config in helion_tuning.tuning_candidates(name, bucket)]
    configs = [*candidates, STORED[config_key(name, torch.bfloat16, bucket)]]
    if name == "split_k_reduce":
        assert all(config["indexing"] == "pointer" for config in configs)
        return
    route = ROUTE_OF_SIZE[bucket.split("|")[0]]
    for config in configs:
        block_m, block_n, block_k = config["block_sizes"]
        assert (block_m, block_n) == route.tile and route.part_step % block_k == 0, config
        assert config["indexing"] == "pointer", config


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("bucket", ["skinny|nn", "skinny|nt", "skinny|tn", "skinny|tt",
                                    "decode|nn", "decode|nt"])
@pytest.mark.parametrize("name", list(helion_impl.EPILOGUES))
def test_the_skinny_and_decode_buckets_never_fall_back_on_a_tensor_descriptor_config(
        name: str, bucket: str, dtype: torch.dtype):
    # In bf16 a skinny or decode call has a config of its own bucket (matmul's for the addmm
    # kernels), fp16 runs bf16's, and so does fp32, which has none of its size stored.  Whatever
    # the store holds, the call fixes pointer indexing (the next test).
    choice = choose_config(STORED, helion_impl.config_keys(name, dtype, bucket), helion_impl.bucket_place)
    assert (choice.note is None) == (dtype == torch.bfloat16)
    assert choice.fallible == (dtype == torch.float32)
    assert split_key(choice.key) == ("matmul", "bfloat16", bucket)
    assert STORED[choice.key]["indexing"] == "pointer"


def test_a_decode_bucket_missing_from_the_store_takes_the_skinny_one_of_its_layout():
    without_decode = {key: config for key, config in STORED.items() if "|decode|" not in key}
    choice = choose_config(without_decode, helion_impl.config_keys("matmul", torch.bfloat16, "decode|nt"),
                           helion_impl.bucket_place)
    assert choice.key == "matmul|bfloat16|skinny|nt" and "nearest stored bucket" in choice.note


@pytest.fixture
def fp16_store_without_small_nn(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """The stored configs as fp16's less ``matmul|float16|small|nn``; the tiled kernel binds afresh."""
    store = store_copy(helion_impl, tmp_path / "helion_configs.json", ["matmul|float16|small|nn"],
                       half_as_fp16=True)
    monkeypatch.setattr(helion_impl, "CONFIG_STORE", store)
    helion_impl.matmul_kernel.reset()
    yield
    helion_impl.matmul_kernel.reset()


def test_a_gemm_bucket_deleted_from_the_store_still_runs_on_the_nearest_and_says_so(
        fp16_store_without_small_nn):
    cells = run_cells(GemmOperator("cpu", torch.float16), Mode.FWD_BWD, (37, 45, 29),
                      ["accuracy", "latency"], ["eager", "helion"])
    assert_accurate(cells, ["eager", "helion"])
    assert_only_helion_noted(
        cells, "helion config: nearest stored bucket matmul|float16|small|nt for matmul|float16|small|nn")


# Shapes of their own: a bound kernel keeps the config of its first call for the session.
@pytest.mark.parametrize(("shape", "indexing"), [((3, 43, 38), "pointer"),
                                                 ((35, 43, 27), "tensor_descriptor")])
def test_a_skinny_call_runs_pointer_indexed_over_a_stored_tensor_descriptor_config(
        monkeypatch, tmp_path: Path, shape: tuple[int, int, int], indexing: str):
    td = {"block_sizes": [32, 32, 16], "indexing": "tensor_descriptor", "num_warps": 4, "num_stages": 2}
    path = tmp_path / "helion_configs.json"
    path.write_text(json.dumps({"configs": {"matmul|float32|large|nn": td}}))
    monkeypatch.setattr(helion_impl, "CONFIG_STORE", ConfigStore(path, helion_impl.bucket_place))
    ran = []

    def recording(bound, config, args, key):
        ran.append(config.config["indexing"])
        return real(bound, config, args, key)

    real = launch._call_within_shared_memory
    monkeypatch.setattr(launch, "_call_within_shared_memory", recording)
    m, n, k = shape
    a, b = torch.randn(m, k), torch.randn(k, n)
    notes: list[str] = []
    with collecting(notes):
        assert_close(helion_impl.fused_matmul(a, b), a.double() @ b.double())
    assert ran == [indexing]
    assert any("nearest stored bucket matmul|float32|large|nn" in note for note in notes)
    assert any("indexing='pointer' fixed" in note for note in notes) == (indexing == "pointer")


@pytest.mark.parametrize(("name", "bucket"), _split_or_skinny_slots())
def test_split_and_skinny_tuning_candidates_generate_triton_code(name: str, bucket: str):
    kernel = helion_tuning.SPLIT_K_KERNELS.get(name, helion_impl.matmul_kernel)
    args = helion_tuning.tuning_args(name, bucket, torch.float16, "cpu")
    bound = kernel.bind(args)
    for config in helion_tuning.tuning_candidates(name, bucket):
        assert ("tl.dot" in bound.to_triton_code(config)) == (name != "split_k_reduce")


def test_split_and_skinny_configs_compile_for_sm90_within_shared_memory():
    # Compiles kernels, which the interpreter this session runs cannot.
    check_run = run_compiling(Path(__file__).with_name("sm90") / "helion_regimes_fit_sm90.py")
    assert check_run.returncode == 0, check_run.stdout + check_run.stderr
    assert check_run.stdout.count("bytes of shared memory") == 25, check_run.stdout


@pytest.mark.parametrize(("m", "n", "k"), [(1, 1, 37), (1, 1, 300), (1, 40, 1), (3, 1, 1)])
@pytest.mark.parametrize("bias", [None, "1d", "2d"])
def test_products_with_a_one_by_one_output_run_on_two_rows(m: int, n: int, k: int, bias: str | None):
    # Helion 1.5.0 generates no 1x1 dot (gemm NOTES, "1x1 products"); each shape has one, forward
    # (1x1xK; K = 300 is split in parts here) or in its backward (1x40x1, 3x1x1).
    a, b = randn(m, k), randn(k, n)
    inputs = [a, b] if bias is None else [randn(*((n,) if bias == "1d" else (m, n))), a, b]
    if bias is None:
        check(helion_impl.matmul, torch.matmul, inputs)
    else:
        check(functools.partial(helion_impl.addmm, alpha=0.5, beta=-2.0),
              functools.partial(torch.addmm, alpha=0.5, beta=-2.0), inputs)
    out = helion_impl.fused_matmul(a.detach(), b.detach())
    assert out._base is None and out.stride(1) == 1  # its own tensor, as every output
