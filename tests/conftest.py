"""Tests run on the CPU: Triton and Helion through Triton's interpreter."""

from harness.device import prepare_backends

prepare_backends("cpu")
