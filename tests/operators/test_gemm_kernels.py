"""CPU tests of the gemm/addmm kernels (Triton and Helion through Triton's interpreter).

Every output and gradient is compared against a float64 reference computed on the same inputs.
Shapes are small (the interpreter is slow) and include sizes that are not multiples of 16:
37x45x29 has rows that are not 16-byte aligned, so the Triton launcher and the Helion host code
copy the operands to padded-pitch buffers and write a padded-pitch output.  The Triton launcher
takes its TMA path for every shape of at least one tile (32x32x16 under the interpreter) and its
pointer path below that or for exact fp32.  The tests allow TF32 dots, as the TMA path requires
for fp32; the interpreter computes every dot exactly anyway.
"""

from pathlib import Path

from harness.device import prepare_backends

prepare_backends("cpu")


import helion  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402

from harness.tuning import configs as helion_configs  # noqa: E402
from harness.tuning import launch  # noqa: E402
from harness.tuning.choice import ConfigChoice, choose_config  # noqa: E402
from operators.gemm import (  # noqa: E402
    alignment,
    helion_impl,
    helion_tuning,
    triton_configs,
    triton_dispatch,
    triton_impl,
)
from tests.helpers import run_compiling, tf32_allowed  # noqa: E402
from tests.operators.gemm_helpers import assert_close, check, float64_reference, randn  # noqa: E402

IMPLS = {"triton": triton_impl, "helion": helion_impl}
SHAPES = [(37, 45, 29), (64, 48, 80)]


pytestmark = pytest.mark.usefixtures("allow_tf32")


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("shape", SHAPES)
def test_matmul_output_and_gradients_match_float64(impl: str, shape: tuple[int, int, int]):
    m, n, k = shape
    check(IMPLS[impl].matmul, torch.matmul, [randn(m, k), randn(k, n)])


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("bias_dims", [1, 2])
def test_addmm_output_and_gradients_match_float64(impl: str, shape: tuple[int, int, int],
                                                  bias_dims: int):
    m, n, k = shape
    bias = randn(n) if bias_dims == 1 else randn(m, n)

    def run(b, x, y):
        return IMPLS[impl].addmm(b, x, y, alpha=1.5, beta=-0.75)

    def reference(b, x, y):
        return torch.addmm(b, x, y, alpha=1.5, beta=-0.75)

    check(run, reference, [bias, randn(m, k), randn(k, n)])


@pytest.mark.parametrize("impl", IMPLS)
def test_addmm_default_scalars_match_float64(impl: str):
    check(IMPLS[impl].addmm, torch.addmm, [randn(36), randn(40, 20), randn(20, 36)])


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("needs", ["a", "b"])
def test_matmul_computes_only_requested_gradients(impl: str, needs: str):
    a, b = randn(40, 20, grad=needs == "a"), randn(20, 36, grad=needs == "b")
    check(IMPLS[impl].matmul, torch.matmul, [a, b])


@pytest.mark.parametrize("impl", IMPLS)
def test_addmm_computes_only_requested_gradients(impl: str):
    bias, mat1, mat2 = randn(36, grad=False), randn(40, 20, grad=False), randn(20, 36)

    def run(b, x, y):
        return IMPLS[impl].addmm(b, x, y, alpha=2.0, beta=0.5)

    def reference(b, x, y):
        return torch.addmm(b, x, y, alpha=2.0, beta=0.5)

    check(run, reference, [bias, mat1, mat2])


def test_triton_matmul_fp16_matches_float64():
    a, b = randn(64, 80, dtype=torch.float16), randn(80, 48, dtype=torch.float16)
    check(triton_impl.matmul, torch.matmul, [a, b])


