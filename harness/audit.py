"""The audit of timed samples: what a timed call reads changes between samples, and one measured
sample, chosen at random, is kept for the check against the float64 reference of what it read.

Before every sample, outside its timed window, :data:`VARIED_ELEMENTS` elements of each tensor the
call reads get the values of other random elements of the same tensor, written through an alias
that shares the tensor's storage but not its version counter.  A backend cannot see the change
without reading its inputs: a result cached on their identity, their version counters or a few
of their elements goes stale, and one cached on their whole contents must read them all before
every call.  One measured sample (never the first) is chosen with the operating system's
randomness; before it, the previous sample's results (where they share no storage with what the
call reads: a CUDA graph's outputs, a backend's own buffer) and the allocator's free blocks are
filled with NaN, and what the call reads is copied; after its end event, the device is
synchronized and its results are copied.  When the timer is done the varied elements get their
first values back.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

VARIED_ELEMENTS = 16
"""Elements of each tensor the call reads that change before every sample."""
CHUNK = 256
"""Samples' worth of random positions drawn at once."""

Results = tuple[torch.Tensor | None, ...]
Collect = Callable[[object], tuple[Results, str | None]]
"""A timed call's return value -> the tensors its check compares (outputs, gradients), and why they
cannot be compared (None: they can); it may raise for a malformed return value."""


@dataclass
class AuditedSample:
    """What one timed call read (copies of the varied tensors, before it) and returned (copies)."""

    read: list[torch.Tensor]
    results: Results
    problem: str | None


class _Variation:
    """Moves of values between random elements of one tensor, and the way back to its first values."""

    def __init__(self, tensor: torch.Tensor):
        self.alias = torch.empty(0, dtype=tensor.dtype, device=tensor.device).set_(
            tensor.untyped_storage(), tensor.storage_offset(), tensor.shape, tensor.stride())
        self.first = tensor.detach().clone()
        self.generator = torch.Generator(device=tensor.device).manual_seed(secrets.randbits(62))
        self.drawn: list[tuple[torch.Tensor, ...]] = []
        self.pending: list[tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]] = []

    def _draw(self) -> None:
        def positions() -> tuple[torch.Tensor, ...]:
            flat = torch.randint(self.alias.numel(), (CHUNK, VARIED_ELEMENTS), generator=self.generator,
                                 device=self.alias.device)
            return torch.unravel_index(flat, self.alias.shape)

        to, source = positions(), positions()
        self.drawn.append(to)
        self.pending = [(tuple(t[i] for t in to), tuple(s[i] for s in source)) for i in range(CHUNK)]

    def step(self) -> None:
        if not self.pending:
            self._draw()
        to, source = self.pending.pop()
        with torch.no_grad():
            self.alias[to] = self.alias[source]

    def restore(self) -> None:
        with torch.no_grad():
            for to in self.drawn:
                self.alias[to] = self.first[to]


class SampleAudit:
    """Varies ``read`` before every sample a timer takes and keeps one sample of those it is
    :meth:`arm`-ed for (:class:`AuditedSample`, in :attr:`sample`).

    ``collect`` gives a call's results; ``poison_free`` NaN-fills the allocator's free blocks of the
    results' sizes; ``poison_results`` NaN-fills results that share no storage with what is read;
    ``synchronize`` waits for the device.
    """

    def __init__(self, read: Sequence[torch.Tensor], collect: Collect, poison_free: Callable[[], None],
                 poison_results: Callable[[Results, Sequence[torch.Tensor]], None],
                 synchronize: Callable[[], None]):
        self.read = list(read)
        self.variations = [_Variation(t) for t in self.read if t.is_floating_point() and t.numel() > 1]
        self.collect, self.poison_free, self.poison_results = collect, poison_free, poison_results
        self.synchronize = synchronize
        self.countdown: int | None = None
        self.previous: Results = ()
        self.seen: list[torch.Tensor] = []
        self.sample: AuditedSample | None = None

    def arm(self, count: int) -> None:
        """Keep one of the next ``count`` samples (at least 2), chosen at random, not the first."""
        self.countdown = 1 + secrets.randbelow(count - 1)

    def before(self) -> None:
        """Before a sample's call, outside its timed window."""
        for variation in self.variations:
            variation.step()
        if self.countdown == 0:
            self.poison_results(self.previous, self.read)
            self.previous = ()
            self.poison_free()
            self.seen = [t.detach().clone() for t in self.read]

    def after(self, result: object) -> None:
        """After a sample's end event, with what its call returned."""
        if self.countdown is None:
            return
        if self.countdown == 1:
            self.previous = self.collect(result)[0]
        elif self.countdown == 0:
            self.synchronize()
            results, problem = self.collect(result)
            copies = tuple(None if r is None else r.detach().clone() for r in results)
            self.sample = AuditedSample(self.seen, copies, problem)
            self.synchronize()
        self.countdown -= 1

    def restore(self) -> None:
        """Give the varied elements their first values back."""
        for variation in self.variations:
            variation.restore()
