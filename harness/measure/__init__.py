"""Measuring one cell: timers, device ceilings, accuracy checks, records, profiles (the sweeps that
run cells are :mod:`harness.sweep`; the metrics computed from a cell's measurement are
:mod:`harness.metrics`; the Helion config tuner, which times with these timers, is
:mod:`harness.tuning.tuner`)."""
