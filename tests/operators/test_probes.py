"""Every operator's probes (``operators/<op>/probes/``) import, on public names only, and
results/ holds their data, not code."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = sorted(f"operators.{path.parent.parent.name}.probes"
                  for path in ROOT.glob("operators/*/probes/__init__.py"))
PROBES = [(package, module.name) for package in PACKAGES
          for module in pkgutil.iter_modules(importlib.import_module(package).__path__)]


def test_the_gemm_and_rms_norm_probes_are_found() -> None:
    assert {"operators.gemm.probes", "operators.rms_norm.probes"} <= set(PACKAGES)


@pytest.mark.parametrize(("package", "name"), [probe for probe in PROBES if probe[1] != "common"])
def test_probe_imports_with_a_main(package: str, name: str) -> None:
    assert callable(importlib.import_module(f"{package}.{name}").main)


@pytest.mark.parametrize(("package", "name"), PROBES)
def test_probe_uses_public_names_of_the_operators_package_only(package: str, name: str) -> None:
    tree = ast.parse(Path(importlib.import_module(package).__path__[0], f"{name}.py").read_text())
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
