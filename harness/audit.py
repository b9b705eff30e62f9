"""The audit of timed samples: what a timed call reads changes between samples, and one sample,
chosen at random, is kept for the check against the float64 reference of what it read.

Before every call a timer makes (its samples, and its untimed calls), outside any timed window
and alike for every call:

- :data:`VARIED_ELEMENTS` random elements of each floating-point tensor the call reads get the
  values of other random elements of its first values, written through :func:`silent_alias` (the
  tensor's storage, not its version counter).  A backend cannot see the change without reading
  its inputs: a result cached on their identity, their version counters or a few of their
  elements goes stale, and one cached on their whole contents must read them all every call.
- The previous call's results (where they share no storage with what the call reads: a CUDA
  graph's outputs, a backend's own buffer) and the allocator's free blocks of the results' sizes
  are filled with NaN: every call must write all of its results.

After every call the device is synchronized and its results are copied.  One sample of those the
timer arms the audit for (never the first) is chosen with the operating system's randomness, and
its copies are kept.  When the timer is done, what that call read is rebuilt from the first values
and the moves, and the varied elements get their first values back.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

VARIED_ELEMENTS = 16
"""Elements of each tensor the call reads that change before every call."""
CHUNK = 256
"""Samples' worth of random positions drawn at once."""

Results = tuple[torch.Tensor | None, ...]
Collect = Callable[[object], tuple[Results, str | None]]
"""A timed call's return value -> the tensors its check compares (outputs, gradients), and why they
cannot be compared (None: they can); it may raise for a malformed return value."""


def silent_alias(tensor: torch.Tensor) -> torch.Tensor:
    """A tensor over ``tensor``'s storage, with its offset, shape and strides, whose writes leave
    ``tensor``'s version counter (what autograd and a cache keyed on it read) as it was."""
    return torch.empty(0, dtype=tensor.dtype, device=tensor.device).set_(
        tensor.untyped_storage(), tensor.storage_offset(), tensor.shape, tensor.stride())


class CallAudit(Protocol):
    """What a timer does around every call it makes (:class:`SampleAudit`, or :data:`NO_AUDIT`)."""

    def arm(self, count: int) -> None:
        """Keep one of the next ``count`` samples (at least 2)."""

    def before(self) -> None:
        """Before a call, outside any timed window."""

    def after(self, result: object) -> None:
        """After a call, with what it returned."""


class _NoAudit:
    """The audit of a timing that checks nothing (a probe's, the tuner's): every hook does nothing."""

    def arm(self, count: int) -> None:
        pass

    def before(self) -> None:
        pass

    def after(self, result: object) -> None:
        pass


NO_AUDIT: CallAudit = _NoAudit()


@dataclass
class AuditedSample:
    """What one timed call read (the read tensors' values then) and returned (copies)."""

    read: list[torch.Tensor]
    results: Results
    problem: str | None


class _Variation:
    """Moves of first values to random elements of one tensor, and the way back to its first values."""

    def __init__(self, tensor: torch.Tensor):
        self.alias = silent_alias(tensor)
        self.first = tensor.detach().clone()
        self.generator = torch.Generator(device=tensor.device).manual_seed(secrets.randbits(62))
        self.to: list[torch.Tensor] = []
        self.source: list[torch.Tensor] = []
        """Flat positions, a (CHUNK, VARIED_ELEMENTS) tensor a chunk of steps."""
        self.indices: list[tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]] = []
        self.steps = 0

    def _draw(self) -> None:
        """Positions for CHUNK steps; a position drawn twice in one step gets one source for both, so
        that whichever write lands, the value is the one :meth:`state` rebuilds."""
        to, source = (torch.randint(self.alias.numel(), (CHUNK, VARIED_ELEMENTS), generator=self.generator,
                                    device=self.alias.device) for _ in range(2))
        same = to.unsqueeze(2) == to.unsqueeze(1)
        last = (same * torch.arange(VARIED_ELEMENTS, device=to.device)).amax(2)
        self.to.append(to)
        self.source.append(source.gather(1, last))
        shape = self.alias.shape
        self.indices.append((torch.unravel_index(self.to[-1], shape),
                             torch.unravel_index(self.source[-1], shape)))

    def step(self) -> None:
        chunk, row = divmod(self.steps, CHUNK)
        if chunk == len(self.to):
            self._draw()
        to, source = self.indices[chunk]
        with torch.no_grad():
            self.alias[tuple(t[row] for t in to)] = self.first[tuple(s[row] for s in source)]
        self.steps += 1

    def state(self, steps: int) -> torch.Tensor:
        """The tensor's values after its first ``steps`` steps (contiguous): each moved element holds
        the first value its last move gave it."""
        first = self.first.contiguous().view(-1)
        values = first.clone()
        if steps:
            to = torch.cat([t.view(-1) for t in self.to])[:steps * VARIED_ELEMENTS]
            source = torch.cat([s.view(-1) for s in self.source])[:steps * VARIED_ELEMENTS]
            moved, which = torch.unique(to, return_inverse=True)
            order = torch.arange(to.numel(), device=to.device)
            last = torch.full_like(moved, -1).scatter_reduce(0, which, order, "amax")
            values[moved] = first[source[last]]
        return values.view(self.first.shape)

    def restore(self) -> None:
        with torch.no_grad():
            for to, _ in self.indices:
                self.alias[to] = self.first[to]