def test_triton_takes_tma_path_for_tensor_core_dots_of_tile_size_aligned_or_not():
    cpu = torch.device("cpu")
    assert triton_dispatch.uses_tma((64, 48, 80), "tf32", cpu)
    assert triton_dispatch.uses_tma((37, 45, 29), "tf32", cpu)
    assert not triton_dispatch.uses_tma((64, 48, 80), "ieee", cpu)
    assert not triton_dispatch.uses_tma((16, 48, 80), "tf32", cpu)
    assert not triton_dispatch.uses_tma((64, 48, 8), "tf32", cpu)


def test_a_tma_config_whose_box_exceeds_the_problem_is_refused_before_launch():
    a, b = torch.randn(64, 40), torch.randn(40, 48)
    out = alignment.output_buffer(64, 48, a.dtype, a.device)
    config = triton_configs.tma_config(64, 64, 16, stages=2, warps=4)  # 64 columns of 48
    with pytest.raises(ValueError, match="TMA box larger than the 64x48x40 problem"):
        triton_impl.tiled_matmul(a, b, out, triton_configs.NO_BIAS, None, 1.0, 0.0, "tf32",
                                 triton_dispatch.Kernel.TMA, config)


def test_padded_pitch_rounds_rows_up_to_16_bytes():
    assert alignment.padded_pitch(4097, 2) == 4104
    assert alignment.padded_pitch(4096, 2) == 4096
    assert alignment.padded_pitch(29, 4) == 32
    assert alignment.padded_pitch(37, 8) == 38
    assert alignment.padded_pitch(0, 2) == 0


def test_tma_alignment_looks_at_the_pitch_of_the_contiguous_dim_and_the_base():
    assert alignment.is_tma_aligned(torch.empty(37, 32), transposed=False)
    assert not alignment.is_tma_aligned(torch.empty(32, 37), transposed=False)
    assert alignment.is_tma_aligned(torch.empty(37, 32).T, transposed=True)
    assert not alignment.is_tma_aligned(torch.empty(32, 37).T, transposed=True)
    assert not alignment.is_tma_aligned(torch.empty(37, 32)[:, 1:], transposed=False)
    assert not alignment.is_tma_aligned(torch.empty(2, 4097, dtype=torch.bfloat16), transposed=False)


def test_aligned_operand_keeps_aligned_tensors_and_pads_the_others():
    aligned = torch.randn(37, 32)
    assert alignment.aligned_operand(aligned, transposed=False) is aligned
    for t, transposed in [(torch.randn(32, 37, dtype=torch.float16), False),
                          (torch.randn(29, 37).T, True), (torch.randn(37, 40)[:, 3:], False)]:
        padded = alignment.aligned_operand(t, transposed)
        assert alignment.is_tma_aligned(padded, transposed)
        assert padded.shape == t.shape and padded.dtype == t.dtype
        assert (padded.stride(0) == 1) == transposed
        assert torch.equal(padded, t)


def test_output_buffer_has_the_logical_shape_and_an_aligned_pitch():
    out = alignment.output_buffer(5, 4097, torch.bfloat16, "cpu")
    assert out.shape == (5, 4097) and out.stride() == (4104, 1)
    assert alignment.output_buffer(5, 4096, torch.float16, "cpu").is_contiguous()


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("n", [45, 48])
def test_outputs_can_be_modified_in_place_under_autograd(impl: str, n: int):
    # A padded-pitch output must be a tensor of its own: autograd refuses in-place ops on
    # views returned by a custom Function.
    a, b = randn(37, 29), randn(29, n)
    out = IMPLS[impl].matmul(a, b)
    assert out._base is None
    out.mul_(2.0)
    out.sum().backward()
    assert_close(a.grad, 2.0 * torch.ones(37, n, dtype=torch.float64) @ b.detach().double().T)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("bias_dims", [0, 1, 2])
