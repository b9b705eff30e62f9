"""Hardware counters for the row-pitch loss (gemm NOTES, prediction 55): at shapes whose rows are
16- but not 128-byte multiples, cuBLAS, the plan's autotuned TMA config, and that config on
copies of A, B and the output with 128-byte pitches (which ran at cuBLAS's speed: prediction 42),
each timed and checked against float64 as every probe's variants, then launched once more inside
the NVTX range ``counted``, so that Nsight Compute profiles those launches alone::

    ncu --clock-control none --nvtx --nvtx-include "counted/" --set full -o pitch \\
        python -m operators.gemm.probes.pitch_counters --out pitch_counters.json
    ncu --import pitch.ncu-rep --page raw --csv > pitch_counters.csv

The JSON's ``counted`` list names the counted launches in the order the report lists them.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

import torch

from operators.gemm import triton_impl
from operators.gemm.alignment import output_buffer
from operators.gemm.probes.common import Run, VariantLog, operand, tiled_into
from operators.gemm.probes.matmul_configs import describe
from operators.gemm.probes.padded_pitch import PITCH_BYTES, pitched
from operators.gemm.triton_dispatch import Kernel, plan

SHAPES = ("3000,5000,7000", "1000,1000,1000")
"""The two sweep shapes under 0.95x whose loss is their pitch (predictions 42 and 45)."""


def variants(a: torch.Tensor, b: torch.Tensor) -> dict[str, Callable[[], torch.Tensor]]:
    """cuBLAS, the plan's autotuned TMA config, and that config on 128-byte pitches, by name."""
    (m, k), n = a.shape, b.shape[1]
    if plan(m, n, k, "tf32", a.device).kernel is not Kernel.TMA:
        raise SystemExit(f"{m}x{n}x{k} does not run the tiled TMA kernel")
    triton_impl.fused_matmul(a, b)  # the autotuner picks
    config = triton_impl.autotuned_tiled_pick(Kernel.TMA)
    wide_a, wide_b = pitched(a), pitched(b)
    wide_out = output_buffer(m, n, a.dtype, a.device, pitch_bytes=PITCH_BYTES)
    return {"cublas": lambda: torch.mm(a, b),
            f"triton plan ({describe(config)})": lambda: triton_impl.fused_matmul(a, b),
            "a, b and out pitched": lambda: tiled_into(wide_a, wide_b, wide_out, Kernel.TMA, config)}


def probe_shape(a: torch.Tensor, b: torch.Tensor, run: Run) -> None:
    """Time and check each of :func:`variants`."""
    for name, call in variants(a, b).items():
        run(name, call)


def counted_launches(a: torch.Tensor, b: torch.Tensor, shape: str) -> list[str]:
    """Each of :func:`variants` launched once inside the NVTX range ``counted``; their names."""
    names = []
    for name, call in variants(a, b).items():
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("counted")
        call()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        names.append(f"{shape} {name}")
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--shape", action="append", help=f"M,N,K (default: {' '.join(SHAPES)})")
    args = parser.parse_args()
    log = VariantLog(args.out)
    counted = []
    for text in args.shape or SHAPES:
        m, n, k = map(int, text.split(","))
        a, b = operand(m, k, False), operand(k, n, False)
        probe_shape(a, b, log.runner(text, a.double() @ b.double(), 2.0 * m * n * k))
        counted += counted_launches(a, b, text)
    with open(args.out) as f:
        report = json.load(f)
    with open(args.out, "w") as f:
        json.dump({**report, "counted": counted}, f, indent=1)
    print(json.dumps({"counted": counted}))


if __name__ == "__main__":
    main()
