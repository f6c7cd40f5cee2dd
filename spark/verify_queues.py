"""The consume-queue side of ``rmqd spark verify``: units as compact numpy columns.

A task reads a group of queue files once, runs their file-level checks and returns every
written unit as a few numpy columns (about 40 bytes a unit), never as Spark rows. The driver
concatenates them into a ``Units`` table, finds the gaps of each queue and the first queue
offset it still holds, and hands each commit-log task the units pointing into its byte range
(see spark/verify_records.py), which checks them against the records it walks.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spark import layout as L
from spark import scan

ProblemRow = tuple[str, int, str, str]  # file, offset, check, problem (the problems kind's columns)


@dataclass
class Units:
    """Written units, one entry per unit in every array. ``queue`` indexes QueueTable.names,
    ``file`` the list of queue files (their relative paths name the problems)."""

    clo: np.ndarray    # commitLogOffset (int64)
    size: np.ndarray   # int32
    tags: np.ndarray   # tagsCode (int64)
    qoff: np.ndarray   # queue offset of the unit (int64)
    queue: np.ndarray  # int32
    file: np.ndarray   # int32
    fpos: np.ndarray   # position of the unit in its file (int64)

    FIELDS = ("clo", "size", "tags", "qoff", "queue", "file", "fpos")

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
        return cls(*(np.zeros(0, t) for t in (np.int64, np.int32, np.int64, np.int64, np.int32, np.int32, np.int64)))


@dataclass(frozen=True)
class QueueTable:
    """The queues (topic, queueId) that have files, and what a commit-log task needs of them:
    topic ids for comparing a record's topic with a unit's, and each queue's first offset (a
    record below it expired with its queue's files)."""

    names: list[tuple[str, int]]  # by queue index
    topics: dict[str, int]        # topic -> id
    keys: np.ndarray              # sorted topic id << 32 | queueId of the queues with units
    key_queue: np.ndarray         # the queue index of each key
    min_offset: np.ndarray        # the first queue offset of each key's queue

    def topic_id(self, queue: np.ndarray) -> np.ndarray:
        ids = np.array([self.topics[t] for t, _q in self.names] + [-1], dtype=np.int64)
        return ids[queue]

    def queue_id(self, queue: np.ndarray) -> np.ndarray:
        return np.array([q for _t, q in self.names] + [-1], dtype=np.int64)[queue]

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
    """One task's queue files: (file index, queue index, file) each; ``file_size`` the
    mappedFileSizeConsumeQueue the files are checked against (0 = not checked)."""

    files: tuple[tuple[int, int, scan.QueueFile], ...]
    file_size: int


def plan_queues(root: str, cq_file_size: int | None, partition_bytes: int) -> tuple[list[str], list[tuple[str, int]], list[QueueGroup]]:
    """(relative path of every queue file, the queues, the task groups) from the listing."""
    files = scan.queue_files(root)
    size = cq_file_size or scan.infer_queue_file_size(files)
    names: list[tuple[str, int]] = []
    index: dict[tuple[str, int], int] = {}
    entries = []
    for i, qf in enumerate(files):
        q = index.setdefault((qf.topic, qf.queue_id), len(index))
        if q == len(names):
            names.append((qf.topic, qf.queue_id))
        entries.append((i, q, qf))
    groups = [QueueGroup(tuple(g), size) for g in scan.group_by_size(entries, lambda e: e[2].size, partition_bytes)]
    return [scan.queue_file_rel(qf) for qf in files], names, groups


def read_queue_group(group: QueueGroup) -> tuple[Units, list[ProblemRow]]:
    """A task: the written units of the group's files and their file-level problems."""
    probs = scan._Problems()
    parts = []
    for file_no, queue_no, qf in group.files:
        units = scan.read_units(qf.path, qf.size)
        scan.check_queue_file(qf, units, group.file_size, probs)
        idx = np.flatnonzero(scan.written_units(units))
        if idx.size == 0:
            continue
        u = units[idx]
        fpos = idx.astype(np.int64) * L.CQ_STORE_UNIT_SIZE
        n = idx.size
        parts.append(Units(u["commitLogOffset"].astype(np.int64), u["size"].astype(np.int32),
                           u["tagsCode"].astype(np.int64), (int(qf.name) + fpos) // L.CQ_STORE_UNIT_SIZE,
                           np.full(n, queue_no, np.int32), np.full(n, file_no, np.int32), fpos))
    return Units.concat(parts), probs.rows


def queue_table(names: list[tuple[str, int]], units: Units) -> QueueTable:
    """Topic ids and each queue's first unit offset (``units`` in any order)."""
    topics: dict[str, int] = {}
    for t, _q in names:
        topics.setdefault(t, len(topics))
    qid = np.array([q for _t, q in names], dtype=np.int64)
    tid = np.array([topics[t] for t, _q in names], dtype=np.int64)
    present = np.unique(units.queue) if len(units) else np.zeros(0, np.int32)
    first = np.full(len(names), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, units.queue, units.qoff)
    # queues of one (topic, queueId) are one queue (merged in plan_queues), so keys are unique
    keys = queue_key(tid[present], qid[present])
    order = np.argsort(keys)
    return QueueTable(names, topics, keys[order], present[order].astype(np.int64), first[present][order])


def gap_problems(units: Units, names: list[tuple[str, int]], files: list[str]) -> list[ProblemRow]:
    """Two consecutive units of a queue whose queue offsets are not consecutive, reported after
    the first of them (as the queue is read)."""
    if len(units) < 2:
        return []
    order = np.lexsort((units.qoff, units.queue))
    q, off = units.queue[order], units.qoff[order]
    gap = np.flatnonzero((q[1:] == q[:-1]) & (off[1:] != off[:-1] + 1))
    out = []
    for g in gap.tolist():
        prev, nxt = order[g], order[g + 1]
        topic, qid = names[int(units.queue[prev])]
        rel = files[int(units.file[prev])]
        out.append((rel, int(units.fpos[prev]) + L.CQ_STORE_UNIT_SIZE, "cq-order",
                    f"queue {topic}/{qid} jumps from offset {int(units.qoff[prev])} to {int(units.qoff[nxt])}"))
    return out


def no_record_problems(units: Units, idx: np.ndarray, names: list[tuple[str, int]],
                       files: list[str]) -> list[ProblemRow]:
    """The units ``idx`` point where no record starts."""
    out = []
    for i in idx.tolist():
        topic, qid = names[int(units.queue[i])]
        out.append((files[int(units.file[i])], int(units.fpos[i]), "cq-unit",
                    f"unit {int(units.qoff[i])} of {topic}/{qid} points to commit-log offset {int(units.clo[i])} "
                    f"where no record starts"))
    return out
