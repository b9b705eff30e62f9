"""The bandwidth a cell's traffic can reach: its mix of patterns (``copy``, ``read2_write1``,
``read``), each at the ceiling a run measured for it (the header's ``ceilings_gbps``)."""

from __future__ import annotations


def traffic_ceiling(traffic: dict[str, int] | None, ceilings_gbps: dict[str, float]) -> float | None:
    """All of ``traffic``'s bytes (bytes per pattern) over the time they take, each pattern's at
    its own ceiling in GB/s.  None when a pattern was not measured."""
    if not traffic or any(pattern not in ceilings_gbps for pattern in traffic):
        return None
    seconds = sum(nbytes / ceilings_gbps[pattern] for pattern, nbytes in traffic.items())
    return sum(traffic.values()) / seconds if seconds > 0 else None
