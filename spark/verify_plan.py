"""The driver's part of ``rmqd spark verify``: Spark jobs of Python tasks, then a merge.

First one job (_one_job) of three kinds of task: consume-queue groups, index files (one a
task) and commit-log splits. A commit-log task reads the units and index entries pointing into
its byte range straight from the files (binary search in each: spark/verify_queues.py
own_units, spark/verify_index.py own_index_entries), assuming what dispatch writes: each queue
file's written units one stretch in offset order, each index file in offset order with every
entry reachable. The queue and index tasks run their checks and return where each split's units
and entries lie; the driver compares that with what each commit-log task read. Where the
assumption failed (a damaged store), they differ, and the two jobs below run instead, so the
findings are always theirs.

The two jobs (_two_jobs): job 1 reads the consume queues and the index files; each task returns
its problems and compact numpy columns (an index file in offset order returns only where each
split's entries lie and the unreachable ones: the commit-log tasks read those entries
themselves). The driver concatenates them, finds queue gaps, and cuts the units and the
reachable index entries by commit-log byte range. Job 2 runs one task per commit-log split with
its range's share (spark/verify_records.py), which returns only problems and counts.

The tasks are plain Python functions over ``SparkContext.parallelize``: what crosses the JVM
is a few pickled arrays per task, never a row per record, so Spark's own CPU stays a small
fraction of the run (the earlier design's DataFrame joins cost ~8x the Python reading).
"""
from __future__ import annotations

import gc
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Callable, Iterable, TypeVar

import numpy as np

from rmqd.spark import scan
from rmqd.spark.datasource import _Options
from rmqd.spark.verify_index import IndexFileResult, IndexTask, Reachable, read_index_file
from rmqd.spark.verify_queues import (ProblemRow, QueueFiles, QueueGroup, QueueSummary, Units, file_gap_problems,
                                 gap_problems, no_record_problems, plan_queues, queue_table, read_queue_group,
                                 summarize_queue_group)
from rmqd.spark.verify_records import OwnInputs, SplitResult, SplitTask, check_split

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
        return sc.parallelize(items, len(items)).map(partial(_in_task, fn)).collect()
    bc = sc.broadcast(items)
    try:
        return sc.parallelize(range(len(items)), len(items)).map(partial(_item_of, fn, bc)).collect()
    finally:
        bc.destroy()


def _item_of(fn: Callable[[T], R], bc, i: int) -> R:
    _freeze_worker_heap()
    return fn(bc.value[i])


def _in_task(fn: Callable[[T], R], item: T) -> R:
    _freeze_worker_heap()
    return fn(item)


def _freeze_worker_heap() -> None:
    """In a PySpark worker: move the objects alive now out of the cyclic GC's reach (gc.freeze).
    A reused worker runs gc.collect() after every task (pyspark/daemon.py), which walks every
    object of the heap -- numpy, pyarrow and pyspark's modules: ~15-25 ms of a core per task
    here, more than a small task's own work. The heap a task starts with is what the previous
    gc.collect() left alive; what the task itself allocates is still collected."""
    from pyspark import TaskContext
    if TaskContext.get() is not None:
        gc.freeze()


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
        out.read += r.read
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


@dataclass(frozen=True)
class _Plan:
    """What both paths start from: the listing and the task inputs."""

    checks: frozenset[str]
    splits: list[scan.CommitLogSplit]
    qf: QueueFiles | None
    groups: list[QueueGroup]
    index_tasks: list[IndexTask]


def _plan(o: _Options, checks: set[str]) -> _Plan:
    qf, groups = plan_queues(o.path, o.cq_file_size, o.partition_bytes) if "consumequeue" in checks else (None, [])
    splits = scan.plan_commitlog(o.path, o.split_size)
    index_tasks = []
    if "index" in checks:
        bounds = _bounds(splits)
        index_tasks = [IndexTask(ref, o.slot_num, o.index_num, bounds) for ref in scan.index_files(o.path)]
    return _Plan(frozenset(checks), splits, qf, groups, index_tasks)


def _bounds(splits: list[scan.CommitLogSplit]) -> tuple[np.ndarray, np.ndarray]:
    return (np.array([sp.base + sp.start for sp in splits], np.int64),
            np.array([sp.base + sp.end for sp in splits], np.int64))


