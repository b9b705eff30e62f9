"""Measuring one cell: device ceilings, accuracy checks, records, profiles (the timers are
:mod:`harness.timing`; the sweeps that run cells are :mod:`harness.sweep`; the metrics computed
from a cell's measurement are :mod:`harness.metrics`)."""
