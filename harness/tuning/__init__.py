"""Tuning: stored Helion configs, which one a kernel call runs on, and the tuner that writes them."""
