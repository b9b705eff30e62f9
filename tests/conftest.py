"""Tests run on the CPU: Triton and Helion through Triton's interpreter; ``tests/gpu``, run on its
own, compiles for the GPU instead (``tests/gpu/conftest.py``).

The interpreter is turned on once the conftest files are loaded, so none of them may import
triton at import time: kernels that call other ``@triton.jit`` functions fail under the
interpreter when triton was imported before it was turned on (triton 3.7.1)."""

from pathlib import Path

import pytest

from harness.device import prepare_backends

GPU_TESTS = Path(__file__).parent / "gpu"


def pytest_configure(config: pytest.Config) -> None:
    """Set up the CPU interpreter before any test module imports a kernel, unless every path this
    session collects lies in ``tests/gpu``."""
    paths = [Path(config.invocation_params.dir, arg.split("::")[0]).resolve() for arg in config.args]
    if not paths or not all(path.is_relative_to(GPU_TESTS) for path in paths):
        prepare_backends("cpu")