class SampleAudit:
    """Varies ``read`` and poisons before every call a timer makes, copies every call's results
    after it, and keeps one sample's of those it is :meth:`arm`-ed for (:meth:`end` gives it).

    ``collect`` gives a call's results; ``poison_free`` NaN-fills the allocator's free blocks of the
    results' sizes; ``poison_results`` NaN-fills results that share no storage with what is read;
    ``synchronize`` waits for the device.  Every call goes through :meth:`before` and
    :meth:`after` alike (the timer's untimed calls too), so none stands out by its work or its
    memory: the results' copies go into one of two sets allocated after the first call, and the
    audited sample's set is swapped out rather than copied again.
    """

    def __init__(self, read: Sequence[torch.Tensor], collect: Collect, poison_free: Callable[[], None],
                 poison_results: Callable[[Results, Sequence[torch.Tensor]], None],
                 synchronize: Callable[[], None]):
        self.read = list(read)
        self.variations = {i: _Variation(t) for i, t in enumerate(self.read)
                           if t.is_floating_point() and t.numel() > 1}
        self.collect, self.poison_free, self.poison_results = collect, poison_free, poison_results
        self.synchronize = synchronize
        self.countdown: int | None = None
        self.previous: Results = ()
        self.steps: dict[int, int] = {}
        self.audited_steps: dict[int, int] | None = None
        self.copies: Results | None = None
        self.kept: tuple[Results, str | None] | None = None
        self.spare: Results = ()

    def arm(self, count: int) -> None:
        """Keep one of the next ``count`` samples (at least 2), chosen at random, not the first."""
        self.countdown = 1 + secrets.randbelow(count - 1)

    def before(self) -> None:
        """Before a call, outside any timed window."""
        for variation in self.variations.values():
            variation.step()
        self.poison_results(self.previous, self.read)
        self.previous = ()
        self.poison_free()
        self.steps = {i: variation.steps for i, variation in self.variations.items()}

    def after(self, result: object) -> None:
        """After a call (a sample's: after its end event), with what it returned."""
        results, problem = self.collect(result)
        if self.copies is None:
            self.copies = tuple(None if r is None else torch.empty_like(r) for r in results)
            self.spare = tuple(None if r is None else torch.empty_like(r) for r in results)
        with torch.no_grad():
            for copy, r in zip(self.copies, results, strict=True):
                if copy is not None and r is not None:
                    copy.copy_(r.detach())
        if self.countdown == 0:
            self.audited_steps = self.steps
            self.kept = (self.copies, problem)
            self.copies, self.spare = self.spare, self.copies
        self.synchronize()
        self.previous = results
        if self.countdown is not None:
            self.countdown -= 1

    def end(self) -> AuditedSample | None:
        """After the timer: the kept sample, with what it read rebuilt; the last results are poisoned
        (a later call must write its own) and the varied elements get their first values back."""
        self.poison_results(self.previous, self.read)
        self.previous = ()
        sample = None
        if self.audited_steps is not None and self.kept is not None:
            read = [self.variations[i].state(self.audited_steps[i]) if i in self.variations
                    else t.detach().clone() for i, t in enumerate(self.read)]
            sample = AuditedSample(read, *self.kept)
        for variation in self.variations.values():
            variation.restore()
        return sample
