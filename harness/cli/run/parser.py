"""The arguments of ``run.py`` (the benchmark run): the parser and the parsing of their values.

Flags follow tritonbench's names.
"""

from __future__ import annotations

import argparse

from harness.cli.args import (
    OneLineParser,
    UsageError,
    comma_list,
    invocation,
    non_negative_float,
    non_negative_int,
    positive_float,
    program,
    validate_choices,
)
from harness.metrics.cell_data import DEFAULT_TIMER
from harness.metrics.table import DEFAULT_METRICS, METRICS
from harness.operator import DTYPE_NAMES, Mode, Shape
from harness.settings import (
    CPU_REP_MS,
    CPU_WARMUP_MS,
    CUDA_REP_MS,
    CUDA_WARMUP_MS,
    DEFAULT_FLUSH,
    FLUSHES,
    GATHER_TIMEOUT_S,
    STARTUP_TIMEOUT_S,
)
from harness.timing import TIMER_KINDS

EXAMPLES = """examples:
  {run} --op exp --mode bwd --metrics accuracy,latency,speedup,gbps
  {run} --op rms_norm --precision bf16 --shape 4096,5120 --only triton,helion
  {run} --op gemm,addmm --mode fwd --metrics tflops,pct_peak --output-json
  {run} --op exp --list-backends
  {run} --op exp --shape 65536 --metrics walltime --only triton,triton_direct,helion,helion_op
      (what custom-op dispatch costs against calling the autograd Function directly)
  {run} --op exp --plugin my_kernels.py --only eager,my_exp --isolate --timeout 120
  {run} --op exp --repeats 7 --output-json current.json
  {run} compare baseline.json current.json --markdown summary.md
  {run} show results.json --mode bwd   (print a result file's tables)
  {run} export results.json --format hud-v3 -o hud.json   (tritonbench-csv, tritonbench-json)
  {run} --op rms_norm --shard 2/4 --output-json part2.json   ({prog} merge joins the parts)
  {run} split all.json -o results/baselines/h200   (one result file per op and mode)
  {torchrun} --op gemm --mode fwd,bwd --repeats 7   (one rank a GPU)
  {run} plot results.json -o results.svg   (draw a result file's panels)
  {run} tune --op exp            (regenerate stored Helion configs on this GPU)
  {run} tritonbench -- --op rms_norm --bwd   (tritonbench's runner with our backends added)
"""
"""The examples ``--help`` ends with; :func:`examples` fills in the command."""


def examples() -> str:
    """:data:`EXAMPLES` with the command as the user runs it: ``python run.py`` or ``opbench``."""
    script = "--no-python opbench" if program() == "opbench" else "run.py"
    torchrun = f"torchrun --nproc-per-node 8 {script}"
    return EXAMPLES.format(run=invocation(), prog=program(), torchrun=torchrun)


MODE_ALIASES = {"--bwd": "bwd", "--fwd-bwd": "fwd_bwd", "--fwd": "fwd", "--fwd-no-grad": "fwd_no_grad"}


def _metrics_of(timer: str | None) -> str:
    """The metrics that need ``timer`` (a kind of :data:`TIMER_KINDS` or None), as a comma list."""
    return ", ".join(name for name, metric in METRICS.items() if metric.timer == timer)


def _metrics_help() -> str:
    """``--metrics``' help: the default, and which timer (or none) each metric needs."""
    others = [f"{_metrics_of(kind)} only the {kind} timer ({what})" for kind, what in TIMER_KINDS.items()
              if kind != DEFAULT_TIMER and _metrics_of(kind)]
    return (f"comma list (see --list-metrics); default {','.join(DEFAULT_METRICS)}. {_metrics_of(None)} "
            "need no timing: asked for alone, each cell is only checked, never timed; "
            + "; ".join([*others, f"the others the {DEFAULT_TIMER} timer"]))


