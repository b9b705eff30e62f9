"""Our backends as tritonbench benchmarks: ``opbench_triton``, ``opbench_helion`` and
``opbench_torch_compile`` on tritonbench's ``vector_exp``, ``rms_norm``, ``gemm`` and ``addmm``.

tritonbench's ``register_benchmark(operator_name=..., func_name=..., label=...)`` only records a
benchmark in its registry; its runner then looks the method up on the operator class, so each
method is also set on the class (as Helion's benchmark runner does).  A method receives
tritonbench's input tuple, maps it to one of our operators (:mod:`harness.tritonbench.adapters`)
and returns that backend's callable, all set-up done; tritonbench's ``--bwd`` runs the backward
of what the callable returns.  tritonbench is imported only here, and only when registering.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from harness.device import prepare_backends, uses_interpreter
from harness.registry import load_operator
from harness.tritonbench.adapters import tritonbench_adapters

BACKENDS: dict[str, str] = {
    "opbench_triton": "triton",
    "opbench_helion": "helion",
    "opbench_torch_compile": "torch_compile",
}
"""tritonbench label -> our backend.  Labels hold no ``-``: tritonbench splits columns there."""

INSTALL = "pip install git+https://github.com/meta-pytorch/tritonbench"
INTERPRETED = ("triton", "helion")


class TritonbenchUnavailable(ImportError):
    """tritonbench cannot be imported; the message says how to install it."""


def import_tritonbench() -> None:
    """Import tritonbench's operator framework, or raise :class:`TritonbenchUnavailable`."""
    try:
        import tritonbench.utils.triton_op  # noqa: F401
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] == "tritonbench":
            raise TritonbenchUnavailable(
                f"tritonbench is not installed (it is not on PyPI): {INSTALL}, "
                "or clone it and run `pip install -e .` there") from exc
        raise TritonbenchUnavailable(f"tritonbench is installed but cannot be imported: {exc}") from exc


def interpreter_problem(device: str) -> str | None:
    """Why Triton and Helion kernels cannot run on ``device`` in this process (None: they can).

    On the CPU they run in Triton's interpreter, which must be on when ``triton.language`` is
    first imported: Triton's own jit functions (``tl.sum``, ...) are decorated then, and torch
    imports Triton early, so setting it later is too late.
    """
    prepare_backends(device)
    if not uses_interpreter(device):
        return None
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction

    if isinstance(tl.sum, InterpretedFunction):
        return None
    return ("on the CPU, Triton's interpreter must be on before Triton is first imported: "
            "start with TRITON_INTERPRET=1 in the environment")


def backend_callable(tritonbench_op: str, backend: str, device: str,
                     inputs: tuple[Any, ...]) -> Callable[[], Any]:
    """Our ``backend`` on tritonbench ``tritonbench_op``'s input tuple, ready to time."""
    problem = interpreter_problem(device)
    if backend in INTERPRETED and problem is not None:
        raise RuntimeError(problem)
    adapter = tritonbench_adapters()[tritonbench_op]
    call = adapter.adapt(*inputs)
    op = load_operator(call.operator)(device, call.dtype, call.options)
    registered = next(b for b in op.backends() if b.name == backend)
    reason = op.skip_reason(registered)
    if reason is not None:
        raise RuntimeError(f"{backend} cannot run here: {reason}")
    return adapter.wrap(getattr(op, registered.method)(*call.inputs))


def benchmark_method(tritonbench_op: str, label: str) -> Callable[..., Callable[[], Any]]:
    """A tritonbench benchmark method ``(self, *inputs) -> callable`` running our backend ``label``."""
    backend = BACKENDS[label]

    def method(self: Any, *inputs: Any) -> Callable[[], Any]:
        return backend_callable(tritonbench_op, backend, self.device, inputs)

    method.__name__ = method.__qualname__ = label
    return method


def register_with_tritonbench(operators: Iterable[str] | None = None) -> dict[str, str]:
    """Add our backends to tritonbench's operators (default: all four); safe to call again.

    The plugin entry point (``harness.tritonbench.register_with_tritonbench``): it takes no
    required argument.
    Returns, for each operator tritonbench could not load (e.g. ``addmm`` without its
    ``generative_recommenders`` dependency), why; the others got the three backends.
    """
    import_tritonbench()
    from tritonbench.operators import load_opbench_by_name
    from tritonbench.utils.triton_op import register_benchmark

    not_loaded = {}
    for name in tritonbench_adapters() if operators is None else operators:
        try:
            op_class = load_opbench_by_name(name)
        except Exception as exc:  # its module's own imports: any error is the operator's
            not_loaded[name] = f"{type(exc).__name__}: {exc}"
            continue
        for label in BACKENDS:
            method = register_benchmark(operator_name=name, func_name=label, label=label)(
                benchmark_method(name, label))
            setattr(op_class, label, method)
    return not_loaded
