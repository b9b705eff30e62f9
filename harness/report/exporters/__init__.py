"""Export formats: format name -> a function turning a result file's header and records into the
text of the exported file.  Adding a format is one entry here plus its module and test."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.report.exporters import hud, tritonbench
from harness.report.results import Record

Exporter = Callable[[dict[str, Any], list[Record]], str]

FORMATS: dict[str, Exporter] = {
    "tritonbench-json": tritonbench.to_json,
    "tritonbench-csv": tritonbench.to_csv,
    "hud-v3": hud.to_v3,
}
