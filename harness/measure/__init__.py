"""Measuring one cell: timers, device ceilings, accuracy checks, the metric computations, records,
profiles, the Helion config tuner (the sweeps that run cells are :mod:`harness.sweep`)."""