def build_parser() -> OneLineParser:
    """The parser of a benchmark run (operators add their own options to it)."""
    parser = OneLineParser(
        prog=program(), description="Benchmark operator backends: accuracy and speed.",
        epilog=examples(), formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("--op", type=comma_list, help="operator name or comma list (see --list-ops)")
    add("--mode", type=comma_list, default=[],
        help="fwd, bwd, fwd_bwd or fwd_no_grad (comma list allowed; default fwd)")
    for flag, mode in MODE_ALIASES.items():
        add(flag, dest="mode_aliases", action="append_const", const=mode, default=[],
            help=f"same as --mode {mode} (adds to --mode)")
    add("--metrics", type=comma_list, default=list(DEFAULT_METRICS), help=_metrics_help())
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
    add("--warmup", type=non_negative_float,
        help=f"warm-up budget in ms a repeat, wall time on CUDA (default {CUDA_WARMUP_MS:g} on CUDA, "
             f"{CPU_WARMUP_MS:g} on CPU)")
    add("--rep", type=non_negative_float,
        help=f"measurement budget in ms a repeat, wall time on CUDA (default {CUDA_REP_MS:g} on CUDA, "
             f"{CPU_REP_MS:g} on CPU)")
    add("--cudagraph", action="store_true", help="time replays of a captured CUDA graph")
    add("--l2-flush", choices=FLUSHES, default=DEFAULT_FLUSH,
        help="how L2 is flushed before each CUDA sample: clean (a read pass, the default) or dirty "
             "(a write, as triton.testing.do_bench does)")
    add("--rtol", type=non_negative_float, help="relative tolerance (overrides the per-dtype default)")
    add("--atol", type=non_negative_float, help="absolute tolerance (overrides the per-dtype default)")
    add("--seed", type=int, default=0, help="seed for the inputs")
    add("--repeats", type=int, default=1,
        help="time each cell R independent times, interleaving backends; keeps every repeat's median")
    add("--isolate", action="store_true",
        help="run each backend of each shape in its own subprocess (crashes become cell errors)")
    add("--timeout", type=positive_float,
        help="with --isolate: seconds one cell may take once it starts timing, or, untimed, once its "
             "first call is done (its start-up has its own)")
    add("--startup-timeout", type=positive_float,
        help="with --isolate: seconds a cell's worker may take for its start-up: imports, inputs, the "
             "reference, set-up and the first call, where compilation happens; with --parallel-compile: "
             f"seconds a compile worker may stay silent (default {STARTUP_TIMEOUT_S:g})")
    add("--parallel-compile", type=non_negative_int, default=0, metavar="N",
        help="before timing, call every cell once (accuracy only) in N processes at once, so the "
             "compilers' on-disk caches hold what the run compiles (on a GPU: about its CPU cores)")
    add("--shard", metavar="K/N",
        help="run the K-th of N disjoint parts of the sweep, dealt by estimated cost "
             "(the merge subcommand joins them)")
    add("--gather-timeout", type=positive_float,
        help="under torchrun: seconds rank 0 waits for a silent rank before it gives up on its cells "
             f"(default {GATHER_TIMEOUT_S:g})")
    add("--profile", metavar="DIR",
        help="write a torch.profiler trace (Chrome/Perfetto JSON) of a few calls of each cell to DIR, named "
             "<op>_<mode>_<shape>_<backend>.json (no flush or spin kernels in it)")
    add("--plugin", action="append", default=[], metavar="FILE.py",
        help="load a file registering extra backends or operators; repeatable")
    add("--csv", nargs="?", const="", metavar="PATH",
        help="write the tables as ;-separated CSV: to PATH (several tables: PATH's stem + "
             "_<op>_<mode>_<precision>), - for stdout, or timestamped files in --output-dir")
    add("--output-json", nargs="?", const="", metavar="PATH",
        help="where the result file goes (default: a timestamped file in --output-dir); - keeps that "
             "file (unless --no-save) and prints it to stdout once the run ends, or is stopped (all else "
             "goes to stderr)")
    add("--no-save", action="store_true", help="keep no result file")
    add("--plot", metavar="FILE.png|svg",
        help="after the tables, plot the run's records to FILE (as the plot subcommand draws a result file)")
    add("--output-dir", default="runs", help="where unnamed result files go (default runs/, ignored by git)")
    add("--list-ops", action="store_true", help="list operators and exit")
    add("--list-backends", action="store_true", help="list each operator's backends and exit")
    add("--list-metrics", action="store_true", help="list metrics with units and exit")
    return parser


def parse_shapes(texts: list[str], arity: int, op: str) -> list[Shape]:
    """``--shape`` values as tuples of positive integers of the operator's arity, without repeats."""
    shapes: list[Shape] = []
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


def modes_from(args: argparse.Namespace) -> list[Mode]:
    """The modes of ``--mode`` and its aliases, in order, without repeats (default fwd)."""
    names = list(dict.fromkeys(args.mode + args.mode_aliases)) or ["fwd"]
    validate_choices("mode", names, [m.value for m in Mode])
    return [Mode(n) for n in names]


def operator_options(args: argparse.Namespace) -> dict:
    """The values of the operators' own options (e.g. addmm's --bias), which must be JSON."""
    base = {action.dest for action in build_parser()._actions}
    return {k: v for k, v in vars(args).items() if k not in base}
