"""The exp operator: every backend's output and gradient against the float64 reference."""

from __future__ import annotations

import pytest
import torch

from harness.operator import Mode
from operators.exp.operator import ExpOperator
from tests.helpers import assert_accurate, assert_interpreted_backends_skipped, run_cells

BACKENDS = ["eager", "triton", "helion", "torch_compile"]


@pytest.mark.parametrize("mode", list(Mode))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_every_backend_matches_reference_in_every_mode(mode: Mode, dtype: torch.dtype) -> None:
    op = ExpOperator("cpu", dtype)
    cells = run_cells(op, mode, (1000,), ["accuracy", "latency"])
    assert_accurate(cells, BACKENDS)
    assert all(cells[(backend, "latency")].value > 0 for backend in BACKENDS)


def test_bf16_on_cpu_skips_interpreted_backends_with_reason() -> None:
    assert_interpreted_backends_skipped(ExpOperator("cpu", torch.bfloat16), (512,))


def _check_exp_and_grad(exp, n: int) -> None:
    x = torch.randn(n, requires_grad=True)
    y = exp(x)
    dy = torch.randn(n)
    y.backward(dy)
    torch.testing.assert_close(y, x.detach().exp())
    torch.testing.assert_close(x.grad, dy * x.detach().exp())


@pytest.mark.parametrize("n", [1, 16383, 16384, 16385, 40000])
def test_helion_bulk_and_tail_split_covers_every_element(n: int) -> None:
    from operators.exp.helion_impl import exp

    _check_exp_and_grad(exp, n)


@pytest.mark.parametrize("n", [1, 4096, 4097, 70001])
def test_triton_masks_only_the_partial_block(n: int) -> None:
    from operators.exp.triton_impl import exp

    _check_exp_and_grad(exp, n)


def test_triton_custom_op_passes_opcheck() -> None:
    from operators.exp import triton_impl

    x = torch.randn(300, requires_grad=True)
    torch.library.opcheck(triton_impl.exp_fwd, (x,))
    torch.library.opcheck(triton_impl.exp_bwd, (torch.randn(300), torch.randn(300)))


def test_triton_custom_op_compiles_fullgraph_forward_and_backward() -> None:
    from operators.exp.triton_impl import exp

    def f(x: torch.Tensor) -> torch.Tensor:
        return exp(x) * 2

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    x = torch.randn(257, requires_grad=True)
    y = compiled(x)
    y.sum().backward()
    torch.testing.assert_close(y, 2 * x.detach().exp())
    torch.testing.assert_close(x.grad, 2 * x.detach().exp())


def test_helion_runs_bulk_and_tail_in_one_launch_each_way(monkeypatch: pytest.MonkeyPatch) -> None:
    from operators.exp import helion_impl

    calls = []
    real = helion_impl.call_with_stored_config

    def spy(kernel, store, key, *args):
        calls.append(key)
        return real(kernel, store, key, *args)

    monkeypatch.setattr(helion_impl, "call_with_stored_config", spy)
    _check_exp_and_grad(helion_impl.exp, helion_impl.ALIGN + 5)
    assert calls == ["exp_fwd|float32|small", "exp_bwd|float32|small"]
