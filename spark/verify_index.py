"""The index side of ``rmqd spark verify``: what each index file lets a lookup find.

A task reads one index file (header, slots and its used entries only), runs its checks and
returns the (commit-log offset, key hash) of every entry a lookup of its own key reaches
through its slot's chain, sorted, as two numpy columns (12 bytes an entry). The driver merges
the files' pairs and gives each commit-log task those of its byte range: a record's key is
indexed when its (offset, hash) is among them (see spark/verify_records.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spark import compact, scan
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


@dataclass
class IndexFileResult:
    reachable: Reachable
    entries: int            # entries in the file (1..indexCount-1)
    min_offset: int | None  # the smallest commit-log offset of any of its entries
    problems: list[ProblemRow]


@dataclass(frozen=True)
class IndexTask:
    ref: scan.IndexFileRef
    slot_num: int | None
    index_num: int | None


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
    kh = e["keyHash"][r].astype(np.int32)
    # entries are appended in dispatch order: already by offset unless the file is damaged
    return IndexFileResult(Reachable(phy[r], kh).by_offset(), int(e.size), int(phy.min()), probs.rows)
