"""Example plugin that cannot load: it adds a backend to an operator that does not exist
(``run.py`` refuses it in one line)."""

from harness.operator import register_benchmark


@register_benchmark(operator="expp")
def fast(self, x):
    return lambda: x
