"""On a GPU: the parts of split rows meet, in both backends' row-split backwards.

Under the CPU interpreter the parts of a row run one after another and would wait forever,
so this runs only in a session of its own on a GPU (``tests/gpu/conftest.py``).  Three
8192-wide parts a row, the last 3616 wide; ``dx`` and ``dw`` of each backend against float64.
"""

from __future__ import annotations

import pytest
import torch

from operators.rms_norm import helion_impl, triton_impl
from operators.rms_norm.triton_plans import BwdKernel, BwdPlan

EPS = 1e-6
M, N = 37, 20000


def errors(got: tuple[torch.Tensor, torch.Tensor], want: tuple[torch.Tensor, torch.Tensor]) -> list[float]:
    """Largest errors of ``dx`` and ``dw`` over the largest float64 value of each."""
    return [((g.double() - w).abs().max() / w.abs().max()).item() for g, w in zip(got, want, strict=True)]


@pytest.fixture(scope="module")
def bf16_rows() -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, torch.Tensor]]:
    """``(dy, x, weight, rstd)`` of bf16 rows 20000 wide, and their float64 ``dx`` and ``dw``."""
    x, dy = (torch.randn(M, N, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    weight = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    xd, wd, dyd = x.double(), weight.double(), dy.double()
    rstd = torch.rsqrt(xd.pow(2).mean(-1) + EPS)
    xhat, g = xd * rstd[:, None], dyd * wd
    want = (rstd[:, None] * (g - xhat * (g * xhat).mean(-1, keepdim=True)), (dyd * xhat).sum(0))
    return (dy, x, weight, rstd.float()), want


def test_triton_row_split_parts_meet_on_the_gpu(bf16_rows) -> None:
    args, want = bf16_rows
    dx_err, dw_err = errors(triton_impl.launch_bwd(*args, BwdPlan(BwdKernel.ROW_SPLIT, 1, 8192, 16)), want)
    assert dx_err < 1e-2 and dw_err < 1e-2


def test_helion_row_split_parts_meet_on_the_gpu(bf16_rows) -> None:
    args, want = bf16_rows
    assert helion_impl.bwd_kernel_names(M, N, torch.bfloat16)[0] == "rms_norm_bwd_row_split"
    dx, dw_partial = helion_impl.bwd_partials(*args)
    dx_err, dw_err = errors((dx, dw_partial.sum(0)), want)
    assert dx_err < 1e-2 and dw_err < 1e-2
