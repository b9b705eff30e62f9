"""rms_norm's Helion kernels, stored-config keys and tuning jobs, run by Triton's CPU interpreter."""

from harness.device import prepare_backends

prepare_backends("cpu")

import functools  # noqa: E402
from pathlib import Path  # noqa: E402

import helion  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from harness.operator import Mode  # noqa: E402
from harness.tuning.choice import choose_config  # noqa: E402
from harness.tuning.configs import load_store  # noqa: E402
from operators.rms_norm import helion_impl, helion_tuning, helion_wide, strategy  # noqa: E402
from operators.rms_norm.operator import RMSNormOperator  # noqa: E402
from tests.helpers import assert_accurate, assert_only_helion_noted, run_cells, store_copy  # noqa: E402
from tests.operators.rms_norm_helpers import (  # noqa: E402
    M,
    assert_matches_reference,
    bf16_backward_errors,
    run_forward_backward,
)


def helion_bwd(dy, x, weight, rstd):
    """Helion's backward kernels for ``x``'s shape: ``dx`` and the summed fp32 ``dw``."""
    dx, dw_partial = helion_impl.bwd_partials(dy, x, weight, rstd)
    return dx, dw_partial.sum(0)


@pytest.mark.parametrize("rows", [3, 37])
def test_helion_dw_sum_adds_partial_rows_in_weight_dtype(rows):
    partial = torch.randn(rows, 200)
    weight = torch.randn(200, dtype=torch.float16)
    dw = helion_impl.rms_norm_dw_sum(partial, weight)
    assert dw.dtype == torch.float16
    torch.testing.assert_close(dw.double(), partial.double().sum(0).half().double(), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize(
    ("divisor", "kernels"),
    [(128, ["rms_norm_bwd_shared_rows", "rms_norm_dw_sum"]),
     (256, ["rms_norm_bwd_row_dot", "rms_norm_bwd_stripe", "rms_norm_dw_sum"])],
)
def test_helion_wide_row_backwards_match_reference(narrow_bwd_rules, divisor, kernels):
    # Rules narrowed: fp32 rows 200 wide (padded to 256) take shared rows, or two passes.
    narrow_bwd_rules(divisor)
    assert helion_impl.bwd_kernel_names(M, 200, torch.float32) == kernels
    outputs, expected = run_forward_backward(helion_impl.rms_norm, M, 200, torch.float32)
    assert_matches_reference(outputs, expected, torch.float32)


def test_helion_bf16_backward_at_16384_wide_matches_reference():
    # 10000-wide bf16 rows (padded to 16384) take the kernel that keeps them in bf16.
    dx_err, dw_err = bf16_backward_errors(helion_bwd, 5, 10000)
    assert dx_err < 1e-2 and dw_err < 1e-2  # bf16 keeps 8 bits: 4e-3 per rounding


def test_helion_backward_converts_only_bf16_rows_again_through_their_bits():
    # From the strategy table's KEPT_INPUT width on, Helion's kernel converts kept bf16 rows again
    # through their bit pattern; fp16 rows and narrower rows not.
    kept_rule = next(rule for rule in strategy.BWD_RULES if rule.strategy is strategy.BwdStrategy.KEPT_INPUT)
    narrowest = kept_rule.widths[0] // 2 + 1  # the narrowest row padded to the rule's width
    config = helion.Config(programs_per_sm=1, num_warps=4)
    for dtype, n, kept in ((torch.bfloat16, narrowest, True), (torch.bfloat16, narrowest - 1, False),
                           (torch.float16, narrowest, False)):
        args = helion_tuning.tuning_args("rms_norm_bwd", 8, n, dtype, "cpu")
        code = helion_impl.rms_norm_bwd.bind(args).to_triton_code(config)
        assert ("tl.int16, bitcast=True" in code) == kept, (dtype, n)


def test_helion_row_split_parts_fit_their_share_cells():
    # A row's parts publish into SHARE_CELLS_PER_ROW cells, and each needs an SM of its own.
    row_split = {regime for regime, kernels in helion_impl.BWD_KERNELS.items()
                 if kernels is helion_impl.ROW_SPLIT_BWD}
    widest = max(rule.widths[1] for rule in strategy.BWD_RULES if rule.strategy in row_split)
    assert widest == 32768
    assert widest // helion_wide.ROW_SPLIT_MIN_PART <= helion_wide.SHARE_CELLS_PER_ROW
    for config in helion_tuning.tuning_candidates("rms_norm_bwd_row_split", widest):
        assert config["block_sizes"][0] >= helion_wide.ROW_SPLIT_MIN_PART


@pytest.mark.parametrize("m", [3, 7])
def test_helion_row_split_backward_matches_reference(narrow_bwd_rules, m):
    # Rules narrowed 128-fold: 16-bit rows padded to 256 with N a multiple of 16 take the row
    # split (one part a row under the interpreter); 3 rows leave one of its 4 groups idle.
    narrow_bwd_rules(128)
    assert helion_impl.bwd_kernel_names(m, 208, torch.bfloat16)[0] == "rms_norm_bwd_row_split"
    assert helion_impl.bwd_kernel_names(m, 208, torch.float16)[0] == "rms_norm_bwd_row_split"
    assert helion_impl.bwd_kernel_names(m, 200, torch.bfloat16)[0] == "rms_norm_bwd_shared_rows"
    assert helion_impl.bwd_kernel_names(m, 208, torch.float32)[0] == "rms_norm_bwd_shared_rows"
    dx_err, dw_err = bf16_backward_errors(helion_bwd, m, 208)
    assert dx_err < 1e-2 and dw_err < 1e-2


@pytest.mark.parametrize(
    ("kernel_name", "n"),
    [("rms_norm_fwd", 4096), ("rms_norm_bwd", 4096), ("rms_norm_bwd", 16384),
     ("rms_norm_bwd_shared_rows", 32768),
     ("rms_norm_bwd_row_split", 32768),
     ("rms_norm_dw_sum", 4096)],
)
def test_helion_tuning_candidates_generate_triton_code(kernel_name, n):
    args = helion_tuning.tuning_args(kernel_name, 64, n, torch.float16, "cpu")
    bound = helion_impl.KERNELS[kernel_name].bind(args)
    candidates = helion_tuning.tuning_candidates(kernel_name, n)
    assert 4 <= len(candidates) <= 12
    for config in candidates:
        assert "@triton.jit" in bound.to_triton_code(config)


@pytest.mark.parametrize(("name", "rows"), [("rms_norm_dw_sum", 2048)])
def test_helion_many_rows_configs_are_tuned_on_many_rows(name, rows):
    jobs = helion_tuning.tuning_jobs(torch.float16, "cpu")
    job = next(job for job in jobs if job.key == f"{name}|float16|n4096|rows{rows}")
    assert job.make_args.args[:3] == (name, rows, 4096)  # arguments are only made when tuned
    bound = helion_impl.KERNELS[name].bind(helion_tuning.tuning_args(name, 64, 4096, torch.float16, "cpu"))
    for config in job.candidates:
        assert "@triton.jit" in bound.to_triton_code(config)


def test_helion_kernels_prefer_their_many_rows_config_from_many_rows(monkeypatch):
    # With many-rows configs from 32 rows (backward) and 2 partial rows (sum), a 64-row input
    # must ask for both many-rows configs first, and a 1-row input for the backward's width
    # config; the sum still gets one partial row per program (4 under the interpreter).
    calls = []

    def record(kernel, store, keys, *args):
        calls.append((kernel.name, keys))
        return kernel(*args)

    monkeypatch.setattr(helion_impl, "call_with_stored_config", record)
    configs = {"rms_norm_bwd": (32, 32768), "rms_norm_dw_sum": (2, 2048)}
    monkeypatch.setattr(helion_impl, "MANY_ROWS_CONFIGS", configs)
    for m in (64, 1):
        run_forward_backward(helion_impl.rms_norm, m, 200, torch.float32)
    width = {name: f"{name}|float32|n256" for name in helion_impl.KERNELS}
    width["rms_norm_fwd"] = "rms_norm_fwd|float32|n128"  # the forward's bucket is the power of two below
    assert calls == [
        ("rms_norm_fwd", (width["rms_norm_fwd"],)),
        ("rms_norm_bwd", (width["rms_norm_bwd"] + "|rows32768", width["rms_norm_bwd"])),
        ("rms_norm_dw_sum", (width["rms_norm_dw_sum"] + "|rows2048", width["rms_norm_dw_sum"])),
        ("rms_norm_fwd", (width["rms_norm_fwd"],)),
        ("rms_norm_bwd", (width["rms_norm_bwd"],)),
        ("rms_norm_dw_sum", (width["rms_norm_dw_sum"] + "|rows2048", width["rms_norm_dw_sum"])),
    ]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_helion_tuning_jobs_cover_every_kernel_of_the_default_cuda_sweep(dtype: torch.dtype) -> None:
    jobs = helion_tuning.tuning_jobs(dtype, "cuda")
    shapes = RMSNormOperator("cuda", dtype).default_shapes()
    # Every key a call on a default shape can look up (many rows: its many-rows config too).
    expected = {
        key
        for _, n in shapes
        for name in helion_tuning.kernels_for_width(n, dtype)
        for key in helion_impl.config_keys(name, dtype, n, rows=2**30)
    }
    assert {job.key for job in jobs} == expected
    assert len(jobs) == len(expected)
    for job in jobs:
        assert isinstance(job.make_args, functools.partial) and job.candidates


def test_the_tuner_finds_its_jobs_and_store_in_helion_tuning() -> None:
    # ``run.py tune`` calls ``tuning_jobs(dtype, device)`` on its module and stores in ``CONFIG_PATH``.
    assert helion_tuning.CONFIG_PATH == helion_impl.CONFIG_PATH
    assert helion_tuning.CONFIG_PATH.name == "helion_configs.json"
    assert callable(helion_tuning.tuning_jobs)


@pytest.mark.parametrize("n, fwd_bucket, bwd_bucket", [
    (1024, "n1024", "n1024"), (5120, "n4096", "n8192"), (8192, "n8192", "n8192"), (40000, "n32768", "n65536"),
])
def test_helion_forward_configs_are_keyed_by_the_power_of_two_below_the_width(
    n: int, fwd_bucket: str, bwd_bucket: str
) -> None:
    # The forward's looped configs walk a row in chunks: a 5120-wide row takes the 2048-wide
    # chunks of the 4096 bucket; the backward keeps padded rows and its next power of two.
    fwd_keys = helion_impl.config_keys("rms_norm_fwd", torch.bfloat16, n, 4096)
    bwd_keys = helion_impl.config_keys("rms_norm_bwd", torch.bfloat16, n, 4096)
    assert fwd_keys == (f"rms_norm_fwd|bfloat16|{fwd_bucket}",)
    assert bwd_keys == (f"rms_norm_bwd|bfloat16|{bwd_bucket}",)


DEFAULT = "Helion's default"


@pytest.mark.parametrize(("n", "expected"), [
    # The widths the H200 runs at bc65cd0 found no stored config for (MissingConfigError then).
    (128, {"rms_norm_fwd": "n1024", "rms_norm_bwd": "n1024", "rms_norm_dw_sum": "n1024"}),
    (65536, {"rms_norm_fwd": "n32768 (own)", "rms_norm_bwd_row_dot": DEFAULT,
             "rms_norm_bwd_stripe": DEFAULT, "rms_norm_dw_sum": "n32768"}),
])
def test_helion_widths_without_stored_configs_take_the_nearest_width_or_helions_default(n, expected):
    store = load_store(helion_impl.CONFIG_PATH)
    got = {}
    for name in ["rms_norm_fwd", *helion_impl.bwd_kernel_names(4096, n, torch.bfloat16)]:
        keys = helion_impl.config_keys(name, torch.bfloat16, n, 264)  # 264 rows: the sum's partial rows
        choice = choose_config(store, keys, helion_impl.bucket_place)
        if choice.key is None:
            got[name] = DEFAULT
            assert choice.note.startswith(f"helion config: Helion's default for {name}|bfloat16|n{n} ")
        else:
            width = choice.key.split("|")[2]
            got[name] = width if choice.note else f"{width} (own)"
    assert got == expected


@pytest.fixture
def fp16_store_without_n1024_forward(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """The stored configs as fp16's less ``rms_norm_fwd|float16|n1024``; the kernels bind afresh."""
    store = store_copy(helion_impl, tmp_path / "helion_configs.json", ["rms_norm_fwd|float16|n1024"],
                       half_as_fp16=True)
    monkeypatch.setattr(helion_impl, "CONFIG_STORE", store)
    for kernel in helion_impl.KERNELS.values():
        kernel.reset()
    yield
    for kernel in helion_impl.KERNELS.values():
        kernel.reset()


def test_a_width_deleted_from_the_store_still_runs_on_the_next_nearest_and_says_so(
        fp16_store_without_n1024_forward):
    # 1000 wide lies in n512, not stored: its nearest, n1024, is deleted, so n2048 stands in.
    cells = run_cells(RMSNormOperator("cpu", torch.float16), Mode.FWD_BWD, (33, 1000),
                      ["accuracy", "latency"], ["eager", "helion"])
    assert_accurate(cells, ["eager", "helion"])
    assert_only_helion_noted(cells, "helion config: nearest stored bucket rms_norm_fwd|float16|n2048 "
                                    "for rms_norm_fwd|float16|n512")


def test_helion_many_rows_configs_stand_in_for_each_other_before_width_configs():
    keys = helion_impl.config_keys("rms_norm_dw_sum", torch.bfloat16, 128, rows=4096)
    assert keys == ("rms_norm_dw_sum|bfloat16|n128|rows2048", "rms_norm_dw_sum|bfloat16|n128")
    choice = choose_config(load_store(helion_impl.CONFIG_PATH), keys, helion_impl.bucket_place)
    assert choice.key == "rms_norm_dw_sum|bfloat16|n1024|rows2048"


def test_helion_width_buckets_lie_at_log2_of_the_width_with_their_rows_suffix():
    assert helion_impl.bucket_place("n1024") == (10, "")
    assert helion_impl.bucket_place("n4096|rows2048") == (12, "rows2048")
    assert helion_impl.bucket_place("large") is None


@pytest.mark.parametrize("kernel_name", ["rms_norm_bwd_row_dot", "rms_norm_bwd_stripe", "rms_norm_nope"])
def test_kernels_without_tuning_candidates_get_no_tuning_arguments(kernel_name):
    with pytest.raises(ValueError, match="expected one of"):
        helion_tuning.tuning_args(kernel_name, 64, 4096, torch.float16, "cpu")
    with pytest.raises(ValueError, match="expected one of"):
        helion_tuning.tuning_candidates(kernel_name, 4096)


def test_one_partial_dw_row_is_cast_not_summed_by_a_config_that_loops():
    # The stored bf16 n32768 dw-sum config has a reduction loop; over one partial row (a backward
    # of M <= 64 rows) Helion refuses it with InvalidConfig.
    partial = torch.randn(1, 20001)
    dw = helion_impl.sum_partial_rows(partial, torch.randn(20001), torch.bfloat16)
    assert torch.equal(dw, partial[0]) and dw.data_ptr() != partial.data_ptr()


def test_the_wide_backwards_walk_their_group_of_rows_one_row_at_a_time():
    # Helion broadcasts a 1-row x over an inner row block wider than 1, which sums dw once per
    # block row at M = 1 (the addmm row sum's fault, gemm NOTES "The M = 1 bias gradient");
    # the stored configs, the candidates and Helion's defaults keep that block (block_sizes[2]) at 1.
    stored = load_store(helion_impl.CONFIG_STORE.path)
    configs = [stored[key] for key in stored if key.startswith("rms_norm_bwd_shared_rows|")]
    configs += [dict(c.config) for c in helion_tuning.tuning_candidates("rms_norm_bwd_shared_rows", 32768)]
    x, dy, weight, rstd = torch.randn(1, 300), torch.randn(1, 300), torch.randn(300), torch.rand(1) + 0.5
    for kernel, args in ((helion_wide.rms_norm_bwd_shared_rows, (dy, x, weight, rstd)),
                         (helion_wide.rms_norm_bwd_stripe, (dy, x, weight, rstd, torch.randn(1)))):
        configs.append(dict(kernel.bind(args).config_spec.default_config().config))
    assert all(config["block_sizes"][2] == 1 for config in configs), configs
