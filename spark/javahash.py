"""Java ``String.hashCode`` of many byte ranges of one buffer at once (numpy, no per-string Python).

The hash is the polynomial sum(c[i] * 31^(n-1-i)) mod 2^32 over UTF-16 code units; for ASCII
bytes the units are the bytes. 31 is odd, so it has an inverse modulo 2^32, and the hash of any
range [a, b) of a buffer d follows from one prefix sum over the whole buffer:

    G[i] = sum_{j<i} d[j] * 31^-j          (mod 2^32)
    hash(d[a:b]) = 31^(b-1) * (G[b] - G[a])  (mod 2^32)

so a batch's property bytes are scanned three times (widen, weight, cumulative sum) whatever
the number of ranges, and every TAGS value, UNIQ_KEY and KEYS token then costs O(1). uint32
arithmetic wraps exactly as Java's int does. Ranges holding a byte >= 0x80 are not ASCII: their
UTF-16 units differ from the bytes, so they are hashed by wire.javamap's per string (rare).
"""
from __future__ import annotations

import numpy as np

from rmqd.wire.javamap import java_string_hash

_INV31 = pow(31, -1, 1 << 32)
_BLOCK = 1 << 16
_pow: np.ndarray = np.ones(1, np.uint32)   # 31^j mod 2^32
_ipow: np.ndarray = np.ones(1, np.uint32)  # 31^-j mod 2^32


def _table(x: int, n: int) -> np.ndarray:
    """x^j mod 2^32 for j < n: a block of powers times the powers of x^block (an outer
    product: vectorised, where a cumulative product of n items is a serial loop)."""
    m = (n + _BLOCK - 1) // _BLOCK
    low = np.cumprod(np.concatenate([np.ones(1, np.uint32), np.full(_BLOCK - 1, x, np.uint32)]), dtype=np.uint32)
    step = np.uint32(int(low[-1]) * x & 0xFFFFFFFF)  # x^block
    high = np.cumprod(np.concatenate([np.ones(1, np.uint32), np.full(m - 1, step, np.uint32)]), dtype=np.uint32)
    return np.multiply.outer(high, low).ravel()[:n]


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """31^j and 31^-j for j < n (cached per process, grown by doubling)."""
    global _pow, _ipow
    if _pow.size < n:
        size = max(n, 2 * _pow.size, 1 << 22)
        _pow, _ipow = _table(31, size), _table(_INV31, size)
    return _pow[:n], _ipow[:n]


def pow31(n: np.ndarray) -> np.ndarray:
    """31^n mod 2^32 for non-negative ints ``n`` (uint32)."""
    p, _ = _powers(int(n.max(initial=0)) + 1)
    return p[n]


class RangeHasher:
    """String.hashCode of byte ranges [start, end) of ``data`` (a uint8 array)."""

    def __init__(self, data: np.ndarray) -> None:
        self.data = data
        p, ip = _powers(data.size + 1)
        self.p = p
        g = np.zeros(data.size + 1, np.uint32)
        np.multiply(data, ip[:data.size], out=g[1:])  # uint8 * uint32 into uint32, no widened copy
        np.cumsum(g[1:], dtype=np.uint32, out=g[1:])
        self.g = g
        # usually empty (every range is ASCII), which one max() tells faster than a search
        self.high = np.flatnonzero(data >= 0x80) if data.size and int(data.max()) >= 0x80 else np.zeros(0, np.int64)

    def ascii(self, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """True for ranges of bytes < 0x80 only."""
        if self.high.size == 0:
            return np.ones(start.shape, bool)
        return np.searchsorted(self.high, start) == np.searchsorted(self.high, end)

    def hash(self, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Signed 32-bit hashes (int64 array) of the ranges, as Java's String.hashCode of their
        UTF-8 decoding (invalid bytes as U+FFFD)."""
        nonempty = end > start
        last = np.where(nonempty, end - 1, 0)
        h = (self.p[last] * (self.g[end] - self.g[start])).astype(np.uint32)
        h[~nonempty] = 0
        out = h.view(np.int32).astype(np.int64)
        for i in np.flatnonzero(~self.ascii(start, end)).tolist():
            out[i] = java_string_hash(self.text(int(start[i]), int(end[i])))
        return out

    def text(self, start: int, end: int) -> str:
        return self.data[start:end].tobytes().decode("utf-8", "replace")

    def utf16_length(self, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Length in UTF-16 units (the bytes for ASCII ranges)."""
        n = (end - start).astype(np.int64)
        for i in np.flatnonzero(~self.ascii(start, end)).tolist():
            n[i] = len(self.text(int(start[i]), int(end[i])).encode("utf-16-le", "surrogatepass")) // 2
        return n


def combine(prefix_hash: np.ndarray, suffix_hash: np.ndarray, suffix_units: np.ndarray) -> np.ndarray:
    """hash(prefix + suffix) from the parts: h(p) * 31^len(s) + h(s) (mod 2^32), signed int64."""
    h = (prefix_hash.astype(np.uint32) * pow31(suffix_units) + suffix_hash.astype(np.uint32)).astype(np.uint32)
    return h.view(np.int32).astype(np.int64)


def index_hash(h: np.ndarray) -> np.ndarray:
    """IndexFile.indexKeyHashMethod: abs(hashCode), 0 for Integer.MIN_VALUE."""
    return np.where(h == -0x80000000, 0, np.abs(h))
