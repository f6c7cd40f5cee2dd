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

from spark import compact, scan
from spark import layout as L
from spark.verify_queues import ProblemRow


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
