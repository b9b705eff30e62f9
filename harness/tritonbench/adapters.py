"""Which of tritonbench's operators this suite's backends join, and how their input tuples
become calls of ours: each of our operators declares it (``tritonbench_adapters``, a
:class:`~harness.operator.TritonbenchAdapter` per tritonbench operator name), so bridging a new
operator touches only its own folder.
"""

from __future__ import annotations

from harness.operator import TritonbenchAdapter
from harness.registry import load_operator, operator_names


def tritonbench_adapters() -> dict[str, TritonbenchAdapter]:
    """tritonbench operator name -> its adapter, from every registered operator that declares
    adapters itself (a plugin's subclass of a built-in operator does not adapt its parent's
    tritonbench operators a second time)."""
    found: dict[str, TritonbenchAdapter] = {}
    for name in operator_names():
        for tritonbench_op, adapter in vars(load_operator(name)).get("tritonbench_adapters", {}).items():
            if tritonbench_op in found:
                raise ValueError(f"two operators adapt tritonbench's {tritonbench_op}")
            found[tritonbench_op] = adapter
    return found
