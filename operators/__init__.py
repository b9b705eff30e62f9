"""The operator registry: operator names -> their ``BenchmarkOperator`` classes.

Operator modules are imported lazily, after the harness has prepared Triton and Helion for
the chosen device (see ``harness.device.prepare_backends``).
"""

from __future__ import annotations

import importlib

from harness.operator import BenchmarkOperator

OPERATORS: dict[str, str] = {
    "exp": "operators.exp.operator:ExpOperator",
}


def operator_names() -> list[str]:
    return sorted(OPERATORS)


def load_operator(name: str) -> type[BenchmarkOperator]:
    """The operator class registered under ``name``."""
    module_name, class_name = OPERATORS[name].split(":")
    return getattr(importlib.import_module(module_name), class_name)
