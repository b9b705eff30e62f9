"""CPU tests of addmm's row-vector bias gradient in Triton (``beta * grad.sum(0)``, through
Triton's interpreter): against float64 at odd sizes and layouts, split into parts or not, the
same bits on every run, and as the ``opbench::summed_rows`` op that the addmm backward runs."""

from harness.device import prepare_backends

prepare_backends("cpu")


import pytest  # noqa: E402
import torch  # noqa: E402

from operators.gemm import triton_direct, triton_impl, triton_row_sum  # noqa: E402
from operators.gemm.strategy import INTERPRETER_SMS  # noqa: E402


def _grad(m: int, n: int, dtype: torch.dtype, transposed: bool = False) -> torch.Tensor:
    g = torch.randn((n, m) if transposed else (m, n), dtype=torch.float64) * 3 + 0.5
    return (g.mT if transposed else g).to(dtype)


@pytest.mark.parametrize(("m", "n"), [(1, 7), (37, 45), (300, 33), (1000, 17), (70, 129)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("transposed", [False, True])
def test_summed_rows_match_float64(m: int, n: int, dtype: torch.dtype, transposed: bool):
    grad = _grad(m, n, dtype, transposed)
    got = triton_row_sum.summed_rows(grad, -0.75)
    want = grad.double().sum(0) * -0.75
    assert got.dtype == dtype and got.shape == (n,)
    tol = 1e-5 if dtype == torch.float32 else 2e-3
    scale = grad.double().abs().sum(0).max().item()
    torch.testing.assert_close(got.double(), want, rtol=tol, atol=tol * scale)


def test_tall_gradients_are_summed_in_parts_and_the_same_bits_every_run():
    m, n = 1000, 20
    rows = triton_row_sum.rows_per_part(m, 2, INTERPRETER_SMS)
    assert rows % triton_row_sum.BLOCK_M == 0 and -(-m // rows) > 1  # several parts
    grad = _grad(m, n, torch.float32)
    first = triton_row_sum.summed_rows(grad, 1.0)
    assert torch.equal(first, triton_row_sum.summed_rows(grad, 1.0))
    torch.testing.assert_close(first.double(), grad.double().sum(0), rtol=1e-5, atol=1e-4)


def test_parts_cover_every_row_in_whole_tiles_and_give_each_sm_programs():
    for m, blocks, sms in [(20120, 4, 132), (1024, 8, 132), (5, 1, 132), (100000, 1, 3)]:
        rows = triton_row_sum.rows_per_part(m, blocks, sms)
        parts = -(-m // rows)
        assert rows % triton_row_sum.BLOCK_M == 0 and parts * rows >= m
        assert parts * blocks <= max(blocks, triton_row_sum.PROGRAMS_PER_SM * sms)


def test_an_empty_gradient_sums_to_zeros_and_no_columns_to_nothing():
    assert torch.equal(triton_row_sum.summed_rows(torch.empty(0, 5), 2.0), torch.zeros(5))
    assert triton_row_sum.summed_rows(torch.empty(4, 0), 2.0).shape == (0,)


def test_the_summed_rows_op_passes_opcheck():
    torch.library.opcheck(torch.ops.opbench.summed_rows.default, (_grad(37, 45, torch.float32), 0.5))


class CountedLaunches:
    """A Triton kernel whose launches are counted."""

    def __init__(self, kernel):
        self.kernel, self.launches = kernel, 0

    def __getitem__(self, grid):
        self.launches += 1
        return self.kernel[grid]


@pytest.mark.parametrize("impl", [triton_impl, triton_direct])
def test_the_addmm_backward_takes_its_row_vector_bias_gradient_from_the_triton_kernel(monkeypatch, impl):
    finish = CountedLaunches(triton_row_sum._row_sum_finish_kernel)
    monkeypatch.setattr(triton_row_sum, "_row_sum_finish_kernel", finish)
    bias = torch.randn(45, requires_grad=True)
    out = impl.addmm(bias, torch.randn(37, 29), torch.randn(29, 45), alpha=1.5, beta=-0.75)
    dy = torch.randn_like(out)
    out.backward(dy)
    torch.testing.assert_close(bias.grad.double(), dy.double().sum(0) * -0.75, rtol=1e-5, atol=1e-4)
    assert finish.launches == 1
