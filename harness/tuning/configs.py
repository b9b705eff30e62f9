"""Stored Helion configs: tuned once per (kernel, dtype, shape bucket) on the GPU, loaded at run time.

Each operator keeps its tuned configs in ``operators/<op>/helion_configs.json``::

    {"helion": "1.5.0", "device": "NVIDIA H200",
     "configs": {"exp_fwd|bfloat16|large": {...helion.Config fields...}}}

A :class:`ConfigStore` is that file together with the operator's bucket scale: where each of
its buckets lies, so that a call whose own bucket is not stored can take the nearest stored one
(:mod:`harness.tuning.choice`).  :mod:`harness.tuning.launch` runs a kernel with its config.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    import helion

HELION_VERSION = "1.5.0"

_stores: dict[Path, dict[str, dict[str, Any]]] = {}


@dataclass(frozen=True)
class TuningJob:
    """One stored-config slot to tune: a kernel, its key, example arguments and candidates."""

    kernel: Any
    key: str
    make_args: Callable[[], tuple[object, ...]]
    candidates: list[helion.Config]


BucketPlace = tuple[float, str]
"""Where a bucket lies on its operator's scale: a position (e.g. log2 of the row width) and the
rest of the bucket that a stand-in config should share (a layout, a rows suffix; ``""`` if none)."""


@dataclass(frozen=True)
class ConfigStore:
    """An operator's stored-config file and its bucket scale."""

    path: Path
    place: Callable[[str], BucketPlace | None]
    """Where a bucket (the part of a key after ``kernel|dtype|``) lies; None for one it does not know."""


def config_key(kernel_name: str, dtype: torch.dtype, bucket: str) -> str:
    """The key under which a config is stored: ``kernel|dtype|bucket``."""
    return f"{kernel_name}|{str(dtype).removeprefix('torch.')}|{bucket}"


def split_key(key: str) -> tuple[str, str, str]:
    """A key's kernel name, dtype and bucket (which may itself hold ``|``)."""
    kernel_name, dtype, bucket = key.split("|", 2)
    return kernel_name, dtype, bucket


def load_store(path: Path) -> dict[str, dict[str, Any]]:
    """Return the configs stored in ``path`` (cached; empty when the file does not exist)."""
    if path not in _stores:
        _stores[path] = json.loads(path.read_text())["configs"] if path.exists() else {}
    return _stores[path]


def save_store(path: Path, configs: dict[str, dict[str, Any]], device_name: str) -> None:
    """Write ``configs`` to ``path`` atomically, merged over what is stored there."""
    merged = dict(load_store(path))
    merged.update(configs)
    payload = {"helion": HELION_VERSION, "device": device_name, "configs": dict(sorted(merged.items()))}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(payload, indent=1) + "\n")
    os.replace(tmp, path)
    _stores[path] = merged
