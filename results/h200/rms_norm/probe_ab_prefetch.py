"""A/B in one run: the Triton backward of another commit's ``triton_impl.py`` against the current one.

Written when the 8192-wide prefetching backward read 3-6 points slower in session 6 than in
the b4dec3a sweeps with no intended change: same inputs, same timer, three alternating
rounds of each version, main kernels alone and whole (with the partial-``dw`` sum),
``dx`` and ``dw`` checked against float64 (``ab_prefetch.txt``)::

    git show b4dec3a:operators/rms_norm/triton_impl.py > old.py
    python results/h200/rms_norm/probe_ab_prefetch.py --old-impl old.py --old-label b4dec3a --out ab.json
"""

from __future__ import annotations

import importlib.util
import sys

from probe_common import (
    DTYPE,
    bwd_inputs,
    probe_parser,
    shapes_from,
    start_gpu_timing,
    time_main_and_whole,
    write_records,
)

from operators.rms_norm import triton_impl

SHAPES = ((4096, 8192), (16384, 8192), (32768, 4096))
ROUNDS = 3


def load_module(path: str, name: str = "old_triton_impl"):
    """Import the file at ``path`` as module ``name`` (registered, so its dataclasses resolve)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def plan_of(module, m: int, n: int):
    """``bwd_plan`` of either version (b4dec3a's takes no dtype)."""
    try:
        return module.bwd_plan(m, n, DTYPE)
    except TypeError:
        return module.bwd_plan(m, n)


def main() -> None:
    parser = probe_parser(__doc__, "4096x8192, 16384x8192, 32768x4096")
    parser.add_argument("--old-impl", required=True, help="another commit's rms_norm triton_impl.py")
    parser.add_argument("--old-label", default="old", help="the other version's name in the records")
    args = parser.parse_args()
    versions = {args.old_label: load_module(args.old_impl), "now": triton_impl}
    timer, copy_gbps = start_gpu_timing()
    records = []
    for m, n in shapes_from(args.shape, SHAPES):
        inputs = bwd_inputs(m, n)
        for round_ in range(ROUNDS):
            for label, module in versions.items():
                record = {"shape": [m, n], "variant": f"{label} r{round_}", "copy_gbps": copy_gbps}
                records += time_main_and_whole(timer, module, inputs, plan_of(module, m, n), record)
        write_records(args.out, records)


if __name__ == "__main__":
    main()
