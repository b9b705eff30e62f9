"""On a GPU: Helion's rms_norm and gemm in fp32, which have no stored configs of their size, run
the bf16 configs of their buckets (half the element size, stages taken off where shared memory
runs out) rather than Helion's default, and say so, against float64."""

from __future__ import annotations

import pytest
import torch

from harness.notes import collecting
from operators.rms_norm import helion_impl as rms_norm_helion
from operators.rms_norm.operator import llama_rms_norm
from tests.gpu.helion_gemm import checked_matmul_notes

BORROWED = ", the bfloat16 config (half the element size), for "


def _assert_borrowed_bf16_configs(notes: list[str]) -> None:
    assert notes, "fp32 found a config of its own"
    assert any(BORROWED in note for note in notes), notes
    assert not any("Helion's default" in note for note in notes), notes


def test_fp32_rms_norm_backward_runs_the_bf16_configs() -> None:
    # 2048x32768: the width whose backward took 136 ms on Helion's default config.
    x = torch.randn(2048, 32768, device="cuda", requires_grad=True)
    weight = (1 + 0.1 * torch.randn(32768, device="cuda")).requires_grad_()
    dy = torch.randn_like(x)
    notes: list[str] = []
    with collecting(notes):
        y = rms_norm_helion.rms_norm(x, weight, 1e-6)
        dx, dw = torch.autograd.grad(y, (x, weight), dy)
    x64, w64 = x.detach().double().requires_grad_(), weight.detach().double().requires_grad_()
    y64 = llama_rms_norm(x64, w64, 1e-6)
    dx64, dw64 = torch.autograd.grad(y64, (x64, w64), dy.double())
    for got, want in ((y, y64), (dx, dx64), (dw, dw64)):
        torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-4 * want.abs().max().item())
    _assert_borrowed_bf16_configs(notes)


@pytest.mark.parametrize("shape", [(4096, 4096, 4096), (16, 4096, 4096), (20120, 512, 1536)],
                         ids=lambda s: "x".join(map(str, s)))
def test_fp32_gemm_runs_the_bf16_configs_of_its_bucket(shape: tuple[int, int, int]) -> None:
    _assert_borrowed_bf16_configs(checked_matmul_notes(shape, torch.float32))
