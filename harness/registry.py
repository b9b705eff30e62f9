"""The one registry of operators: operator names -> their ``BenchmarkOperator`` classes.

The built-in operators are the sub-packages of ``operators/``: each ``operators/<name>/operator.py``
is imported the first time the registry is asked and the ``BenchmarkOperator`` subclass it
defines is registered, so adding an operator is adding its folder (the operator modules never
import the registry).  A plugin's operator class is decorated with :func:`register_operator`.
Kernel modules are not imported here (backends import them lazily), so Triton and Helion can be
prepared for the device first (:func:`harness.device.prepare_backends`).

Backends that plugins attach to an existing operator (``register_benchmark(operator=...)``)
are attached when the registry is next asked (:func:`attach_pending_backends`).
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from types import ModuleType

from harness.operator import PENDING_BACKENDS, BenchmarkOperator

_OPERATORS: dict[str, type[BenchmarkOperator]] = {}
_builtins_loaded = False


class UnknownOperatorError(LookupError):
    """An operator name nobody registered; the message names the valid ones."""


def register_operator(cls: type[BenchmarkOperator]) -> type[BenchmarkOperator]:
    """Class decorator: make ``cls`` available as ``--op <cls.name>``."""
    _OPERATORS[_checked(cls).name] = cls
    return cls


def _checked(cls: type[BenchmarkOperator]) -> type[BenchmarkOperator]:
    """``cls``, refused if it still defines the ``add_options`` hook nothing reads any more, or
    does not mark exactly one backend as the baseline (what accuracy and speedup are measured against)."""
    if "add_options" in vars(cls):
        raise TypeError(f"{cls.__name__}.add_options is no longer read: declare the options as "
                        "command_line_options = (harness.operator.Option(...), ...)")
    return _one_baseline(cls)


def _one_baseline(cls: type[BenchmarkOperator]) -> type[BenchmarkOperator]:
    """``cls``, refused unless exactly one of its backends is the baseline."""
    baselines = [backend.name for backend in cls.backends() if backend.baseline]
    if len(baselines) != 1:
        raise TypeError(f"{cls.__name__} must mark exactly one backend @register_benchmark(baseline=True), "
                        f"not {len(baselines)}{': ' + ', '.join(baselines) if baselines else ''}")
    return cls


def _load_builtins() -> None:
    global _builtins_loaded
    if _builtins_loaded:
        return
    _builtins_loaded = True
    import operators

    for package in pkgutil.iter_modules(operators.__path__):
        if package.ispkg:
            cls = _checked(defined_operator(importlib.import_module(f"operators.{package.name}.operator")))
            _OPERATORS.setdefault(cls.name, cls)  # a plugin's operator of the same name stays


def defined_operator(module: ModuleType) -> type[BenchmarkOperator]:
    """The one ``BenchmarkOperator`` subclass that ``module`` defines (not merely imports)."""
    found = [value for value in vars(module).values()
             if isinstance(value, type) and issubclass(value, BenchmarkOperator)
             and value.__module__ == module.__name__]
    if len(found) != 1:
        raise TypeError(f"{module.__name__} must define one BenchmarkOperator subclass, "
                        f"found {[cls.__name__ for cls in found]}")
    return found[0]


def operator_names() -> list[str]:
    """Every registered operator name, sorted."""
    _load_builtins()
    attach_pending_backends()
    return sorted(_OPERATORS)


def load_operator(name: str) -> type[BenchmarkOperator]:
    """The operator class registered under ``name``."""
    _load_builtins()
    attach_pending_backends()
    if name not in _OPERATORS:
        raise UnknownOperatorError(f"no operator {name!r} (valid: {', '.join(sorted(_OPERATORS))})")
    return _OPERATORS[name]


def attach_pending_backends() -> None:
    """Attach the backends declared for an operator by name; a backend named like an existing one
    replaces it and stays the baseline if the one it replaces was."""
    _load_builtins()
    while PENDING_BACKENDS:
        operator, method = PENDING_BACKENDS.pop(0)
        if operator not in _OPERATORS:
            raise UnknownOperatorError(
                f"no operator {operator!r} (valid: {', '.join(sorted(_OPERATORS))})"
            )
        target = _OPERATORS[operator]
        replaced = getattr(getattr(target, method.__name__, None), "_benchmark", None)
        if replaced is not None and replaced.baseline and not method._benchmark.baseline:
            method._benchmark = dataclasses.replace(method._benchmark, baseline=True)
        setattr(target, method.__name__, method)
        _one_baseline(target)
