"""Hardware counters for the row-pitch loss (gemm NOTES, prediction 55).

At shapes whose rows are 16- but not 128-byte multiples, three variants of one matmul: cuBLAS,
the plan's autotuned TMA config, and that config on copies of A, B and the output with 128-byte
pitches (which ran at cuBLAS's speed: prediction 42). Each is timed and checked against float64
as in every probe, then launched once more inside the NVTX ranges ``counted/<shape> <label>``
(labels: ``cublas``, ``plan``, ``pitched``), so that Nsight Compute profiles those launches
alone and names each kernel's variant, however many kernels a call launches::

    ncu --clock-control none --nvtx --nvtx-include "counted/" --set full -o pitch \\
        python -m operators.gemm.probes.pitch_counters --out pitch_counters.json
    ncu --import pitch.ncu-rep --page raw --csv --print-nvtx-rename kernel > pitch_counters.csv

(``--clock-control none``: the clocks are left alone, as the device's METHOD.md asks.) The
report lists kernels in launch order, and the JSON's ``counted`` names the ranges in that order.
Under ``ncu`` every launch is intercepted, so the JSON's times compare with each other only.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import torch

from operators.gemm import triton_impl
from operators.gemm.alignment import output_buffer
from operators.gemm.probes.common import Run, VariantLog, operand, tiled_into
from operators.gemm.probes.matmul_configs import describe
from operators.gemm.probes.padded_pitch import PITCH_BYTES, autotuned_config, check_tiled, pitched
from operators.gemm.triton_dispatch import Kernel

SHAPES = ("3000,5000,7000", "1000,1000,1000")
"""The two sweep shapes under 0.95x whose loss is their pitch (predictions 42 and 45)."""


class Variant(NamedTuple):
    """One way to compute the matmul: its NVTX ``label``, its ``name`` in the JSON, its ``call``."""

    label: str
    name: str
    call: Callable[[], torch.Tensor]


def variants(a: torch.Tensor, b: torch.Tensor) -> list[Variant]:
    """cuBLAS, the plan's autotuned TMA config, and that config on 128-byte pitches."""
    m, n = a.shape[0], b.shape[1]
    config = autotuned_config(a, b)
    wide_a, wide_b = pitched(a), pitched(b)
    wide_out = output_buffer(m, n, a.dtype, a.device, pitch_bytes=PITCH_BYTES)
    return [Variant("cublas", "cublas", lambda: torch.mm(a, b)),
            Variant("plan", f"triton plan ({describe(config)})", lambda: triton_impl.fused_matmul(a, b)),
            Variant("pitched", "a, b and out pitched",
                    lambda: tiled_into(wide_a, wide_b, wide_out, Kernel.TMA, config))]


def time_and_check(calls: list[Variant], run: Run) -> None:
    """Time and check each of ``calls``."""
    for variant in calls:
        run(variant.name, variant.call)


def probe_shape(a: torch.Tensor, b: torch.Tensor, run: Run) -> None:
    """Time and check each of :func:`variants` of ``a @ b``."""
    time_and_check(variants(a, b), run)


def counted_launches(shape: str, calls: list[Variant], skip: set[str]) -> list[str]:
    """Each of ``calls`` but those named in ``skip`` (failed when timed) launched once inside the
    NVTX ranges ``counted/<shape> <label>``; the ranges' inner names, in launch order."""
    ranges: list[str] = []
    for variant in calls:
        if variant.name in skip:
            continue
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("counted")
        torch.cuda.nvtx.range_push(f"{shape} {variant.label}")
        try:
            variant.call()
            torch.cuda.synchronize()
        finally:
            torch.cuda.nvtx.range_pop()
            torch.cuda.nvtx.range_pop()
        ranges.append(f"{shape} {variant.label}")
    return ranges


def add_counted(out: Path, ranges: list[str]) -> None:
    """Add the counted launches' ranges to the probe's JSON (written by :class:`VariantLog`)."""
    report = json.loads(out.read_text())
    out.write_text(json.dumps({**report, "counted": ranges}, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--shape", action="append", help=f"M,N,K (default: {' '.join(SHAPES)})")
    args = parser.parse_args()
    shapes = {text: tuple(map(int, text.split(","))) for text in args.shape or SHAPES}
    for m, n, k in shapes.values():
        check_tiled(m, n, k, torch.device("cuda"))
    log = VariantLog(args.out)
    ranges: list[str] = []
    for text, (m, n, k) in shapes.items():
        a, b = operand(m, k, False), operand(k, n, False)
        calls = variants(a, b)
        time_and_check(calls, log.runner(text, a.double() @ b.double(), 2.0 * m * n * k))
        failed = {r["variant"] for r in log.records if r["shape"] == text and "error" in r}
        ranges += counted_launches(text, calls, failed)
        add_counted(Path(args.out), ranges)
    print(json.dumps({"counted": ranges}))


if __name__ == "__main__":
    main()
