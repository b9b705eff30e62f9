"""``run.py tune``: time each operator's curated Helion configs on this GPU and store the best.

Each Helion kernel module lists its stored-config slots with ``tuning_jobs(dtype, device)``;
every candidate config is compiled and timed with the benchmark timer (median, L2 flushed),
and the fastest one is written to the module's ``helion_configs.json``.  No search-based
autotuning runs: the candidates are a short list chosen for the H200.
"""

from __future__ import annotations

import argparse
import importlib

import torch

from harness.cli import OneLineParser, UsageError, validate_choices
from harness.operator import DTYPE_NAMES
from harness.timing import CudaTimer
from operators import operator_names
from operators.helion_configs import TuningJob, save_store

HELION_MODULES = {
    "exp": "operators.exp.helion_impl",
    "rms_norm": "operators.rms_norm.helion_impl",
    "gemm": "operators.gemm.helion_impl",
    "addmm": "operators.gemm.helion_impl",
}


def _tune_job(job: TuningJob, timer: CudaTimer) -> tuple[dict | None, list[str]]:
    args = job.make_args()
    bound = job.kernel.bind(args)
    best: tuple[float, dict] | None = None
    log = []
    for config in job.candidates:
        try:
            bound.set_config(config)
            ms = timer.measure(lambda: bound(*args)).p50
        except Exception as exc:  # noqa: BLE001 - a candidate that fails is skipped
            log.append(f"  {config}: failed ({type(exc).__name__}: {str(exc)[:120]})")
            continue
        log.append(f"  {ms * 1e3:9.1f} us  {config}")
        if best is None or ms < best[0]:
            best = (ms, dict(config.config))
    return (best[1] if best else None), log


def tune_main(argv: list[str]) -> int:
    """Entry point of ``run.py tune``; returns the exit status."""
    parser = OneLineParser(prog="run.py tune", description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--op", required=True, help="comma list of operators")
    parser.add_argument("--precision", "--dtype", dest="precision", default="bf16,fp16,fp32",
                        help="comma list of dtypes (default bf16,fp16,fp32)")
    parser.add_argument("--rep", type=float, default=50.0, help="timing budget per config, ms")
    parser.add_argument("--match", default="", help="tune only config keys containing this text")
    args = parser.parse_args(argv)
    ops = [o for o in args.op.split(",") if o]
    validate_choices("op", ops, operator_names())
    precisions = [p for p in args.precision.split(",") if p]
    validate_choices("precision", precisions, list(DTYPE_NAMES))
    if not torch.cuda.is_available():
        raise UsageError("tune needs a GPU (stored configs are per GPU model)")
    timer = CudaTimer(warmup_ms=10.0, rep_ms=args.rep)
    device_name = torch.cuda.get_device_name()
    unknown = [op for op in ops if op not in HELION_MODULES]
    if unknown:
        raise UsageError(f"{unknown[0]} has no Helion kernels to tune (valid: {', '.join(HELION_MODULES)})")
    # gemm and addmm share one module: tune it once.
    for module_name in dict.fromkeys(HELION_MODULES[op] for op in ops):
        module = importlib.import_module(module_name)
        for precision in precisions:
            for job in module.tuning_jobs(DTYPE_NAMES[precision], "cuda"):
                if args.match not in job.key:
                    continue
                best, log = _tune_job(job, timer)
                print(job.key)
                print("\n".join(log), flush=True)
                if best is not None:
                    save_store(module.CONFIG_PATH, {job.key: best}, device_name)
        print(f"stored configs in {module.CONFIG_PATH}")
    return 0
