"""CPU tests of addmm's row-vector bias gradient (``beta * grad.sum(0)``) in Triton and Helion,
through Triton's interpreter: against float64 at odd sizes and layouts, split into parts or not,
the same bits on every run, as the ``opbench::summed_rows`` and ``opbench_helion::summed_rows``
ops that the addmm backwards run, and the Helion configs compiling for sm_90."""

from harness.device import prepare_backends

prepare_backends("cpu")


from pathlib import Path  # noqa: E402

import helion  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from harness.notes import collecting  # noqa: E402
from harness.tuning.configs import load_store  # noqa: E402
from harness.tuning.launch import call_with_stored_config  # noqa: E402
from operators.gemm import (  # noqa: E402
    helion_impl,
    helion_ops,
    helion_row_sum,
    helion_tuning,
    row_sum_plan,
    triton_direct,
    triton_impl,
    triton_row_sum,
)
from operators.gemm.strategy import INTERPRETER_SMS  # noqa: E402
from tests.helpers import CountedLaunches, run_compiling  # noqa: E402

SUMMED_ROWS = {"triton": triton_row_sum.summed_rows, "helion": helion_impl.summed_rows}


def _grad(m: int, n: int, dtype: torch.dtype, transposed: bool = False) -> torch.Tensor:
    g = torch.randn((n, m) if transposed else (m, n), dtype=torch.float64) * 3 + 0.5
    return (g.mT if transposed else g).to(dtype)


