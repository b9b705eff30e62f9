"""Measuring: timers, device ceilings, accuracy checks, one cell, the sweep and its isolated worker,
the Helion config tuner."""
