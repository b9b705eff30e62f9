"""One sweep over every GPU: the ranks of ``torchrun --nproc-per-node N run.py ...``.

Each rank takes its GPU (``LOCAL_RANK``) and its share of the run (:func:`harness.sweep.shards.deal`),
measures that GPU's ceilings, and runs its cells in a child worker process it supervises
(:mod:`harness.sweep.continuation`), so a crash or a poisoned context in a kernel costs that
cell, never the rank.  Ranks hand their records to rank 0 through torch.distributed's key-value
store (torchrun's own when it provides one, so it outlives the workers); rank 0 gathers them
as they come, writes the one result file (its header names every GPU) and prints the tables.
A rank that stops reporting for ``gather_timeout_s`` is given up on: its cells not yet received
become errors, and it is told to stop.  torchrun itself stops every rank when one *rank*
process dies (its fail-fast policy); what rank 0 had received is kept.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from harness.report.results import Record

PREFIX = "opbench/"


@dataclass(frozen=True)
class Rank:
    """This process's place among torchrun's workers."""

    rank: int
    world: int
    local_rank: int

    @classmethod
    def from_env(cls) -> Rank | None:
        """The rank torchrun (or another launcher setting ``RANK`` and ``WORLD_SIZE``) gave this
        process, or None for a plain run."""
        if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
            return None
        return cls(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]),
                   int(os.environ.get("LOCAL_RANK", os.environ["RANK"])))

    def gpu_name(self, device: str) -> str:
        """How records name the device a cell ran on: ``host/cuda:3`` (or ``host/cpu``)."""
        where = f"cuda:{self.local_rank}" if device == "cuda" else "cpu"
        return f"{socket.gethostname()}/{where}"


def select_gpu(device: str) -> None:
    """Make ``LOCAL_RANK``'s GPU this process's current one (no-op off CUDA or outside torchrun)."""
    if device == "cuda" and "LOCAL_RANK" in os.environ:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))


class RecordStore:
    """Records from every rank, through a torch.distributed TCP store."""

    def __init__(self, rank: Rank, timeout_s: float = 3600.0):
        self.rank = rank
        agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
        self.store = dist.TCPStore(os.environ.get("MASTER_ADDR", "127.0.0.1"), int(os.environ["MASTER_PORT"]),
                                   None if agent else rank.world, is_master=not agent and rank.rank == 0,
                                   timeout=dt.timedelta(seconds=timeout_s))
        self.sent = 0
        self.read = [0] * rank.world

    def _key(self, *parts: object) -> str:
        return PREFIX + "/".join(map(str, parts))

    def publish(self, name: str, value: Any) -> None:
        """Set ``name`` to ``value`` (JSON) for this rank."""
        self.store.set(self._key(name, self.rank.rank), json.dumps(value))

    def has(self, name: str, rank: int) -> bool:
        """Whether ``rank`` has set ``name``."""
        return self.store.check([self._key(name, rank)])

    def lookup(self, name: str, rank: int) -> Any:
        """``rank``'s value of ``name`` (blocks until it is set)."""
        return json.loads(self.store.get(self._key(name, rank)))

    def push(self, records: list[Record]) -> None:
        """Hand a finished cell's records to rank 0."""
        self.store.set(self._key("records", self.rank.rank, self.sent),
                       json.dumps([dataclasses.asdict(r) for r in records]))
        self.sent += 1
        self.store.add(self._key("sent", self.rank.rank), 1)

    def finish(self) -> None:
        self.store.set(self._key("done", self.rank.rank), "1")

    def done(self, rank: int) -> bool:
        return self.store.check([self._key("done", rank)])

    def new_records(self, rank: int) -> list[Record]:
        """The records ``rank`` pushed since the last call."""
        available = self.store.add(self._key("sent", rank), 0)
        records = []
        while self.read[rank] < available:
            batch = json.loads(self.store.get(self._key("records", rank, self.read[rank])))
            records += [Record(**r) for r in batch]
            self.read[rank] += 1
        return records

    def abort(self, rank: int) -> None:
        """Tell ``rank`` to stop (rank 0 gave up on it)."""
        self.store.set(self._key("abort", rank), "1")

    def aborted(self) -> bool:
        return self.store.check([self._key("abort", self.rank.rank)])


class Gatherer:
    """On rank 0: passes every other rank's records to ``sink`` as they arrive."""

    def __init__(self, store: RecordStore, sink: Callable[[list[Record]], None]):
        self.store, self.sink = store, sink
        self.waiting = list(range(1, store.rank.world))
        self.last = {r: time.monotonic() for r in self.waiting}
        self.given_up: list[int] = []

    def poll(self) -> None:
        """Take whatever the other ranks pushed since the last poll."""
        for rank in list(self.waiting):
            finished = self.store.done(rank)
            if records := self.store.new_records(rank):
                self.sink(records)
                self.last[rank] = time.monotonic()
            if finished:
                self.waiting.remove(rank)

    def finish(self, timeout_s: float) -> list[int]:
        """Poll until every rank is done, giving up on (and stopping) a rank silent for
        ``timeout_s``; the ranks given up on."""
        while self.waiting:
            self.poll()
            for rank in [r for r in self.waiting if time.monotonic() - self.last[r] > timeout_s]:
                self.store.abort(rank)
                self.waiting.remove(rank)
                self.given_up.append(rank)
            if self.waiting:
                time.sleep(0.2)
        return self.given_up
