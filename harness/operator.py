"""The operator authoring surface: ``BenchmarkOperator``, ``register_benchmark`` and ``Mode``.

An operator subclasses :class:`BenchmarkOperator`, yields example inputs per shape, and
decorates one method per backend with :func:`register_benchmark`.  A backend method receives
the inputs and returns a zero-argument callable that runs the operation; everything that is
set-up (allocation, compilation, config loading) happens before it returns.
"""

from __future__ import annotations

import contextlib
import enum
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

Output = torch.Tensor | tuple[torch.Tensor, ...]
Shape = tuple[int, ...]

DEFAULT_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float32: (1e-4, 1e-5),
    torch.float16: (5e-3, 1e-3),
    torch.bfloat16: (2e-2, 1e-2),
}
DTYPE_NAMES: dict[str, torch.dtype] = {
    "fp32": torch.float32,
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
}


class Mode(str, enum.Enum):
    """What a benchmark times."""

    FWD = "fwd"
    FWD_NO_GRAD = "fwd_no_grad"
    BWD = "bwd"
    FWD_BWD = "fwd_bwd"

    @property
    def needs_grad(self) -> bool:
        """Whether differentiable inputs require grad in this mode."""
        return self is not Mode.FWD_NO_GRAD

    @property
    def checks_outputs(self) -> bool:
        return self is not Mode.BWD

    @property
    def checks_grads(self) -> bool:
        return self in (Mode.BWD, Mode.FWD_BWD)


@dataclass(frozen=True)
class Backend:
    """A registered implementation of an operator."""

    name: str
    method: str
    baseline: bool
    fwd_only: bool
    enabled: bool = True


PENDING_BACKENDS: list[tuple[str, Callable[..., Callable[[], Output]]]] = []
"""Backends declared with ``register_benchmark(operator=...)``, waiting for the registry
(:mod:`harness.registry`) to attach them to their operator class."""


def register_benchmark(
    baseline: bool = False, label: str | None = None, fwd_only: bool = False,
    operator: str | None = None, enabled: bool = True,
) -> Callable[[Callable[..., Callable[[], Output]]], Callable[..., Callable[[], Output]]]:
    """Mark an operator method as a backend.

    ``label`` names the backend in tables and records (default: the function name); it must
    not contain ``-``, which separates backend and metric in column names.  ``operator``
    attaches a plain function to a registered operator (how plugins add backends); a
    backend of the same name as an existing one replaces it, and stays the baseline if the
    one it replaces was.  ``enabled=False`` leaves the backend out of a run unless ``--only``
    names it (variants that answer one question, such as what dispatch or compilation costs).
    ``fwd_only``: the backend has no backward; it is skipped in ``bwd`` and ``fwd_bwd``, and its
    ``fwd`` outputs need not require grad (every other backend's must).
    """

    def mark(method: Callable[..., Callable[[], Output]]) -> Callable[..., Callable[[], Output]]:
        name = label or method.__name__
        if "-" in name:
            raise ValueError(f"backend label {name!r} must not contain '-'")
        method._benchmark = Backend(name, method.__name__, baseline, fwd_only, enabled)  # type: ignore[attr-defined]
        if operator is not None:
            PENDING_BACKENDS.append((operator, method))
        return method

    return mark


@dataclass(frozen=True)
class Option:
    """An operator's own command-line option ``--<name>``; its value reaches the operator in
    ``self.options[name]`` (and the result file's header)."""

    name: str
    default: Any
    help: str
    choices: tuple[str, ...] | None = None
    parse: Callable[[str], Any] | None = None
    """Text -> value; raises ``ValueError`` with a message saying what is wrong with the text.
    Without one, the text is read as the default's type, an int or a finite float (an option
    with ``choices``, or any other default, keeps the text: :func:`harness.cli.args.option_parse`)."""


def finite_number(text: str) -> float:
    """``text`` as a finite float; ``ValueError`` for anything else (``nan``, ``inf``, words)."""
    try:
        value = float(text)
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a number") from exc
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite number")
    return value


