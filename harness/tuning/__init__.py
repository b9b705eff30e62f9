"""Stored Helion configs and which one a kernel call runs on (the tuner that writes them is
:mod:`harness.measure.tuner`)."""