def test_triton_pads_unaligned_operands_onto_the_tma_path(monkeypatch, dtype: torch.dtype,
                                                          bias_dims: int):
    def no_pointer_kernel(*args, **kwargs):
        raise AssertionError("pointer kernel launched")

    monkeypatch.setattr(triton_impl, "_matmul_pointer_kernel", no_pointer_kernel)
    m, n, k = 37, 45, 33
    mats = [randn(m, k, dtype=dtype), randn(k, n, dtype=dtype)]
    if bias_dims == 0:
        check(triton_impl.matmul, torch.matmul, mats)
        return
    bias = randn(n, dtype=dtype) if bias_dims == 1 else randn(m, n, dtype=dtype)

    def run(b, x, y):
        return triton_impl.addmm(b, x, y, alpha=1.5, beta=-0.75)

    def reference(b, x, y):
        return torch.addmm(b, x, y, alpha=1.5, beta=-0.75)

    check(run, reference, [bias, *mats])


@pytest.mark.parametrize("impl", ["matmul", "addmm"])
def test_helion_kernels_get_aligned_operands_and_outputs_forward_and_backward(monkeypatch,
                                                                              impl: str):
    calls = []

    def spy(kernel, store, keys, *args, **kwargs):
        calls.append((kernel, args))
        return launch.call_with_stored_config(kernel, store, keys, *args, **kwargs)

    monkeypatch.setattr(helion_impl, "call_with_stored_config", spy)
    inputs = [randn(37, 29, dtype=torch.float16), randn(29, 45, dtype=torch.float16)]
    if impl == "addmm":
        check(helion_impl.addmm, torch.addmm, [randn(45, dtype=torch.float16), *inputs])
    else:
        check(helion_impl.matmul, torch.matmul, inputs)
    matmuls = [args for kernel, args in calls if kernel is helion_impl.matmul_kernel]
    # The row-bias gradient (one part of 37 rows: its parts kernel alone) loads by pointer: any pitch.
    assert len(matmuls) == 3 and len(calls) == (4 if impl == "addmm" else 3)
    for args in matmuls:
        for t in (a for a in args if isinstance(a, torch.Tensor) and a.dim() == 2):
            assert alignment.is_tma_aligned(t, transposed=t.stride(1) != 1)


@pytest.mark.parametrize("transposed", ["a", "b", "both"])
def test_triton_reads_transposed_operands_in_place(transposed: str):
    a = torch.randn(48, 40).T if transposed in ("a", "both") else torch.randn(40, 48)
    b = torch.randn(36, 48).T if transposed in ("b", "both") else torch.randn(48, 36)
    bias = torch.randn(40, 36)
    out = triton_impl.fused_matmul(a, b, bias, alpha=0.5, beta=2.0)
    assert_close(out, 0.5 * a.double() @ b.double() + 2.0 * bias.double())


@pytest.mark.parametrize(("persistent", "subtile"), [(False, False), (True, False), (False, True)])
def test_triton_tma_kernel_schedules_match_float64(persistent: bool, subtile: bool):
    # Each schedule run as a given config (the probes' path), not the autotuner's pick.
    a, b, bias = torch.randn(64, 80), torch.randn(48, 80).T, torch.randn(48)
    meta = dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, GROUP_M=2, PERSISTENT=persistent,
                EPILOGUE_SUBTILE=subtile)
    config = triton.Config(meta, num_warps=4, num_stages=2, pre_hook=triton_configs.set_block_shapes)
    with tf32_allowed():
        assert triton_dispatch.plan(64, 48, 80, "tf32", a.device).kernel is triton_dispatch.Kernel.TMA
        out = triton_impl.fused_matmul(a, b, bias, alpha=2.0, beta=0.5, config=config)
    assert_close(out, 2.0 * a.double() @ b.double() + 0.5 * bias.double())


def test_triton_tma_configs_compile_for_sm90_and_none_that_fits_is_pruned():
    checked = run_compiling(Path(__file__).with_name("sm90") / "tma_configs_fit_sm90.py")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("bytes of shared memory") == 5 * len(triton_configs.TMA_CONFIGS)


