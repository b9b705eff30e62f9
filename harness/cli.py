"""Command line: ``run.py [options]`` runs benchmarks; ``run.py tune ...`` tunes Helion configs.

Flags follow tritonbench's names.  Bad input exits with status 2 and one line naming the
valid choices; a run whose cells all succeeded exits 0, one with failed cells 1.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import torch

from harness.arg_types import comma_list, non_negative_float, non_negative_int, positive_float
from harness.device import default_device, prepare_backends
from harness.metrics import DEFAULT_METRICS
from harness.operator import DTYPE_NAMES, BenchmarkOperator, Mode

EXAMPLES = """examples:
  python run.py --op exp --mode bwd --metrics accuracy,latency,speedup,gbps
  python run.py --op rms_norm --precision bf16 --shape 4096,5120 --only triton,helion
  python run.py --op gemm,addmm --mode fwd --metrics tflops,pct_peak --output-json
  python run.py --op exp --list-backends
  python run.py --op exp --plugin my_kernels.py --only eager,my_exp --isolate --timeout 120
  python run.py --op exp --repeats 7 --output-json current.json
  python run.py compare baseline.json current.json --markdown summary.md
  python run.py show results.json --mode bwd   (print a result file's tables)
  python run.py tune --op exp            (regenerate stored Helion configs on this GPU)
"""
MODE_ALIASES = {"--bwd": "bwd", "--fwd-bwd": "fwd_bwd", "--fwd": "fwd", "--fwd-no-grad": "fwd_no_grad"}


class UsageError(Exception):
    """Bad command-line input; the message names the valid choices."""


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and exit code 2, with no traceback."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="run.py", description="Benchmark operator backends: accuracy and speed.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("--op", type=comma_list, help="operator name or comma list (see --list-ops)")
    add("--mode", type=comma_list, default=[],
        help="fwd, bwd, fwd_bwd or fwd_no_grad (comma list allowed; default fwd)")
    for flag, mode in MODE_ALIASES.items():
        add(flag, dest="mode_aliases", action="append_const", const=mode, default=[],
            help=f"same as --mode {mode} (adds to --mode)")
    add("--metrics", type=comma_list, default=list(DEFAULT_METRICS),
        help="comma list (see --list-metrics); default latency,speedup,accuracy")
    add("--only", type=comma_list, help="run only these backends (comma list)")
    add("--skip", type=comma_list, default=[], help="skip these backends (comma list)")
    add("--baseline", help="backend that speedup is relative to (default: the operator's)")
    add("--precision", "--dtype", dest="precision", choices=sorted(DTYPE_NAMES),
        help="default: bf16 on CUDA, fp32 on CPU")
    add("--device", choices=["cuda", "cpu"], help="default: cuda when available, else cpu")
    add("--shape", action="append", default=None,
        help="comma-separated integers of the operator's x_val; repeatable; replaces the sweep")
    add("--num-inputs", type=int, help="run only the first N shapes (after --input-id)")
    add("--input-id", type=non_negative_int, default=0, help="index of the first shape to run")
    add("--warmup", type=non_negative_float, help="warm-up budget in ms (default 25 on CUDA, 5 on CPU)")
    add("--rep", type=non_negative_float, help="measurement budget in ms (default 100 on CUDA, 50 on CPU)")
    add("--cudagraph", action="store_true", help="time replays of a captured CUDA graph")
    add("--rtol", type=non_negative_float, help="relative tolerance (overrides the per-dtype default)")
    add("--atol", type=non_negative_float, help="absolute tolerance (overrides the per-dtype default)")
    add("--seed", type=int, default=0, help="seed for the inputs")
    add("--repeats", type=int, default=1,
        help="time each cell R independent times, interleaving backends; keeps every repeat's median")
    add("--isolate", action="store_true",
        help="run each backend of each shape in its own subprocess (crashes become cell errors)")
    add("--timeout", type=positive_float, help="with --isolate: seconds one cell may take")
    add("--plugin", action="append", default=[], metavar="FILE.py",
        help="load a file registering extra backends or operators; repeatable")
    add("--csv", nargs="?", const="", metavar="PATH", help="write the tables as CSV")
    add("--output-json", nargs="?", const="", metavar="PATH", help="write the result records")
    add("--output-dir", default="results", help="where unnamed result files go (default results/)")
    add("--list-ops", action="store_true", help="list operators and exit")
    add("--list-backends", action="store_true", help="list each operator's backends and exit")
    add("--list-metrics", action="store_true", help="list metrics with units and exit")
    return parser


def _usage(message: str) -> NoReturn:
    print(f"run.py: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def check_writable(path: Path | None) -> None:
    """Fail before the sweep, not after it, when a result file cannot be written."""
    if path is None:
        return
    if path.is_dir():
        raise UsageError(f"{path} is a folder; give a file name")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".opbench-check-"):
            pass
    except OSError as exc:
        raise UsageError(f"cannot write {path} ({exc.strerror})") from exc


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``run.py``; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["tune"]:
            from harness.tune import tune_main

            return tune_main(argv[1:])
        if argv[:1] == ["compare"]:
            from harness.compare import compare_main

            return compare_main(argv[1:])
        if argv[:1] == ["show"]:
            from harness.show import show_main

            return show_main(argv[1:])
        from harness.run_command import run_command

        return run_command(build_parser(), argv)
    except UsageError as exc:
        _usage(str(exc))
    except BrokenPipeError:
        # The reader of stdout went away (``run.py show FILE | head``): stop quietly, and keep
        # Python from reporting the same error again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def parse_shapes(texts: list[str], arity: int, op: str) -> list[tuple[int, ...]]:
    """``--shape`` values as tuples of positive integers of the operator's arity, without repeats."""
    shapes = []
    for text in texts:
        try:
            shape = tuple(int(part) for part in text.split(","))
        except ValueError:
            shape = ()
        if len(shape) != arity or any(v <= 0 for v in shape):
            raise UsageError(
                f"--shape {text!r}: {op} takes {arity} comma-separated positive integers"
            )
        if shape not in shapes:
            shapes.append(shape)
    return shapes


def resolve_dtype(op: type[BenchmarkOperator], precision: str) -> torch.dtype:
    dtype = DTYPE_NAMES[precision]
    if dtype not in op.supported_dtypes:
        valid = [n for n, d in DTYPE_NAMES.items() if d in op.supported_dtypes]
        raise UsageError(f"{op.name} does not support {precision} (valid: {', '.join(valid)})")
    return dtype


def resolve_device(requested: str | None) -> str:
    device = requested or default_device()
    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: no GPU is visible (valid here: cpu)")
    prepare_backends(device)
    return device


def validate_choices(kind: str, given: list[str], valid: Sequence[str]) -> None:
    unknown = [g for g in given if g not in valid]
    if unknown:
        raise UsageError(f"unknown {kind} {unknown[0]!r} (valid: {', '.join(valid)})")


def default_output(path: str | None, output_dir: str, name: str) -> Path | None:
    if path is None:
        return None
    return Path(path) if path else Path(output_dir) / name


def modes_from(args: argparse.Namespace) -> list[Mode]:
    names = list(dict.fromkeys(args.mode + args.mode_aliases)) or ["fwd"]
    validate_choices("mode", names, [m.value for m in Mode])
    return [Mode(n) for n in names]
