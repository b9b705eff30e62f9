"""The one line of a record's error text that says what went wrong, for tables, verdicts and
messages, and the words that text is read by: the note on the cell that lost the CUDA context,
and the messages of errors that poison it.
"""

from __future__ import annotations

import re

CONTEXT_LOST_NOTE = "(the CUDA context was lost: the rest of the run went on in a fresh process)"
"""Appended to the error of the cell whose failure poisoned the CUDA context."""

STICKY_ERRORS = re.compile(
    r"illegal memory access|unspecified launch failure|device-side assert|illegal instruction|"
    r"misaligned address|an illegal address|cudaErrorLaunchFailure|cudaErrorIllegalAddress|"
    r"context is destroyed|uncorrectable ECC",
    re.IGNORECASE,
)
"""Messages of errors that poison the CUDA context."""

_BOILERPLATE = re.compile(
    r"CUDA kernel errors might be asynchronously reported|For debugging consider passing|"
    r"Compile with `?TORCH_USE_CUDA_DSA|Search for `cuda|Traceback \(most recent call last\)|"
    r"^File \"|^During handling of the above exception|^The above exception was the direct cause|"
    r"^at \d+:\d+:?$|^\^+$",
)
_COMPILER_AT = re.compile(r"(^|: )at \d+:\d+:?$")
"""The line before the source of a Triton compile error; the message follows the caret under it."""
_EXCEPTION_LINE = re.compile(r"^[\w.]*(Error|Exception|Exit|Interrupt)\b.*")


def error_line(text: str | None) -> str:
    """The one line of an error's text that says what went wrong (and, for the culprit of a lost
    CUDA context, :data:`CONTEXT_LOST_NOTE`).

    The message after the caret of a compiler error (Triton's ``at 4:33:`` is followed by the
    source and a caret; a caret under a Python traceback's frame is not one), else the last line
    naming a CUDA error that poisons the context (a dying worker's ``what(): CUDA error: ...``
    after a harmless warning), else the last line naming an exception, else the first line that
    is not boilerplate (CUDA's advice on debugging, traceback frames).
    """
    if text and CONTEXT_LOST_NOTE in text:
        return f"{error_line(text.replace(CONTEXT_LOST_NOTE, ''))} {CONTEXT_LOST_NOTE}"
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return "no message"
    carets = [i for i, line in enumerate(lines) if re.fullmatch(r"\^+", line)
              and i + 1 < len(lines) and any(_COMPILER_AT.search(before) for before in lines[:i])
              and not _BOILERPLATE.search(lines[i + 1])]
    if carets:
        return _prefixed(lines, lines[carets[-1] + 1])
    meaningful = [line for line in lines if not _BOILERPLATE.search(line)]
    sticky = [line for line in meaningful if STICKY_ERRORS.search(line)]
    if sticky:
        return sticky[-1][:300]
    exceptions = [line for line in meaningful if _EXCEPTION_LINE.match(line)]
    if exceptions:
        return exceptions[-1][:300]
    return (meaningful or lines)[0][:300]


def _prefixed(lines: list[str], message: str) -> str:
    """``message`` with the exception type of the first line, when the first line names one."""
    kind = lines[0].split(":", 1)[0] if _EXCEPTION_LINE.match(lines[0]) else ""
    return (f"{kind}: {message}" if kind and not message.startswith(kind) else message)[:300]
