"""Metrics: the table of every metric (:mod:`harness.metrics.table`) and the data of one cell they
are computed from (:mod:`harness.metrics.cell_data`).

A leaf package: it imports nothing else of the harness, so measuring, sweeping, reporting and the
command line all read the one table.
"""
