"""Run a Helion kernel with its stored config, never failing for want of one.

:func:`call_with_stored_config` binds a kernel to its arguments and, on the first call of each
specialization, applies the config :func:`~harness.tuning.choice.choose_config` picks (its own
bucket's, else the nearest stored bucket's, else Helion's default).  When the first launch
needs more shared memory than the GPU has (Triton's ``OutOfResources``), it is compiled again
one pipeline stage shallower (``num_stages``, then the loops' ``range_num_stages``), down to
:data:`MIN_STAGES`.  Whatever the call ended up running
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
    one pipeline stage shallower (:func:`_one_stage_fewer`).  Returns the result and, when stages
    were taken off, a note saying which and why (``key`` names the config)."""
    first, error = config, None
    while True:
        try:
            bound.set_config(config)
            result = bound(*args)
        except OutOfResources as exc:
            shallower = _one_stage_fewer(config) if exc.name == "shared memory" else None
            if shallower is None:
                raise
            config, error = shallower, error or exc
            continue
        if error is None:
            return result, None
        changes = ", ".join(f"{name} {_stages(first)[name]} -> {after}"
                            for name, after in _stages(config).items() if after != _stages(first)[name])
        return result, (f"{NOTE_PREFIX}{changes} for {key} after OutOfResources (shared memory: "
                        f"{error.required} bytes needed, {error.limit} available)")


def _stages(config: helion.Config) -> dict[str, object]:
    return {"num_stages": config.num_stages, "range_num_stages": config.config.get("range_num_stages")}


def _one_stage_fewer(config: helion.Config) -> helion.Config | None:
    """``config`` one stage shallower: ``num_stages`` first, then the deepest loop's
    ``range_num_stages``; None when every stage count is down to :data:`MIN_STAGES`."""
    fields = dict(config.config)
    if config.num_stages > MIN_STAGES:
        return helion.Config(**{**fields, "num_stages": config.num_stages - 1})
    loops = list(fields.get("range_num_stages") or [])
    deepest = max(range(len(loops)), key=lambda i: loops[i] or 0, default=None)
    if deepest is None or (loops[deepest] or 0) <= MIN_STAGES:
        return None
    loops[deepest] -= 1
    return helion.Config(**{**fields, "range_num_stages": loops})
