"""``run.py tune``: time each operator's curated Helion configs on this GPU and store the best.

Each operator names the module holding its Helion kernels' stored-config slots
(``helion_tuning``): its ``tuning_jobs(dtype, device)`` lists the slots, and the fastest
correct candidate of each is written to the module's ``CONFIG_PATH``.  Exit 1 when a slot got
no correct candidate.
"""

from __future__ import annotations

import argparse
import importlib
import sys

import torch

from harness.cli.args import OneLineParser, UsageError, help_text, program, validate_choices
from harness.operator import DTYPE_NAMES
from harness.registry import load_operator, operator_names
from harness.settings import TUNE_REP_MS, TUNE_WARMUP_MS, TimerSettings
from harness.timing import make_timer
from harness.tuning.configs import save_store
from harness.tuning.tuner import tune_job


def tune_main(argv: list[str]) -> int:
    """Entry point of ``run.py tune``; returns the exit status."""
    parser = OneLineParser(prog=f"{program()} tune", description=help_text(__doc__),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--op", required=True, help="comma list of operators")
    parser.add_argument("--precision", "--dtype", dest="precision", default="bf16,fp16,fp32",
                        help="comma list of dtypes (default bf16,fp16,fp32)")
    parser.add_argument("--rep", type=float, default=TUNE_REP_MS, help="timing budget per config, ms")
    parser.add_argument("--match", default="", help="tune only config keys containing this text")
    args = parser.parse_args(argv)
    ops = [o for o in args.op.split(",") if o]
    validate_choices("op", ops, operator_names())
    precisions = [p for p in args.precision.split(",") if p]
    validate_choices("precision", precisions, list(DTYPE_NAMES))
    if not torch.cuda.is_available():
        raise UsageError("tune needs a GPU (stored configs are per GPU model)")
    timer = make_timer("cuda", TimerSettings(TUNE_WARMUP_MS, args.rep))
    device_name = torch.cuda.get_device_name()
    modules = {op: load_operator(op).helion_tuning for op in operator_names()}
    tunable = [op for op, module in modules.items() if module is not None]
    unknown = [op for op in ops if modules[op] is None]
    if unknown:
        raise UsageError(f"{unknown[0]} has no Helion kernels to tune (valid: {', '.join(tunable)})")
    untuned = []
    # gemm and addmm share one module: tune it once.
    for module_name in dict.fromkeys(modules[op] for op in ops):
        module = importlib.import_module(module_name)
        for precision in precisions:
            for job in module.tuning_jobs(DTYPE_NAMES[precision], "cuda"):
                if args.match not in job.key:
                    continue
                best, log = tune_job(job, timer)
                print(job.key)
                print("\n".join(log), flush=True)
                if best is None:
                    untuned.append(job.key)
                else:
                    save_store(module.CONFIG_PATH, {job.key: best}, device_name)
        print(f"stored configs in {module.CONFIG_PATH}")
    if untuned:
        print(f"no candidate ran correctly for {len(untuned)} slot(s): {', '.join(untuned)}", file=sys.stderr)
        return 1
    return 0
