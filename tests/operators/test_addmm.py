"""The addmm operator: every backend against the float64 reference, with 1-D and 2-D bias,
alpha and beta other than 1; its command-line options."""

from __future__ import annotations

import argparse

import pytest
import torch

from harness.operator import Mode
from harness.report.results import read_json
from operators.addmm.operator import AddmmOperator
from tests.helpers import (
    assert_accurate,
    assert_interpreted_backends_skipped,
    cli_accuracy,
    run_cells,
    run_cli,
    tf32_allowed,
)

KERNEL_BACKENDS = ["eager", "triton", "helion"]
SCALED_2D = {"bias": "2d", "alpha": 1.5, "beta": -0.5}


@pytest.mark.parametrize("mode", list(Mode), ids=[m.value for m in Mode])
def test_kernel_backends_match_reference_in_every_mode(mode: Mode) -> None:
    op = AddmmOperator("cpu", torch.float32, SCALED_2D)
    assert_accurate(run_cells(op, mode, (20, 12, 9), ["accuracy"], KERNEL_BACKENDS), KERNEL_BACKENDS)


@pytest.mark.parametrize(
    ("options", "shape"),
    [
        ({}, (32, 32, 32)),
        ({"bias": "1d", "alpha": 0.5, "beta": 2.0}, (20, 12, 9)),
        (SCALED_2D, (32, 32, 32)),
    ],
    ids=["1d-defaults", "1d-scaled", "2d-scaled"],
)
def test_bias_kinds_and_scales_match_reference(options: dict, shape: tuple[int, ...]) -> None:
    op = AddmmOperator("cpu", torch.float32, options)
    with tf32_allowed():
        cells = run_cells(op, Mode.FWD_BWD, shape, ["accuracy"], KERNEL_BACKENDS)
    assert_accurate(cells, KERNEL_BACKENDS)


def test_torch_compile_matches_reference_forward_and_backward() -> None:
    op = AddmmOperator("cpu", torch.float32, SCALED_2D)
    cells = run_cells(op, Mode.FWD_BWD, (20, 12, 9), ["accuracy"], ["eager", "torch_compile"])
    assert_accurate(cells, ["torch_compile"])


def test_bf16_on_cpu_skips_interpreted_backends_with_reason() -> None:
    assert_interpreted_backends_skipped(AddmmOperator("cpu", torch.bfloat16), (16, 16, 16), KERNEL_BACKENDS)


def test_options_come_from_the_command_line_or_default() -> None:
    parser = argparse.ArgumentParser()
    AddmmOperator.add_options(parser)
    parsed = vars(parser.parse_args(["--bias", "2d", "--alpha", "1.5", "--beta", "-0.5"]))
    op = AddmmOperator("cpu", torch.float32, parsed)
    assert (op.full_bias, op.alpha, op.beta) == (True, 1.5, -0.5)
    assert op.make_inputs((5, 4, 3))[0].shape == (5, 4)
    default = AddmmOperator("cpu", torch.float32)
    assert (default.full_bias, default.alpha, default.beta) == (False, 1.0, 1.0)
    assert default.make_inputs((5, 4, 3))[0].shape == (4,)


def test_byte_model_counts_the_bias_and_its_gradient() -> None:
    m, n, k = 64, 32, 16
    row = AddmmOperator("cpu", torch.float16)
    full = AddmmOperator("cpu", torch.float16, {"bias": "2d"})
    assert full.bytes_moved((m, n, k), Mode.FWD) - row.bytes_moved((m, n, k), Mode.FWD) == 2 * (m * n - n)
    assert full.bytes_moved((m, n, k), Mode.BWD) - row.bytes_moved((m, n, k), Mode.BWD) == 2 * (m * n - n)
    assert row.flops((m, n, k), Mode.FWD_BWD) == 6 * m * n * k


def test_run_py_end_to_end_with_options(tmp_path) -> None:
    accuracy = cli_accuracy(tmp_path / "addmm.json", "--op", "addmm", "--mode", "bwd", "--bias", "2d",
                            "--alpha", "1.5", "--beta", "-0.5", "--shape", "20,12,9",
                            "--only", "eager,triton")
    assert accuracy == {"eager": 1.0, "triton": 1.0}
    header, _ = read_json(tmp_path / "addmm.json")
    assert header["options"] == SCALED_2D
    shown = run_cli("show", str(tmp_path / "addmm.json"))
    assert "operator options: alpha=1.5, beta=-0.5, bias=2d" in shown.stdout.splitlines()
