"""Narrow integer columns for the trip through Spark (pickled task inputs and results).

Everything a verify task hands on crosses the JVM twice (the task's result to the driver, the
driver's cut of it to the next tasks), and the JVM's CPU grows with the bytes. The int64 (and
int32) columns involved are mostly small or sorted: commit-log offsets that grow by a record or
a few at a time, queue offsets that grow by one or stay (queues interleave), sizes of a few KiB,
file numbers below a few thousand. So a column travels as the narrowest of int8/16/32 its
values fit, or as such steps from its first value, whichever is narrower, and as it is
otherwise -- exact in every case, and given back in its own dtype. Steps that are narrow but
for a few (a concatenation of queues jumps back at each queue's start) travel narrow with
the few kept aside.
"""
from __future__ import annotations

import numpy as np

_NARROW = tuple((np.iinfo(t).min, np.iinfo(t).max, np.dtype(t)) for t in (np.int8, np.int16, np.int32))
_FEW = 32  # steps kept aside: at most one in _FEW (and columns of at least _FEW steps)


def _fits(lo: int, hi: int, below: int) -> np.dtype | None:
    """The narrowest of int8/16/32 holding [lo, hi] that is narrower than ``below`` bytes."""
    for tmin, tmax, t in _NARROW:
        if t.itemsize >= below:
            return None
        if tmin <= lo and hi <= tmax:
            return t
    return None


def pack(a: np.ndarray) -> tuple:
    """A picklable, usually 2-8x smaller, form of the integer array ``a`` (see unpack)."""
    a = np.asarray(a)
    if a.size == 0:
        return ("raw", a)
    t = _fits(int(a.min()), int(a.max()), a.dtype.itemsize)
    d = np.diff(a.astype(np.int64, copy=False))
    td = _fits(int(d.min()), int(d.max()), (t or a.dtype).itemsize) if d.size else np.dtype(np.int8)
    width = (td or t or a.dtype).itemsize  # bytes a value takes in the best form so far
    for _tmin, _tmax, nt in _NARROW[:2] if d.size >= _FEW else ():
        if nt.itemsize >= width:
            break
        wide = (d < _tmin) | (d > _tmax)
        k = int(np.count_nonzero(wide))
        if k * _FEW <= d.size:  # the few wide steps (16 bytes each with their positions) aside
            at = np.flatnonzero(wide)
            narrow = d.astype(nt)
            narrow[at] = 0
            return ("x", a.dtype.str, int(a[0]), narrow, at, d[at])
    if td is not None:
        return ("d", a.dtype.str, int(a[0]), d.astype(td))
    if t is not None:
        return ("v", a.dtype.str, a.astype(t))
    return ("raw", a)


def unpack(p: tuple) -> np.ndarray:
    """The array ``pack`` was given (same values, same dtype)."""
    if p[0] == "raw":
        return p[1]
    if p[0] == "v":
        return p[2].astype(p[1])
    steps = p[3]
    if p[0] == "x":
        steps = steps.astype(np.int64)
        steps[p[4]] = p[5]
    out = np.empty(steps.size + 1, np.int64)
    out[0] = p[2]
    np.cumsum(steps, dtype=np.int64, out=out[1:])
    out[1:] += p[2]
    return out.astype(p[1], copy=False)
