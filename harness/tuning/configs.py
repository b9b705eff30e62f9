"""Stored Helion configs: tuned once per (kernel, dtype, shape bucket) on the GPU, loaded at run time.

Each operator keeps its tuned configs in ``operators/<op>/helion_configs.json``::

    {"helion": "1.5.0", "device": "NVIDIA H200",
     "configs": {"exp_fwd|bfloat16|large": {...helion.Config fields...}}}

:func:`call_with_stored_config` binds a Helion kernel to its arguments, applies the stored
config for the key (compiling it once per specialization) and runs it.  A call may name
fallback keys after its own (e.g. a kernel sharing another's loop nest): the first stored one
wins.  No search-based autotuning happens during a benchmark.  Under Triton's CPU interpreter
the same stored config runs when there is one (its large tiles keep the interpreter fast),
else Helion's default config.
"""

from __future__ import annotations

import json
import os
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    import helion

HELION_VERSION = "1.5.0"

_configured: weakref.WeakSet = weakref.WeakSet()
_stores: dict[Path, dict[str, dict[str, Any]]] = {}


@dataclass(frozen=True)
class TuningJob:
    """One stored-config slot to tune: a kernel, its key, example arguments and candidates."""

    kernel: Any
    key: str
    make_args: Callable[[], tuple[object, ...]]
    candidates: list[helion.Config]


class MissingConfigError(LookupError):
    """No stored config matches a kernel call on the GPU."""


def config_key(kernel_name: str, dtype: torch.dtype, bucket: str) -> str:
    """The key under which a config is stored: ``kernel|dtype|bucket``."""
    return f"{kernel_name}|{str(dtype).removeprefix('torch.')}|{bucket}"


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


def _as_keys(keys: str | tuple[str, ...]) -> tuple[str, ...]:
    return (keys,) if isinstance(keys, str) else keys


def first_stored_key(configs: Mapping[str, Any], keys: str | tuple[str, ...]) -> str | None:
    """The first of ``keys`` (a key, or keys in order of preference) present in ``configs``."""
    return next((key for key in _as_keys(keys) if key in configs), None)


def stored_config(path: Path, keys: str | tuple[str, ...]) -> helion.Config:
    """The config stored under the first stored of ``keys``; raises :class:`MissingConfigError`
    naming the first (preferred) key and the fix when none is stored."""
    configs = load_store(path)
    key = first_stored_key(configs, keys)
    if key is None:
        raise MissingConfigError(
            f"no stored Helion config for {_as_keys(keys)[0]} in {path.name}; "
            "run `python run.py tune --op <op>` on this GPU"
        )
    import helion  # imported when a kernel first runs, after the device is prepared (harness.device)

    return helion.Config(**configs[key])


def call_with_stored_config(kernel: Any, store: Path, keys: str | tuple[str, ...],
                            *args: object) -> Any:
    """Run Helion ``kernel`` on ``args`` with the config stored under the first stored of
    ``keys`` (a key, or keys in order of preference).

    Interpreted (CPU) runs fall back to Helion's default config when none is stored.
    """
    bound = kernel.bind(args)
    if bound not in _configured:
        interpreted = os.environ.get("TRITON_INTERPRET") == "1"
        if interpreted and first_stored_key(load_store(store), keys) is None:
            bound.set_config(bound.config_spec.default_config())
        else:
            bound.set_config(stored_config(store, keys))
        _configured.add(bound)
    return bound(*args)
