"""Which stored config a Helion kernel call runs on, and what the cell's records say about it.

A call names its keys in order of preference (``kernel|dtype|bucket``: its own, then e.g. a
kernel sharing its loop nest).  The choice, first match wins:

1. the first of the keys that is stored (no note: this is the config meant for the call);
2. else (with ``borrow``) the first of them stored in the dtype of the same element size
   (:data:`SAME_SIZE_DTYPES`: fp16 runs bf16's config of its own bucket);
3. else, for each key in turn, the *nearest stored bucket* of the same kernel and dtype on the
   operator's bucket scale (:attr:`~harness.tuning.configs.ConfigStore.place`): the smallest
   distance between positions, then a bucket with the same rest (layout, rows suffix), then the
   larger position (a config for wider rows or bigger matrices keeps enough threads and tiles
   for narrower ones; the other way round it may spill); then (with ``borrow``) the same in the
   dtype of the same element size;
4. else (with ``borrow``) the same two steps in the dtype of half the element size
   (:data:`HALF_SIZE_DTYPES`: fp32 runs bf16's config), a config that may not fit: the launch
   takes stages off where shared memory runs out and runs Helion's default where it fails;
5. else Helion's default config for the bound kernel, the one ``run.py tune`` checks every
   candidate against.

A config borrowed across dtypes was timed on the other dtype's kernels; its note says whose it is.
Steps 2 to 5 come with a note for the cell's records.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.tuning.configs import BucketPlace, split_key

NOTE_PREFIX = "helion config: "

SAME_SIZE_DTYPES = {"float16": "bfloat16", "bfloat16": "float16"}
"""The dtype whose stored configs another may run on where its own lack the call's bucket: one of
the same element size, so a config's tiles, stages and shared memory stay what was tuned."""

HALF_SIZE_DTYPES = {"float32": "bfloat16"}
"""The dtype whose stored configs a dtype of twice its element size runs where neither it nor a
dtype of its own size has one, rather than Helion's default, far slower than Triton on wide fp32
rms_norm rows (``results/h200/rms_norm/NOTES.md``, "fp32 on Helion's default config")."""


@dataclass(frozen=True)
class ConfigChoice:
    """The stored key whose config a call runs on (None: Helion's default config) and the note
    that says so when it is not the call's own."""

    key: str | None
    note: str | None = None
    fallible: bool = False
    """A config of another element size, which may not compile for this dtype: the launch runs
    Helion's default config where it fails."""


def nearest_key(configs: Mapping[str, Any], key: str,
                place: Callable[[str], BucketPlace | None]) -> str | None:
    """The stored key of ``key``'s kernel and dtype whose bucket lies nearest to ``key``'s, or None."""
    kernel_name, dtype, bucket = split_key(key)
    wanted = place(bucket)
    if wanted is None:
        return None
    prefix = f"{kernel_name}|{dtype}|"
    ranked = []
    for stored in configs:
        there = place(stored.removeprefix(prefix)) if stored.startswith(prefix) else None
        if there is not None:
            ranked.append((abs(there[0] - wanted[0]), there[1] != wanted[1], -there[0], stored))
    return min(ranked)[-1] if ranked else None


def choose_config(configs: Mapping[str, Any], keys: tuple[str, ...],
                  place: Callable[[str], BucketPlace | None], borrow: bool = True) -> ConfigChoice:
    """The config for a call with ``keys`` (in order of preference) among the stored ``configs``;
    ``borrow``: whether the configs of another dtype may serve (steps 2 to 4)."""
    kernel_name, dtype, _ = split_key(keys[0])
    same = SAME_SIZE_DTYPES.get(dtype) if borrow else None
    half = HALF_SIZE_DTYPES.get(dtype) if borrow else None

    def in_dtype(other: str) -> tuple[str, ...]:
        return tuple("|".join((name, other, bucket)) for name, _, bucket in map(split_key, keys))

    def exact(candidates: tuple[str, ...]) -> str | None:
        return next((key for key in candidates if key in configs), None)

    def nearest(candidates: tuple[str, ...]) -> str | None:
        found = (nearest_key(configs, key, place) for key in candidates)
        return next((near for near in found if near is not None), None)

    def borrowed(key: str, other: str, size: str, fallible: bool = False) -> ConfigChoice:
        return ConfigChoice(key, f"{NOTE_PREFIX}{key}, the {other} config ({size}), for {keys[0]}", fallible)

    if (key := exact(keys)) is not None:
        return ConfigChoice(key)
    if same and (key := exact(in_dtype(same))) is not None:
        return borrowed(key, same, "the same element size")
    if (key := nearest(keys)) is not None:
        return ConfigChoice(key, f"{NOTE_PREFIX}nearest stored bucket {key} for {keys[0]}")
    if same and (key := nearest(in_dtype(same))) is not None:
        return borrowed(key, same, "the same element size")
    if half and (key := exact(in_dtype(half)) or nearest(in_dtype(half))) is not None:
        return borrowed(key, half, "half the element size", fallible=True)
    return ConfigChoice(None, f"{NOTE_PREFIX}Helion's default for {keys[0]} "
                              f"(no {kernel_name}|{dtype} config stored)")
