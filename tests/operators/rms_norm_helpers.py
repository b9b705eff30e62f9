"""What the rms_norm kernel tests share: the float64 reference and a launch spy."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

EPS = 1e-6
M = 37
TOLERANCES = {
    torch.float32: {"rtol": 1e-4, "atol": 1e-4},
    torch.float16: {"rtol": 1e-2, "atol": 1e-2},
}


def reference(x: torch.Tensor, weight: torch.Tensor, dy: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """y, dx, dw from the formulas, in float64."""
    x, weight, dy = x.double(), weight.double(), dy.double()
    rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS)
    xhat = x * rstd
    g = dy * weight
    dx = rstd * (g - xhat * (g * xhat).mean(-1, keepdim=True))
    return xhat * weight, dx, (dy * xhat).sum(0)


def run_forward_backward(rms_norm: Callable, m: int, n: int, dtype: torch.dtype) -> tuple[tuple, tuple]:
    """``(y, dx, dw)`` of ``rms_norm`` on random inputs, and the float64 reference for them."""
    x = torch.randn(m, n, dtype=dtype, requires_grad=True)
    weight = torch.randn(n, dtype=dtype, requires_grad=True)
    dy = torch.randn(m, n, dtype=dtype)
    y = rms_norm(x, weight, EPS)
    y.backward(dy)
    return (y, x.grad, weight.grad), reference(x.detach(), weight.detach(), dy)


def assert_matches_reference(outputs: tuple, expected: tuple, dtype: torch.dtype) -> None:
    for name, got, want in zip(("y", "dx", "dw"), outputs, expected, strict=True):
        assert got.dtype == dtype, name
        torch.testing.assert_close(got.double(), want, **TOLERANCES[dtype], msg=name)


def bf16_backward_errors(bwd: Callable, m: int, n: int) -> list[float]:
    """Largest ``dx`` and ``dw`` errors of a bf16 backward, over the largest float64 value."""
    x, weight, dy = (torch.randn(m, n).bfloat16(), torch.randn(n).bfloat16(), torch.randn(m, n).bfloat16())
    rstd = torch.rsqrt(x.double().pow(2).mean(-1) + EPS).float()
    dx, dw = bwd(dy, x, weight, rstd)
    _, dx_want, dw_want = reference(x, weight, dy)
    return [((got.double() - want).abs().max() / want.abs().max()).item()
            for got, want in ((dx, dx_want), (dw, dw_want))]


class LaunchSpy:
    """Stands in for a jitted kernel and records each launch's name before running it."""

    def __init__(self, kernel: object, name: str, launched: list[str]):
        self.kernel, self.name, self.launched = kernel, name, launched

    def __getitem__(self, grid: tuple) -> Callable:
        self.launched.append(self.name)
        return self.kernel[grid]


def spy_on_launches(monkeypatch: pytest.MonkeyPatch, module: object, *names: str) -> list[str]:
    """Replace kernels ``names`` of ``module`` with :class:`LaunchSpy` s; the list they record
    each launch's name in."""
    launched: list[str] = []
    for name in names:
        monkeypatch.setattr(module, name, LaunchSpy(getattr(module, name), name, launched))
    return launched


