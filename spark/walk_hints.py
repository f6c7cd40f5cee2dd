"""Where records are likely to start in a commit-log byte range, from the consume queues.

The commit-log walk follows the chain of record sizes one record at a time (a Python step
each: about a third of a scan task's own time). The consume-queue units pointing into a
split name most of its record starts; spark/scan.py's ``_Runs`` checks them with numpy and
lets the walk take a run of well-formed, back-to-back records in one step when the chain
reaches its first record. So these starts are only a hint: whatever the queues hold (stale,
damaged, another store's), the positions the walk yields are the ones it would have found
alone. A store without queues is walked record by record, as before.

Each queue file is assumed to be what dispatch leaves - fillPreBlank's blank units, then
written units in commit-log-offset order, then zeros - to find its written span and offset
range with a few probes; only files whose range overlaps the split are read whole. Where that
assumption fails the hint is merely poorer.
"""
from __future__ import annotations

import numpy as np

from rmqd.spark import layout as L
from rmqd.spark import scan

# Probing a queue file costs ~40 us (a map, two binary searches, the unmap) in every task, and
# the hints save ~10 % of a task's walk and decode, ~14 ms per 128 MiB split: past a few hundred
# queue files the probes cost more than they save, and the walk goes record by record instead
MAX_FILES = 256


def hint_files(root) -> tuple[scan.QueueFile, ...] | None:
    """The queue files the commit-log tasks should take hints from (listed once, by the
    driver), or None when there are too many for the hints to pay."""
    files = scan.queue_files(root)
    return tuple(files) if 0 < len(files) <= MAX_FILES else None


def record_starts(files: list[scan.QueueFile], lo: int, hi: int) -> np.ndarray | None:
    """Sorted physical offsets in [lo, hi) that some written unit of ``files`` points to
    (None: no unit does)."""
    parts = []
    unit = L.CQ_STORE_UNIT_SIZE
    for f in files:
        n = f.size // unit
        if n == 0:
            continue
        with scan._Mapped(f.path) as m:
            u = m.u8[:n * unit].view(L.CQ_DTYPE)
            clo, size = u["commitLogOffset"], u["size"]
            a = scan.first_true(0, n, lambda i: int(size[i]) != L.INT_MAX)
            b = scan.first_true(a, n, lambda i: int(size[i]) <= 0)
            if b > a and int(clo[a]) < hi and int(clo[b - 1]) >= lo:
                c = clo[a:b].astype(np.int64)
                c = c[(c >= lo) & (c < hi)]
                if c.size:
                    parts.append(c)
            del u, clo, size
    if not parts:
        return None
    out = np.concatenate(parts)
    out.sort(kind="stable")
    return out
