"""Reporting: result records, result files, terminal tables, plots and export formats (the metric
table they read is :mod:`harness.metrics.table`)."""
