"""The run of one torchrun rank: its share of the sweeps on its GPU, and on rank 0 the gathering,
the result file and the tables (:mod:`harness.sweep.ranks` says how the ranks meet)."""

from __future__ import annotations

import argparse
import socket
from collections.abc import Callable
from typing import TextIO

import torch

from harness.cli.progress import ProgressDisplay
from harness.cli.run.output import Outputs, exit_status, print_tables, write_plot
from harness.cli.signals import Terminated, sigterm_raises
from harness.measure.ceilings import measure_ceilings
from harness.measure.records import Baseline, cell_records
from harness.metrics.cell_data import Measurement
from harness.operator import DTYPE_NAMES
from harness.report.results import Record
from harness.report.run_header import make_header, python_argv
from harness.report.table import ceilings_line
from harness.settings import RunSettings
from harness.sweep.continuation import ShapeWork, Supervision, continue_in_workers
from harness.sweep.ranks import Gatherer, Rank, RecordStore, select_gpu
from harness.sweep.shards import Unit, deal, restrict
from harness.sweep.spec import Sweep, run_plan


def _lost_records(sweeps: list[Sweep], units: list[Unit], received: set, rank: int) -> list[Record]:
    """Error records for the cells of ``units`` that rank ``rank`` never reported."""
    records = []
    for unit in units:
        sweep = sweeps[unit.sweep]
        shape = sweep.shapes[unit.shape]
        for backend in sweep.backends:
            if (sweep.op.name, sweep.mode.value, sweep.op.x_val(shape), backend) in received:
                continue
            error = f"rank {rank} stopped reporting (hung or died) before this cell finished"
            records += cell_records(sweep.op, sweep.mode, shape, backend, Measurement(), error,
                                    sweep.settings.metrics, sweep.ceilings,
                                    Baseline(sweep.speedup_baseline, sweep.op.baseline().name))
    return records


def run_ranked(args: argparse.Namespace, settings: RunSettings, sweeps: list[Sweep], rank: Rank,
               gather_timeout_s: float, data: TextIO) -> int:
    """Run this rank's share; rank 0 also gathers every rank's records and reports the run."""
    outputs = Outputs.of(args, settings.precision, sorted({s.mode.value for s in sweeps}), data)
    if rank.rank == 0:
        outputs.check_writable()
    select_gpu(settings.device)
    store = RecordStore(rank)
    shares = deal(sweeps, rank.world)
    mine = restrict(sweeps, shares[rank.rank])
    ceilings = measure_ceilings(settings.device, DTYPE_NAMES[settings.precision], settings.timer,
                                any(sweep.timed for sweep in sweeps))
    name = torch.cuda.get_device_name() if settings.device == "cuda" else socket.gethostname()
    store.publish("gpu", {"rank": rank.rank, "gpu": rank.gpu_name(settings.device), "device_name": name,
                          "ceilings_gbps": ceilings.traffic_gbps})
    for sweep in sweeps + mine:
        sweep.ceilings = ceilings
    records: list[Record] = []
    header: dict = {}

    def keep(new: list[Record]) -> None:
        records.extend(new)
        if header:
            outputs.save(header, records)

    def mark(new: list[Record]) -> None:
        for record in new:
            record.gpu = rank.gpu_name(settings.device)
        if rank.rank == 0:
            keep(new)
        else:
            store.push(new)

    if rank.rank == 0:
        header.update(make_header(settings.device, python_argv(), {
            "copy_gbps": ceilings.copy_gbps, "ceilings_gbps": ceilings.traffic_gbps,
            "peak_gbps": ceilings.peak_gbps, "peak_tflops": ceilings.peak_tflops, **settings.header_fields(),
            "world_size": rank.world, "plan": run_plan(sweeps, settings.metrics), "complete": False}))
    work = [ShapeWork(i, shape, list(sweep.backends))
            for i, sweep in enumerate(mine) for shape in sweep.shapes]
    gatherer = Gatherer(store, keep) if rank.rank == 0 else None
    supervision = Supervision(stop=store.aborted, poll=gatherer.poll if gatherer else lambda: None)
    ending = "finished"
    try:
        with sigterm_raises(), ProgressDisplay(sum(len(w.backends) for w in work),
                                               prefix=f"rank {rank.rank} ") as progress:
            continue_in_workers(mine, work, mark, progress, supervision)
        store.finish()
        if gatherer is None:
            return 0
        for lost in gatherer.finish(gather_timeout_s):
            keep(_lost_records(sweeps, shares[lost], _received(records), lost))
    except KeyboardInterrupt:
        ending = "interrupted"
    except Terminated:
        ending = "terminated"
    if gatherer is None:
        return 130 if ending == "interrupted" else 143
    gatherer.poll()
    header["gpus"] = [store.lookup("gpu", r) if store.has("gpu", r) else {"rank": r, "gpu": "unknown",
                      "device_name": "unknown", "ceilings_gbps": {}} for r in range(rank.world)]
    return _report(sweeps, records, header, outputs, ending)


def _received(records: list[Record]) -> set:
    return {(r.op, r.mode, r.x_val if isinstance(r.x_val, int) else tuple(r.x_val), r.backend)
            for r in records}


def _report(sweeps: list[Sweep], records: list[Record], header: dict, outputs: Outputs, ending: str) -> int:
    order = {s.op.name: s.backends for s in sweeps}
    records.sort(key=_run_order(sweeps))
    header["complete"] = ending == "finished"
    outputs.save(header, records)
    print_tables(records, {s.op.name: s.op.x_val_label for s in sweeps}, order, outputs)
    for gpu in header["gpus"]:
        print(f"rank {gpu['rank']}: {gpu['device_name']} {gpu['gpu']}  {ceilings_line(gpu['ceilings_gbps'])}")
    write_plot(header, records, outputs)
    outputs.print_result(header, records)
    return exit_status(records, ending, outputs)


def _run_order(sweeps: list[Sweep]) -> Callable[[Record], tuple]:
    """Records in the order a single process would have written them: sweep, shape, backend."""
    sweep_of = {(s.op.name, s.mode.value): i for i, s in enumerate(sweeps)}

    def key(record: Record) -> tuple:
        index = sweep_of[(record.op, record.mode)]
        sweep = sweeps[index]
        shapes = [sweep.op.x_val(shape) for shape in sweep.shapes]
        x_val = record.x_val if isinstance(record.x_val, int) else tuple(record.x_val)
        return (index, shapes.index(x_val), sweep.backends.index(record.backend))

    return key
