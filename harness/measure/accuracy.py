"""Compare a backend's outputs and input gradients against a float64 reference.

The reference is the baseline backend run on inputs upcast to float64, with the same
``dy`` (upcast) in backward modes.  A tensor passes when every element satisfies
``|actual - ref| <= atol + rtol * |ref|``; a non-finite value where the reference is finite (or
a different one where it is not), a wrong shape, a wrong dtype or a missing gradient fails
with a message saying which.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from harness.metrics.cell_data import AccuracyResult


def _compare(name: str, actual: torch.Tensor | None, ref: torch.Tensor, dtype: torch.dtype,
             rtol: float, atol: float) -> AccuracyResult:
    if actual is None:
        return AccuracyResult(False, float("nan"), float("nan"), f"{name}: missing")
    if tuple(actual.shape) != tuple(ref.shape):
        return AccuracyResult(
            False, float("nan"), float("nan"),
            f"{name}: shape {tuple(actual.shape)}, expected {tuple(ref.shape)}",
        )
    if actual.dtype != dtype:
        return AccuracyResult(
            False, float("nan"), float("nan"), f"{name}: dtype {actual.dtype}, expected {dtype}"
        )
    got = actual.detach().to(torch.float64)
    want = ref.detach().to(device=got.device, dtype=torch.float64)
    finite_ref = torch.isfinite(want)
    # Where the reference is finite the value must be too; where it is not (inf, nan), the
    # value must be the same non-finite value.
    bad_values = torch.where(finite_ref, ~torch.isfinite(got),
                             ~((got == want) | (torch.isnan(got) & torch.isnan(want))))
    err = torch.where(finite_ref, (got - want).abs(), torch.zeros_like(got))
    rel = err / want.abs().clamp_min(torch.finfo(torch.float64).tiny)
    max_abs = float(err.max()) if err.numel() else 0.0
    max_rel = float(rel.max()) if rel.numel() else 0.0
    if bool(bad_values.any()):
        return AccuracyResult(
            False, max_abs, max_rel, f"{name}: {int(bad_values.sum())} non-finite values"
        )
    outside = err > atol + rtol * want.abs()
    if bool(outside.any()):
        return AccuracyResult(
            False, max_abs, max_rel,
            f"{name}: {int(outside.sum())}/{outside.numel()} elements outside "
            f"rtol={rtol:g} atol={atol:g} (max abs err {max_abs:.3g})",
        )
    return AccuracyResult(True, max_abs, max_rel)


def compare_all(names: Sequence[str], actual: Sequence[torch.Tensor | None],
                reference: Sequence[torch.Tensor], dtype: torch.dtype,
                tolerances: Sequence[tuple[float, float]]) -> AccuracyResult:
    """Compare tensors pairwise, each with its own ``(rtol, atol)``; reports every failing pair
    and the worst errors."""
    if len(actual) != len(reference):
        return AccuracyResult(
            False, float("nan"), float("nan"),
            f"{len(actual)} tensors, expected {len(reference)}",
        )
    results = [
        _compare(name, got, want, dtype, rtol, atol)
        for name, got, want, (rtol, atol) in zip(names, actual, reference, tolerances, strict=True)
    ]
    failed = [r for r in results if not r.passed]
    worst_abs = max((r.max_abs_err for r in results), default=0.0)
    worst_rel = max((r.max_rel_err for r in results), default=0.0)
    if failed:
        return AccuracyResult(False, worst_abs, worst_rel, "; ".join(r.reason or "" for r in failed))
    return AccuracyResult(True, worst_abs, worst_rel)
