"""A digest of the code a run imports, recorded in its result file's header beside the git commit.

The commit names what the checkout's history says; the digest names what its files hold, so a run
made where the history is stale or absent (a copied tree whose ``.git`` is an earlier one) can
still be matched to the commit it ran: check that commit out and compare ``source_digest()``.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("run.py", "harness", "operators")
"""The files and folders whose ``*.py`` and ``*.json`` files are hashed, relative to the repository."""
SUFFIXES = (".py", ".json")


def source_files(root: Path = ROOT) -> list[Path]:
    """The hashed files under ``root`` (through linked folders too), sorted by their path relative to it."""
    files = []
    for name in SOURCES:
        path = root / name
        if path.is_file():
            files.append(path)
            continue
        for folder, subfolders, names in os.walk(path, followlinks=True):
            subfolders[:] = [d for d in subfolders if d != "__pycache__"]
            files += [Path(folder) / f for f in names if Path(f).suffix in SUFFIXES]
    return sorted(files, key=lambda f: f.relative_to(root).as_posix())


def source_digest(root: Path = ROOT) -> str:
    """SHA-256 over each source file's relative path and bytes, in path order (hex, 64 digits)."""
    digest = hashlib.sha256()
    for path in source_files(root):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()