@pytest.mark.parametrize(("stride_bias_m", "kept"), [(4096, False), (1, True)])
def test_triton_tma_pruning_charges_the_bias_conversion_to_all_but_a_column_major_bias(
        monkeypatch, stride_bias_m: int, kept: bool):
    # 128x256x64/s3 persistent with a full bias: 245,784 B row-major, 217,112 B column-major
    # (tests/operators/sm90/tma_configs_fit_sm90.py), of 230,400 the pruning allows.
    monkeypatch.setattr(triton_configs, "shared_memory_bytes", lambda device_index: 232448 - 2048)
    operand = torch.empty(4096, 4096, dtype=torch.bfloat16)
    config = triton_configs.TMA_CONFIGS[0]
    assert config.kwargs["PERSISTENT"] and not config.kwargs["EPILOGUE_SUBTILE"] and config.num_stages == 3
    pruned = triton_configs.prune_by_smem(triton_configs.TMA_CONFIGS, operand, True,
                                          triton_configs.FULL_BIAS, stride_bias_m)
    assert (config in pruned) is kept


def test_triton_pointer_kernel_runs_a_given_config_and_reports_the_autotuned_pick():
    a, b = torch.randn(20, 24), torch.randn(24, 36)  # 20 rows: under a TMA tile
    assert triton_dispatch.plan(20, 36, 24, "tf32", a.device).kernel is triton_dispatch.Kernel.POINTER
    config = triton_configs.INTERPRETER_POINTER_CONFIGS[0]
    assert_close(triton_impl.fused_matmul(a, b, config=config), a.double() @ b.double())
    triton_impl.fused_matmul(a, b)
    assert triton_impl.autotuned_tiled_pick(triton_dispatch.Kernel.POINTER) == config
    with pytest.raises(ValueError, match="not a pointer kernel's"):
        triton_impl.fused_matmul(a, b, config=triton_configs.INTERPRETER_TMA_CONFIGS[0])


def test_triton_custom_ops_pass_opcheck():
    a, b, bias = randn(37, 29), randn(29, 45), randn(45)
    torch.library.opcheck(torch.ops.opbench.matmul.default, (a, b))
    torch.library.opcheck(torch.ops.opbench.addmm.default, (bias, a, b, 1.5, 0.5))
    torch.library.opcheck(torch.ops.opbench.addmm.default, (None, a, b, 2.0, 0.0))


def test_triton_ops_compile_without_graph_breaks():
    def loss(bias, x, y):
        return (triton_impl.addmm(bias, x, y, alpha=1.5, beta=0.5) + triton_impl.matmul(x, y)).sum()

    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
    inputs = [randn(36), randn(40, 20), randn(20, 36)]
    compiled(*inputs).backward()

    def reference(bias, x, y):
        return torch.addmm(bias, x, y, alpha=1.5, beta=0.5) + x @ y

    _, ref_grads = float64_reference(reference, inputs, torch.ones(40, 36))
    for tensor, ref_grad in zip(inputs, ref_grads, strict=True):
        assert_close(tensor.grad, ref_grad)


@pytest.mark.parametrize("kernel_name", helion_impl.EPILOGUES)
@pytest.mark.parametrize("bucket", ["small|nn", "large|nt", "large|tn", "wide|nn", "wide|nt", "outer|nt",
                                    "outer|tn"])
def test_helion_tuning_candidates_generate_triton_code(kernel_name: str, bucket: str):
    args = helion_tuning.tuning_args(kernel_name, bucket, torch.float16, "cpu")
    # the dispatch's size, not the dims'
    size = bucket.split("|")[0] if bucket.startswith(("wide", "outer")) else None
    assert helion_impl.bucket(*args[:2], size) == bucket
    bound = helion_impl.matmul_kernel.bind(args)
    for config in helion_tuning.tuning_candidates(kernel_name, bucket):
        assert "tl.dot" in bound.to_triton_code(config)


