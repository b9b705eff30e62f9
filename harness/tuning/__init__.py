"""Tuning: stored Helion configs (loaded by the kernels at run time) and the tuner that writes them."""