@pytest.mark.parametrize(("m", "n"), [(1, 7), (37, 45), (300, 33), (1000, 17), (600, 5), (70, 129)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("backend", SUMMED_ROWS)
def test_summed_rows_match_float64(m: int, n: int, dtype: torch.dtype, transposed: bool, backend: str):
    grad = _grad(m, n, dtype, transposed)
    got = SUMMED_ROWS[backend](grad, -0.75)
    want = grad.double().sum(0) * -0.75
    assert got.dtype == dtype and got.shape == (n,)
    tol = 1e-5 if dtype == torch.float32 else 2e-3
    scale = grad.double().abs().sum(0).max().item()
    torch.testing.assert_close(got.double(), want, rtol=tol, atol=tol * scale)


def test_tall_gradients_are_summed_in_parts_and_the_same_bits_every_run():
    m, n = 1000, 20
    rows = row_sum_plan.part_rows(m, n, INTERPRETER_SMS)
    assert rows % triton_row_sum.parts_tile(n)[0] == 0 and -(-m // rows) > 1  # several parts
    grad = _grad(m, n, torch.float32)
    first = triton_row_sum.summed_rows(grad, 1.0)
    assert torch.equal(first, triton_row_sum.summed_rows(grad, 1.0))
    torch.testing.assert_close(first.double(), grad.double().sum(0), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("n", [7, 8, 45, 128, 129, 512, 1024, 4096])
@pytest.mark.parametrize("m", [5, 300, 8192, 17424, 20120, 34579, 100000])
def test_parts_cover_every_row_in_whole_tiles_near_the_programs_aimed_at(m: int, n: int):
    sms = 132
    rows, step = row_sum_plan.part_rows(m, n, sms), row_sum_plan.row_block(n)
    parts, blocks = -(-m // rows), -(-n // row_sum_plan.column_block(n))
    assert step * row_sum_plan.column_block(n) == row_sum_plan.ROW_STEP * row_sum_plan.COLUMNS
    assert step % row_sum_plan.ROW_STEP == 0 and rows % step == 0 and parts * rows >= m
    wanted = -(-row_sum_plan.PROGRAMS_PER_SM * sms // blocks)  # parts
    if m >= 2 * step * wanted:  # parts of two tiles or more: rounding moves them little
        assert 0.7 * wanted <= parts <= 1.4 * wanted
    else:  # fewer rows: as many parts as wanted, or one a tile
        assert parts >= min(0.7 * wanted, -(-m // step))


def test_addmms_reference_gradient_is_cut_into_about_four_programs_an_sm():
    assert row_sum_plan.part_rows(20120, 512, 132) == 160  # 126 parts x 4 column blocks


def test_a_narrow_gradient_is_summed_in_tall_tiles_and_few_parts():
    # 8192x8x8192's (8192, 8): 32 parts of one 256x16 tile each, not 256 of a mostly masked
    # 32x128 one, so the finish adds 32 parts (gemm NOTES: prediction 59).
    assert (row_sum_plan.column_block(8), row_sum_plan.row_block(8)) == (16, 256)
    assert row_sum_plan.part_rows(8192, 8, 132) == 256
    widths = [row_sum_plan.column_block(n) for n in (1, 16, 17, 64, 65, 128, 4096)]
    assert widths == [16, 16, 32, 64, 128, 128, 128]


@pytest.mark.parametrize(("m", "n"), [(8192, 8), (257, 8), (1000, 17), (3000, 45), (300, 129)])
def test_the_gpu_s_tiles_sum_narrow_and_wide_gradients_through_the_interpreter(monkeypatch, m: int, n: int):
    # The interpreter's own tile is 16x16; these are the tiles the kernels take on a GPU
    # (256x16 and 128x16 at N = 8), run through it at the H100's part count.
    monkeypatch.setattr(triton_row_sum, "INTERPRETED", False)
    monkeypatch.setattr(triton_row_sum, "sm_count", lambda device: 132)
    assert triton_row_sum.parts_tile(n) == (row_sum_plan.row_block(n), row_sum_plan.column_block(n))
    grad = _grad(m, n, torch.float16)
    got = triton_row_sum.summed_rows(grad, 0.5)
    scale = grad.double().abs().sum(0).max().item()
    torch.testing.assert_close(got.double(), grad.double().sum(0) * 0.5, rtol=2e-3, atol=2e-3 * scale)


@pytest.mark.parametrize("backend", SUMMED_ROWS)
def test_an_empty_gradient_sums_to_zeros_and_no_columns_to_nothing(backend: str):
    assert torch.equal(SUMMED_ROWS[backend](torch.empty(0, 5), 2.0), torch.zeros(5))
    assert SUMMED_ROWS[backend](torch.empty(4, 0), 2.0).shape == (0,)


@pytest.mark.parametrize("op", ["opbench", "opbench_helion"])
def test_the_summed_rows_ops_pass_opcheck(op: str):
    torch.library.opcheck(getattr(torch.ops, op).summed_rows.default, (_grad(37, 45, torch.float32), 0.5))


@pytest.mark.parametrize("m", [1, 3, 32])
def test_a_gradient_of_one_part_is_summed_by_one_triton_launch_into_the_output(monkeypatch, m: int):
    assert row_sum_plan.part_rows(m, 45, INTERPRETER_SMS) >= m  # one part
    parts = CountedLaunches(triton_row_sum._row_sum_parts_kernel)
    finish = CountedLaunches(triton_row_sum._row_sum_finish_kernel)
    monkeypatch.setattr(triton_row_sum, "_row_sum_parts_kernel", parts)
    monkeypatch.setattr(triton_row_sum, "_row_sum_finish_kernel", finish)
    grad = _grad(m, 45, torch.float16)
    got = triton_row_sum.summed_rows(grad, -0.75)
    assert (parts.launches, finish.launches) == (1, 0) and got.dtype == torch.float16
    torch.testing.assert_close(got.double(), grad.double().sum(0) * -0.75, rtol=2e-3, atol=2e-3 * m * 4)


@pytest.mark.parametrize("m", [1, 3, 32])
def test_a_gradient_of_one_part_is_summed_by_helion_s_parts_kernel_alone(monkeypatch, m: int):
    launched = []

    def recording(kernel, store, key, *args):
        launched.append(kernel)
        return call_with_stored_config(kernel, store, key, *args)

    monkeypatch.setattr(helion_impl, "call_with_stored_config", recording)
    grad = _grad(m, 45, torch.float32)
    got = helion_impl.summed_rows(grad, -0.75)
    torch.testing.assert_close(got.double(), grad.double().sum(0) * -0.75, rtol=1e-5, atol=1e-4)
    assert launched == [helion_row_sum.row_sum_parts_kernel]


@pytest.mark.parametrize("impl", [triton_impl, triton_direct])
def test_the_addmm_backward_takes_its_row_vector_bias_gradient_from_the_triton_kernel(monkeypatch, impl):
    finish = CountedLaunches(triton_row_sum._row_sum_finish_kernel)
    monkeypatch.setattr(triton_row_sum, "_row_sum_finish_kernel", finish)
    bias = torch.randn(45, requires_grad=True)
    out = impl.addmm(bias, torch.randn(300, 29), torch.randn(29, 45), alpha=1.5, beta=-0.75)
    dy = torch.randn_like(out)
    out.backward(dy)
    torch.testing.assert_close(bias.grad.double(), dy.double().sum(0) * -0.75, rtol=1e-5, atol=1e-4)
    assert finish.launches == 1


@pytest.mark.parametrize("impl", [triton_impl, helion_ops])
def test_the_compiled_addmm_backward_runs_the_summed_rows_op_whole(monkeypatch, impl):
    # As the *_compiled backends: the op stays opaque in a full graph and runs once a backward.
    finish = CountedLaunches(triton_row_sum._row_sum_finish_kernel)
    monkeypatch.setattr(triton_row_sum, "_row_sum_finish_kernel", finish)
    compiled = torch.compile(impl.addmm, fullgraph=True, backend="aot_eager")
    bias = torch.randn(45, requires_grad=True)
    out = compiled(bias, torch.randn(300, 29), torch.randn(29, 45), alpha=1.5, beta=-0.75)
    dy = torch.randn_like(out)
    notes: list[str] = []
    with collecting(notes):
        out.backward(dy)
    torch.testing.assert_close(bias.grad.double(), dy.double().sum(0) * -0.75, rtol=1e-5, atol=1e-4)
    if impl is triton_impl:
        assert finish.launches == 1
    else:  # Helion's pair on the CPU's fp32, which has no stored configs
        assert finish.launches == 0
        assert any("row_sum_finish|float32" in note for note in notes), notes


@pytest.mark.parametrize("impl", [helion_impl, helion_ops])
def test_the_helion_addmm_backward_takes_its_row_vector_bias_gradient_from_the_helion_kernels(impl):
    bias = torch.randn(45, requires_grad=True)
    out = impl.addmm(bias, torch.randn(300, 29), torch.randn(29, 45), alpha=1.5, beta=-0.75)
    dy = torch.randn_like(out)
    notes: list[str] = []
    with collecting(notes):
        out.backward(dy)
    torch.testing.assert_close(bias.grad.double(), dy.double().sum(0) * -0.75, rtol=1e-5, atol=1e-4)
    # fp32 on the CPU has no stored configs: the kernels say they ran on Helion's default.
    assert any("Helion's default for row_sum_parts|float32|small" in note for note in notes), notes
    assert any("Helion's default for row_sum_finish|float32|small" in note for note in notes), notes


@pytest.mark.parametrize("name", helion_tuning.ROW_SUM_KERNELS)
def test_every_helion_row_sum_candidate_computes_the_sum(name: str):
    grad = _grad(300, 45, torch.float32)
    rows = row_sum_plan.part_rows(300, 45, INTERPRETER_SMS)
    parts = torch.stack([chunk.sum(0) for chunk in grad.split(rows)])
    args = ((grad, torch.empty_like(parts), rows, 1.0) if name == "row_sum_parts"
            else (parts, 0.5, torch.empty(45)))
    want = parts if name == "row_sum_parts" else parts.sum(0) * 0.5
    out = args[1] if name == "row_sum_parts" else args[2]
    bound = helion_tuning.ROW_SUM_KERNELS[name].bind(args)
    for config in helion_tuning.tuning_candidates(name, "large"):
        out.fill_(float("nan"))  # what an earlier candidate wrote proves nothing
        bound.set_config(config)
        torch.testing.assert_close(bound(*args), want, rtol=1e-5, atol=1e-4)


def test_the_row_sum_kernels_and_their_helion_configs_compile_for_sm90():
    # Compiles kernels, which the interpreter this session runs cannot.
    check_run = run_compiling(Path(__file__).with_name("sm90") / "row_sum_fits_sm90.py")
    assert check_run.returncode == 0, check_run.stdout + check_run.stderr
    assert check_run.stdout.count("bytes of shared memory") == 2 * 3 + 2 * (7 + 5), check_run.stdout


@pytest.mark.parametrize("m", [1, 2, 33])
@pytest.mark.parametrize("config", [config for key, config in load_store(helion_impl.CONFIG_PATH).items()
                                    if key.startswith("row_sum_parts|")])
def test_every_stored_row_sum_parts_config_sums_rows_fewer_than_its_row_block(config: dict, m: int):
    # Helion (static shapes) broadcasts a 1-row tensor's row across the whole row block: at M = 1
    # the tuned 32-row block once summed the row 32 times (gemm NOTES, "The M = 1 bias gradient").
    n = 200
    grad = _grad(m, n, torch.float32)
    rows = row_sum_plan.part_rows(m, n, INTERPRETER_SMS)
    parts = torch.full((-(-m // rows), n), float("nan"))
    bound = helion_row_sum.row_sum_parts_kernel.bind((grad, parts, rows, 1.0))
    bound.set_config(helion.Config(**config))
    want = torch.stack([chunk.sum(0) for chunk in grad.double().split(rows)])
    torch.testing.assert_close(bound(grad, parts, rows, 1.0).double(), want, rtol=1e-5, atol=1e-4)
