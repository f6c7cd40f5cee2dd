"""The consume-queue side of ``rmqd spark verify``: units as compact numpy columns.

A task reads a group of queue files once, runs their file-level checks and returns every
written unit as a few numpy columns (a few bytes a unit on the way, spark/compact.py), never as
Spark rows. The driver concatenates them into a ``Units`` table, finds the gaps of each queue
and the first queue offset it still holds, and hands each commit-log task the units pointing
into its byte range (see spark/verify_records.py), which checks them against the records it
walks. In the one-job path (spark/verify_plan.py) no units travel: a task returns each file's
written span and where each split's units lie (summarize_queue_group), and the commit-log tasks
read their units from the files (own_units).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rmqd.spark import compact
from rmqd.spark import layout as L
from rmqd.spark import scan

ProblemRow = tuple[str, int, str, str]  # file, offset, check, problem (the problems kind's columns)


@dataclass
class Units:
    """Written units, one entry per unit in every array; ``file`` indexes QueueTable.files
    (which gives the unit's queue and the position of the unit in its file). Pickled
    narrow (spark/compact.py)."""

    clo: np.ndarray    # commitLogOffset (int64)
    size: np.ndarray   # int32
    tags: np.ndarray   # tagsCode (int64)
    qoff: np.ndarray   # queue offset of the unit (int64)
    file: np.ndarray   # int32

    FIELDS = ("clo", "size", "tags", "qoff", "file")

    def __len__(self) -> int:
        return int(self.clo.size)

    def take(self, idx: np.ndarray | slice) -> "Units":
        return Units(*(getattr(self, f)[idx] for f in self.FIELDS))

    @classmethod
    def concat(cls, parts: list["Units"]) -> "Units":
        if not parts:
            return cls.empty()
        return cls(*(np.concatenate([getattr(p, f) for p in parts]) for f in cls.FIELDS))

    @classmethod
    def empty(cls) -> "Units":
        return cls(*(np.zeros(0, t) for t in (np.int64, np.int32, np.int64, np.int64, np.int32)))

    def __getstate__(self) -> dict:
        return {f: compact.pack(getattr(self, f)) for f in self.FIELDS}

    def __setstate__(self, state: dict) -> None:
        for f in self.FIELDS:
            setattr(self, f, compact.unpack(state[f]))


@dataclass(frozen=True)
class QueueFiles:
    """The consume-queue files of a store, as listed: their relative paths (problems name
    them), the queue each belongs to and the first byte offset of each (its name)."""

    files: list[str]
    names: list[tuple[str, int]]  # the queues (topic, queueId), by queue index
    file_queue: np.ndarray        # queue index of each file
    file_base: np.ndarray         # int(name) of each file

    def queue(self, units: Units) -> np.ndarray:
        return self.file_queue[units.file]

    def describe(self, units: Units, i: int) -> tuple[str, str, int, int]:
        """(file, topic, queueId, position in the file) of unit ``i``."""
        f = int(units.file[i])
        topic, qid = self.names[int(self.file_queue[f])]
        return self.files[f], topic, qid, (int(units.qoff[i]) - int(self.file_base[f]) // L.CQ_STORE_UNIT_SIZE) * L.CQ_STORE_UNIT_SIZE


@dataclass(frozen=True)
class QueueTable:
    """The queues (topic, queueId) that have files, and what a commit-log task needs of them:
    topic ids for comparing a record's topic with a unit's, and each queue's first offset (a
    record below it expired with its queue's files)."""

    qf: QueueFiles
    topics: dict[str, int]        # topic -> id
    keys: np.ndarray              # sorted topic id << 32 | queueId of the queues with units
    min_offset: np.ndarray        # the first queue offset of each key's queue

    @property
    def names(self) -> list[tuple[str, int]]:
        return self.qf.names

    def unit_topic_queue(self, units: Units) -> tuple[np.ndarray, np.ndarray]:
        """(topic id, queueId) of each unit."""
        q = self.qf.queue(units)
        tid = np.array([self.topics[t] for t, _q in self.names] + [-1], dtype=np.int64)
        qid = np.array([qi for _t, qi in self.names] + [-1], dtype=np.int64)
        return tid[q], qid[q]

    def lookup(self, topic_id: np.ndarray, queue_id: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(has units, first queue offset) of each record's queue."""
        key = queue_key(topic_id, queue_id)
        if self.keys.size == 0:
            return np.zeros(key.shape, bool), np.zeros(key.shape, np.int64)
        i = np.minimum(np.searchsorted(self.keys, key), self.keys.size - 1)
        return self.keys[i] == key, self.min_offset[i]


def queue_key(topic_id: np.ndarray, queue_id: np.ndarray) -> np.ndarray:
    return (topic_id.astype(np.int64) << 32) | (queue_id.astype(np.int64) & 0xFFFFFFFF)


@dataclass(frozen=True)
class QueueGroup:
    """One task's queue files: (file index, file) each; ``file_size`` the
    mappedFileSizeConsumeQueue the files are checked against (0 = not checked)."""

    files: tuple[tuple[int, scan.QueueFile], ...]
    file_size: int


def plan_queues(root: str, cq_file_size: int | None, partition_bytes: int) -> tuple[QueueFiles, list[QueueGroup]]:
    """The queue files and the task groups, from the listing."""
    files = scan.queue_files(root)
    size = cq_file_size or scan.infer_queue_file_size(files)
    index: dict[tuple[str, int], int] = {}
    file_queue = [index.setdefault((qf.topic, qf.queue_id), len(index)) for qf in files]
    qf = QueueFiles([scan.queue_file_rel(f) for f in files], list(index), np.array(file_queue, dtype=np.int64),
                    np.array([int(f.name) for f in files], dtype=np.int64))
    groups = [QueueGroup(tuple(g), size)
              for g in scan.group_by_size(list(enumerate(files)), lambda e: e[1].size, partition_bytes)]
    return qf, groups


def read_queue_group(group: QueueGroup) -> tuple[Units, list[ProblemRow]]:
    """A task: the written units of the group's files and their file-level problems."""
    probs = scan._Problems()
    parts = []
    for file_no, qf in group.files:
        units = scan.read_units(qf.path, qf.size)
        scan.check_queue_file(qf, units, group.file_size, probs)
        idx = np.flatnonzero(scan.written_units(units))
        if idx.size == 0:
            continue
        u = units[idx]
        parts.append(Units(u["commitLogOffset"].astype(np.int64), u["size"].astype(np.int32),
                           u["tagsCode"].astype(np.int64), (int(qf.name) // L.CQ_STORE_UNIT_SIZE) + idx.astype(np.int64),
                           np.full(idx.size, file_no, np.int32)))
    return Units.concat(parts), probs.rows


def queue_table(qf: QueueFiles, units: Units) -> QueueTable:
    """Topic ids and each queue's first unit offset (``units`` in any order)."""
    topics: dict[str, int] = {}
    for t, _q in qf.names:
        topics.setdefault(t, len(topics))
    qid = np.array([q for _t, q in qf.names], dtype=np.int64)
    tid = np.array([topics[t] for t, _q in qf.names], dtype=np.int64)
    # a file's units come in queue-offset order: only the first unit of each run of one file
    # can be its queue's first
    runs = np.flatnonzero(np.diff(units.file, prepend=-1)) if len(units) else np.zeros(0, np.int64)
    queue = qf.file_queue[units.file[runs]]
    present = np.unique(queue)
    first = np.full(len(qf.names), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, queue, units.qoff[runs])
    # files of one (topic, queueId) are one queue (merged in plan_queues), so keys are unique
    keys = queue_key(tid[present], qid[present])
    order = np.argsort(keys)
    return QueueTable(qf, topics, keys[order], first[present][order])


def gap_problems(units: Units, qf: QueueFiles) -> list[ProblemRow]:
    """Two consecutive units of a queue whose queue offsets are not consecutive, reported after
    the first of them (as the queue is read)."""
    if len(units) < 2:
        return []
    queue = qf.queue(units)
    # files are listed queue by queue in name order, so this is usually sorted already
    dq, do = np.diff(queue), np.diff(units.qoff)
    if ((dq > 0) | ((dq == 0) & (do >= 0))).all():
        order = np.arange(len(units))
    else:
        order = np.lexsort((units.qoff, queue))
    q, off = queue[order], units.qoff[order]
    gap = np.flatnonzero((q[1:] == q[:-1]) & (off[1:] != off[:-1] + 1))
    out = []
    for g in gap.tolist():
        prev, nxt = int(order[g]), int(order[g + 1])
        rel, topic, qid, fpos = qf.describe(units, prev)
        out.append((rel, fpos + L.CQ_STORE_UNIT_SIZE, "cq-order",
                    f"queue {topic}/{qid} jumps from offset {int(units.qoff[prev])} to {int(units.qoff[nxt])}"))
    return out


def no_record_problems(units: Units, idx: np.ndarray, qf: QueueFiles) -> list[ProblemRow]:
    """The units ``idx`` point where no record starts."""
    out = []
    for i in idx.tolist():
        rel, topic, qid, fpos = qf.describe(units, i)
        out.append((rel, fpos, "cq-unit", f"unit {int(units.qoff[i])} of {topic}/{qid} points to commit-log offset "
                                          f"{int(units.clo[i])} where no record starts"))
    return out


# --------------------------------------------------------------------------------------------
# one job: the commit-log tasks read their units from the queue files (see spark/verify_plan.py)


@dataclass
class QueueSummary:
    """An optimistic queue task's answer: the file-level problems, and what lets the driver
    confirm that each commit-log task read from the files the units it would have been given.
    ``spans``: per file of the group, the written units [a, b) ((0, 0): none); ``cuts``: per
    file, per split, the units [first, end) pointing into it. ``ordered`` False: some file's
    written units are not one stretch in commit-log-offset order (no spans or cuts then)."""

    problems: list[ProblemRow]
    units: int
    ordered: bool
    spans: np.ndarray   # (files, 2)
    cuts: np.ndarray    # (files, splits, 2)


def summarize_queue_group(group: QueueGroup, qf: QueueFiles, bounds: tuple[np.ndarray, np.ndarray]) -> QueueSummary:
    """A task: read_queue_group's checks, without the units: their spans and per-split cuts,
    and the problems of units pointing outside every commit-log split."""
    probs = scan._Problems()
    lo, hi = bounds
    n_files = len(group.files)
    spans = np.zeros((n_files, 2), np.int64)
    cuts = np.zeros((n_files, lo.size, 2), np.int64)
    total = 0
    ordered = True
    for k, (file_no, f) in enumerate(group.files):
        units = scan.read_units(f.path, f.size)
        scan.check_queue_file(f, units, group.file_size, probs)
        idx = np.flatnonzero(scan.written_units(units))
        total += idx.size
        if idx.size == 0 or not ordered:
            continue
        a, b = int(idx[0]), int(idx[-1]) + 1
        clo = units["commitLogOffset"][a:b].astype(np.int64)
        if b - a != idx.size or not (clo[1:] >= clo[:-1]).all():
            ordered = False
            continue
        spans[k] = a, b
        c = np.stack([np.searchsorted(clo, lo), np.searchsorted(clo, hi)], axis=1)
        cuts[k] = c + a
        # units inside no split (splits may overlap: counted, not assigned)
        inside = np.zeros(b - a + 1, np.int64)
        np.add.at(inside, c[:, 0], 1)
        np.add.at(inside, c[:, 1], -1)
        out = np.flatnonzero(np.cumsum(inside[:-1]) == 0)
        if out.size:
            u = units[a + out]
            lost = Units(u["commitLogOffset"].astype(np.int64), u["size"].astype(np.int32),
                         u["tagsCode"].astype(np.int64), int(f.name) // L.CQ_STORE_UNIT_SIZE + a + out.astype(np.int64),
                         np.full(out.size, file_no, np.int32))
            probs.rows += no_record_problems(lost, np.arange(out.size), qf)
    return QueueSummary(probs.rows, total, ordered, spans, cuts)


_BLANK, _WRITTEN, _OTHER = 0, 1, 2


def _unit_kind(u: np.ndarray, i: int) -> int:
    """written_units' view of one unit: fillPreBlank's blank, written, or neither."""
    x = u[i]
    size = int(x["size"])
    if size == L.INT_MAX and int(x["commitLogOffset"]) == 0 and int(x["tagsCode"]) == 0:
        return _BLANK
    return _WRITTEN if size > 0 else _OTHER


def own_units(files: tuple[scan.QueueFile, ...], qf: QueueFiles, lo: int, hi: int
              ) -> tuple[Units, QueueTable, np.ndarray, np.ndarray]:
    """A commit-log task's own reading of the units pointing into [lo, hi), by binary search
    in each queue file, assuming every file is fillPreBlank's blanks, then its written units in
    commit-log-offset order, then unwritten ones (what dispatch leaves). Returns the units as
    the driver would cut them (file order, then stably by offset), the queue table, and each
    file's written span and cut ((files, 2) each) for the driver to compare with the queue
    tasks' (summarize_queue_group): where the assumption fails, they differ."""
    spans = np.zeros((len(files), 2), np.int64)
    cuts = np.zeros((len(files), 2), np.int64)
    parts = []
    firsts = []
    for file_no, f in enumerate(files):
        n = f.size // L.CQ_STORE_UNIT_SIZE
        if n == 0:
            continue
        with scan._Mapped(f.path) as m:
            u = m.u8[:n * L.CQ_STORE_UNIT_SIZE].view(L.CQ_DTYPE)
            a = scan.first_true(0, n, lambda i: _unit_kind(u, i) != _BLANK)
            b = scan.first_true(a, n, lambda i: _unit_kind(u, i) == _OTHER)
            if b > a:
                clo = u["commitLogOffset"]
                i0 = scan.first_true(a, b, lambda i: int(clo[i]) >= lo)
                i1 = scan.first_true(i0, b, lambda i: int(clo[i]) >= hi)
                spans[file_no] = a, b
                cuts[file_no] = i0, i1
                q0 = int(f.name) // L.CQ_STORE_UNIT_SIZE
                firsts.append((file_no, q0 + a))
                if i1 > i0:
                    x = u[i0:i1]
                    parts.append(Units(x["commitLogOffset"].astype(np.int64), x["size"].astype(np.int32),
                                       x["tagsCode"].astype(np.int64), q0 + np.arange(i0, i1, dtype=np.int64),
                                       np.full(i1 - i0, file_no, np.int32)))
                    del x
                del clo
            del u
    units = Units.concat(parts)
    units = units.take(np.argsort(units.clo, kind="stable"))
    heads = Units(np.zeros(len(firsts), np.int64), np.zeros(len(firsts), np.int32), np.zeros(len(firsts), np.int64),
                  np.array([q for _f, q in firsts], np.int64), np.array([f for f, _q in firsts], np.int32))
    return units, queue_table(qf, heads), spans, cuts


def file_gap_problems(spans: np.ndarray, qf: QueueFiles) -> list[ProblemRow] | None:
    """gap_problems from each file's written span (the units of a span are consecutive queue
    offsets): the jumps between one file's last unit and the next file's first, in a queue.
    None: the files' units are not in queue-offset order (gap_problems sorts them then)."""
    has = np.flatnonzero(spans[:, 1] > spans[:, 0])
    if has.size < 2:
        return []
    q = qf.file_queue[has]
    base = qf.file_base[has] // L.CQ_STORE_UNIT_SIZE
    first, last = base + spans[has, 0], base + spans[has, 1] - 1
    dq = np.diff(q)
    same = dq == 0
    if not ((dq > 0) | (same & (first[1:] >= last[:-1]))).all():
        return None
    out = []
    for g in np.flatnonzero(same & (first[1:] != last[:-1] + 1)).tolist():
        f = int(has[g])
        topic, qid = qf.names[int(qf.file_queue[f])]
        out.append((qf.files[f], int(spans[f, 1]) * L.CQ_STORE_UNIT_SIZE, "cq-order",
                    f"queue {topic}/{qid} jumps from offset {int(last[g])} to {int(first[g + 1])}"))
    return out
