"""Time the parts of the rms_norm backward on a GPU: main kernels, partial-``dw`` sum, whole.

For each shape this times, for the Triton backend, the whole backward, its main kernels
alone and its sum of the partial ``dw`` rows; for the Helion backend, its main kernels alone,
its sum kernel (``rms_norm_dw_sum``) and the Triton sum on Helion's partial rows.  A copy of
the bytes the model counts is timed as the ceiling (probe 3 also timed the sum's earlier
tile and the ``torch`` sum Helion's partial rows once took)::

    python -m operators.rms_norm.probes.bwd_parts --out parts.json [--shape M,N]
"""

from __future__ import annotations

import torch

from harness.timing import Timer
from operators.rms_norm import helion_impl
from operators.rms_norm import triton_impl as impl
from operators.rms_norm.probes.common import (
    DTYPE,
    bwd_inputs,
    probe_parser,
    shapes_from,
    start_gpu_timing,
    write_records,
)

SHAPES = ((4096, 4096), (4096, 8192), (4096, 16384), (4096, 32768), (16384, 8192), (32768, 4096))


def probe_shape(timer: Timer, m: int, n: int, copy_gbps: float) -> tuple[list[dict], str]:
    """Time every part at ``(m, n)``; returns the records and a one-line summary."""
    x, weight, dy, rstd, _, dw_ref = bwd_inputs(m, n)
    plan = impl.bwd_plan(m, n, DTYPE)
    nbytes = 3 * m * n * 2
    src = torch.randn(nbytes // 4, device="cuda", dtype=DTYPE)  # read + write = nbytes
    dst = torch.empty_like(src)
    _, t_partial = impl.launch_bwd_partials(dy, x, weight, rstd, plan)
    _, h_partial = helion_impl.bwd_partials(dy, x, weight, rstd)
    parts = {
        "copy_same_bytes": lambda: dst.copy_(src),
        "triton_whole": lambda: impl.launch_bwd(dy, x, weight, rstd, plan),
        "triton_main": lambda: impl.launch_bwd_partials(dy, x, weight, rstd, plan),
        "triton_sum": lambda: impl.sum_partial_rows(t_partial, weight),
        "helion_main": lambda: helion_impl.bwd_partials(dy, x, weight, rstd),
        "helion_partial_triton_sum": lambda: impl.sum_partial_rows(h_partial, weight),
        "helion_dw_sum": lambda: helion_impl.sum_partial_rows(h_partial, weight, x.dtype),
    }
    checked = ("triton_sum", "helion_partial_triton_sum", "helion_dw_sum")
    records = []
    line = [f"{m}x{n} partial rows triton {t_partial.size(0)} helion {h_partial.size(0)}"]
    for name, call in parts.items():
        ms = timer.measure(call).p50
        record = {"shape": [m, n], "part": name, "ms": ms, "copy_gbps": copy_gbps,
                  "pct_copy_if_whole": 100 * nbytes / ms / 1e6 / copy_gbps}
        if name in checked:
            err = (call().double() - dw_ref).abs().max() / dw_ref.abs().max()
            record["dw_max_rel_err"] = err.item()
        records.append(record)
        line.append(f"{name} {1000 * ms:.1f}us")
    return records, " | ".join(line)


def main() -> None:
    args = probe_parser(__doc__, "the M*N >= 2^24 sweep shapes").parse_args()
    timer, copy_gbps = start_gpu_timing()
    shapes = shapes_from(args.shape, SHAPES)
    records = []
    for m, n in shapes:
        shape_records, summary = probe_shape(timer, m, n, copy_gbps)
        records += shape_records
        print(summary, flush=True)
        write_records(args.out, records)


if __name__ == "__main__":
    main()
