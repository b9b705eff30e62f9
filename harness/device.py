"""Choose the device and prepare Triton, Helion and Inductor to run on it.

On a machine without a GPU, Triton kernels run through Triton's interpreter and Helion
kernels run their generated Triton code through the same interpreter.  Both read their
environment when kernels are decorated, so :func:`prepare_backends` must run before any
kernel module is imported; the operator registry imports kernel modules lazily for that
reason.
"""

from __future__ import annotations

import os

import torch

_INTERPRETER_MATH = (
    "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "abs", "floor", "ceil",
    "fma", "erf",
)


def default_device() -> str:
    """Return ``"cuda"`` when a GPU is visible, else ``"cpu"``."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def triton_interpreted() -> bool:
    """Whether ``TRITON_INTERPRET`` turns Triton's CPU interpreter on, read as Triton reads it."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "yes", "on")


def uses_interpreter(device: str) -> bool:
    """Whether Triton and Helion kernels run through Triton's CPU interpreter."""
    return device == "cpu"


def prepare_backends(device: str) -> None:
    """Set up Triton and Helion for ``device``; idempotent.

    On the CPU this turns on Triton's interpreter, stops Helion from autotuning (which
    cannot run there) and points the ``libdevice`` math functions that Helion emits at
    their ``tl`` equivalents, which the interpreter can run (triton issue 8825).  On CUDA
    it makes any accidental Helion autotuning an error: benchmarks use stored configs.
    """
    if uses_interpreter(device):
        os.environ["TRITON_INTERPRET"] = "1"
        os.environ["HELION_AUTOTUNE_EFFORT"] = "none"
        _route_libdevice_to_tl()
    elif os.environ.get("OPBENCH_ALLOW_AUTOTUNE") != "1":
        os.environ["HELION_DISALLOW_AUTOTUNING"] = "1"


def keep_no_compiler_choices() -> None:
    """Let Inductor keep on disk the kernels it compiles but not what it chooses: no compiled
    graphs (the FX graph and AOT autograd caches, whose code holds max-autotune's picks) and no
    autotuning timings.  A ``--parallel-compile`` worker's setting: its choices were made while other
    workers shared the GPU, so the timed run makes them again."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    inductor_config.fx_graph_cache = False
    inductor_config.autotune_local_cache = False
    functorch_config.enable_autograd_cache = False


def _route_libdevice_to_tl() -> None:
    import triton.language as tl
    from triton.language.extra import libdevice

    def forward_to_tl(name: str):
        # Looked up at call time: the interpreter patches ``tl`` only while a kernel runs.
        def call(*args, **kwargs):
            return getattr(tl, name)(*args, **kwargs)

        call.__name__ = name
        return call

    for name in _INTERPRETER_MATH:
        setattr(libdevice, name, forward_to_tl(name))
