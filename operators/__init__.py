"""The operator registry: operator names -> their ``BenchmarkOperator`` classes.

Built-in operator modules are imported lazily, after the harness has prepared Triton and
Helion for the chosen device (see ``harness.device.prepare_backends``).  Plugins add
operators with :func:`register_operator`.
"""

from __future__ import annotations

import importlib

from harness.operator import BenchmarkOperator

OPERATORS: dict[str, str] = {
    "exp": "operators.exp.operator:ExpOperator",
    "rms_norm": "operators.rms_norm.operator:RMSNormOperator",
    "gemm": "operators.gemm.operator:GemmOperator",
    "addmm": "operators.addmm.operator:AddmmOperator",
}


_registered: dict[str, type[BenchmarkOperator]] = {}


def register_operator(cls: type[BenchmarkOperator]) -> type[BenchmarkOperator]:
    """Class decorator: make ``cls`` available as ``--op <cls.name>``."""
    _registered[cls.name] = cls
    return cls


def operator_names() -> list[str]:
    return sorted(set(OPERATORS) | set(_registered))


def load_operator(name: str) -> type[BenchmarkOperator]:
    """The operator class registered under ``name``."""
    if name in _registered:
        return _registered[name]
    if name not in OPERATORS:
        raise LookupError(f"no operator {name!r} (valid: {', '.join(operator_names())})")
    module_name, class_name = OPERATORS[name].split(":")
    return getattr(importlib.import_module(module_name), class_name)
