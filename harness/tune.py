"""``run.py tune``: time each operator's curated Helion configs on this GPU and store the best.

Each Helion kernel module lists its stored-config slots with ``tuning_jobs(dtype, device)``;
every candidate config is compiled, its outputs checked against those of Helion's default
config, and timed with the benchmark timer (median, L2 flushed); the fastest correct one is
written to the module's ``helion_configs.json``.  Exit 1 when a slot got no correct candidate.
No search-based autotuning runs: the candidates are a short list chosen for the H200.
"""

from __future__ import annotations

import argparse
import importlib
import sys

import torch

from harness.cli import OneLineParser, UsageError, validate_choices
from harness.operator import DTYPE_NAMES
from harness.timing import CpuTimer, CudaTimer
from operators import operator_names
from operators.helion_configs import TuningJob, save_store

HELION_MODULES = {
    "exp": "operators.exp.helion_impl",
    "rms_norm": "operators.rms_norm.helion_impl",
    "gemm": "operators.gemm.helion_impl",
    "addmm": "operators.gemm.helion_impl",
}


def _outputs(result: object) -> list[torch.Tensor]:
    """The tensors a kernel call returned, in order."""
    items = result if isinstance(result, (tuple, list)) else (result,)
    return [item for item in items if isinstance(item, torch.Tensor)]


def _disagreement(got: list[torch.Tensor], want: list[torch.Tensor]) -> str | None:
    """Why a candidate's outputs differ from the default config's, or None if they agree.

    Outputs whose shape depends on the config (per-program partial rows) are not compared.
    The error is the largest difference over the reference's largest magnitude: rounding
    order moves it by ~1e-3 in 16-bit types, a wrong kernel by ~1.
    """
    for index, (a, b) in enumerate(zip(got, want, strict=True)):
        if a.shape != b.shape:
            continue
        a64, b64 = a.double(), b.double()
        error = ((a64 - b64).abs().max() / b64.abs().max().clamp_min(1e-30)).item()
        tolerance = 1e-3 if a.dtype in (torch.float32, torch.float64) else 2e-2
        if not error <= tolerance:
            return f"output {index} differs from the default config's by {error:.2g} (limit {tolerance:g})"
    return None


def _tune_job(job: TuningJob, timer: CudaTimer | CpuTimer) -> tuple[dict | None, list[str]]:
    """The fastest candidate whose outputs match Helion's default config's, and the log lines."""
    args = job.make_args()
    bound = job.kernel.bind(args)
    log = []
    try:
        bound.set_config(bound.config_spec.default_config())
        returned = _outputs(bound(*args))
        reference = [tensor.clone() for tensor in returned]
    except Exception as exc:  # noqa: BLE001 - then candidates are timed unchecked, and the log says so
        returned, reference = [], None
        log.append(f"  default config failed ({type(exc).__name__}): candidates are not checked")
    # Outputs written into argument buffers are poisoned before each candidate, so a
    # candidate that leaves part of one unwritten cannot pass on the default config's values.
    written_in_place = [t for t in returned if t.is_floating_point() and any(t is a for a in args)]
    best: tuple[float, dict] | None = None
    for config in job.candidates:
        try:
            bound.set_config(config)
            for tensor in written_in_place:
                tensor.fill_(float("nan"))
            why = None if reference is None else _disagreement(_outputs(bound(*args)), reference)
            if why is None:
                ms = timer.measure(lambda: bound(*args)).p50
        except Exception as exc:  # noqa: BLE001 - a candidate that fails is skipped
            why = f"failed ({type(exc).__name__}: {str(exc)[:120]})"
        if why is not None:
            log.append(f"  {config}: {why}")
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
    untuned = []
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
                if best is None:
                    untuned.append(job.key)
                else:
                    save_store(module.CONFIG_PATH, {job.key: best}, device_name)
        print(f"stored configs in {module.CONFIG_PATH}")
    if untuned:
        print(f"no candidate ran correctly for {len(untuned)} slot(s): {', '.join(untuned)}", file=sys.stderr)
        return 1
    return 0
