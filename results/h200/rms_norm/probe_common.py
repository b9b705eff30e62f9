"""What the rms_norm probe scripts share: their arguments, timer, copy bandwidth and result file.

Every probe takes ``--out FILE`` and repeatable ``--shape M,N``, times with the same
:class:`CudaTimer` settings against the copy bandwidth measured at its start, and rewrites
its JSON result file after each shape, so a probe stopped early keeps what it finished.
"""

from __future__ import annotations

import argparse
import json

import torch

from harness.device import measure_copy_gbps, prepare_backends
from harness.timing import CudaTimer


def probe_parser(doc: str, default_shapes: str) -> argparse.ArgumentParser:
    """The parser every probe starts from: ``--out`` and ``--shape``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--shape", action="append", help=f"M,N to probe (default: {default_shapes})")
    return parser


def shapes_from(texts: list[str] | None, default: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The ``--shape M,N`` arguments as pairs, or ``default`` when none were given."""
    return [tuple(map(int, text.split(","))) for text in texts] if texts else list(default)


def start_gpu_timing() -> tuple[CudaTimer, float]:
    """Prepare the CUDA backends; return the probes' timer and the copy bandwidth it measures (GB/s)."""
    prepare_backends("cuda")
    timer = CudaTimer(warmup_ms=5, rep_ms=25)
    return timer, measure_copy_gbps("cuda", timer.warmup_ms, timer.rep_ms)


def write_records(path: str, records: list[dict]) -> None:
    """Write the probe's records, with the GPU's name, to ``path``."""
    with open(path, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "records": records}, f, indent=1)
