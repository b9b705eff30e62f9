"""What the rms_norm probe scripts share: their arguments, timer, copy bandwidth and result file.

Every probe takes ``--out FILE`` and repeatable ``--shape M,N``, times with the same
timer settings (:data:`PROBE_TIMER`) against the copy bandwidth measured at its start, and rewrites
its JSON result file after each shape, so a probe stopped early keeps what it finished.
"""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch

from harness.device import prepare_backends
from harness.measure.ceilings import measure_traffic_gbps
from harness.settings import TimerSettings
from harness.timing import Timer, make_timer
from operators.rms_norm import triton_impl
from operators.rms_norm.operator import EPS
from operators.rms_norm.triton_plans import BwdPlan

DTYPE = torch.bfloat16
"""The dtype every rms_norm probe runs in."""
PROBE_TIMER = TimerSettings(warmup_ms=5, rep_ms=25)
"""The budgets every rms_norm probe times with."""


def probe_parser(doc: str, default_shapes: str) -> argparse.ArgumentParser:
    """The parser every probe starts from: ``--out`` and ``--shape``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--shape", action="append", help=f"M,N to probe (default: {default_shapes})")
    return parser


def shapes_from(texts: list[str] | None, default: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The ``--shape M,N`` arguments as pairs, or ``default`` when none were given."""
    return [tuple(map(int, text.split(","))) for text in texts] if texts else list(default)


def start_gpu_timing() -> tuple[Timer, float]:
    """Prepare the CUDA backends; return the probes' timer and the copy bandwidth it measures (GB/s)."""
    prepare_backends("cuda")
    return make_timer("cuda", PROBE_TIMER), measure_traffic_gbps("cuda", PROBE_TIMER, ("copy",))["copy"]


def write_records(path: str, records: list[dict]) -> None:
    """Write the probe's records, with the GPU's name, to ``path``."""
    with open(path, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "records": records}, f, indent=1)


def fwd_inputs(m: int, n: int) -> tuple[torch.Tensor, ...]:
    """Fresh bf16 ``x`` and ``weight`` on the GPU, and the float64 ``rstd`` and ``y`` they should give."""
    x = torch.randn(m, n, device="cuda", dtype=DTYPE)
    weight = (1 + 0.1 * torch.randn(n, device="cuda")).to(DTYPE)
    rstd = torch.rsqrt(x.double().pow(2).mean(-1) + EPS)
    return x, weight, rstd, x.double() * rstd[:, None] * weight.double()


def check_and_time_fwd(timer: Timer, call: Callable[[], tuple], record: dict,
                       refs: tuple[torch.Tensor, torch.Tensor], nbytes: int) -> dict:
    """Run a forward variant, record its errors against the float64 ``refs`` (``rstd``, ``y``)
    and its time (:func:`_time_checked`); ``call`` returns ``y`` and ``rstd`` (or ``None``
    for it)."""
    def errors(outputs: tuple) -> dict:
        y, rstd = outputs
        found = {"y_max_rel_err": max_rel_err(y, refs[1])}
        if rstd is not None:
            found["rstd_max_rel_err"] = max_rel_err(rstd, refs[0])
        return found

    return _time_checked(timer, call, record, errors, nbytes)


