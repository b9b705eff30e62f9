"""rms_norm's probes import, on public names only, and results/ holds their data, not code."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

from operators.rms_norm import probes

ROOT = Path(__file__).resolve().parents[2]
PROBES = sorted(module.name for module in pkgutil.iter_modules(probes.__path__))


@pytest.mark.parametrize("name", [name for name in PROBES if name != "common"])
def test_probe_imports_with_a_main(name: str) -> None:
    assert callable(importlib.import_module(f"{probes.__name__}.{name}").main)


@pytest.mark.parametrize("name", PROBES)
def test_probe_uses_public_names_of_the_operators_package_only(name: str) -> None:
    tree = ast.parse(Path(probes.__path__[0], f"{name}.py").read_text())
    modules = set()  # local names bound to modules of the operators package
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("operators"):
            for alias in node.names:
                assert not alias.name.startswith("_"), f"{name} imports {node.module}.{alias.name}"
                if inspect.ismodule(getattr(importlib.import_module(node.module), alias.name)):
                    modules.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
            assert not node.attr.startswith("_"), f"{name} uses {node.value.id}.{node.attr}"


def test_the_results_folder_holds_data_only() -> None:
    """No scripts, compiled code or kernel caches anywhere under ``results/``: probes live next
    to their kernels."""
    code = [path.relative_to(ROOT) for path in (ROOT / "results").rglob("*")
            if path.suffix in {".py", ".pyc", ".sh", ".so", ".cubin"} or "cache" in path.name.lower()]
    assert not code, code
