"""Reporting: the metric table, result records, result files and terminal tables."""
