"""The exp operator: every backend's output and gradient against the float64 reference."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from harness.operator import Mode
from harness.tuning.configs import load_store
from operators.exp.operator import ExpOperator
from tests.helpers import (
    assert_accurate,
    assert_interpreted_backends_skipped,
    assert_only_helion_noted,
    run_cells,
    store_copy,
)

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


@pytest.mark.parametrize("namespace", ["opbench", "opbench_helion"])
def test_custom_ops_pass_opcheck_on_transposed_inputs(namespace: str) -> None:
    # The fakes must give Dynamo the contiguous layout the host functions return.
    from operators.exp import helion_ops, triton_impl  # noqa: F401 - registers both namespaces

    ops = getattr(torch.ops, namespace)
    x = torch.randn(300, requires_grad=True)
    torch.library.opcheck(ops.exp_fwd.default, (x,))
    torch.library.opcheck(ops.exp_fwd.default, (torch.randn(9, 17).t().requires_grad_(),))
    torch.library.opcheck(ops.exp_bwd.default, (torch.randn(300), torch.randn(300)))
    torch.library.opcheck(ops.exp_bwd.default, (torch.randn(9, 17).t(), torch.randn(9, 17).t()))


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


class ExpStoreCopy:
    """A copy of exp's committed store, lacking the keys :meth:`without` names, that exp's Helion
    kernels read for one test; ``applied`` lists each (kernel, config) they are set to."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, path: Path):
        from helion.runtime.kernel import BoundKernel

        from operators.exp import helion_impl

        self.monkeypatch, self.path, self.impl = monkeypatch, path, helion_impl
        self.applied: list[tuple[str, dict]] = []
        real_set_config = BoundKernel.set_config

        def set_config(bound: BoundKernel, config: Any) -> None:
            self.applied.append((bound.kernel.name, dict(config.config)))
            real_set_config(bound, config)

        monkeypatch.setattr(BoundKernel, "set_config", set_config)

    def without(self, *keys: str) -> None:
        self.monkeypatch.setattr(self.impl, "CONFIG_STORE", store_copy(self.impl, self.path, keys))
        self.reset()

    def reset(self) -> None:
        """Forget the bound kernels, so that their next call chooses its config afresh."""
        for kernel in self.impl.KERNELS.values():
            kernel.reset()


@pytest.fixture
def exp_store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[ExpStoreCopy]:
    copy = ExpStoreCopy(monkeypatch, tmp_path / "helion_configs.json")
    yield copy
    copy.reset()


def _helion_cells(mode: Mode) -> dict:
    """The eager and helion records of an fp32 exp of ALIGN + 5 elements (the small bucket)."""
    from operators.exp.helion_impl import ALIGN

    return run_cells(ExpOperator("cpu", torch.float32), mode, (ALIGN + 5,), ["accuracy", "latency"],
                     ["eager", "helion"])


def test_helion_without_its_bucket_runs_on_the_nearest_stored_bucket_and_says_so(exp_store) -> None:
    from operators.exp.helion_impl import CONFIG_PATH

    exp_store.without("exp_fwd|float32|small", "exp_bwd|float32|small")
    cells = _helion_cells(Mode.FWD_BWD)
    assert_accurate(cells, ["eager", "helion"])
    assert_only_helion_noted(cells, (
        "helion config: nearest stored bucket exp_fwd|float32|large for exp_fwd|float32|small; "
        "helion config: nearest stored bucket exp_bwd|float32|large for exp_bwd|float32|small"))
    stored = load_store(CONFIG_PATH)
    assert exp_store.applied == [("exp_fwd", stored["exp_fwd|float32|large"]),
                                 ("exp_bwd", stored["exp_bwd|float32|large"])]
    assert stored["exp_fwd|float32|large"] != stored["exp_fwd|float32|small"]


def test_helion_without_any_config_of_its_kernel_runs_on_helions_default_and_says_so(exp_store) -> None:
    from operators.exp.helion_impl import CONFIG_PATH, exp_fwd

    exp_store.without(*(key for key in load_store(CONFIG_PATH) if key.startswith("exp_fwd|float32|")))
    cells = _helion_cells(Mode.FWD)
    assert_accurate(cells, ["eager", "helion"])
    assert cells[("helion", "latency")].note == (
        "helion config: Helion's default for exp_fwd|float32|small (no exp_fwd|float32 config stored)")
    (name, config), = exp_store.applied
    assert name == "exp_fwd" and config == dict(exp_fwd.bind(_fwd_args()).config_spec.default_config().config)


def _fwd_args() -> tuple[torch.Tensor, ...]:
    from operators.exp.helion_impl import ALIGN, split_at_bulk

    x = torch.randn(ALIGN + 5)
    return split_at_bulk(x, torch.empty_like(x))
