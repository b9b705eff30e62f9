"""Helion's 8192-wide backward under candidate configs: the stored one against loop pipelining,
one row a step, streaming eviction hints and TMA loads.

For each shape of the ``n8192`` bucket and each config this times ``rms_norm_bwd`` alone
("main") and followed by the stored ``rms_norm_dw_sum`` ("whole"), against the copy
bandwidth measured at the start, with ``dx`` and ``dw`` checked against float64::

    python results/h200/rms_norm/probe_helion_bwd_configs.py --out helion_configs.json

Written for, and run at, d61a6c9 (probe 22), whose ``rms_norm_bwd`` took outer tiles of rows
(``block_sizes``).  From e453546 the kernel takes an ``sm_slots`` argument and a
``programs_per_sm`` config instead, so this probe runs only on d61a6c9's ``helion_impl``.
"""

from __future__ import annotations

import functools

import helion
from probe_common import (
    bwd_inputs,
    check_and_time,
    probe_parser,
    shapes_from,
    start_gpu_timing,
    write_records,
)

from operators.rms_norm import helion_impl

SHAPES = ((4096, 8192), (16384, 8192), (4096, 5120))

_TMA_XY = ["pointer", "tensor_descriptor", "tensor_descriptor", "pointer", "pointer", "pointer"]
"""``indexing`` with ``x`` and ``dy`` loaded through TMA (loads: rstd, x, dy, weight; stores: dx, dw)."""

CANDIDATES = {
    "stored": dict(block_sizes=[32, 2], num_warps=16),
    "row_step": dict(block_sizes=[32, 1], num_warps=16),
    "stages2": dict(block_sizes=[32, 2], num_warps=16, range_num_stages=[0, 2]),
    "row_step_stages2": dict(block_sizes=[32, 1], num_warps=16, range_num_stages=[0, 2]),
    "row_step_stages3": dict(block_sizes=[32, 1], num_warps=16, range_num_stages=[0, 3]),
    "row_step_8w_stages2": dict(block_sizes=[32, 1], num_warps=8, range_num_stages=[0, 2]),
    "evict_first": dict(block_sizes=[32, 2], num_warps=16, load_eviction_policies=["", "first", "first", ""]),
    "tma_stages3": dict(block_sizes=[32, 1], num_warps=16, range_num_stages=[0, 3], indexing=_TMA_XY),
}


def with_sum(compiled, dy, x, weight, rstd):
    """A compiled backward followed by the stored partial-``dw`` sum."""
    dx, partial = compiled(dy, x, weight, rstd)
    return dx, helion_impl._run("rms_norm_dw_sum", x, partial, weight, rows=partial.size(0))


def main() -> None:
    parser = probe_parser(__doc__, ", ".join(f"{m}x{n}" for m, n in SHAPES))
    parser.add_argument("--only", help="comma-separated candidate names")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(CANDIDATES)
    timer, copy_gbps = start_gpu_timing()
    records = []
    for m, n in shapes_from(args.shape, SHAPES):
        x, weight, dy, rstd, dx_ref, dw_ref = bwd_inputs(m, n)
        bound = helion_impl.rms_norm_bwd.bind((dy, x, weight, rstd))
        nbytes = 3 * m * n * 2
        for name in names:
            base = {"shape": [m, n], "variant": name, "config": CANDIDATES[name], "copy_gbps": copy_gbps}
            try:
                compiled = bound.compile_config(helion.Config(**CANDIDATES[name]))
            except Exception as exc:  # recorded, so the other candidates still run
                records.append({**base, "error": f"{type(exc).__name__}: {exc}"[:300]})
                print(f"{m}x{n} {name}: {records[-1]['error']}", flush=True)
                continue
            calls = {"main": functools.partial(compiled, dy, x, weight, rstd),
                     "whole": functools.partial(with_sum, compiled, dy, x, weight, rstd)}
            for scope, call in calls.items():
                record = {**base, "scope": scope}
                records.append(check_and_time(timer, call, record, (dx_ref, dw_ref), nbytes))
            write_records(args.out, records)


if __name__ == "__main__":
    main()
