"""Java's hashing and hash-map iteration order, which RocketMQ's bytes carry.

Why a module: a RocketMQ broker serializes java.util.HashMap / ConcurrentHashMap contents
(message properties, header extFields, config JSON tables) in the map's iteration order,
i.e. by hash bucket. Reproducing those bytes needs Java's ``String.hashCode`` and the
bucket order of a table of the size the JDK would have grown to - one implementation here
for every caller (wire codecs, the store's config files, processors)."""

from __future__ import annotations

import functools
import operator
from typing import Any, Hashable, Iterable, Mapping, TypeVar

__all__ = [
    "java_string_hash", "java_string_hash_from", "java_hash", "hashmap_capacity", "chm_table_size", "java_hashmap_order",
    "java_hashmap_key_order", "java_concurrent_hashmap_order", "ConcurrentHashMapOrder", "hashmap_permutation",
]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
HASHMAP_DEFAULT_CAPACITY = 16
_POW31 = [pow(31, i, 1 << 32) for i in range(511, -1, -1)]  # 31^511 .. 31^0 (mod 2^32)
#: True where this module runs as a Cython build (scripts/build_ext): the hashes then take a plain
#: loop, which javamap.pxd turns into C; interpreted, map/sum keeps the loop in C instead.
COMPILED = not __file__.endswith(".py")


def java_string_hash(s: str) -> int:
    """Java String.hashCode (over UTF-16 code units) as a signed 32-bit int.

    sum(c[i] * 31^(n-1-i)) mod 2^32, computed with map/sum so the loop runs in C."""
    if s.isascii():
        if COMPILED:
            return _ascii_hash(0, s.encode("ascii"))
        units: bytes | list[int] = s.encode("ascii")
    else:
        raw = s.encode("utf-16-be", "surrogatepass")
        units = [(raw[i] << 8) | raw[i + 1] for i in range(0, len(raw), 2)]
    n = len(units)
    if n <= 512:
        h = sum(map(operator.mul, units, _POW31[512 - n:])) & 0xFFFFFFFF
    else:
        h = 0
        for ch in units:
            h = (31 * h + ch) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def java_string_hash_from(prefix_hash: int, s: str) -> int:
    """``(prefix + s).hashCode()`` from ``prefix.hashCode()``: the hash is a polynomial, so
    h(p + s) = h(p) * 31^len(s) + h(s) (mod 2^32, len in UTF-16 units). Lets the index hash
    ``topic#key`` without building the string or re-hashing the shared prefix."""
    if s.isascii() and len(s) < 512:
        if COMPILED:
            return _ascii_hash(prefix_hash & 0xFFFFFFFF, s.encode("ascii"))
        n = len(s)
        h = prefix_hash * _POW31[511 - n] + sum(map(operator.mul, s.encode("ascii"), _POW31[512 - n:]))
    else:
        units = len(s.encode("utf-16-be", "surrogatepass")) // 2
        h = prefix_hash * pow(31, units, 1 << 32) + java_string_hash(s)
    h &= 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def _ascii_hash(h: int, data: bytes) -> int:
    """Horner's rule over ASCII bytes from hash ``h`` (unsigned), as a signed 32-bit int: the
    compiled form of the two hashes above (a C loop; interpreted it would be the slowest way)."""
    mask = 0xFFFFFFFF  # a typed local: Cython keeps a literal this large a Python int
    for c in data:
        h = (h * 31 + c) & mask
    return h - 0x100000000 if h > 0x7FFFFFFF else h


def java_hash(key: Any) -> int:
    """``key.hashCode()`` for the key types RocketMQ's maps use: String, Integer, Long."""
    if isinstance(key, str):
        return java_string_hash(key)
    if isinstance(key, int) and not isinstance(key, bool):
        if -0x80000000 <= key <= 0x7FFFFFFF:  # Integer.hashCode
            return key
        v = key & 0xFFFFFFFFFFFFFFFF  # Long.hashCode
        return (v ^ (v >> 32)) & 0xFFFFFFFF
    raise TypeError(f"no Java hash for {type(key).__name__}")


@functools.lru_cache(maxsize=4096)
def _spread(key: Any) -> int:
    """HashMap.hash / ConcurrentHashMap.spread: the hash with its high half folded in
    (keys repeat, so this is cached). CHM's extra ``& 0x7FFFFFFF`` never reaches a bucket."""
    h = java_hash(key) & 0xFFFFFFFF
    return h ^ (h >> 16)


_CACHED_KEYS_MAX = 64  # headers and properties: key sets repeat; big config tables are not cached


