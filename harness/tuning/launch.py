"""Run a Helion kernel with its stored config, never failing for want of one.

:func:`call_with_stored_config` binds a kernel to its arguments and, on the first call of each
specialization, applies the config :func:`~harness.tuning.choice.choose_config` picks (its own
bucket's, else on the GPU the same-size dtype's of that bucket, else the nearest stored bucket's,
else on the GPU a half-size dtype's, else Helion's default), with the fields the call
fixes (``fixed``, e.g. ``indexing="pointer"`` for a kernel whose tensor-descriptor loads would
be wrong) put over it; ``fixed`` is read on that first call only.  When the first launch
needs more shared memory than the GPU has (Triton's ``OutOfResources``), it is compiled again
one pipeline stage shallower (``num_stages``, then the loops' ``range_num_stages``), down to
:data:`MIN_STAGES`; a half-size dtype's config that still fails gives way to Helion's default.
Whatever the call ended up running on other than its own stored config is a note for the cell
(:mod:`harness.notes`), left again on every later call, so every cell that runs the kernel says
so; called outside a cell (from tritonbench's runner, say) the first call's notes are warnings
instead.  No search-based autotuning happens.  Imported by the kernel modules, after the device is prepared.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

import helion
from triton.runtime.errors import OutOfResources

from harness.device import triton_interpreted
from harness.error_line import STICKY_ERRORS, error_line
from harness.notes import add_note, announce_note
from harness.tuning.choice import NOTE_PREFIX, choose_config
from harness.tuning.configs import ConfigStore, load_store

MIN_STAGES = 1
"""The fewest pipeline stages a config is lowered to when it needs too much shared memory."""

_configured: weakref.WeakKeyDictionary[Any, tuple[str, ...]] = weakref.WeakKeyDictionary()
"""Each configured bound kernel and the notes its calls leave."""


def call_with_stored_config(kernel: Any, store: ConfigStore, keys: str | tuple[str, ...],
                            *args: object, fixed: Mapping[str, object] | None = None) -> Any:
    """Run Helion ``kernel`` on ``args`` with the config chosen from ``store`` for ``keys`` (a key,
    or keys in order of preference), its fields in ``fixed`` replaced by those values."""
    bound = kernel.bind(args)
    notes = _configured.get(bound)
    if notes is None:
        keys = (keys,) if isinstance(keys, str) else keys
        return _configure_and_call(bound, store, keys, args, dict(fixed or {}))
    for note in notes:
        add_note(note)
    return bound(*args)


def _configure_and_call(bound: Any, store: ConfigStore, keys: tuple[str, ...], args: tuple,
                        fixed: dict[str, object]) -> Any:
    configs = load_store(store.path)
    # Not under the interpreter: its gemm routes assume Helion's default BLOCK_K (helion_dispatch).
    choice = choose_config(configs, keys, store.place, borrow=not triton_interpreted())
    if choice.key is None:
        chosen = dict(bound.config_spec.default_config().config)
    else:
        chosen = configs[choice.key]
    key, chosen_note = choice.key or keys[0], choice.note
    config, refixed = _with_fixed(chosen, fixed, key)
    try:
        result, lowered = _call_within_shared_memory(bound, config, args, key)
    except Exception as exc:
        if not choice.fallible or _loses_the_context(exc):  # a lost CUDA context runs nothing more
            raise
        config, refixed = _with_fixed(bound.config_spec.default_config().config, fixed, keys[0])
        result, lowered = _call_within_shared_memory(bound, config, args, keys[0])
        chosen_note = (f"{NOTE_PREFIX}Helion's default for {keys[0]}: {key} failed "
                       f"({type(exc).__name__}: {error_line(str(exc))})")
    notes = tuple(note for note in (chosen_note, refixed, lowered) if note is not None)
    _configured[bound] = notes
    for note in notes:
        announce_note(note)
    return result


def _loses_the_context(exc: BaseException | None) -> bool:
    """Whether ``exc`` or an exception it was raised from or during names an error that poisons the
    CUDA context."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if STICKY_ERRORS.search(str(exc)):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def _with_fixed(chosen: Mapping[str, Any], fixed: dict[str, object],
                key: str) -> tuple[helion.Config, str | None]:
    """The config ``chosen`` (stored under ``key``) with the fields in ``fixed``, and a note naming
    those it held otherwise.  A per-access list of one value (``indexing=["pointer", ...]``)
    already holds that value."""

    def holds(name: str) -> bool:
        have, want = chosen.get(name), fixed[name]
        return have == want or (isinstance(have, list) and all(item == want for item in have))

    changed = [f"{name}={fixed[name]!r}" for name in sorted(fixed) if not holds(name)]
    note = f"{NOTE_PREFIX}{', '.join(changed)} fixed by the call over {key}" if changed else None
    return helion.Config(**{**chosen, **fixed}), note


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
