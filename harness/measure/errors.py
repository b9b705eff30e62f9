"""Error text of a failed cell for the result file, and whether the failure left the CUDA
context unusable (the one line tables show is :func:`harness.error_line.error_line`'s).

A CUDA error such as an illegal memory access is sticky: every later CUDA call in the process
fails too, so the rest of a run must go on in a fresh process.
"""

from __future__ import annotations

import torch

from harness.error_line import STICKY_ERRORS

MAX_ERROR_CHARS = 4000
"""The most of an error's text a record keeps."""


def error_text(exc: BaseException) -> str:
    """The full description of an exception for a result record (type, then its message)."""
    return f"{type(exc).__name__}: {str(exc).strip()}"[:MAX_ERROR_CHARS]


def context_lost(device: str, text: str) -> bool:
    """Whether a failure with error ``text`` left ``device``'s CUDA context unusable: its message
    names a sticky error, or the device no longer synchronizes."""
    if STICKY_ERRORS.search(text):
        return True
    if device != "cuda":
        return False
    try:
        torch.cuda.synchronize()
    except Exception:  # any failure to synchronize means the context is gone
        return True
    return False


class ContextLost(Exception):
    """The CUDA context of this process is unusable after a cell failed; the rest of the run must
    continue in a fresh process.  ``done`` lists the backends of the current shape already
    measured (the culprit included), with the speedup baseline's median when it was one of them."""

    def __init__(self, culprit: str, done: list[str], baseline_p50: float | None):
        super().__init__(f"the CUDA context was lost in cell {culprit}")
        self.culprit, self.done, self.baseline_p50 = culprit, done, baseline_p50
