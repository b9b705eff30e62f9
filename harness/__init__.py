"""Benchmark harness: everything that is not specific to one operator."""