def time_same_bytes_copy(timer: Timer, record: dict, nbytes: int) -> dict:
    """Time a ``dst.copy_(src)`` that reads and writes ``nbytes`` in all, as variant
    ``copy_same_bytes`` of ``record`` (:func:`_time_checked`, unchecked)."""
    src = torch.randn(nbytes // 4, device="cuda", dtype=DTYPE)
    copy = functools.partial(torch.empty_like(src).copy_, src)
    return _time_checked(timer, copy, {**record, "variant": "copy_same_bytes"}, None, nbytes)


def bwd_reference(
    x: torch.Tensor, weight: torch.Tensor, dy: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``dx`` and ``dw`` of the rms_norm backward in float64, with ``rstd`` recomputed from ``x``."""
    xd, wd, dyd = x.double(), weight.double(), dy.double()
    rstd = torch.rsqrt(xd.pow(2).mean(-1) + EPS)
    xhat, g = xd * rstd[:, None], dyd * wd
    return rstd[:, None] * (g - xhat * (g * xhat).mean(-1, keepdim=True)), (dyd * xhat).sum(0)


def max_rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    """The largest absolute error over the largest reference magnitude."""
    return ((got.double() - want).abs().max() / want.abs().max()).item()


def bwd_inputs(m: int, n: int) -> tuple[torch.Tensor, ...]:
    """Fresh bf16 ``x``, ``weight`` and ``dy`` on the GPU, ``rstd`` from Triton's forward, and
    the float64 ``dx`` and ``dw`` they should give."""
    x = torch.randn(m, n, device="cuda", dtype=DTYPE)
    weight = (1 + 0.1 * torch.randn(n, device="cuda")).to(DTYPE)
    dy = torch.randn_like(x)
    _, rstd = triton_impl.launch_fwd(x, weight, EPS, triton_impl.fwd_plan(m, n))
    return (x, weight, dy, rstd, *bwd_reference(x, weight, dy))


def check_and_time(timer: Timer, call: Callable[[], tuple], record: dict,
                   refs: tuple[torch.Tensor, torch.Tensor], nbytes: int) -> dict:
    """Run a backward variant, record its errors against the float64 ``refs`` and its time
    (:func:`_time_checked`); ``call`` returns ``dx`` and either ``dw`` or the partial ``dw``
    rows (summed here)."""
    def errors(outputs: tuple) -> dict:
        dx, dw = outputs
        return {"dx_max_rel_err": max_rel_err(dx, refs[0]),
                "dw_max_rel_err": max_rel_err(dw.sum(0) if dw.dim() == 2 else dw, refs[1])}

    return _time_checked(timer, call, record, errors, nbytes)


def _time_checked(timer: Timer, call: Callable[[], Any], record: dict,
                  errors: Callable[[Any], dict] | None, nbytes: int) -> dict:
    """Run ``call`` once and add ``errors(outputs)`` to ``record`` (unless ``errors`` is
    ``None``), then time it as a share of ``record["copy_gbps"]`` for ``nbytes`` and print a
    line.  ``record`` holds the shape, variant and copy bandwidth (and any ``flush`` or
    ``scope``, which the line names).  A variant that fails to compile or launch is recorded
    with its error, not raised, so the other variants still run.
    """
    try:
        outputs = call()
        found = errors(outputs) if errors is not None else {}
        record.update(found)
        ms = timer.measure(call).p50
        record.update(ms=ms, pct_copy=100 * nbytes / ms / 1e6 / record["copy_gbps"])
        summary = f"{1000 * ms:.1f} us, {record['pct_copy']:.1f}%"
        if found:
            summary += " (errors " + ", ".join(f"{value:.1e}" for value in found.values()) + ")"
    except Exception as exc:  # recorded, so the other variants still run
        record["error"] = summary = f"{type(exc).__name__}: {exc}"[:300]
    m, n = record["shape"]
    label = " ".join(str(record[key]) for key in ("variant", "flush", "scope") if key in record)
    print(f"{m}x{n} {label}: {summary}", flush=True)
    return record


def time_main_and_whole(timer: Timer, module: ModuleType, inputs: tuple[torch.Tensor, ...],
                        plan: BwdPlan, record: dict) -> list[dict]:
    """Check and time a Triton backward module's main kernels alone and whole (with the
    partial-``dw`` sum) under ``plan``, on ``inputs`` from :func:`bwd_inputs`; ``record``
    holds the shape, variant and ``copy_gbps``."""
    x, weight, dy, rstd, dx_ref, dw_ref = inputs
    m, n = x.shape
    records = []
    for scope, launch in (("main", module.launch_bwd_partials), ("whole", module.launch_bwd)):
        call = functools.partial(launch, dy, x, weight, rstd, plan)
        scoped = {**record, "scope": scope}
        records.append(check_and_time(timer, call, scoped, (dx_ref, dw_ref), 3 * m * n * 2))
    return records