def test_triton_autotune_keeps_128x128_tiles_for_narrow_n_on_the_h200(monkeypatch):
    monkeypatch.setattr(triton_configs, "shared_memory_bytes", lambda device_index: 232448 - 2048)
    operand = torch.empty(20120, 1536, dtype=torch.bfloat16)
    kept = triton_configs.prune_by_smem(triton_configs.TMA_CONFIGS, operand, True, triton_configs.ROW_BIAS)
    tiles = {(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"]) for c in kept}
    assert {(128, 128, 64), (128, 64, 64), (128, 256, 64)} <= tiles


MATMUL_KEY = "matmul|bfloat16|large|nn"


def _choice(kernel_name: str, bucket: str, stored: object) -> ConfigChoice:
    keys = helion_impl.config_keys(kernel_name, torch.bfloat16, bucket)
    return choose_config(dict.fromkeys(stored, {}), keys, helion_impl.bucket_place)


def test_helion_addmm_1d_takes_the_matmul_config_of_its_bucket_before_a_own_small():
    own = "addmm_1d|bfloat16|large|nn"
    assert helion_impl.config_keys("addmm_1d", torch.bfloat16, "large|nn") == (own, MATMUL_KEY)
    own_small = "addmm_1d|bfloat16|small|nn"
    assert _choice("addmm_1d", "large|nn", [MATMUL_KEY, own_small]) == ConfigChoice(MATMUL_KEY)
    assert _choice("addmm_1d", "large|nn", [MATMUL_KEY, own]) == ConfigChoice(own)
    assert helion_impl.config_keys("matmul", torch.bfloat16, "large|nn") == (MATMUL_KEY,)


@pytest.mark.parametrize("bucket", ["small|nn", "large|nn", "large|nt", "small|tn"])
def test_helion_addmm_2d_runs_on_its_own_stored_configs_never_on_matmuls(bucket: str):
    # matmul's flattened large config needs 278,568 bytes of shared memory with an (M, N) bias.
    choice = _choice("addmm_2d", bucket, helion_configs.load_store(helion_impl.CONFIG_PATH))
    assert choice.key == f"addmm_2d|bfloat16|{bucket.split('|')[0]}|nn"
    assert (choice.note is None) == bucket.endswith("nn")


@pytest.mark.parametrize(("wanted", "stored", "nearest"), [
    ("small|nt", ["matmul|bfloat16|large|nt", "matmul|bfloat16|small|nn"], "matmul|bfloat16|small|nn"),
    ("small|nt", ["matmul|bfloat16|large|nn", "matmul|bfloat16|large|nt"], "matmul|bfloat16|large|nt"),
    ("large|tn", ["matmul|float32|large|tn", "matmul|bfloat16|small|nn"], "matmul|bfloat16|small|nn"),
    # the outer bucket (K <= 16, one 16-deep k-block) lies beyond large: large takes wide first
    ("large|nn", ["matmul|bfloat16|outer|nn", "matmul|bfloat16|wide|nn"], "matmul|bfloat16|wide|nn"),
    ("outer|nt", ["matmul|bfloat16|wide|nt", "matmul|bfloat16|large|nt"], "matmul|bfloat16|large|nt"),
])
def test_helion_gemm_takes_the_nearest_size_then_the_same_layout(wanted: str, stored: list, nearest: str):
    choice = _choice("matmul", wanted, stored)
    assert choice == ConfigChoice(nearest, f"helion config: nearest stored bucket {nearest} "
                                           f"for matmul|bfloat16|{wanted}")


@pytest.mark.parametrize("kernel_name", helion_impl.EPILOGUES)
def test_helion_stored_matmul_configs_generate_code_for_every_epilogue(kernel_name: str):
    stored = helion_configs.load_store(helion_impl.CONFIG_PATH)
    args = helion_tuning.tuning_args(kernel_name, "small|nn", torch.float16, "cpu")
    bound = helion_impl.matmul_kernel.bind(args)
    matmul_keys = [key for key in stored if key.startswith("matmul|")]
    assert matmul_keys
    for key in matmul_keys:
        assert "tl.dot" in bound.to_triton_code(helion.Config(**stored[key]))