ONE_JOB = True  # try the one-job path first (False: always the two jobs)
# each commit-log task of the one job looks into every queue and index file (~40 us a file
# without units in its range): with more (files x splits) than this, the two jobs cost less
ONE_JOB_MAX_READS = 4096
last_path = ""  # which path the last run_checks took: "one job", "two jobs" or "two jobs after one"


def run_checks(sc, o: _Options, checks: Iterable[str]) -> Findings:
    """The record, consume-queue and index checks of the store ``o.path`` (those in ``checks``).

    First as one Spark job whose commit-log tasks read their units and index entries from the
    files themselves, assuming a store as dispatch writes it (_one_job); when the queue and
    index tasks of the same job show the assumption did not hold, again as the two jobs that
    assume nothing (_two_jobs). Either way the findings are the two jobs' findings."""
    global last_path
    plan = _plan(o, set(checks))
    files = sum(len(g.files) for g in plan.groups) + len(plan.index_tasks)
    if ONE_JOB and (plan.qf is not None or plan.index_tasks) and files * len(plan.splits) <= ONE_JOB_MAX_READS:
        out = _one_job(sc, o, plan)
        if out is not None:
            last_path = "one job"
            return out
        last_path = "two jobs after one"
    else:
        last_path = "two jobs"
    return _two_jobs(sc, o, plan)


def _split_tasks(o: _Options, plan: _Plan) -> list[SplitTask]:
    delays = scan.delay_table(o.delay_levels)
    return [SplitTask(sp, crc="records" in plan.checks, delays=delays) for sp in plan.splits]


def _two_jobs(sc, o: _Options, plan: _Plan) -> Findings:
    """Job 1 reads the queues and index files, the driver merges and cuts what they return,
    job 2 checks the commit-log splits against their cuts."""
    out = Findings()
    items: list[tuple[str, object]] = [("queues", g) for g in plan.groups]
    items += [("index", t) for t in plan.index_tasks]
    sources = _job(sc, _source_task, items, "consume queues and index files")
    unit_parts = [r for (k, _p), r in zip(items, sources) if k == "queues"]
    index_parts: list[IndexFileResult] = [r for (k, _p), r in zip(items, sources) if k == "index"]

    units = table = None
    if plan.qf is not None:
        units = Units.concat([u for u, _p in unit_parts])
        for _u, p in unit_parts:
            out.problems += p
        out.units = len(units)
        table = queue_table(plan.qf, units)
        out.problems += gap_problems(units, plan.qf)
        units = units.take(np.argsort(units.clo, kind="stable"))
    reach = None
    index_from = 0
    if "index" in plan.checks:
        for r in index_parts:
            out.problems += r.problems
        out.index_entries = sum(r.entries for r in index_parts)
        index_problems = any(r.problems for r in index_parts)
        if out.index_entries or index_problems:
            reach = Reachable.merge([r.reachable for r in index_parts if r.reachable is not None])
            index_from = min((r.min_offset for r in index_parts if r.min_offset is not None), default=0)
    in_files = [r for r in index_parts if r.reachable is None] if reach is not None else []

    covered = np.zeros(len(units) if units is not None else 0, bool)
    tasks = _split_tasks(o, plan)
    for i, (sp, t) in enumerate(zip(plan.splits, tasks)):
        lo, hi = sp.base + sp.start, sp.base + sp.end
        if units is not None:
            a, b = np.searchsorted(units.clo, lo), np.searchsorted(units.clo, hi)
            covered[a:b] = True
            t.units, t.queues = units.take(slice(a, b)), table
        if reach is not None:
            a, b = np.searchsorted(reach.phy, lo), np.searchsorted(reach.phy, hi)
            t.index, t.index_from = reach.take(slice(a, b)), index_from
            t.index_slices = [x for x in (r.slice(i) for r in in_files) if x is not None]
    if units is not None and table is not None:
        # units pointing outside every commit-log file
        out.problems += no_record_problems(units, np.flatnonzero(~covered), table.qf)
    groups = _groups(tasks, TASKS_PER_CORE * sc.defaultParallelism)
    results: list[SplitResult] = _job(sc, _check_splits, groups, "commit log", shared=SHARED_INPUTS)
    _add_splits(out, results)
    return out


def _add_splits(out: Findings, results: list[SplitResult]) -> None:
    for r in results:
        out.records += r.records
        out.index_keys += r.index_keys
        out.problems += r.problems


# ---------------------------------------------------------------------------------------------
# one job


