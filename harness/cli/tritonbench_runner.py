"""Run one tritonbench operator in this process, with our backends registered on it.

For tritonbench versions without a plugin hook: backends registered in this process are seen
only by an operator run in this process, so this drives tritonbench's own pieces directly (its
argument parser, ``load_opbench_by_name``, the operator's ``run`` and its result's table, CSV
and JSON writers) instead of its ``run.py``, which is not part of the installed package and
runs several operators, or ``--isolate``, in subprocesses.
"""

from __future__ import annotations

import sys
from argparse import Namespace
from pathlib import Path
from typing import Any

from harness.tritonbench.adapters import tritonbench_adapters
from harness.tritonbench.registration import import_tritonbench, register_with_tritonbench


class TritonbenchUsageError(Exception):
    """tritonbench arguments this runner cannot honour; the message says why."""


def _rep_ms(tb_args: Namespace) -> float:
    """The measurement budget: ``--rep`` in newer tritonbench, ``--iter`` in older (both ms)."""
    return tb_args.rep if hasattr(tb_args, "rep") else tb_args.iter


def _single_operator(tb_args: Namespace) -> str:
    ops = [op for op in (tb_args.op or "").split(",") if op]
    if len(ops) != 1:
        raise TritonbenchUsageError(
            "give one operator with --op: tritonbench runs several in subprocesses, which do not "
            "see backends registered here (e.g. --op rms_norm)")
    if getattr(tb_args, "isolate", False):
        raise TritonbenchUsageError(
            "--isolate runs in subprocesses, which do not see backends registered here; "
            "register harness.tritonbench.register_with_tritonbench as a plugin where tritonbench has one")
    return ops[0]


def _write(result: Any, tb_args: Namespace, op: str) -> None:
    """Print and save ``result`` as tritonbench's ``--csv``, ``--output``, ``--output-json`` and
    ``--output-dir`` say."""
    if not tb_args.skip_print:
        if tb_args.csv:
            result.write_csv_to_file(sys.stdout)
        else:
            print(result)
    targets = [(tb_args.output, "csv"), (tb_args.output_json, "json")]
    if tb_args.output_dir:
        kind = "csv" if tb_args.csv else "json"
        targets.append((Path(tb_args.output_dir) / f"{op}.{kind}", kind))
    for path, kind in targets:
        if path:
            with open(path, "w") as f:
                (result.write_csv_to_file if kind == "csv" else result.write_json_to_file)(f)
            print(f"wrote {path}", file=sys.stderr)


def run_tritonbench(argv: list[str]) -> None:
    """Parse ``argv`` as tritonbench does, register our backends on its operator and run it.

    Raises :class:`TritonbenchUsageError` for what this runner refuses, and whatever the run
    raises (tritonbench stops at a backend's error unless given ``--keep-going``); the results
    finished before an error are still printed and written.
    """
    import_tritonbench()
    from tritonbench.operators import load_opbench_by_name
    from tritonbench.utils.parser import get_parser

    # get_parser parses sys.argv when given no arguments: always hand it argv.
    tb_args, extra_args = get_parser(argv).parse_known_args(argv)
    op = _single_operator(tb_args)
    not_loaded = register_with_tritonbench([op]) if op in tritonbench_adapters() else {}
    if op in not_loaded:
        raise TritonbenchUsageError(f"tritonbench cannot load its operator {op}: {not_loaded[op]}")
    if tb_args.list_backends or tb_args.list_metrics:
        from tritonbench.utils.list_operator_details import list_operator_details

        print(list_operator_details(operators=[op], show_metrics=tb_args.list_metrics,
                                    show_backends=tb_args.list_backends))
        return
    try:
        op_class = load_opbench_by_name(op)
    except Exception as exc:  # its module's own imports: any error is the operator's
        raise TritonbenchUsageError(f"tritonbench cannot load its operator {op}: "
                                    f"{type(exc).__name__}: {exc}") from exc
    bench = op_class(tb_args=tb_args, extra_args=extra_args)
    try:
        bench.run(tb_args.warmup, _rep_ms(tb_args))
    finally:
        result = getattr(bench, "output", None)
        if result is not None:
            _write(result, tb_args, op)
