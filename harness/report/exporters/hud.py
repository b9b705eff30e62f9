"""Result files as PyTorch OSS benchmark database v3 records (``benchmark.oss_ci_benchmark_v3``),
as test-infra's ``upload-benchmark-results`` action accepts them: a JSON list, one record per
(op, mode, dtype, x_val, backend, metric) with a value; failed and skipped cells are left out.

The layout follows tritonbench's own converter (``.ci/test_infra/oss_ci_benchmark_v3.py``): the
operator is the ``model`` (backend in ``model.backend``, the run's operator options in
``model.extra_info``), the mode is ``benchmark.mode``, the x_val is
``metric.extra_info["input_shape"]`` as tritonbench prints it, and ``benchmark_values`` holds the
one value of the cell (a latency's or walltime's median, ``aggregation: p50``; its repeats' medians and
percentiles are in ``metric.extra_info``).  The runner is spelled as the action's
``gather_runners_info.py`` spells it (``name`` "cuda", ``type`` the GPU's name), which is where
the HUD reads device and arch from.  Every ``extra_info`` maps strings to strings: numbers and
lists are JSON-encoded.
"""

from __future__ import annotations

import json
from typing import Any

from harness.report.exporters.common import exported, tritonbench_x_val
from harness.report.results import Record

BENCHMARK_NAME = "opbench"

_RUN_SETTINGS = ("date_utc", "command", "precision", "repeats", "timer", "tolerance", "isolate", "seed",
                 "python")
"""Header keys copied into ``benchmark.extra_info``."""

_REPOS = {"torch": "pytorch/pytorch", "triton": "triton-lang/triton", "helion": "pytorch/helion"}


def _strings(info: dict[str, Any]) -> dict[str, str]:
    """A string->string map: strings kept, other values JSON-encoded, None left out."""
    return {key: value if isinstance(value, str) else json.dumps(value, sort_keys=True)
            for key, value in info.items() if value is not None}


def _runners(header: dict[str, Any]) -> list[dict[str, Any]]:
    """The one machine of the run: ``name`` the device kind, ``type`` and ``gpu_info`` (or
    ``cpu_info``) its model name."""
    device, model = header.get("device") or "cpu", header.get("device_name") or ""
    runner: dict[str, Any] = {"name": device, "type": model}
    runner["gpu_info" if device == "cuda" else "cpu_info"] = model
    runner["extra_info"] = _strings({"driver": header.get("driver"), "cuda_version": header.get("cuda")})
    return [runner]


def _dependencies(header: dict[str, Any]) -> dict[str, dict[str, str]]:
    found = {package: {"repo": repo, "version": header[package]}
             for package, repo in _REPOS.items() if header.get(package)}
    if header.get("git_commit"):
        found["opbench"] = {"sha": header["git_commit"]}
    return found


def _metric(r: Record) -> dict[str, Any]:
    info = {
        **r.extra,
        "unit": r.unit,
        "input_shape": tritonbench_x_val(r.x_val),
        "aggregation": "p50" if r.p50 is not None else None,
        "p20": r.p20, "p80": r.p80, "n_samples": r.n_samples, "repeats": r.repeats,
        "flag": r.flag, "note": r.note,
    }
    return {"name": r.metric, "benchmark_values": [r.value], "extra_info": _strings(info)}


def to_v3(header: dict[str, Any], records: list[Record]) -> str:
    """The v3 records of a result file, as the text of a ``.json`` file for the upload action."""
    settings = _strings({key: header.get(key) for key in _RUN_SETTINGS})
    options = _strings(header.get("options") or {})
    runners, dependencies = _runners(header), _dependencies(header)
    out = [{
        "benchmark": {"name": BENCHMARK_NAME, "mode": r.mode, "dtype": r.dtype, "extra_info": settings},
        "model": {"name": r.op, "type": BENCHMARK_NAME, "backend": r.backend, "origins": [BENCHMARK_NAME],
                  "extra_info": options},
        "metric": _metric(r),
        "runners": runners,
        "dependencies": dependencies,
    } for r in exported(records)]
    return json.dumps(out, indent=1, allow_nan=False) + "\n"