@functools.lru_cache(maxsize=4096)
def _cached_permutation(keys: tuple, table_size: int) -> tuple[int, ...] | None:
    return _permutation(keys, table_size)


def _permutation(keys: tuple, table_size: int) -> tuple[int, ...] | None:
    mask = table_size - 1
    perm = tuple(sorted(range(len(keys)), key=lambda i: _spread(keys[i]) & mask))
    return None if perm == tuple(range(len(keys))) else perm


def hashmap_permutation(keys: tuple, table_size: int) -> tuple[int, ...] | None:
    """Indexes of ``keys`` in the iteration order of a table of ``table_size`` buckets filled
    with them in this order (None: that order already). A bucket keeps insertion order
    (sorted() is stable); buckets with 8+ colliding keys (treeified in Java) are not modelled.
    Small key sets (request headers, message properties) repeat, so they are cached."""
    if len(keys) <= _CACHED_KEYS_MAX:
        return _cached_permutation(keys, table_size)
    return _permutation(keys, table_size)


def _bucket_order(mapping: Mapping[K, V], table_size: int) -> dict[K, V]:
    keys = tuple(mapping)
    perm = hashmap_permutation(keys, table_size)
    if perm is None:
        return dict(mapping)
    return {keys[i]: mapping[keys[i]] for i in perm}


def hashmap_capacity(max_size: int) -> int:
    """Table size of a default-constructed HashMap that has held ``max_size`` entries
    (16, doubled while size > 0.75 * capacity; a table never shrinks)."""
    cap = HASHMAP_DEFAULT_CAPACITY
    while max_size > cap * 0.75:
        cap *= 2
    return cap


def chm_table_size(initial_capacity: int | None) -> int:
    """Bins of ``new ConcurrentHashMap<>(initial_capacity)``; None = the no-arg
    constructor (16), which is what fastjson creates when it parses a map."""
    if initial_capacity is None:
        return 16
    n = 1
    while n < int(1.0 + initial_capacity / 0.75):  # JDK tableSizeFor(1 + cap / loadFactor)
        n <<= 1
    return n


def java_hashmap_order(mapping: Mapping[K, V], max_size: int | None = None, *,
                       capacity: int | None = None) -> dict[K, V]:
    """The mapping re-ordered as a ``java.util.HashMap`` filled in this order iterates.

    ``max_size``: the most entries the Java map ever held (a removed key still grew the
    table); ``capacity`` overrides the table size outright."""
    if capacity is None:
        capacity = hashmap_capacity(max(len(mapping), max_size or 0))
    return _bucket_order(mapping, capacity)


def java_hashmap_key_order(keys: Iterable[K], max_size: int | None = None) -> tuple:
    """Just the key order of :func:`java_hashmap_order` (to precompute a fixed layout)."""
    keys = tuple(keys)
    perm = hashmap_permutation(keys, hashmap_capacity(max(len(keys), max_size or 0)))
    return keys if perm is None else tuple(keys[i] for i in perm)


def _chm_table_size_for(size: int, initial_capacity: int | None) -> int:
    n = chm_table_size(initial_capacity)
    while size >= n - (n >> 2):  # sizeCtl = 0.75 n: the table doubled
        n <<= 1
    return n


def java_concurrent_hashmap_order(table: Mapping[K, V], initial_capacity: int | None) -> dict[K, V]:
    """``table`` re-ordered as a ``ConcurrentHashMap`` built with ``initial_capacity``
    (see :func:`chm_table_size`) and holding the same keys iterates them (fastjson writes
    maps in iteration order). The table doubles as the JDK's does, at 3/4 full."""
    return _bucket_order(table, _chm_table_size_for(len(table), initial_capacity))


class ConcurrentHashMapOrder:
    """:func:`java_concurrent_hashmap_order`'s key order for one big table ordered again and
    again as it changes a little (topics.json, saved after each change): each key's bucket is
    remembered for the current table size, so ordering again is one sort in C."""

    def __init__(self, initial_capacity: int | None) -> None:
        self.initial_capacity = initial_capacity
        self._size = 0
        self._buckets: dict[Any, int] = {}

    def keys(self, table: Mapping[K, Any]) -> list[K]:
        n = _chm_table_size_for(len(table), self.initial_capacity)
        buckets = self._buckets
        if n != self._size or len(buckets) > 2 * len(table) + 64:  # resized, or many keys gone
            buckets = self._buckets = {}
            self._size = n
        missing = table.keys() - buckets.keys()
        if missing:
            mask, spread = n - 1, _spread.__wrapped__
            for key in missing:
                buckets[key] = spread(key) & mask
        return sorted(table, key=buckets.__getitem__)  # stable: a bucket keeps insertion order
