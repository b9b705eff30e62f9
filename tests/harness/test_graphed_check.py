"""What ``--cudagraph`` needs, checked on the CPU: no autograd graph of a cell's first call left
alive, and a replay's outputs poisoned before the audited sample only where they share no storage
with what the graph reads (the replays themselves run on the GPU: ``tests/gpu/test_cudagraph_check.py``)."""

from __future__ import annotations

import pytest
import torch

from harness.measure.cell import Cell, poison_unread
from harness.operator import Mode
from harness.sweep import in_process
from operators.exp.operator import ExpOperator
from tests.helpers import run_cells


@pytest.mark.parametrize("repeats", [1, 2])
@pytest.mark.parametrize("mode", [Mode.FWD, Mode.FWD_BWD])
def test_a_timed_cell_holds_no_autograd_graph_of_its_first_call(monkeypatch: pytest.MonkeyPatch,
                                                                  mode: Mode, repeats: int) -> None:
    timed_with: list[object] = []
    time_cell = in_process.time_cell

    def spy(op: object, mode: Mode, cell: Cell, *args: object) -> list:
        timed_with.extend(output.grad_fn for output in cell.first_outputs)
        return time_cell(op, mode, cell, *args)

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
