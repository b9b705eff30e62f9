"""What ``--cudagraph`` needs, checked on the CPU: no autograd graph of a cell's first call left
alive; a replay's outputs poisoned only where they share no storage with what the graph reads;
a replay checked on fresh inputs against their reference with the ``dy`` it was captured with."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
import torch

from harness.measure import cell as cell_module
from harness.measure.cell import Cell, poison_unread
from harness.operator import Mode, as_tuple, register_benchmark
from harness.settings import RunSettings, TimerSettings
from harness.sweep import in_process
from harness.sweep.runner import run_shape
from harness.sweep.spec import Sweep
from operators.exp.operator import ExpOperator
from tests.helpers import cpu_settings, run_cells


@pytest.mark.parametrize("repeats", [1, 2])
@pytest.mark.parametrize("mode", [Mode.FWD, Mode.FWD_BWD])
def test_a_timed_cell_holds_no_autograd_graph_of_its_first_call(monkeypatch: pytest.MonkeyPatch,
                                                                  mode: Mode, repeats: int) -> None:
    timed_with: list[object] = []
    time_cell = in_process.time_cell

    def spy(cell: Cell, *args: object) -> None:
        timed_with.extend(output.grad_fn for output in cell.first_outputs)
        time_cell(cell, *args)

    monkeypatch.setattr(in_process, "time_cell", spy)
    records = run_cells(ExpOperator(device="cpu", dtype=torch.float32), mode, (1000,),
                        ["accuracy", "latency"], ["eager", "triton"], repeats=repeats)
    assert records["eager", "accuracy"].value == records["triton", "accuracy"].value == 1.0
    assert timed_with == [None] * 2 * repeats


def test_a_replay_poisons_what_it_writes_and_nothing_it_reads() -> None:
    x, dy = torch.randn(7), torch.randn(7)
    output, own_grad, dy_as_grad, view_of_x = torch.randn(7), torch.randn(7), dy.view_as(dy), x[2:]
    poison_unread([output, own_grad, None, dy_as_grad, view_of_x, torch.arange(3)], [x, 3, dy])
    assert output.isnan().all() and own_grad.isnan().all()
    assert not dy.isnan().any() and not x.isnan().any()


def timed_settings(cudagraph: bool) -> RunSettings:
    """A short CPU run that checks and times, with or without ``--cudagraph``."""
    timer = TimerSettings(warmup_ms=0.0, rep_ms=1.0, cudagraph=cudagraph)
    return dataclasses.replace(cpu_settings(["accuracy", "latency"]), timer=timer)


@pytest.mark.parametrize("cudagraph", [False, True])
def test_a_replay_is_checked_on_the_fresh_inputs_with_the_dy_it_was_captured_with(cudagraph: bool) -> None:
    op = ExpOperator(device="cpu", dtype=torch.float32)
    sweep = Sweep(op, Mode.FWD_BWD, [(1000,)], ["eager"], "eager", timed_settings(cudagraph))
    given = in_process._shape_inputs(sweep, (1000,))
    if not cudagraph:
        assert given.replay_reference is None
        return
    (fresh,), (first_dy,) = given.fresh, op.grad_outputs((given.fresh[0],))
    expected = fresh.double().exp()
    assert not torch.equal(fresh, given.inputs[0])
    assert torch.allclose(given.replay_reference.outputs[0], expected)
    assert torch.allclose(given.replay_reference.grads[0], expected * first_dy.double())
    assert not torch.allclose(given.fresh_reference.grads[0], given.replay_reference.grads[0])


@pytest.fixture
def graphs_emulated(monkeypatch: pytest.MonkeyPatch) -> None:
    """The timed-call check's CUDA graph stood in for on the CPU: a replay calls again and copies
    the results into the outputs and gradients its capture made, as a graph writes them."""
    checked: list[Cell] = []
    check_timed_call = in_process.check_timed_call

    def spy(op: object, mode: Mode, cell: Cell, *args: object, **kwargs: object) -> object:
        checked.append(cell)
        return check_timed_call(op, mode, cell, *args, **kwargs)

    class StandInGraph:
        def __init__(self, fn: Callable[[], object], setup: Callable[[], None]):
            self.fn, self.setup = fn, setup
            self.leaves = [x for x in checked[-1].inputs if isinstance(x, torch.Tensor) and x.requires_grad]
            setup()
            self.outputs = as_tuple(fn())
            self.grads = [leaf.grad for leaf in self.leaves]

        def __call__(self) -> object:
            held = [leaf.grad for leaf in self.leaves]  # a replay leaves the leaves' .grad as it was
            self.setup()
            again = as_tuple(self.fn())
            with torch.no_grad():
                for output, value in zip(self.outputs, again, strict=True):
                    output.copy_(value)
                for grad, leaf in zip(self.grads, self.leaves, strict=True):
                    if grad is not None:
                        grad.copy_(leaf.grad)
            for leaf, grad in zip(self.leaves, held, strict=True):
                leaf.grad = grad
            return self.outputs

    monkeypatch.setattr(in_process, "check_timed_call", spy)
    monkeypatch.setattr(cell_module, "CapturedCall", StandInGraph)


class StashingExp(ExpOperator):
    @register_benchmark()
    def stash(self, x: torch.Tensor) -> Callable[[], torch.Tensor]:
        stashed: list[torch.Tensor] = []

        def call() -> torch.Tensor:
            if not stashed:
                stashed.append(torch.exp(x).detach())
            return stashed[0].clone()
        return call


@pytest.mark.usefixtures("graphs_emulated")
@pytest.mark.parametrize("mode", [Mode.FWD, Mode.FWD_NO_GRAD, Mode.FWD_BWD])
def test_a_replay_on_fresh_inputs_passes_a_right_backend_and_fails_a_stash(mode: Mode) -> None:
    op = StashingExp(device="cpu", dtype=torch.float32)
    backends = ["eager", "stash"] if mode is Mode.FWD_NO_GRAD else ["eager"]
    sweep = Sweep(op, mode, [(1000,)], backends, "eager", timed_settings(cudagraph=True))
    records = {(r.backend, r.metric): r for r in run_shape(sweep, (1000,))}
    assert records["eager", "accuracy"].value == 1.0, records["eager", "accuracy"].note
    if mode is Mode.FWD_NO_GRAD:
        assert records["stash", "accuracy"].value == 0.0
        assert records["stash", "accuracy"].note.startswith("in a timed call")
