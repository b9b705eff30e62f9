"""No import cycle among the modules, and no source file (tests, examples) past a readable size.

The graph is built from the source of ``harness/`` and ``operators/``: every import statement,
also those inside functions (a lazy import hides a cycle from Python, not from a reader).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("harness", "operators")
MAX_LINES = 400


def _module_files() -> dict[str, Path]:
    files = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            files[name] = path
    return files


def _imported(node: ast.AST, modules: set[str], importer: str, is_package: bool) -> list[str]:
    """The project modules an import statement in ``importer`` imports (the most specific
    module named; relative imports resolved)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = importer.split(".")
            anchor = parts[:len(parts) - node.level + (1 if is_package else 0)]
            base = ".".join([*anchor, base] if base else anchor)
        names = [f"{base}.{alias.name}" for alias in node.names]
        names = [name if name in modules else base for name in names]
    else:
        return []
    return [name for name in names if name in modules]


def _imported_by_name(importer: str, modules: set[str]) -> set[str]:
    """Modules ``importer`` imports with ``importlib`` by a computed name: the registry imports
    every ``operators.<name>.operator``."""
    if importer != "harness.registry":
        return set()
    return {name for name in modules if name.startswith("operators.") and name.endswith(".operator")}


def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports anywhere in its source."""
    files = _module_files()
    modules = set(files)
    graph = {}
    for name, path in files.items():
        package = path.name == "__init__.py"
        nodes = ast.walk(ast.parse(path.read_text()))
        found = {target for node in nodes for target in _imported(node, modules, name, package)}
        graph[name] = (found | _imported_by_name(name, modules)) - {name}
    return graph


def package_of(module: str) -> str:
    """The node a module counts as in the package graph: its harness sub-package
    (``harness.measure``), its operator (``operators.gemm``), a ``probes`` package (a leaf of
    timing scripts, ``operators.rms_norm.probes``), or itself (``harness.settings``)."""
    parts = module.split(".")
    if "probes" in parts:
        return ".".join(parts[:parts.index("probes") + 1])
    return ".".join(parts[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """``graph`` with each module collapsed into :func:`package_of`'s node."""
    collapsed: dict[str, set[str]] = {}
    for module, targets in graph.items():
        collapsed.setdefault(package_of(module), set()).update(package_of(t) for t in targets)
    return {name: targets - {name} for name, targets in collapsed.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules (first repeated at the end), or None."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":
                return stack[stack.index(target):] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_harness_and_operators_have_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_graph_sees_relative_imports_and_the_registry_s_imports_by_name() -> None:
    modules = set(_module_files())
    statement = ast.parse("from .strategy import Regime").body[0]
    importer = "operators.gemm.triton_dispatch"
    assert _imported(statement, modules, importer, False) == ["operators.gemm.strategy"]
    assert "operators.addmm.operator" in import_graph()["harness.registry"]


def test_the_cycle_finder_finds_a_planted_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_graph_sees_imports_inside_functions() -> None:
    graph = import_graph()
    assert "harness.registry" in graph
    assert "harness.operator" in graph["harness.registry"]


def test_only_the_command_line_imports_argparse_in_the_harness() -> None:
    files = {name: path for name, path in _module_files().items() if name.startswith("harness")}
    importers = sorted(
        name for name, path in files.items()
        if any(isinstance(node, ast.Import) and any(a.name == "argparse" for a in node.names)
               or isinstance(node, ast.ImportFrom) and node.module == "argparse"
               for node in ast.walk(ast.parse(path.read_text())))
    )
    assert all(name.startswith("harness.cli") for name in importers), importers


def test_no_module_is_over_the_size_limit() -> None:
    sources = [*_module_files().values(), *(ROOT / "tests").rglob("*.py"), *(ROOT / "examples").rglob("*.py")]
    sizes = {str(path.relative_to(ROOT)): len(path.read_text().splitlines()) for path in sources}
    too_long = {name: lines for name, lines in sizes.items() if lines > MAX_LINES}
    assert not too_long, too_long


def test_the_command_line_imports_no_kernel_library_before_the_device_is_prepared() -> None:
    """Triton reads its interpreter switch when it is imported (kernels calling other jitted
    functions fail otherwise): run.py must prepare the device before anything imports it."""
    probe = "import sys, harness.cli.main; print(sorted(m for m in ('triton', 'helion') if m in sys.modules))"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, env=env)
    assert result.stdout.strip() == "[]", result.stdout + result.stderr


def test_the_packages_import_each_other_one_way() -> None:
    """No package imports one that imports it back, directly or through others: measuring
    imports reporting's record types, so reporting never imports measuring; the registry imports
    the operators, so they never import it."""
    cycle = find_cycle(package_graph(import_graph()))
    assert cycle is None, "import cycle between packages: " + " -> ".join(cycle)


def test_the_package_graph_collapses_modules_to_their_package() -> None:
    assert package_of("harness.measure.cell") == "harness.measure"
    assert package_of("harness.settings") == "harness.settings"
    assert package_of("operators.gemm.triton_dispatch") == "operators.gemm"
    assert package_of("operators.rms_norm.probes.bwd_parts") == "operators.rms_norm.probes"
    graph = package_graph(import_graph())
    assert "harness.report" in graph["harness.measure"] and "harness.measure" not in graph["harness.report"]
    assert "harness.measure" in graph["harness.sweep"] and "harness.sweep" not in graph["harness.measure"]
    assert "operators.gemm" in graph["harness.registry"]
