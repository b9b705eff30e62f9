"""``run.py tritonbench -- ARGS``: tritonbench's runner on one of its operators, with this suite's
backends added (``opbench_triton``, ``opbench_helion``, ``opbench_torch_compile`` on vector_exp,
rms_norm, gemm and addmm); ARGS are tritonbench's own, e.g.
``python run.py tritonbench -- --op rms_norm --bwd --metrics latency,speedup,accuracy``.

For tritonbench versions without a plugin hook (where it has one, point it at
``harness.tritonbench.register_with_tritonbench``).  Exit 2 with
one line when tritonbench is not installed or the arguments ask for subprocesses (several
operators, ``--isolate``), which would not see the backends; exit 1 when the run fails.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys

import torch

from harness.cli.args import UsageError, help_text, invocation, program
from harness.cli.tritonbench_runner import TritonbenchUsageError, run_tritonbench
from harness.device import prepare_backends
from harness.error_line import error_line
from harness.measure.errors import error_text
from harness.tritonbench.registration import TritonbenchUnavailable, import_tritonbench, interpreter_problem

TRITONBENCH_DEFAULT_DEVICE = "cuda"


def _device(args: list[str]) -> str:
    """The ``--device``/``-d`` tritonbench will read from ``args``."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--device", "-d", default=TRITONBENCH_DEFAULT_DEVICE)
    return parser.parse_known_args(args)[0].device


def _installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except ValueError:  # in sys.modules without a spec: imported some other way
        return True


def import_tritonbench_or_exit() -> None:
    """Import tritonbench, or exit 2 with the one line saying how to install it."""
    try:
        import_tritonbench()
    except TritonbenchUnavailable as exc:
        raise UsageError(str(exc)) from None


def tritonbench_main(argv: list[str]) -> int:
    """Entry point of ``run.py tritonbench``; returns the exit status."""
    if argv[:1] in (["-h"], ["--help"]):
        print(help_text(__doc__))
        return 0
    args = argv[1:] if argv[:1] == ["--"] else argv
    if not _installed("tritonbench"):
        import_tritonbench_or_exit()  # says how to install it before anything else
    if _device(args) == "cuda" and not torch.cuda.is_available():
        raise UsageError("tritonbench runs on cuda unless told otherwise and this machine has no CUDA GPU: "
                         "add --device cpu")
    # Before tritonbench imports Triton: on the CPU this turns Triton's interpreter on.
    prepare_backends(_device(args))
    import_tritonbench_or_exit()
    if problem := interpreter_problem(_device(args)):
        raise UsageError(f"{problem}, e.g. TRITON_INTERPRET=1 {invocation()} tritonbench -- {' '.join(args)}")
    try:
        run_tritonbench(args)
    except TritonbenchUsageError as exc:
        raise UsageError(str(exc)) from None
    except Exception as exc:
        print(f"{program()} tritonbench: {error_line(error_text(exc))} "
              "(without --keep-going tritonbench stops at the first failing backend)", file=sys.stderr)
        return 1
    return 0
