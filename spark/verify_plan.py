"""The driver's part of ``rmqd spark verify``: two Spark jobs of Python tasks, then a merge.

Job 1 reads the consume queues (groups of files) and the index files (one a task); each task
returns its problems and compact numpy columns (spark/verify_queues.py, spark/verify_index.py;
an index file in offset order returns only where each split's entries lie and the unreachable
ones: the commit-log tasks read those entries themselves). The driver concatenates them, finds
queue gaps, and cuts the units and the reachable index entries by commit-log byte range. Job 2 runs one task per commit-log split with its range's
share (spark/verify_records.py), which returns only problems and counts.

The tasks are plain Python functions over ``SparkContext.parallelize``: what crosses the JVM
is a few pickled arrays per task, never a row per record, so Spark's own CPU stays a small
fraction of the run (the earlier design's DataFrame joins cost ~8x the Python reading).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Callable, Iterable, TypeVar

import numpy as np

from spark import scan
from spark.datasource import _Options
from spark.verify_index import IndexFileResult, IndexTask, Reachable, read_index_file
from spark.verify_queues import (ProblemRow, Units, gap_problems, no_record_problems, plan_queues,
                                 queue_table, read_queue_group)
from spark.verify_records import SplitResult, SplitTask, check_split

TASKS_PER_CORE = 2
SHARED_INPUTS = True
T = TypeVar("T")
R = TypeVar("R")


@dataclass
class Findings:
    """Counts and every problem found (file, offset, check, problem)."""

    records: int = 0
    units: int = 0
    index_keys: int = 0
    index_entries: int = 0
    problems: list[ProblemRow] = field(default_factory=list)


def _job(sc, fn: Callable[[T], R], items: list[T], what: str, shared: bool = False) -> list[R]:
    """``fn`` over ``items``, one Spark task each, results in item order. ``shared``: the items
    reach the tasks as one broadcast, which each Python worker reads from the broadcast's file
    (in local mode the driver's own), instead of inside each task through the JVM."""
    if not items:
        return []
    sc.setJobDescription(f"rmqd spark verify: {what}")
    if not shared:
        return sc.parallelize(items, len(items)).map(fn).collect()
    bc = sc.broadcast(items)
    try:
        return sc.parallelize(range(len(items)), len(items)).map(partial(_item_of, fn, bc)).collect()
    finally:
        bc.destroy()


def _item_of(fn: Callable[[T], R], bc, i: int) -> R:
    return fn(bc.value[i])


def _check_splits(tasks: list[SplitTask]) -> SplitResult:
    """A task: several consecutive splits (a Spark task costs ~30 ms of scheduling here, a
    split of 128 MiB ~0.2 s of work: a few tasks per core keep both the balance and the
    overhead small)."""
    out = SplitResult()
    for t in tasks:
        r = check_split(t)
        out.records += r.records
        out.index_keys += r.index_keys
        out.problems += r.problems
    return out


def _groups(tasks: list[SplitTask], n: int) -> list[list[SplitTask]]:
    """``tasks`` in at most ``n`` runs of consecutive splits of about equal bytes."""
    total = sum(t.split.end - t.split.start for t in tasks)
    target = max(1, -(-total // max(n, 1)))
    return scan.group_by_size(tasks, lambda t: t.split.end - t.split.start, target)


def _source_task(item: tuple[str, object]) -> tuple[Units, list[ProblemRow]] | IndexFileResult:
    kind, payload = item
    if kind == "queues":
        return read_queue_group(payload)  # type: ignore[arg-type]
    return read_index_file(payload)  # type: ignore[arg-type]


def run_checks(sc, o: _Options, checks: Iterable[str]) -> Findings:
    """The record, consume-queue and index checks of the store ``o.path`` (those in ``checks``)."""
    checks = set(checks)
    root = o.path
    out = Findings()
    items: list[tuple[str, object]] = []
    if "consumequeue" in checks:
        qf, groups = plan_queues(root, o.cq_file_size, o.partition_bytes)
        items += [("queues", g) for g in groups]
    splits = scan.plan_commitlog(root, o.split_size)
    if "index" in checks:
        bounds = (np.array([sp.base + sp.start for sp in splits], np.int64),
                  np.array([sp.base + sp.end for sp in splits], np.int64))
        items += [("index", IndexTask(ref, o.slot_num, o.index_num, bounds)) for ref in scan.index_files(root)]
    sources = _job(sc, _source_task, items, "consume queues and index files")
    unit_parts = [r for (k, _p), r in zip(items, sources) if k == "queues"]
    index_parts: list[IndexFileResult] = [r for (k, _p), r in zip(items, sources) if k == "index"]

    units = table = None
    if "consumequeue" in checks:
        units = Units.concat([u for u, _p in unit_parts])
        for _u, p in unit_parts:
            out.problems += p
        out.units = len(units)
        table = queue_table(qf, units)
        out.problems += gap_problems(units, qf)
        units = units.take(np.argsort(units.clo, kind="stable"))
    reach = None
    index_from = 0
    if "index" in checks:
        for r in index_parts:
            out.problems += r.problems
        out.index_entries = sum(r.entries for r in index_parts)
        index_problems = any(r.problems for r in index_parts)
        if out.index_entries or index_problems:
            reach = Reachable.merge([r.reachable for r in index_parts if r.reachable is not None])
            index_from = min((r.min_offset for r in index_parts if r.min_offset is not None), default=0)
    in_files = [r for r in index_parts if r.reachable is None] if reach is not None else []

    covered = np.zeros(len(units) if units is not None else 0, bool)
    tasks = []
    delays = scan.delay_table(o.delay_levels)
    for i, sp in enumerate(splits):
        lo, hi = sp.base + sp.start, sp.base + sp.end
        t = SplitTask(sp, crc="records" in checks, delays=delays)
        if units is not None:
            a, b = np.searchsorted(units.clo, lo), np.searchsorted(units.clo, hi)
            covered[a:b] = True
            t.units, t.queues = units.take(slice(a, b)), table
        if reach is not None:
            a, b = np.searchsorted(reach.phy, lo), np.searchsorted(reach.phy, hi)
            t.index, t.index_from = reach.take(slice(a, b)), index_from
            t.index_slices = [x for x in (r.slice(i) for r in in_files) if x is not None]
        tasks.append(t)
    if units is not None and table is not None:
        # units pointing outside every commit-log file
        out.problems += no_record_problems(units, np.flatnonzero(~covered), table.qf)
    groups = _groups(tasks, TASKS_PER_CORE * sc.defaultParallelism)
    results: list[SplitResult] = _job(sc, _check_splits, groups, "commit log", shared=SHARED_INPUTS)
    for r in results:
        out.records += r.records
        out.index_keys += r.index_keys
        out.problems += r.problems
    return out
