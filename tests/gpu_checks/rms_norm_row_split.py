"""On a GPU: the parts of split rows meet, in both backends' row-split backwards.

Run in a process of its own by ``tests/test_rms_norm_gpu.py``: Triton and Helion read their
setup when kernels are imported, and a test session has set them up for the CPU interpreter,
where the parts of a row run one after another and would wait forever.  Three 8192-wide parts
a row, the last 3616 wide; ``dx`` and ``dw`` of each backend against float64.  Prints the
errors; exits 1 when one is above 1e-2 or Helion does not route these rows to its row split.
"""

from __future__ import annotations

import sys

from harness.device import prepare_backends

prepare_backends("cuda")

import torch  # noqa: E402

from operators.rms_norm import helion_impl, triton_impl  # noqa: E402

EPS = 1e-6


def errors(got: tuple[torch.Tensor, torch.Tensor], want: tuple[torch.Tensor, torch.Tensor]) -> list[float]:
    """Largest errors of ``dx`` and ``dw`` over the largest float64 value of each."""
    return [((g.double() - w).abs().max() / w.abs().max()).item() for g, w in zip(got, want, strict=True)]


def main() -> int:
    m, n = 37, 20000
    x, dy = (torch.randn(m, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    weight = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    xd, wd, dyd = x.double(), weight.double(), dy.double()
    rstd = torch.rsqrt(xd.pow(2).mean(-1) + EPS)
    xhat, g = xd * rstd[:, None], dyd * wd
    want = (rstd[:, None] * (g - xhat * (g * xhat).mean(-1, keepdim=True)), (dyd * xhat).sum(0))
    rstd = rstd.float()
    if helion_impl.bwd_kernel_names(n, x.dtype)[0] != "rms_norm_bwd_row_split":
        print(f"helion routes {n}-wide bf16 rows to {helion_impl.bwd_kernel_names(n, x.dtype)[0]}")
        return 1
    dx, dw_partial = helion_impl.bwd_partials(dy, x, weight, rstd)
    got = {
        "triton": triton_impl.launch_bwd(dy, x, weight, rstd, triton_impl.BwdPlan("row_split", 1, 8192, 16)),
        "helion": (dx, dw_partial.sum(0)),
    }
    worst = 0.0
    for backend, grads in got.items():
        dx_err, dw_err = errors(grads, want)
        print(f"{backend}: dx {dx_err:.1e}, dw {dw_err:.1e}")
        worst = max(worst, dx_err, dw_err)
    return 0 if worst < 1e-2 else 1


if __name__ == "__main__":
    sys.exit(main())
