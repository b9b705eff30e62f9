"""``run.py --plugin FILE.py``: load user files that register backends or operators.

A plugin uses the suite's own decorators: ``@register_benchmark(operator="exp")`` on a
function adds a backend to a registered operator, and ``@harness.registry.register_operator``
on a ``BenchmarkOperator`` subclass adds a new operator.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path

from harness.registry import UnknownOperatorError, attach_pending_backends

_loaded: set[Path] = set()


class PluginError(Exception):
    """A plugin file that cannot be loaded; the message names the file and why."""


def load_plugins(paths: list[str]) -> None:
    """Execute each plugin file once, in order."""
    for text in paths:
        path = Path(text).resolve()
        if path in _loaded:
            continue
        if not path.is_file():
            raise PluginError(f"--plugin {text}: no such file")
        # An explicit source loader, so a file without the .py suffix is still read as Python.
        name = f"opbench_plugin_{path.stem}"
        spec = importlib.util.spec_from_loader(name, importlib.machinery.SourceFileLoader(name, str(path)))
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        try:
            spec.loader.exec_module(module)
            attach_pending_backends()
        except UnknownOperatorError as exc:
            raise PluginError(f"--plugin {text}: {exc}") from exc
        except Exception as exc:
            raise PluginError(f"--plugin {text}: failed to load ({type(exc).__name__}: {exc})") from exc
        _loaded.add(path)
