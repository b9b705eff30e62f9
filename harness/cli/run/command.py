"""``run.py [options]``: resolve the options into settings and sweeps, run them, print and write results."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, TextIO

import torch
from tabulate import tabulate

from harness.cli.args import UsageError, add_operator_options, invocation, validate_choices
from harness.cli.plot import checked_plot_path
from harness.cli.progress import ProgressDisplay
from harness.cli.run.output import Outputs, exit_status, print_tables, stdout_for_data, write_plot
from harness.cli.run.parser import build_parser, modes_from, operator_options, parse_shapes
from harness.cli.run.ranked import run_ranked
from harness.cli.signals import Terminated, sigterm_raises
from harness.device import default_device, prepare_backends
from harness.measure.ceilings import measure_ceilings
from harness.measure.errors import ContextLost
from harness.metrics.cell_data import DEFAULT_TIMER
from harness.metrics.table import METRICS
from harness.operator import DTYPE_NAMES, BenchmarkOperator, Mode
from harness.plugins import PluginError, load_plugins
from harness.registry import UnknownOperatorError, load_operator, operator_names
from harness.report.plot import PLOT_METRICS
from harness.report.results import Record
from harness.report.run_header import make_header, python_argv
from harness.report.table import ceilings_line, options_line
from harness.settings import DEFAULT_FLUSH, GATHER_TIMEOUT_S, STARTUP_TIMEOUT_S, RunSettings, TimerSettings
from harness.sweep.continuation import continue_in_workers, remaining_work
from harness.sweep.in_process import MAX_SEED, MIN_SEED
from harness.sweep.precompile import precompile
from harness.sweep.ranks import Rank
from harness.sweep.runner import run_sweep
from harness.sweep.shards import ShardError, deal, parse_shard, restrict
from harness.sweep.spec import Sweep, run_plan

NEGATIVE_NUMBER = re.compile(r"-\d+|-\d*\.\d+")
"""A value, not an option (argparse's own rule)."""


def _print_lists(args: argparse.Namespace, out: TextIO) -> bool:
    if args.list_ops:
        rows = []
        for name in operator_names():
            op = load_operator(name)
            options = " ".join(f"--{option.name}" for option in op.command_line_options)
            summary = next(iter((op.__doc__ or "").strip().splitlines()), "")
            rows.append([name, op.x_val_label, summary, options])
        print(tabulate(rows, headers=["op", "x_val", "what", "options"]), file=out)
        return True
    if args.list_metrics:
        for name, metric in METRICS.items():
            timing = {None: " (no timing)", DEFAULT_TIMER: ""}.get(metric.timer, f" ({metric.timer} timer)")
            print(f"{name:<13}{metric.unit:<9}{metric.description}{timing}", file=out)
        return True
    if args.list_backends:
        for name in args.op or operator_names():
            backends = load_operator(name).backends()
            listed = [b.name + (" (baseline)" if b.baseline else "") + ("" if b.enabled else " (with --only)")
                      for b in backends]
            print(f"{name}: {', '.join(listed)}", file=out)
        return True
    return False


def _first_pass(argv: list[str]) -> argparse.Namespace:
    """The run's own options, before plugins and operators add theirs (``--help`` waits)."""
    return build_parser().parse_known_args([arg for arg in argv if arg not in ("-h", "--help")])[0]


def _parse(argv: list[str], first: argparse.Namespace) -> argparse.Namespace:
    """Two passes: the first (:func:`_first_pass`) loads plugins and finds the operators, whose
    options join the second.  ``--help`` waits for the second pass, so ``--op addmm --help`` lists
    addmm's options.
    """
    parser = build_parser()
    prepare_backends(first.device or default_device())
    try:
        load_plugins(first.plugin)
        names = operator_names()
    except (PluginError, UnknownOperatorError) as exc:
        raise UsageError(str(exc)) from exc
    if first.op:
        validate_choices("op", first.op, names)
    for name in first.op or []:
        group = parser.add_argument_group(f"{name} options")
        add_operator_options(group, load_operator(name).command_line_options)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        _refuse_unknown(parser, unknown, first.op or [])
    return args


def _option_owner(name: str, options: dict[str, list[str]]) -> tuple[str, list[str]] | None:
    """The operator option ``--name`` stands for (its name or, as argparse takes it, the start of
    one option's name alone) and the operators of ``options`` (each one's option names) that have
    it; None when it stands for none."""
    exact = [op for op, names in options.items() if name in names]
    if exact:
        return name, exact
    starts = {n for names in options.values() for n in names if name and n.startswith(name)}
    if len(starts) != 1:
        return None
    option = starts.pop()
    return option, [op for op, names in options.items() if option in names]


def _refuse_unknown(parser: argparse.ArgumentParser, unknown: list[str], ops: list[str]) -> NoReturn:
    """Name the operators unknown options belong to, or refuse them as argparse would."""
    before_dashes = unknown[:unknown.index("--")] if "--" in unknown else unknown
    flags = [token for token in before_dashes
             if token.startswith("-") and not NEGATIVE_NUMBER.fullmatch(token)]
    options = {op: [option.name for option in load_operator(op).command_line_options]
               for op in operator_names()}
    owned = {flag: found for flag in flags
             if (found := _option_owner(flag.removeprefix("--").split("=")[0], options))}
    if not owned:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    names = list(dict.fromkeys(f"--{option}" for option, _ in owned.values()))
    owners = list(dict.fromkeys(op for _, ops_having in owned.values() for op in ops_having))
    it = "it" if len(names) == 1 else "them"
    where = f"--op {','.join(ops)} does not name {it}" if ops else f"name {it} with --op {owners[0]}"
    rest = [flag for flag in flags if flag not in owned]
    others = f"; unrecognized too: {' '.join(rest)}" if rest else ""
    what = "is an option" if len(names) == 1 else "are options"
    raise UsageError(f"{', '.join(names)} {what} of {', '.join(owners)}: {where}{others}")


def _device(requested: str | None) -> str:
    device = requested or default_device()
    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: no GPU is visible (valid here: cpu)")
    prepare_backends(device)
    return device


def _check_folder(flag: str, path: Path) -> None:
    """Refuse a folder to write into that is a file, or lies under one."""
    existing = next(p for p in (path.absolute(), *path.absolute().parents) if p.exists())
    if not existing.is_dir():
        raise UsageError(f"{flag} {path}: {existing} is a file; give a folder")


def _settings(args: argparse.Namespace) -> RunSettings:
    """The run's settings from the parsed arguments, refusing combinations that cannot run."""
    validate_choices("metric", args.metrics, list(METRICS))
    if args.repeats < 1:
        raise UsageError(f"--repeats {args.repeats}: must be at least 1")
    if args.timeout is not None and not args.isolate:
        raise UsageError("--timeout needs --isolate (a cell in this process cannot be stopped)")
    if args.startup_timeout is not None and not (args.isolate or args.parallel_compile):
        raise UsageError("--startup-timeout needs --isolate or --parallel-compile (it limits their workers)")
    if not MIN_SEED <= args.seed <= MAX_SEED:
        raise UsageError(f"--seed {args.seed}: must be within {MIN_SEED}..{MAX_SEED}")
    if args.profile == "":
        raise UsageError("--profile needs a folder")
    if args.profile is not None:
        _check_folder("--profile", Path(args.profile))
    if args.num_inputs is not None and args.num_inputs < 1:
        raise UsageError(f"--num-inputs {args.num_inputs}: must be at least 1")
    device = _device(args.device)
    if args.cudagraph and device != "cuda":
        raise UsageError("--cudagraph needs --device cuda (CUDA graphs do not exist on the CPU)")
    if args.l2_flush != DEFAULT_FLUSH and device != "cuda":
        raise UsageError(f"--l2-flush {args.l2_flush} needs --device cuda (the CPU timer flushes nothing)")
    if args.no_save and args.output_json not in (None, "-"):
        raise UsageError("--no-save keeps no result file and --output-json asks for one: give one of them "
                         "(with --no-save, --output-json - prints the run's JSON alone)")
    if args.csv == "-" and args.output_json == "-":
        raise UsageError("--csv - and --output-json - both write to stdout: send one of them to a file")
    if args.cudagraph and Mode.BWD in modes_from(args):
        raise UsageError("--cudagraph cannot replay --mode bwd alone: the retained graph's backward runs "
                         "on its forward's stream, outside the capture (valid: fwd, fwd_no_grad, fwd_bwd)")
    options = operator_options(args)
    try:
        json.dumps(options)
    except TypeError as exc:
        raise UsageError(f"operator options must be plain values to be recorded ({exc})") from exc
    return RunSettings(
        device=device, precision=args.precision or ("bf16" if device == "cuda" else "fp32"),
        # A profiled cell's kernels are recorded too: a trace that fails is that cell's kernels error.
        metrics=[*args.metrics, *(["kernels"] if args.profile is not None and "kernels" not in args.metrics
                                  else [])],
        timer=TimerSettings.default(device, args.warmup, args.rep, args.cudagraph, args.l2_flush),
        repeats=args.repeats, seed=args.seed, rtol=args.rtol, atol=args.atol, isolate=args.isolate,
        timeout_s=args.timeout, startup_timeout_s=args.startup_timeout or STARTUP_TIMEOUT_S,
        plugins=[str(Path(p).resolve()) for p in args.plugin], options=options,
        profile_dir=None if args.profile is None else str(Path(args.profile).resolve()),
    )


def _backends(op: type[BenchmarkOperator], args: argparse.Namespace) -> tuple[list[str], str]:
    """The backends to run (speedup baseline first) and the speedup baseline."""
    names = [b.name for b in op.backends()]
    validate_choices(f"backend for {op.name}", (args.only or []) + args.skip, names)
    if args.baseline:
        validate_choices(f"baseline for {op.name}", [args.baseline], names)
    baseline = args.baseline or op.baseline().name
    if "speedup" in args.metrics and baseline in args.skip:
        raise UsageError(f"--skip {baseline}: it is the speedup baseline; drop speedup from "
                         "--metrics or choose another --baseline")
    outside_only = [n for n in args.skip if n not in args.only] if args.only else []
    if outside_only:
        them = "them" if len(outside_only) > 1 else "it"
        raise UsageError(f"--skip {','.join(outside_only)}: --only does not name {them}, so there is "
                         f"nothing to skip (--only {','.join(args.only)})")
    default = [b.name for b in op.backends() if b.enabled]
    chosen = [n for n in names if (n in args.only if args.only else n in default) and n not in args.skip]
    if "speedup" in args.metrics and baseline not in chosen:
        chosen.insert(0, baseline)
    if not chosen:
        raise UsageError(f"--only/--skip leave no backend of {op.name} to run (valid: {', '.join(names)})")
    chosen.sort(key=lambda n: n != baseline)
    return chosen, baseline


def _sweeps(args: argparse.Namespace, settings: RunSettings) -> list[Sweep]:
    """One sweep per operator and mode, in the order asked for."""
    sweeps = []
    for name in args.op:
        op_class = load_operator(name)
        dtype = DTYPE_NAMES[settings.precision]
        if dtype not in op_class.supported_dtypes:
            valid = [n for n, d in DTYPE_NAMES.items() if d in op_class.supported_dtypes]
            raise UsageError(f"{name} does not support {settings.precision} (valid: {', '.join(valid)})")
        op = op_class(settings.device, dtype, settings.options)
        shapes = parse_shapes(args.shape, op.shape_arity(), name) if args.shape else op.default_shapes()
        end = None if args.num_inputs is None else args.input_id + args.num_inputs
        shapes = shapes[args.input_id:end]
        if not shapes:
            raise UsageError(f"--input-id {args.input_id} is past {name}'s last shape")
        backends, baseline = _backends(op_class, args)
        sweeps += [Sweep(op, mode, shapes, backends, baseline, settings) for mode in modes_from(args)]
    return sweeps


def _execute(sweeps: list[Sweep], sink: Callable[[list[Record]], None]) -> str:
    """Run every sweep, passing records to ``sink`` as cells finish; how the run ended
    (``finished``, ``interrupted`` by Ctrl-C or ``terminated`` by SIGTERM).

    A cell that poisons the CUDA context costs that cell: the rest of the run goes on in fresh
    worker processes (:mod:`harness.sweep.continuation`).
    """
    total = sum(len(sweep.shapes) * len(sweep.backends) for sweep in sweeps)
    try:
        with sigterm_raises(), ProgressDisplay(total) as progress:
            for index, sweep in enumerate(sweeps):
                sweep.progress = progress
                try:
                    run_sweep(sweep, sink)
                except ContextLost as lost:
                    continue_in_workers(sweeps, remaining_work(sweeps, index, lost), sink, progress)
                    break
    except KeyboardInterrupt:
        return "interrupted"
    except Terminated:
        return "terminated"
    return "finished"


def _precompile(sweeps: list[Sweep], workers: int) -> str:
    """Fill the compilers' caches before timing (:mod:`harness.sweep.precompile`), with its
    progress and outcome on stderr; how it ended (``finished``, or ``interrupted`` or
    ``terminated``, as :func:`_execute`)."""
    cells = sum(len(sweep.shapes) * len(sweep.backends) for sweep in sweeps)
    print(f"precompile: calling each of {cells} cells once, {min(workers, cells)} at a time",
          file=sys.stderr, flush=True)
    started = time.monotonic()
    try:
        with sigterm_raises(), ProgressDisplay(cells, prefix="precompile ") as progress:
            outcome = precompile(sweeps, workers, progress)
    except KeyboardInterrupt:
        return "interrupted"
    except Terminated:
        return "terminated"
    print(f"precompile: {outcome.done} of {outcome.cells} cells called in "
          f"{time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    for problem in outcome.problems[:8]:
        print(f"precompile: {problem}", file=sys.stderr, flush=True)
    return "finished"


def run_command(argv: list[str]) -> int:
    """Run the benchmarks ``argv`` asks for; returns the exit status.  Where stdout carries data
    (``--csv -``, ``--output-json -``), it does from the first argument read to the last line."""
    first = _first_pass(argv)
    with stdout_for_data(first.csv == "-" or first.output_json == "-") as data:
        return _run_command(argv, first, data)


def _run_command(argv: list[str], first: argparse.Namespace, data: TextIO) -> int:
    args = _parse(argv, first)
    if _print_lists(args, data):
        return 0
    if not args.op:
        raise UsageError(f"--op is required (valid: {', '.join(operator_names())})")
    settings = _settings(args)
    sweeps = _sweeps(args, settings)
    if args.plot:
        checked_plot_path(Path(args.plot))
        if not set(PLOT_METRICS) & set(settings.metrics):
            raise UsageError(f"--plot draws {', '.join(PLOT_METRICS)}: add one to --metrics")
    rank = Rank.from_env()
    if rank is None and args.gather_timeout is not None:
        raise UsageError("--gather-timeout applies under torchrun only (it bounds waiting on a silent rank)")
    if rank is not None:
        if args.shard:
            raise UsageError("--shard cannot run under torchrun: its ranks share the run among themselves")
        if args.parallel_compile:
            raise UsageError("--parallel-compile cannot run under torchrun: fill the caches first with "
                             f"{invocation()} ... --parallel-compile N --metrics accuracy --no-save")
    shard = None
    if args.shard:
        try:
            shard = parse_shard(args.shard)
        except ShardError as exc:
            raise UsageError(str(exc)) from exc
    if rank is not None:
        timeout = GATHER_TIMEOUT_S if args.gather_timeout is None else args.gather_timeout
        return run_ranked(args, settings, sweeps, rank, timeout, data)
    return _run_here(args, settings, sweeps, shard, data)


def _run_here(args: argparse.Namespace, settings: RunSettings, sweeps: list[Sweep],
              shard: tuple[int, int] | None, data: TextIO) -> int:
    """Run the sweeps (this shard's share of them) in this process and report them."""
    plan = run_plan(sweeps, settings.metrics)
    if shard is not None:
        part, parts = shard
        sweeps = restrict(sweeps, deal(sweeps, parts)[part - 1])
    outputs = Outputs.of(args, settings.precision, [m.value for m in modes_from(args)], data)
    outputs.check_writable()
    ceilings = measure_ceilings(settings.device, DTYPE_NAMES[settings.precision], settings.timer,
                                any(sweep.timed for sweep in sweeps))
    for sweep in sweeps:
        sweep.ceilings = ceilings
    header = make_header(settings.device, python_argv(), {
        "copy_gbps": ceilings.copy_gbps, "ceilings_gbps": ceilings.traffic_gbps,
        "peak_gbps": ceilings.peak_gbps, "peak_tflops": ceilings.peak_tflops, **settings.header_fields(),
        "shard": args.shard, "parallel_compile": args.parallel_compile, "plan": plan, "complete": False,
    })
    records: list[Record] = []

    def sink(new: list[Record]) -> None:
        records.extend(new)
        outputs.save(header, records)

    ending = _precompile(sweeps, args.parallel_compile) if args.parallel_compile and sweeps else "finished"
    if ending == "finished":
        ending = _execute(sweeps, sink)
    header["complete"] = ending == "finished"
    outputs.save(header, records)
    orders = {sweep.op.name: sweep.backends for sweep in sweeps}
    print_tables(records, {s.op.name: s.op.x_val_label for s in sweeps}, orders, outputs)
    print(f"device: {header['device_name']}  {ceilings_line(ceilings.traffic_gbps)}")
    if line := options_line(header.get("options")):
        print(line)
    write_plot(header, records, outputs)
    outputs.print_result(header, records)
    if args.shard and not sweeps and ending == "finished":
        print(f"--shard {args.shard}: no cells fell to this part (more parts than the run's work)",
              file=sys.stderr)
    return exit_status(records, ending, outputs)
