"""The benchmark run behind ``run.py``: resolve options, sweep, print tables, write files."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from harness.cell_records import DeviceCeilings
from harness.cli import (
    UsageError,
    build_parser,
    check_writable,
    default_output,
    modes_from,
    parse_shapes,
    resolve_device,
    resolve_dtype,
    validate_choices,
)
from harness.device import (
    declared_peak_gbps,
    declared_peak_tflops,
    default_device,
    measure_copy_gbps,
    prepare_backends,
)
from harness.metrics import METRICS
from harness.operator import DTYPE_NAMES, BenchmarkOperator, Mode
from harness.plugins import PluginError, load_plugins
from harness.results import (
    Record,
    default_result_name,
    make_header,
    python_argv,
    write_csv,
    write_json,
)
from harness.runner import IsolateSettings, SweepSettings, run_sweep
from harness.table import TableData, group_records, options_line, render
from harness.timing import make_timer
from operators import load_operator, operator_names


def _print_lists(args: argparse.Namespace) -> bool:
    if args.list_ops:
        print("\n".join(operator_names()))
        return True
    if args.list_metrics:
        for name, info in METRICS.items():
            print(f"{name:<13}{info.unit:<9}{info.description}")
        return True
    if args.list_backends:
        for name in args.op or operator_names():
            backends = load_operator(name).backends()
            listed = [b.name + (" (baseline)" if b.baseline else "") for b in backends]
            print(f"{name}: {', '.join(listed)}")
        return True
    return False


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """Two passes: the first loads plugins and finds the operators, whose options join the second.

    ``--help`` waits for the second pass, so ``--op addmm --help`` lists addmm's options.
    """
    first, _ = parser.parse_known_args([arg for arg in argv if arg not in ("-h", "--help")])
    prepare_backends(first.device or default_device())
    try:
        load_plugins(first.plugin)
    except PluginError as exc:
        raise UsageError(str(exc)) from exc
    if first.op:
        validate_choices("op", first.op, operator_names())
    for name in first.op or []:
        op = load_operator(name)
        op.add_options(parser.add_argument_group(f"{name} options"))
    return parser.parse_args(argv)


def _backends(op: type[BenchmarkOperator], args: argparse.Namespace) -> tuple[list[str], str]:
    names = [b.name for b in op.backends()]
    validate_choices(f"backend for {op.name}", (args.only or []) + args.skip, names)
    if args.baseline:
        validate_choices(f"baseline for {op.name}", [args.baseline], names)
    baseline = args.baseline or op.baseline().name
    if "speedup" in args.metrics and baseline in args.skip:
        raise UsageError(f"--skip {baseline}: it is the speedup baseline; drop speedup from "
                         "--metrics or choose another --baseline")
    chosen = [n for n in names if (args.only is None or n in args.only) and n not in args.skip]
    if "speedup" in args.metrics and baseline not in chosen:
        chosen.insert(0, baseline)
    if not chosen:
        raise UsageError(f"--only/--skip leave no backend of {op.name} to run (valid: {', '.join(names)})")
    chosen.sort(key=lambda n: n != baseline)
    return chosen, baseline


def _progress_bar() -> tuple[Progress | None, Callable[[str], None]]:
    if not sys.stderr.isatty():
        return None, lambda _: None
    bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                   transient=True)
    task = bar.add_task("starting")
    return bar, lambda text: bar.update(task, description=text)


def _operator_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict:
    """The values of the operators' own options (e.g. addmm's --bias), which must be JSON."""
    base = {action.dest for action in build_parser()._actions}
    options = {k: v for k, v in vars(args).items() if k not in base}
    try:
        json.dumps(options)
    except TypeError as exc:
        raise UsageError(f"operator options must be plain values to be recorded ({exc})") from exc
    return options


def run_command(parser: argparse.ArgumentParser, argv: list[str]) -> int:
    """Run the benchmarks ``argv`` asks for; returns the exit status."""
    args = _parse(parser, argv)
    if _print_lists(args):
        return 0
    if not args.op:
        raise UsageError(f"--op is required (valid: {', '.join(operator_names())})")
    validate_choices("metric", args.metrics, list(METRICS))
    modes = modes_from(args)
    if args.repeats < 1:
        raise UsageError(f"--repeats {args.repeats}: must be at least 1")
    if args.timeout is not None and not args.isolate:
        raise UsageError("--timeout needs --isolate (a cell in this process cannot be stopped)")
    device = resolve_device(args.device)
    if args.cudagraph and device != "cuda":
        raise UsageError("--cudagraph needs --device cuda (CUDA graphs do not exist on the CPU)")
    if args.cudagraph and Mode.BWD in modes:
        raise UsageError("--cudagraph cannot replay --mode bwd alone: the retained graph's backward runs "
                         "on its forward's stream, outside the capture (valid: fwd, fwd_no_grad, fwd_bwd)")
    if args.num_inputs is not None and args.num_inputs < 1:
        raise UsageError(f"--num-inputs {args.num_inputs}: must be at least 1")
    precision = args.precision or ("bf16" if device == "cuda" else "fp32")
    warmup = args.warmup if args.warmup is not None else (25.0 if device == "cuda" else 5.0)
    rep = args.rep if args.rep is not None else (100.0 if device == "cuda" else 50.0)
    timer = make_timer(device, warmup, rep, args.cudagraph)
    op_options = _operator_options(parser, args)
    plans = []
    for name in args.op:
        op_class = load_operator(name)
        dtype = resolve_dtype(op_class, precision)
        op = op_class(device, dtype, op_options)
        shapes = (parse_shapes(args.shape, op.shape_arity(), name) if args.shape
                  else op.default_shapes())
        end = None if args.num_inputs is None else args.input_id + args.num_inputs
        shapes = shapes[args.input_id:end]
        if not shapes:
            raise UsageError(f"--input-id {args.input_id} is past {name}'s last shape")
        plans.append((op, shapes, *_backends(op_class, args)))

    copy_gbps = measure_copy_gbps(device, warmup, rep)
    ceilings = DeviceCeilings(
        copy_gbps=copy_gbps, peak_gbps=declared_peak_gbps(device, copy_gbps),
        peak_tflops=declared_peak_tflops(device, DTYPE_NAMES[precision]),
    )
    header = make_header(device, python_argv(), {
        "copy_gbps": copy_gbps, "peak_gbps": ceilings.peak_gbps, "peak_tflops": ceilings.peak_tflops,
        "precision": precision, "repeats": args.repeats, "options": op_options,
        "timer": {"warmup_ms": warmup, "rep_ms": rep, "cudagraph": args.cudagraph},
    })
    isolate = None
    if args.isolate:
        isolate = IsolateSettings(args.timeout, {
            "device": device, "precision": precision, "options": op_options,
            "plugins": [str(Path(p).resolve()) for p in args.plugin],
            "warmup": warmup, "rep": rep, "cudagraph": args.cudagraph,
        })
    json_path = default_output(
        args.output_json, args.output_dir,
        default_result_name(args.op, [m.value for m in modes], precision, "json"),
    )
    for path in (json_path, default_output(args.csv, args.output_dir, "check.csv")):
        check_writable(path)
    records: list[Record] = []

    def sink(new: list[Record]) -> None:
        records.extend(new)
        if json_path is not None:
            write_json(json_path, header, records)

    bar, progress = _progress_bar()
    interrupted = False
    try:
        if bar is not None:
            bar.start()
        for op, shapes, backends, baseline in plans:
            for mode in modes:
                settings = SweepSettings(
                    metrics=args.metrics, backends=backends, speedup_baseline=baseline,
                    shapes=shapes, timer=timer, ceilings=ceilings, rtol=args.rtol, atol=args.atol,
                    seed=args.seed, repeats=args.repeats, isolate=isolate, progress=progress,
                )
                run_sweep(op, mode, settings, sink)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if bar is not None:
            bar.stop()
    labels = {op.name: op.x_val_label for op, *_ in plans}
    _report(records, labels, args, precision)
    print(f"device: {header['device_name']}  copy bandwidth: {copy_gbps:.1f} GB/s")
    if line := options_line(header.get("options")):
        print(line)
    if json_path is not None:
        write_json(json_path, header, records)
        print(f"results: {json_path}")
    if interrupted:
        print("interrupted: finished cells were kept", file=sys.stderr)
        return 130
    failed = _failed_cells(records)
    if failed:
        print(f"{len(failed)} cell(s) failed: " + ", ".join(sorted(failed)[:8]), file=sys.stderr)
        return 1
    if not any(r.status == "ok" for r in records):
        reason = next((r.error for r in records if r.error), "no cells")
        print(f"nothing was measured: every cell was skipped ({reason})", file=sys.stderr)
        return 1
    return 0


def _report(records: list[Record], labels: dict[str, str], args: argparse.Namespace,
            precision: str) -> None:
    groups = group_records(records)
    for (op, mode, dtype), group in groups.items():
        print(render(group, labels[op]))
        print()
        if args.csv is not None:
            name = default_result_name([op], [mode], precision, "csv")
            path = default_output(args.csv, args.output_dir, name)
            if args.csv and len(groups) > 1:
                path = path.with_name(f"{path.stem}_{op}_{mode}_{dtype}{path.suffix or '.csv'}")
            data = TableData(group, labels[op])
            write_csv(path, data.header(), data.raw_rows())
            print(f"csv: {path}")


def _failed_cells(records: list[Record]) -> set[str]:
    failed = set()
    for r in records:
        if r.status == "error" or (r.metric == "accuracy" and r.status == "ok" and r.value == 0):
            failed.add(f"{r.op}/{r.mode}/{r.backend}/{r.x_val}")
    return failed

