"""Run a Helion kernel with its stored config, never failing for want of one.

:func:`call_with_stored_config` binds a kernel to its arguments and, on the first call of each
specialization, applies the config :func:`~harness.tuning.choice.choose_config` picks (its own
bucket's, else the nearest stored bucket's, else Helion's default).  When the first launch
needs more shared memory than the GPU has (Triton's ``OutOfResources``), it is compiled again
with one pipeline stage fewer, down to :data:`MIN_STAGES`.  Whatever the call ended up running
on other than its own stored config is a note for the cell (:mod:`harness.measure.notes`),
left again on every later call, so every cell that runs the kernel says so.  No search-based
autotuning happens.  Imported by the kernel modules, after the device is prepared.
"""

from __future__ import annotations

import weakref
from typing import Any

import helion
from triton.runtime.errors import OutOfResources

from harness.measure.notes import add_note
from harness.tuning.choice import NOTE_PREFIX, choose_config
from harness.tuning.configs import ConfigStore, load_store

MIN_STAGES = 1
"""The fewest pipeline stages a config is lowered to when it needs too much shared memory."""

_configured: weakref.WeakKeyDictionary[Any, tuple[str, ...]] = weakref.WeakKeyDictionary()
"""Each configured bound kernel and the notes its calls leave."""


def call_with_stored_config(kernel: Any, store: ConfigStore, keys: str | tuple[str, ...],
                            *args: object) -> Any:
    """Run Helion ``kernel`` on ``args`` with the config chosen from ``store`` for ``keys`` (a key,
    or keys in order of preference)."""
    bound = kernel.bind(args)
    notes = _configured.get(bound)
    if notes is None:
        return _configure_and_call(bound, store, (keys,) if isinstance(keys, str) else keys, args)
    for note in notes:
        add_note(note)
    return bound(*args)


def _configure_and_call(bound: Any, store: ConfigStore, keys: tuple[str, ...], args: tuple) -> Any:
    configs = load_store(store.path)
    choice = choose_config(configs, keys, store.place)
    if choice.key is None:
        config = bound.config_spec.default_config()
    else:
        config = helion.Config(**configs[choice.key])
    result, lowered = _call_within_shared_memory(bound, config, args, choice.key or keys[0])
    notes = tuple(note for note in (choice.note, lowered) if note is not None)
    _configured[bound] = notes
    for note in notes:
        add_note(note)
    return result


def _call_within_shared_memory(bound: Any, config: helion.Config, args: tuple,
                               key: str) -> tuple[Any, str | None]:
    """Set ``config`` on ``bound`` and call it; while the launch runs out of shared memory, again
    with one stage fewer (down to :data:`MIN_STAGES`).  Returns the result and, when stages were
    taken off, a note saying how many and why (``key`` names the config)."""
    first_stages, error = config.num_stages, None
    while True:
        try:
            bound.set_config(config)
            result = bound(*args)
        except OutOfResources as exc:
            if exc.name != "shared memory" or config.num_stages <= MIN_STAGES:
                raise
            error = error or exc
            config = helion.Config(**{**config.config, "num_stages": config.num_stages - 1})
            continue
        if error is None:
            return result, None
        return result, (f"{NOTE_PREFIX}num_stages {first_stages} -> {config.num_stages} for {key} after "
                        f"OutOfResources (shared memory: {error.required} bytes needed, {error.limit} "
                        "available)")