def _one_task(item: tuple[str, object]) -> QueueSummary | IndexFileResult | SplitResult | None:
    kind, payload = item
    if kind == "splits":
        try:
            return _check_splits(payload)  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 - the two jobs will run it again, and raise if they do
            return None
    if kind == "queues":
        group, qf, bounds = payload  # type: ignore[misc]
        return summarize_queue_group(group, qf, bounds)
    return read_index_file(payload)  # type: ignore[arg-type]


def _one_job(sc, o: _Options, plan: _Plan) -> Findings | None:
    """Queue, index and commit-log tasks in one Spark job: no barrier between reading the
    queues and index files and checking the commit log. The commit-log tasks read their units
    and index entries from the files (own_inputs), assuming a store as dispatch writes it: each
    queue file's written units are one stretch in offset order, each index file is in offset
    order with every entry reachable. The queue and index tasks check that assumption and
    report what the commit-log tasks should have read; None: it did not hold (or a commit-log
    task failed), the two jobs must run instead."""
    bounds = _bounds(plan.splits)
    files = tuple(f for g in plan.groups for _n, f in g.files)
    own = OwnInputs(files if plan.qf is not None else None, plan.qf,
                    tuple(t.ref for t in plan.index_tasks) if "index" in plan.checks else None, o.slot_num, o.index_num)
    tasks = [replace(t, own=own) for t in _split_tasks(o, plan)]
    groups = _groups(tasks, TASKS_PER_CORE * sc.defaultParallelism)
    # the index tasks first: a file is one task, often longer than a commit-log task, and
    # would otherwise run alone at the end
    items: list[tuple[str, object]] = [("index", t) for t in plan.index_tasks]
    items += [("queues", (g, plan.qf, bounds)) for g in plan.groups]
    items += [("splits", g) for g in groups]
    got = _job(sc, _one_task, items, "consume queues, index files and commit log", shared=SHARED_INPUTS)
    split_results: list[SplitResult | None] = [r for (k, _p), r in zip(items, got) if k == "splits"]
    index_parts: list[IndexFileResult] = [r for (k, _p), r in zip(items, got) if k == "index"]
    summaries: list[QueueSummary] = [r for (k, _p), r in zip(items, got) if k == "queues"]
    if any(r is None for r in split_results):
        return None
    out = Findings()
    want: dict[str, tuple] = {}  # what each commit-log task should have read: queue and index parts
    if plan.qf is not None:
        if not all(s.ordered for s in summaries):
            return None
        spans = np.concatenate([s.spans for s in summaries]) if summaries else np.zeros((0, 2), np.int64)
        cuts = np.concatenate([s.cuts for s in summaries]) if summaries else np.zeros((0, len(plan.splits), 2), np.int64)
        gaps = file_gap_problems(spans, plan.qf)
        if gaps is None:
            return None
        for s in summaries:
            out.problems += s.problems
            out.units += s.units
        out.problems += gaps
        want["queues"] = (spans, cuts)
    if "index" in plan.checks:
        if any(r.problems or (r.entries and (r.reachable is not None or r.dropped is None or r.dropped.size))
               for r in index_parts):
            return None
        out.index_entries = sum(r.entries for r in index_parts)
        counts = np.array([r.entries for r in index_parts], np.int64)
        icuts = np.stack([r.cuts if r.entries else np.zeros((len(plan.splits), 2), np.int64) for r in index_parts],
                         axis=0) if index_parts else np.zeros((0, len(plan.splits), 2), np.int64)
        index_from = min((r.min_offset for r in index_parts if r.min_offset is not None), default=0)
        want["index"] = (counts, icuts, index_from if out.index_entries else 0)
    reads = [x for r in split_results for x in r.read]  # type: ignore[union-attr]
    if len(reads) != len(plan.splits):
        return None
    for i, read in enumerate(reads):
        if read is None:  # an empty split: nothing read
            continue
        spans_r, qcuts, counts_r, icuts_r, from_r = read
        if "queues" in want:
            spans, cuts = want["queues"]
            if not (np.array_equal(spans_r, spans) and np.array_equal(qcuts, cuts[:, i])):
                return None
        if "index" in want:
            counts, icuts, index_from = want["index"]
            if not (np.array_equal(counts_r, counts) and np.array_equal(icuts_r, icuts[:, i]) and from_r == index_from):
                return None
    _add_splits(out, split_results)  # type: ignore[arg-type]
    return out
