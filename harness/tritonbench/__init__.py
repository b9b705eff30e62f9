"""This suite's backends inside tritonbench: the registration function and the input adapters
(the in-process runner behind ``run.py tritonbench`` is :mod:`harness.cli.tritonbench_runner`).

:func:`register_with_tritonbench` is the plugin entry point: called in a process before
tritonbench's runner runs an operator there (from a plugin hook that takes a
``module.function`` path, or from a script), it adds our backends to that operator.
"""

from harness.tritonbench.registration import register_with_tritonbench

__all__ = ["register_with_tritonbench"]
