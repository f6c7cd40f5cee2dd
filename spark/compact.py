"""Narrow integer columns for the trip through Spark (pickled task inputs and results).

Everything a verify task hands on crosses the JVM twice (the task's result to the driver, the
driver's cut of it to the next tasks), at about 5 ms of wall time per MB on the development
machine. The int64 columns involved are mostly small or sorted: commit-log offsets that grow
by a record or a few at a time, queue offsets that grow by one, tags codes that are 32-bit
string hashes. So a column travels as int32 when its values fit, as int32 steps from its first
value when those fit, and as it is otherwise -- exact in every case.
"""
from __future__ import annotations

import numpy as np

_I32 = np.iinfo(np.int32)


def pack(a: np.ndarray) -> tuple:
    """A picklable, usually 2x smaller, form of the int64 array ``a`` (see unpack)."""
    a = np.asarray(a, dtype=np.int64)
    if a.size == 0:
        return ("raw", a)
    lo, hi = int(a.min()), int(a.max())
    if _I32.min <= lo and hi <= _I32.max:
        return ("i32", a.astype(np.int32))
    d = np.diff(a)
    if d.size == 0 or (_I32.min <= int(d.min()) and int(d.max()) <= _I32.max):
        return ("d32", int(a[0]), d.astype(np.int32))
    return ("raw", a)


def unpack(p: tuple) -> np.ndarray:
    """The int64 array ``pack`` was given."""
    if p[0] == "raw":
        return p[1]
    if p[0] == "i32":
        return p[1].astype(np.int64)
    out = np.empty(p[2].size + 1, np.int64)
    out[0] = p[1]
    np.cumsum(p[2], dtype=np.int64, out=out[1:])
    out[1:] += p[1]
    return out