@dataclass(frozen=True)
class TritonbenchCall:
    """What a tritonbench operator's input tuple becomes: one of our operators, the inputs its
    backends take, and its options."""

    operator: str
    inputs: tuple[Any, ...]
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of the first tensor input: the benchmark dtype."""
        return next(x.dtype for x in self.inputs if isinstance(x, torch.Tensor))


@dataclass(frozen=True)
class TritonbenchAdapter:
    """How a tritonbench operator's input tuple maps to a :class:`TritonbenchCall`, and how our
    output is handed back (as is, or in the dict tritonbench's metrics of that operator read)."""

    adapt: Callable[..., TritonbenchCall]
    output_key: str | None = None

    def wrap(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        """``fn`` returning its output in the form tritonbench's operator expects."""
        if self.output_key is None:
            return fn
        key = self.output_key
        return lambda: {key: fn()}


@dataclass(frozen=True)
class KernelWork:
    """The modelled work of one launch of a kernel: fewest bytes through device memory, flops
    (either None where the model has none)."""

    bytes_moved: int | None = None
    flops: int | None = None


class BenchmarkOperator:
    """Base class of every operator; subclasses fill in the class variables and hooks."""

    name: ClassVar[str]
    x_val_label: ClassVar[str]
    supported_dtypes: ClassVar[tuple[torch.dtype, ...]] = (
        torch.float32,
        torch.float16,
        torch.bfloat16,
    )
    compute_bound: ClassVar[bool] = False
    tritonbench_adapters: ClassVar[dict[str, TritonbenchAdapter]] = {}
    """tritonbench operators (by their name there) whose input tuples this operator computes on."""
    helion_tuning: ClassVar[str | None] = None
    """The module whose ``tuning_jobs(dtype, device)`` and ``CONFIG_PATH`` ``run.py tune`` uses."""
    command_line_options: ClassVar[tuple[Option, ...]] = ()
    """The operator's own options, added to ``run.py``'s parser when ``--op`` names it."""
    review_speedup: ClassVar[float] = 10.0
    bwd_seed: ClassVar[int] = 1234
    whole_direction_kernels: ClassVar[dict[str, Mode]] = {}
    """Kernels one launch of which does all of a direction's modelled work, by the profiler's
    name: ``Mode.FWD`` (the forward) or ``Mode.BWD`` (the backward); see :meth:`kernel_work`."""

    def __init__(self, device: str, dtype: torch.dtype, options: dict[str, Any] | None = None):
        self.device = device
        self.dtype = dtype
        self.options = options or {}
        self._dy_cache: dict[Any, tuple[torch.Tensor, ...]] = {}
        self._handed_out: list[tuple[Any, tuple[torch.Tensor, ...]]] | None = None

    @classmethod
    def backends(cls) -> list[Backend]:
        """Registered backends, baseline first, then in definition order; a method a subclass
        redefines is its own (registered or not)."""
        found: dict[str, Backend] = {}
        for klass in reversed(cls.__mro__):  # a subclass's method of a name replaces its parent's
            for name, attr in vars(klass).items():
                backend = getattr(attr, "_benchmark", None)
                if backend is None:
                    found.pop(name, None)
                else:
                    found[name] = backend
        return sorted(dict.fromkeys(found.values()), key=lambda b: not b.baseline)

    @classmethod
    def baseline(cls) -> Backend:
        return next(b for b in cls.backends() if b.baseline)

    # --- inputs -------------------------------------------------------------------------
    def default_shapes(self) -> list[Shape]:
        """The default sweep for ``self.device``."""
        raise NotImplementedError

    def shape_arity(self) -> int:
        """How many integers one ``--shape`` takes."""
        return len(self.default_shapes()[0])

    def make_inputs(self, shape: Shape) -> tuple[Any, ...]:
        """Fresh random inputs for ``shape`` (never zeros)."""
        raise NotImplementedError

    def differentiable(self, inputs: Sequence[Any]) -> list[int]:
        """Indices of inputs that take gradients: by default every floating-point tensor."""
        return [
            i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor) and x.is_floating_point()
        ]

    def x_val(self, shape: Shape) -> int | Shape:
        """The row label of a shape in tables and records."""
        return shape[0] if len(shape) == 1 else shape

    # --- models -------------------------------------------------------------------------
    def bytes_moved(self, shape: Shape, mode: Mode) -> int | None:
        """Fewest bytes through device memory per call in ``mode`` (None: no model)."""
        return None

    def flops(self, shape: Shape, mode: Mode) -> int | None:
        """Floating-point operations per call in ``mode`` (None: no model)."""
        return None

    def traffic(self, shape: Shape, mode: Mode) -> dict[str, int] | None:
        """:meth:`bytes_moved` split by traffic pattern (``copy``, ``read2_write1``, ``read``), which
        ``pct_peak`` reads against the bandwidth measured for each; by default all of it ``copy``."""
        nbytes = self.bytes_moved(shape, mode)
        return None if nbytes is None else {"copy": nbytes}

    def kernel_work(self, shape: Shape, mode: Mode, kernel: str) -> KernelWork | None:
        """The work of one launch of the kernel named ``kernel`` (as the profiler names it) in a
        call of ``mode``, where the operator's model can tell it by name: by default the whole
        model of the direction :attr:`whole_direction_kernels` gives the kernel, else None.  (A call
        of one kernel launched once is given the call's whole model by the harness.)"""
        direction = self.whole_direction_kernels.get(kernel)
        if direction is None:
            return None
        return KernelWork(self.bytes_moved(shape, direction), self.flops(shape, direction))

    def tolerance(self, shape: Shape, tensor: str) -> tuple[float, float]:
        """(rtol, atol) for comparing ``tensor`` (``output[i]``, or ``grad[i]`` of input ``i``)
        against the float64 reference; operators give each tensor one from its own magnitude."""
        return DEFAULT_TOLERANCES[self.dtype]

    def fresh_inputs(self, shape: Shape, seed: int) -> tuple[Any, ...] | None:
        """Other inputs of ``shape`` for the check after timing (None: check on the same inputs).

        The harness copies their values into each backend's own input tensors, so a backend
        sees the tensors it was built with holding new values: a cached result fails.
        """
        devices = [torch.cuda.current_device()] if self.device == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)
            return self.make_inputs(shape)

    def skip_reason(self, backend: Backend) -> str | None:
        """Why ``backend`` cannot run with this device and dtype (None: it can)."""
        return None

    # --- backward -----------------------------------------------------------------------
    def grad_outputs(self, outputs: tuple[torch.Tensor, ...],
                     fresh: bool = False) -> tuple[torch.Tensor, ...]:
        """One ``dy`` per output, drawn with a fixed seed and the same for every backend.

        Drawn in the benchmark dtype and cast to each output's dtype, so the float64
        reference sees exactly the values the backends see.  Each call hands out copies of
        its own, so a backend that writes into its ``dy`` cannot change another's; the harness
        checks the copies it handed out afterwards (:meth:`changed_grad_outputs`).  ``fresh``
        gives the second set, drawn with another seed, for the check after timing.  A ``dy``
        depends on its outputs' shapes only: the checks on fresh inputs rely on it.
        """
        key = (tuple(tuple(o.shape) for o in outputs), fresh)
        if key not in self._dy_cache:
            generator = torch.Generator(device=outputs[0].device).manual_seed(self.bwd_seed + int(fresh))
            self._dy_cache[key] = tuple(
                torch.randn(o.shape, generator=generator, device=o.device).to(self.dtype)
                for o in outputs
            )
        dys = tuple(d.to(o.dtype, copy=True) for d, o in zip(self._dy_cache[key], outputs, strict=True))
        if self._handed_out is not None:
            self._handed_out.append((key, dys))
        return dys

    @contextlib.contextmanager
    def track_grad_outputs(self) -> Iterator[list[tuple[Any, tuple[torch.Tensor, ...]]]]:
        """Collect, in the yielded list, every ``dy`` :meth:`grad_outputs` hands out inside the block."""
        handed_out: list[tuple[Any, tuple[torch.Tensor, ...]]] = []
        previous, self._handed_out = self._handed_out, handed_out
        try:
            yield handed_out
        finally:
            self._handed_out = previous

    def changed_grad_outputs(self, handed_out: list[tuple[Any, tuple[torch.Tensor, ...]]]) -> str | None:
        """Why a ``dy`` handed out (as collected by :meth:`track_grad_outputs`) no longer holds
        its values, or None when every one is unchanged."""
        for key, dys in handed_out:
            for i, (dy, drawn) in enumerate(zip(dys, self._dy_cache[key], strict=True)):
                if not torch.equal(dy, drawn.to(dy.dtype)):
                    return f"dy of output[{i}] was modified in place by the backend"
        return None

    def get_bwd_fn(self, fwd_output: Output) -> Callable[[], None]:
        """A callable running the backward of ``fwd_output`` on its retained graph."""
        outputs = as_tuple(fwd_output)
        dys = self.grad_outputs(outputs)

        def backward() -> None:
            torch.autograd.backward(outputs, dys, retain_graph=True)

        return backward


def as_tuple(output: Output) -> tuple[torch.Tensor, ...]:
    """A backend's output as a tuple of tensors."""
    if isinstance(output, torch.Tensor):
        return (output,)
    if isinstance(output, tuple) and all(isinstance(o, torch.Tensor) for o in output):
        return output
    raise TypeError(f"a backend must return a tensor or a tuple of tensors, not {type(output)}")

