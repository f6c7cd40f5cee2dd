"""The index side of ``rmqd spark verify``: what each index file lets a lookup find.

A task reads one index file (header, slots and its used entries only), runs its checks and
finds every entry a lookup of its own key reaches through its slot's chain. A record's key is
indexed when its (commit-log offset, key hash) is among those entries' (see
spark/verify_records.py), so each commit-log task needs the reachable entries of its byte
range. When the file's entries are in offset order (dispatch appends them so), the task
returns only where each split's entries lie in the file and the few that are not reachable:
the commit-log tasks read their entries from the file themselves (IndexSlice). Otherwise it
returns the (offset, hash) pairs, sorted, as two numpy columns, which the driver merges and
cuts by byte range.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rmqd.spark import compact, scan
from rmqd.spark import layout as L
from rmqd.spark.verify_queues import ProblemRow


@dataclass
class Reachable:
    """(commit-log offset, key hash) of reachable entries, sorted by offset (a record's keys
    in any order: whoever looks them up sorts the few pairs of its range)."""

    phy: np.ndarray   # int64
    hash: np.ndarray  # int32 (IndexFile's non-negative key hash)

    def __len__(self) -> int:
        return int(self.phy.size)

    def __getstate__(self) -> dict:  # offsets in order: narrow steps on the way (spark/compact.py)
        return {"phy": compact.pack(self.phy), "hash": self.hash}

    def __setstate__(self, state: dict) -> None:
        self.phy, self.hash = compact.unpack(state["phy"]), state["hash"]

    def take(self, idx: slice) -> "Reachable":
        return Reachable(self.phy[idx], self.hash[idx])

    @classmethod
    def merge(cls, parts: list["Reachable"]) -> "Reachable":
        """Concatenated in file order (index files follow the commit log, so this is usually
        in offset order already); sorted only when it is not."""
        if not parts:
            return cls(np.zeros(0, np.int64), np.zeros(0, np.int32))
        return cls(np.concatenate([p.phy for p in parts]), np.concatenate([p.hash for p in parts])).by_offset()

    def by_offset(self) -> "Reachable":
        if self.phy.size > 1 and not (np.diff(self.phy) >= 0).all():
            order = np.argsort(self.phy, kind="stable")
            return Reachable(self.phy[order], self.hash[order])
        return self


@dataclass(frozen=True)
class IndexSlice:
    """``count`` entries from byte ``pos`` of an index file: those pointing into one commit-log
    split; ``dropped``: the ones (by position in the slice) a lookup cannot reach."""

    path: str
    pos: int
    count: int
    dropped: np.ndarray

    def read(self) -> Reachable:
        e = np.fromfile(self.path, dtype=L.INDEX_ENTRY_DTYPE, count=self.count, offset=self.pos)
        if e.size != self.count:
            raise RuntimeError(f"{self.path}: {self.count - e.size} index entries gone since they were checked")
        keep = np.ones(e.size, bool)
        keep[self.dropped] = False
        return Reachable(e["phyOffset"][keep].astype(np.int64), e["keyHash"][keep].astype(np.int32))


@dataclass
class IndexFileResult:
    reachable: Reachable | None  # None: the commit-log tasks read the entries (cuts, dropped)
    entries: int            # entries in the file (1..indexCount-1)
    min_offset: int | None  # the smallest commit-log offset of any of its entries
    problems: list[ProblemRow]
    path: str = ""
    entry0: int = 0                  # byte position of entry 0 in the file
    cuts: np.ndarray | None = None   # per split: [first, end) entry numbers pointing into it
    dropped: np.ndarray | None = None  # entry numbers not reachable (or with a negative hash), sorted

    def slice(self, split: int) -> IndexSlice | None:
        """The entries of split number ``split`` (None: none)."""
        assert self.cuts is not None and self.dropped is not None
        a, b = (int(x) for x in self.cuts[split])
        if b <= a:
            return None
        d = self.dropped[(self.dropped >= a) & (self.dropped < b)] - a
        return IndexSlice(self.path, self.entry0 + a * L.INDEX_ENTRY_SIZE, b - a, d)


@dataclass(frozen=True)
class IndexTask:
    ref: scan.IndexFileRef
    slot_num: int | None
    index_num: int | None
    bounds: tuple[np.ndarray, np.ndarray] | None = None  # the commit-log splits' [lo, hi) offsets


def read_index_file(task: IndexTask) -> IndexFileResult:
    """A task: one index file's problems and reachable (offset, hash) pairs."""
    probs = scan._Problems()
    v = scan.read_index_checked(task.ref, task.slot_num, task.index_num, probs)
    if v is None or v.count <= 1:
        if v is not None:
            scan.check_index_file(task.ref, v, None, probs)
        return IndexFileResult(Reachable.merge([]), 0, None, probs.rows)
    reach = scan.index_reachability(v)
    scan.check_index_file(task.ref, v, reach, probs)
    e = v.entries[1:v.count]
    phy = e["phyOffset"].astype(np.int64)
    # a negative stored hash is no record's (they are abs values): never a match
    r = reach[1:] & (e["keyHash"] >= 0)
    if task.bounds is not None and (phy[1:] >= phy[:-1]).all():
        # in offset order: each split's entries are one stretch of the file
        lo, hi = task.bounds
        cuts = np.stack([np.searchsorted(phy, lo), np.searchsorted(phy, hi)], axis=1) + 1
        return IndexFileResult(None, int(e.size), int(phy.min()), probs.rows, path=task.ref.path,
                               entry0=int(scan._index_entry_pos(v, np.int64(0))), cuts=cuts,
                               dropped=np.flatnonzero(~r) + 1)
    kh = e["keyHash"][r].astype(np.int32)
    # entries are appended in dispatch order: already by offset unless the file is damaged
    return IndexFileResult(Reachable(phy[r], kh).by_offset(), int(e.size), int(phy.min()), probs.rows)


