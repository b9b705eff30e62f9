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


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph with each module of a harness sub-package (``harness.measure.timing``)
    collapsed into that sub-package (``harness.measure``) and each operator's modules into
    ``operators.<name>``; other modules stay themselves."""
    def node(module: str) -> str:
        parts = module.split(".")
        if parts[0] in PACKAGES and len(parts) > 2:
            return ".".join(parts[:2])
        return module

    collapsed: dict[str, set[str]] = {}
    for module, targets in graph.items():
        collapsed.setdefault(node(module), set()).update(node(t) for t in targets)
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


def harness_package(module: str) -> str:
    """The harness node a module belongs to: its sub-package (``harness.measure``), or itself for a
    top-level module (``harness.settings``)."""
    return ".".join(module.split(".")[:2])


def harness_package_graph() -> dict[str, set[str]]:
    """Harness sub-package -> the harness sub-packages its modules import.  ``operators`` is left
    out: its cycle with the registry is not one between the harness's own jobs."""
    graph: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        if module.startswith("harness."):
            package = harness_package(module)
            imported = {harness_package(t) for t in targets if t.startswith("harness.")}
            graph.setdefault(package, set()).update(imported - {package})
    return graph


def test_the_harness_sub_packages_import_each_other_one_way() -> None:
    """No sub-package imports one that imports it back, directly or through others (e.g. measuring
    imports reporting's record types, so reporting never imports measuring)."""
    cycle = find_cycle(harness_package_graph())
    assert cycle is None, "import cycle between harness packages: " + " -> ".join(cycle)


def test_the_package_graph_collapses_modules_to_their_sub_package() -> None:
    graph = harness_package_graph()
    assert harness_package("harness.measure.timing") == "harness.measure"
    assert harness_package("harness.settings") == "harness.settings"
    assert "harness.report" in graph["harness.measure"] and "harness.settings" in graph["harness.measure"]
