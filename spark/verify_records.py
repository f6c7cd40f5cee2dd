"""The commit-log task of ``rmqd spark verify``: every check of the records of one split.

A task walks the records starting in its split (spark/scan.py's walk and head decoding), checks
their integrity (lengths, PHYSICALOFFSET, body CRC, UTF-8), and matches them, batch by batch,
against the consume-queue units and the reachable index entries of its byte range, which it
reads from the queue and index files itself (own_inputs) or the driver gathered first
(spark/verify_queues.py, spark/verify_index.py, spark/verify_plan.py). Only problems and counts
leave the task: no per-record row crosses into Spark (Spark's joins of such rows cost 7x more
CPU in the JVM than the reading itself).

Per batch everything is numpy over the batch: property items are located by their separator
bytes, TAGS / KEYS / UNIQ_KEY are byte ranges of the property data, the tags code and every
``topic#key`` hash come from one prefix sum over that data (spark/javahash.py), and units and
index entries are matched by binary search on the records' (sorted) offsets. Python runs per
record only in the chain walk, the CRC call, and for each problem found.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow.compute as pc

from rmqd.spark import javahash as J
from rmqd.spark import layout as L
from rmqd.spark import scan
from rmqd.spark.verify_index import IndexSlice, Reachable, own_index_entries
from rmqd.spark.verify_queues import ProblemRow, QueueFiles, QueueTable, Units, no_record_problems, own_units
from rmqd.store.consumequeue import SCHEDULE_TOPIC, tags_code_of
from rmqd.wire.javamap import java_string_hash
from rmqd.wire.message import MessageConst

TRAN_MASK = L.MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
ROLLBACK = L.MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
DISPATCHED_TYPES = (L.MessageSysFlag.TRANSACTION_NOT_TYPE, L.MessageSysFlag.TRANSACTION_COMMIT_TYPE)
BATCH_ROWS = 16384  # no Arrow batch leaves the task: larger batches cut per-batch work, until the cache misses
# the head fields the checks read (the others are not converted)
HEAD_FIELDS = ("total_size", "magic", "body_crc", "queue_id", "queue_offset", "physical_offset", "sys_flag",
               "store_timestamp", "body_length")


@dataclass(frozen=True)
class OwnInputs:
    """What a commit-log task reads its units and index entries from itself (the one-job path,
    spark/verify_plan.py): all the store's queue files (None: no consume-queue check) and index
    files (None: no index check)."""

    queue_files: tuple[scan.QueueFile, ...] | None
    qf: QueueFiles | None
    index_files: tuple[scan.IndexFileRef, ...] | None
    slot_num: int | None = None
    index_num: int | None = None


@dataclass
class SplitTask:
    """One commit-log split and what its records are checked against. ``units`` / ``index``
    None: that check is not run; the units and pairs are those of the split's byte range."""

    split: scan.CommitLogSplit
    crc: bool
    delays: dict[int, int]
    queues: QueueTable | None = None
    units: Units | None = None
    index: Reachable | None = None
    index_slices: list[IndexSlice] = field(default_factory=list)  # more of ``index``, read by the task
    index_from: int = 0  # records before the first indexed offset are not looked up
    batch_rows: int = BATCH_ROWS
    own: OwnInputs | None = None  # read units, queues, index and index_from from the files (see own_inputs)


@dataclass
class SplitResult:
    records: int = 0
    index_keys: int = 0
    problems: list[ProblemRow] = field(default_factory=list)
    read: list = field(default_factory=list)  # per split with ``own``: what own_inputs read (None: nothing)


def own_inputs(task: SplitTask) -> tuple[SplitTask, tuple]:
    """``task`` with its units, queue table, index entries and index_from read from the files
    (task.own), and what was read: per queue file its written span and cut, per index file its
    entry count and cut, and index_from (the driver compares them with what the queue and index
    tasks found; equal, the task was given what the two-job path would have given it)."""
    own, sp = task.own, task.split
    assert own is not None
    lo, hi = sp.base + sp.start, sp.base + sp.end
    units = queues = spans = qcuts = None
    if own.queue_files is not None and own.qf is not None:
        units, queues, spans, qcuts = own_units(own.queue_files, own.qf, lo, hi)
    index, index_from, counts, icuts = None, 0, None, None
    if own.index_files is not None:
        index, index_from, counts, icuts = own_index_entries(own.index_files, own.slot_num, own.index_num, lo, hi)
    return (replace(task, units=units, queues=queues, index=index, index_from=index_from, own=None),
            (spans, qcuts, counts, icuts, index_from))


