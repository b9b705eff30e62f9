"""Helion configs: the stored ones, which one a kernel call runs on, and the tuner that times the
candidates and writes them (:mod:`harness.tuning.tuner`)."""
