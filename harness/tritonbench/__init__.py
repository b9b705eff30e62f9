"""This suite's backends inside tritonbench: the ``--plugin`` entry point, the input adapters and
the in-process runner behind ``run.py tritonbench``.

``--plugin harness.tritonbench.register_with_tritonbench`` (tritonbench versions that have
``--plugin``) names :func:`register_with_tritonbench`.
"""

from harness.tritonbench.registration import register_with_tritonbench

__all__ = ["register_with_tritonbench"]
