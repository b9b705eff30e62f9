"""Helion configs: the stored ones, which one a kernel call runs on, and the tuner that times the
candidates and picks one per job (:mod:`harness.tuning.tuner`; ``run.py tune`` stores them)."""
