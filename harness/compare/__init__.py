"""Comparing: the statistics and verdict rules of the performance-regression gate."""