def check_split(task: SplitTask) -> SplitResult:
    """A task: walk the split, check every batch; then report the units of the range that no
    record of it matched."""
    sp = task.split
    res = SplitResult()
    if sp.size == 0:
        if task.own is not None:
            res.read.append(None)
        return res
    if task.own is not None:
        task, read = own_inputs(task)
        res.read.append(read)
    rel = f"{scan.COMMITLOG_DIR}/{sp.name}"
    if task.index is not None and task.index_slices:
        task = replace(task, index=Reachable.merge([task.index] + [x.read() for x in task.index_slices]),
                       index_slices=[])
    probs = scan._Problems()
    matched = np.zeros(len(task.units), bool) if task.units is not None else None
    with scan._Mapped(sp.path) as m:
        # the units of the range tell where records start: the walk takes them run by run
        runs = scan._Runs(m.u8, task.units.clo - sp.base) if task.units is not None and len(task.units) else None
        for chunk in scan._walk(m.mm, sp, rel, probs, task.batch_rows, runs):
            _Batch(task, m, rel, chunk, probs, res, matched).run()
    if task.units is not None and task.queues is not None:
        probs.rows += no_record_problems(task.units, np.flatnonzero(~matched), task.queues.qf)
    res.problems = probs.rows
    return res


class _Batch:
    """The checks of one batch of record positions."""

    def __init__(self, task: SplitTask, m, rel: str, chunk: list[int], probs: scan._Problems,
                 res: SplitResult, matched: np.ndarray | None) -> None:
        self.task, self.m, self.rel, self.probs, self.res, self.matched = task, m, rel, probs, res, matched
        self.P = np.asarray(chunk, dtype=np.int64)

    def run(self) -> None:
        if not self._integrity():
            return
        t = self.task
        if t.units is None and t.index is None:
            return
        self._properties()
        if t.units is not None:
            self._queues()
        if t.index is not None:
            self._index()

    # ---------------------------------------------------------------------------------------

    def _integrity(self) -> bool:
        """Lengths, CRC, PHYSICALOFFSET, UTF-8; keeps the well-formed records (False: none)."""
        u8, rel, add = self.m.u8, self.rel, self.probs.add
        d = scan._decode_heads(u8, self.P, HEAD_FIELDS)
        if not d.ok.all():
            for p in self.P[~d.ok].tolist():
                add(rel, p, "record", "body/topic/properties lengths do not add up to the record size")
            self.P = self.P[d.ok]
            if self.P.size == 0:
                return False
            d = scan._decode_heads(u8, self.P, HEAD_FIELDS)
        P, f = self.P, d.f
        self.res.records += int(P.size)
        base = self.task.split.base
        if self.task.crc:
            crcs = scan._body_crcs(self.m.mm, d.body_pos, f["body_length"].astype(np.int64))
            for i in np.flatnonzero(crcs != f["body_crc"]).tolist():
                add(rel, int(P[i]), "body-crc", f"body CRC {int(crcs[i])} != stored BODYCRC {int(f['body_crc'][i])}")
        phys_ok = f["physical_offset"] == base + P
        for p, v in zip(P[~phys_ok].tolist(), f["physical_offset"][~phys_ok].tolist()):
            add(rel, p, "record", f"PHYSICALOFFSET field {v} != position {base + p}")
        self.topics, tok = scan._strings(u8, d.topic_pos, d.topic_len)
        for p in P[~tok].tolist():
            add(rel, p, "record", "topic is not UTF-8")
        self.props, pok = scan._strings(u8, d.props_pos, d.props_len)
        for p in P[~pok].tolist():
            add(rel, p, "record", "properties are not UTF-8")
        self.f = f
        self.pos = base + P  # physical offsets, ascending
        return True

    def _properties(self) -> None:
        """Topic ids and the byte ranges of TAGS, KEYS, UNIQ_KEY and DELAY in the property data."""
        enc = pc.dictionary_encode(self.topics)
        self.topic_names: list[str] = enc.dictionary.to_pylist()
        self.topic_idx = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        n = self.P.size
        data, s, k, e, row = scan._property_items(self.props)
        self.hasher = J.RangeHasher(data)
        key_len = k - s
        self.values: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        names = (MessageConst.PROPERTY_TAGS, MessageConst.PROPERTY_KEYS, MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
                 MessageConst.PROPERTY_DELAY_TIME_LEVEL)
        for name, hit in zip(names, scan._items_named_each(data, s, key_len, names)):
            start = np.full(n, -1, dtype=np.int64)
            end = np.full(n, -1, dtype=np.int64)
            if hit.size:
                r = row[hit]
                last = np.ones(hit.size, dtype=bool)
                last[:-1] = r[:-1] != r[1:]  # a repeated name: the last one, as HashMap.put keeps
                start[r[last]] = k[hit[last]] + 1
                end[r[last]] = e[hit[last]]
            self.values[name] = (start, end)

    def _value(self, name: str, i: int) -> str | None:
        s, e = self.values[name]
        return None if s[i] < 0 else self.hasher.text(int(s[i]), int(e[i]))

    def _expected_tags_codes(self) -> np.ndarray:
        """store.consumequeue.tags_code_of of every record: TAGS' hash; SCHEDULE_TOPIC_XXXX's
        delivery time per record (rare)."""
        s, e = self.values[MessageConst.PROPERTY_TAGS]
        has = s >= 0
        codes = np.zeros(self.P.size, np.int64)
        codes[has] = self.hasher.hash(s[has], e[has])
        if SCHEDULE_TOPIC in self.topic_names:
            sched = np.flatnonzero(self.topic_idx == self.topic_names.index(SCHEDULE_TOPIC))
            ts = self.f["store_timestamp"]
            for i in sched.tolist():
                props = {k: v for k, v in ((MessageConst.PROPERTY_TAGS, self._value(MessageConst.PROPERTY_TAGS, i)),
                                           (MessageConst.PROPERTY_DELAY_TIME_LEVEL,
                                            self._value(MessageConst.PROPERTY_DELAY_TIME_LEVEL, i))) if v is not None}
                codes[i] = tags_code_of(SCHEDULE_TOPIC, props, int(ts[i]), self.task.delays)
        return codes

    # ---------------------------------------------------------------------------------------

    def _queues(self) -> None:
        """Units pointing into this batch against its records; dispatched records without a unit."""
        t, q, u, pos, f = self.task, self.task.queues, self.task.units, self.pos, self.f
        assert q is not None and u is not None and self.matched is not None
        tid_of = np.array([q.topics.get(name, -1) for name in self.topic_names] + [-1], dtype=np.int64)
        tid = tid_of[self.topic_idx]
        qid = f["queue_id"].astype(np.int64)
        lo, hi = np.searchsorted(u.clo, pos[0]), np.searchsorted(u.clo, pos[-1], side="right")
        clo = u.clo[lo:hi]
        i = np.minimum(np.searchsorted(pos, clo), pos.size - 1)
        found = pos[i] == clo
        self.matched[lo:hi] |= found
        ui = lo + np.flatnonzero(found)
        ri = i[found]
        u_tid, u_qid = q.unit_topic_queue(u.take(ui))
        same = (u_tid == tid[ri]) & (u_qid == qid[ri])
        bad_size = same & (u.size[ui] != f["total_size"][ri])
        bad_qoff = same & (u.qoff[ui] != f["queue_offset"][ri])
        tags = self._expected_tags_codes()
        bad_tags = same & (u.tags[ui] != tags[ri])
        for j in np.flatnonzero(~same | bad_size | bad_qoff | bad_tags).tolist():
            self._unit_problems(int(ui[j]), int(ri[j]), bool(same[j]), bool(bad_size[j]), bool(bad_qoff[j]),
                                int(tags[ri[j]]))
        # records dispatch puts in a queue and no unit points to (below a queue's first unit
        # they expired with its files)
        tran = f["sys_flag"] & TRAN_MASK
        dispatched = (tran == DISPATCHED_TYPES[0]) | (tran == DISPATCHED_TYPES[1])
        in_queue = np.zeros(pos.size, bool)
        in_queue[ri] = True  # the records some unit matched (offsets are unique: no second search)
        cand = np.flatnonzero(dispatched & ~in_queue)
        if cand.size:
            has, first = q.lookup(tid[cand], qid[cand])
            qoff = f["queue_offset"][cand]
            for r in cand[~has | (qoff >= first)].tolist():
                self.probs.add(self.rel, int(self.P[r]), "cq-missing",
                               f"record of {self._topic(r)}/{int(qid[r])} queue offset {int(f['queue_offset'][r])} "
                               f"is not in its consume queue")

    def _topic(self, r: int) -> str:
        return self.topic_names[int(self.topic_idx[r])]

    def _unit_problems(self, ui: int, ri: int, same: bool, bad_size: bool, bad_qoff: bool, tags: int) -> None:
        t, u, f = self.task, self.task.units, self.f
        assert t.queues is not None and u is not None
        where, topic, qid, at = t.queues.qf.describe(u, ui)
        rloc = f"{self.rel}:{int(self.P[ri])}"
        add = self.probs.add
        if not same:
            add(where, at, "cq-unit", f"unit {int(u.qoff[ui])} of {topic}/{qid} points to a record of "
                                      f"{self._topic(ri)}/{int(f['queue_id'][ri])} at {rloc}")
            return
        if bad_size:
            add(where, at, "cq-unit", f"unit size {int(u.size[ui])} != record size {int(f['total_size'][ri])} at {rloc}")
        if bad_qoff:
            add(where, at, "cq-unit", f"unit is queue offset {int(u.qoff[ui])} but the record at {rloc} has queue "
                                      f"offset {int(f['queue_offset'][ri])}")
        if int(u.tags[ui]) != tags:
            add(where, at, "cq-unit", f"tags code {int(u.tags[ui])} != {tags} expected from the record at {rloc}")

    # ---------------------------------------------------------------------------------------

    def _index(self) -> None:
        """Every key IndexService.buildIndex puts for a record (topic#UNIQ_KEY, topic#each
        non-empty KEYS token; not for ROLLBACK records) must be among the reachable entries."""
        t, pos, f = self.task, self.pos, self.f
        assert t.index is not None
        rows = (f["sys_flag"] & TRAN_MASK) != ROLLBACK
        rows &= pos >= t.index_from
        us, ue = self.values[MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX]
        uniq = np.flatnonzero(rows & (us >= 0))
        ks, ke = self.values[MessageConst.PROPERTY_KEYS]
        key_rows = np.flatnonzero(rows & (ks >= 0))
        tok_s, tok_e, tok_r = self._tokens(ks[key_rows], ke[key_rows], key_rows)
        start = np.concatenate([us[uniq], tok_s])
        end = np.concatenate([ue[uniq], tok_e])
        row = np.concatenate([uniq, tok_r])
        if row.size == 0:
            return
        self.res.index_keys += int(row.size)
        prefix = np.array([java_string_hash(name + "#") for name in self.topic_names], dtype=np.int64)
        h = J.combine(prefix[self.topic_idx[row]], self.hasher.hash(start, end), self.hasher.utf16_length(start, end))
        key_hash = J.index_hash(h)
        # membership of (offset, hash) among the reachable pairs of this batch's offsets
        ix = t.index
        lo, hi = np.searchsorted(ix.phy, pos[0]), np.searchsorted(ix.phy, pos[-1], side="right")
        found = _pairs_among(ix.phy[lo:hi], ix.hash[lo:hi], pos[row], key_hash, pos[0])
        for k in np.flatnonzero(~found).tolist():
            r = int(row[k])
            key = f"{self._topic(r)}#{self.hasher.text(int(start[k]), int(end[k]))}"
            self.probs.add(f"{self.rel}", int(self.P[r]), "index-missing",
                           f"key '{key}' (hash {int(key_hash[k])}) of this record is not found in the index")

    def _tokens(self, s: np.ndarray, e: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The non-empty KEY_SEPARATOR-separated tokens of the ranges [s, e) (of records
        ``rows``), in order: the ranges' own ends and the separators inside them bound them."""
        data = self.hasher.data
        sep = np.flatnonzero(data == ord(MessageConst.KEY_SEPARATOR))
        if sep.size and s.size:
            r = np.searchsorted(s, sep, side="right") - 1
            sep = sep[(r >= 0) & (sep < e[np.maximum(r, 0)])]
        else:
            sep = sep[:0]
        if sep.size:  # two sorted runs each: the stable sort merges them
            starts = np.sort(np.concatenate([s, sep + 1]), kind="stable")
            ends = np.sort(np.concatenate([sep, e]), kind="stable")
        else:  # keys without separators (most): each range is its one token
            starts, ends = s, e
        keep = ends > starts
        starts, ends = starts[keep], ends[keep]
        owner = rows[np.searchsorted(s, starts, side="right") - 1]
        return starts, ends, owner


MAX_PROBES = 8  # entries at one offset probed one by one; more (a damaged index) take the sort


def _pairs_among(phy: np.ndarray, hsh: np.ndarray, want_phy: np.ndarray, want_hash: np.ndarray,
                 origin: int) -> np.ndarray:
    """Is each (want_phy, want_hash) among the pairs (phy, hsh)? ``phy`` is sorted, so each
    wanted offset's entries are a run found by binary search, and runs are short (a record has
    a key or two): probing them side by side beats sorting the pairs (``origin``: an offset
    no pair is below, for the sort's packed keys)."""
    if phy.size == 0:
        return np.zeros(want_phy.size, bool)
    if phy.size == want_phy.size:
        # usually the wanted pairs are the reachable ones, in the order dispatch put them (a
        # record's UNIQ_KEY, then its keys): equal side by side, each is found
        order = np.argsort(want_phy, kind="stable")
        if (phy == want_phy[order]).all() and (hsh == want_hash[order]).all():
            return np.ones(want_phy.size, bool)
    a = np.searchsorted(phy, want_phy)
    found = np.zeros(want_phy.size, bool)
    last = phy.size - 1
    for k in range(MAX_PROBES + 1):
        i = np.minimum(a + k, last)
        at = (a + k <= last) & (phy[i] == want_phy)  # still within the offset's run
        if not at.any():
            return found
        if k == MAX_PROBES:
            break
        found |= at & (hsh[i] == want_hash)
    have = np.sort(((phy - origin) << 31) | hsh.astype(np.int64))
    want = ((want_phy - origin) << 31) | want_hash
    j = np.minimum(np.searchsorted(have, want), have.size - 1)
    return have[j] == want
