"""Test plugin: adds a backend to an operator that does not exist."""

from harness.operator import register_benchmark


@register_benchmark(operator="expp")
def fast(self, x):
    return lambda: x
