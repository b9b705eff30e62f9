"""Merging the result files of disjoint parts of one run (``--shard K/N`` files, torchrun ranks).

The parts must come from the same code and settings: the same commit, versions, GPU model,
timer, repeats, tolerances, ``--isolate``, ``--parallel-compile``, precision, seed and operator
options; every part must have finished; ``--shard`` parts must share their plan (what the
command set out to measure, before the shard took its share) and be each of ``1/N`` .. ``N/N``
of one N exactly once; and no cell may be in two parts (separate runs of disjoint shapes
merge).  The merged header keeps the first part's fields (but a split file's ``split``:
:mod:`harness.report.split`) and lists every part's shard and GPUs; the records are put in the
order of the run's plan, as one unsharded run writes them (:func:`in_plan_order`).
"""

from __future__ import annotations

from typing import Any

from harness.report.results import Record, describe_cell

SAME = ("git_commit", "source_digest", "device_name", "torch", "triton", "helion", "python", "timer",
        "repeats", "tolerance", "isolate", "precision", "seed", "options", "parallel_compile")
"""Header fields every part of one run must share."""


class MergeError(ValueError):
    """Parts that cannot be merged; the message names the part and why."""


def merge_parts(parts: list[tuple[str, dict[str, Any], list[Record]]]) -> tuple[dict[str, Any], list[Record]]:
    """One header and the union of the records of ``parts`` (name, header, records)."""
    if not parts:
        raise MergeError("nothing to merge")
    first_name, first, _ = parts[0]
    for name, header, _ in parts[1:]:
        for field in SAME:
            if header.get(field) != first.get(field):
                raise MergeError(f"{name} and {first_name} differ in {field}: "
                                 f"{header.get(field)!r} vs {first.get(field)!r}")
    for name, header, _ in parts:
        if header.get("complete") is False:
            raise MergeError(f"{name} is a partial run (stopped before it finished): rerun that part")
    shards = _shards(parts)
    if any(shard is not None for shard in shards):
        for name, header, _ in parts[1:]:
            if header.get("plan") != first.get("plan"):
                raise MergeError(f"{name} and {first_name} are shards of different plans (the shapes, "
                                 "backends, metrics or baseline their command set out to measure)")
    _check_shards(shards)
    seen: dict[tuple, str] = {}
    records: list[Record] = []
    for name, _, part in parts:
        for record in part:
            key = (record.cell(), record.metric)
            if key in seen:
                raise MergeError(f"{name} and {seen[key]} both hold {describe_cell(record)}")
            seen[key] = name
            records.append(record)
    header = {**first, "shards": shards,
              "gpus": [gpu for _, h, _ in parts for gpu in h.get("gpus", [])]}
    header.pop("shard", None)
    header.pop("split", None)
    return header, in_plan_order(records, first.get("plan"))


def in_plan_order(records: list[Record], plan: Any) -> list[Record]:
    """``records`` in the order their run's ``plan`` swept them (its sweeps, then each sweep's
    shapes), as one unsharded run writes them; records the plan does not place keep their order, last."""
    sweeps = plan.get("sweeps") if isinstance(plan, dict) else None
    if not isinstance(sweeps, list):
        return records
    places: dict[tuple, tuple[int, int]] = {}
    for i, sweep in enumerate(sweeps):
        for j, shape in enumerate(sweep.get("shapes", []) if isinstance(sweep, dict) else []):
            places.setdefault((sweep.get("op"), sweep.get("mode"), tuple(shape)), (i, j))
    unplaced = (len(sweeps), 0)
    return sorted(records, key=lambda r: places.get((r.op, r.mode, r.cell()[3]), unplaced))


def _shards(parts: list[tuple[str, dict[str, Any], list[Record]]]) -> list[str | None]:
    """Every part's shard (a merged file: its parts' shards), once for the pieces a split cut
    from one file (they share its shards)."""
    shards: list[str | None] = []
    split_sources: set[tuple] = set()
    for name, header, _ in parts:
        own = header.get("shards") if header.get("shards") is not None else [header.get("shard")]
        if not isinstance(own, list) or not all(s is None or isinstance(s, str) for s in own):
            raise MergeError(f"{name}: malformed shards {own!r}")
        if header.get("split") is not None:
            if tuple(own) in split_sources:
                continue
            split_sources.add(tuple(own))
        shards += own
    return shards


def _check_shards(shards: list[str | None]) -> None:
    """Refuse shards that are not each of 1/N .. N/N of one N exactly once (None: not a shard)."""
    given = [shard for shard in shards if shard is not None]
    if not given:
        return
    if len(given) < len(shards):
        raise MergeError("only some parts are --shard parts: merge the shards of one run only")
    try:
        split = [tuple(int(v) for v in shard.split("/")) for shard in given]
        if any(len(s) != 2 or not 1 <= s[0] <= s[1] for s in split):
            raise ValueError
    except ValueError as exc:
        raise MergeError(f"malformed shards in the parts' headers: {', '.join(given)}") from exc
    counts = {parts for _, parts in split}
    if len(counts) > 1:
        raise MergeError(f"shards of different counts: {', '.join(given)}")
    (parts,) = counts
    missing = sorted(set(range(1, parts + 1)) - {part for part, _ in split})
    if missing or len(split) != parts:
        raise MergeError(f"shards {', '.join(given)} are not each of 1/{parts} .. {parts}/{parts} once"
                         + (f" (missing {', '.join(f'{k}/{parts}' for k in missing)})" if missing else ""))
