"""Measuring one cell: timers, device ceilings, accuracy checks, records, profiles, the Helion config
tuner (the sweeps that run cells are :mod:`harness.sweep`; the metrics computed from a cell's
measurement are :mod:`harness.metrics`)."""