def own_index_entries(refs: tuple[scan.IndexFileRef, ...], slot_num: int | None, index_num: int | None,
                      lo: int, hi: int) -> tuple[Reachable | None, int, np.ndarray, np.ndarray]:
    """A commit-log task's own reading of the index entries pointing into [lo, hi), by binary
    search in each file, assuming every file is in offset order with every entry reachable
    (what dispatch writes). Returns the entries (None: no file has any, the check does not
    run), index_from, and per file its entry count and cut [first, end) ((files,) and
    (files, 2)) for the driver to compare with the index tasks' (read_index_file): where the
    assumption fails, they differ. Raises ValueError where read_index would."""
    counts = np.zeros(len(refs), np.int64)
    cuts = np.zeros((len(refs), 2), np.int64)
    parts = []
    index_from = None
    for k, ref in enumerate(refs):
        s, n = scan.index_geometry(ref.size, slot_num, index_num)
        e0 = L.INDEX_HEADER_SIZE + s * L.HASH_SLOT_SIZE
        # read_index's count: the header's, within the entries the file has room for
        with open(ref.path, "rb") as fh:
            head = fh.read(min(L.INDEX_HEADER_SIZE, ref.size))
        raw = int(np.frombuffer(head, L.INDEX_HEADER_DTYPE)[0]["indexCount"]) if len(head) == L.INDEX_HEADER_SIZE else 0
        have = max(0, min(n, (ref.size - e0) // L.INDEX_ENTRY_SIZE))
        count = max(1, min(raw, have))
        if count <= 1:
            continue
        counts[k] = count - 1
        with scan._Mapped(ref.path) as m:
            e = m.u8[e0:e0 + count * L.INDEX_ENTRY_SIZE].view(L.INDEX_ENTRY_DTYPE)
            phy = e["phyOffset"]
            first = int(phy[1])
            index_from = first if index_from is None else min(index_from, first)
            i0 = scan.first_true(1, count, lambda i: int(phy[i]) >= lo)
            i1 = scan.first_true(i0, count, lambda i: int(phy[i]) >= hi)
            cuts[k] = i0, i1
            parts.append(Reachable(phy[i0:i1].astype(np.int64), e["keyHash"][i0:i1].astype(np.int32)))
            del e, phy
    if counts.sum() == 0:
        return None, 0, counts, cuts
    return Reachable.merge(parts), index_from or 0, counts, cuts

