"""Columnar readers of store files: one split of a file -> Arrow record batches.

These are plain functions (no Spark) so the data source, the benchmark and the tests share them.
A commit-log split is a byte range of one file. Records never span files, but they do span split
boundaries, so a split owns the records that *start* inside it: it walks the chain of record
sizes from its first record and finishes the last one past its end. A split that does not begin
at the file start finds its first record by resynchronising: the next position holding a record
magic code whose stored PHYSICALOFFSET equals the file's start offset plus that position (or a
BLANK record whose size reaches the end of the file) -- a record locates itself, so no index of
record starts is needed and splits are planned without reading the files.

Per record only the chain walk (two ints) runs in Python; the heads of a batch are then copied
with one fancy index into a one-byte-stride view of the file whose items are whole heads (numpy
record type derived from ``wire.message.RECORD_FIELDS``, see spark/layout.py), and properties
are split into a map by locating their separator bytes with numpy. The chain walk is a tight
loop (one struct unpack per record) and body CRCs are one CRC-32 call per record over a
memoryview of the map; everything else is per batch. Only the columns asked for are computed.
"""
from __future__ import annotations

import mmap
import os
import re
import struct
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rmqd.spark import layout as L
from rmqd.spark.schemas import ARROW_SCHEMAS
from rmqd.store.config import MessageStoreConfig
from rmqd.store.consumequeue import SCHEDULE_TOPIC, tags_code_of
from rmqd.wire.javamap import java_string_hash
from rmqd.wire.message import MessageConst, create_offset_msg_id, format_socket_address

try:  # ISA-L's CRC-32 (same polynomial and values as zlib's) is ~3.5x faster on 1 KiB bodies
    from isal.isal_zlib import crc32
except ImportError:  # pragma: no cover - an executor without the spark extra's isal
    from zlib import crc32

_HEAD2 = struct.Struct(">iI")  # totalSize, magic: the first two RECORD_FIELDS
assert L.V4.pos["total_size"] == 0 and L.V4.pos["magic"] == 4
_PHYS = struct.Struct(">q")
# magic codes as they appear on disk; a candidate record starts 4 bytes before the match
_SYNC = re.compile(b"|".join(re.escape(struct.pack(">I", m))
                             for m in (L.MAGIC_CODE_V1, L.MAGIC_CODE_V2, L.BLANK_MAGIC_CODE)))
# every byte value -> its two upper-case hex digits, as one 2-byte item in memory order
_HEX_PAIRS = np.frombuffer(b"".join(b"%02X" % i for i in range(256)), dtype="V2")
MAX_BATCH_BYTES = 64 * 1024 * 1024  # keeps int32 binary offsets far from overflow
DEFAULT_SPLIT_SIZE = 128 * 1024 * 1024
DEFAULT_BATCH_ROWS = 8192

COMMITLOG_DIR = "commitlog"
CONSUMEQUEUE_DIR = "consumequeue"
INDEX_DIR = "index"


# --------------------------------------------------------------------------------------------
# planning


@dataclass(frozen=True)
class CommitLogSplit:
    """Records starting in [start, end) of one commit-log file."""

    path: str
    name: str
    base: int        # the file's first physical offset (its name)
    size: int        # file length
    start: int
    end: int


@dataclass(frozen=True)
class QueueFile:
    path: str
    topic: str
    queue_id: int
    name: str
    size: int


@dataclass(frozen=True)
class IndexFileRef:
    path: str
    name: str
    size: int


def _is_offset_name(name: str) -> bool:
    return len(name) == 20 and name.isdigit()


def commitlog_dir(root: str | os.PathLike) -> Path:
    return Path(root) / COMMITLOG_DIR


def commitlog_files(root: str | os.PathLike) -> list[tuple[str, Path, int, int]]:
    """(name, path, base offset, size) of the commit-log files, in offset order."""
    d = commitlog_dir(root)
    if not d.is_dir():
        return []
    out = []
    for p in sorted(d.iterdir()):
        if p.is_file() and _is_offset_name(p.name):
            out.append((p.name, p, int(p.name), p.stat().st_size))
    return out


def plan_commitlog(root: str | os.PathLike, split_size: int = DEFAULT_SPLIT_SIZE) -> list[CommitLogSplit]:
    if split_size <= 0:
        raise ValueError(f"splitSize must be positive, got {split_size}")
    splits = []
    for name, path, base, size in commitlog_files(root):
        for start in range(0, max(size, 1), split_size):
            splits.append(CommitLogSplit(str(path), name, base, size, start, min(start + split_size, size)))
    return splits


def queue_files(root: str | os.PathLike) -> list[QueueFile]:
    d = Path(root) / CONSUMEQUEUE_DIR
    out: list[QueueFile] = []
    if not d.is_dir():
        return out
    for tdir in sorted(d.iterdir()):
        if not tdir.is_dir():
            continue
        for qdir in sorted(tdir.iterdir(), key=lambda p: (not p.name.isdigit(), int(p.name) if p.name.isdigit() else 0)):
            if not qdir.is_dir() or not qdir.name.lstrip("-").isdigit():
                continue
            for f in sorted(qdir.iterdir()):
                if f.is_file() and _is_offset_name(f.name):
                    out.append(QueueFile(str(f), tdir.name, int(qdir.name), f.name, f.stat().st_size))
    return out


def group_by_size(items: list, size_of: Callable[[object], int], target: int) -> list[list]:
    """Pack small files into partitions of about ``target`` bytes (keeps order)."""
    groups: list[list] = []
    cur: list = []
    acc = 0
    for it in items:
        if cur and acc + size_of(it) > target:
            groups.append(cur)
            cur, acc = [], 0
        cur.append(it)
        acc += size_of(it)
    if cur:
        groups.append(cur)
    return groups


def index_files(root: str | os.PathLike) -> list[IndexFileRef]:
    d = Path(root) / INDEX_DIR
    if not d.is_dir():
        return []
    return [IndexFileRef(str(p), p.name, p.stat().st_size) for p in sorted(d.iterdir())
            if p.is_file() and len(p.name) == 17 and p.name.isdigit()]


def infer_queue_file_size(files: list[QueueFile]) -> int:
    """mappedFileSizeConsumeQueue as the store was written: the most common file length."""
    sizes = Counter(f.size for f in files if f.size > 0 and f.size % L.CQ_STORE_UNIT_SIZE == 0)
    return sizes.most_common(1)[0][0] if sizes else 0


def index_geometry(size: int, hash_slot_num: int | None = None, index_num: int | None = None) -> tuple[int, int]:
    """(maxHashSlotNum, maxIndexNum) of an index file: the given ones, RocketMQ's defaults if the
    size matches them, else the 1:4 ratio RocketMQ's defaults use."""
    if hash_slot_num and index_num:
        return hash_slot_num, index_num
    if size == L.index_file_size(5_000_000, 20_000_000):
        return 5_000_000, 20_000_000
    body = size - L.INDEX_HEADER_SIZE
    ratio_unit = L.HASH_SLOT_SIZE + 4 * L.INDEX_ENTRY_SIZE
    if hash_slot_num and (body - hash_slot_num * L.HASH_SLOT_SIZE) % L.INDEX_ENTRY_SIZE == 0:
        return hash_slot_num, (body - hash_slot_num * L.HASH_SLOT_SIZE) // L.INDEX_ENTRY_SIZE
    if body > 0 and body % ratio_unit == 0:
        s = body // ratio_unit
        return s, 4 * s
    raise ValueError(f"index file of {size} bytes: pass maxHashSlotNum and maxIndexNum")


# --------------------------------------------------------------------------------------------
# commit log: walking


class _Problems:
    """Collects (file, offset, check, problem) rows; ``None`` collector = reading rows, not checking."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, int, str, str]] = []

    def add(self, file: str, offset: int, check: str, problem: str) -> None:
        self.rows.append((file, int(offset), check, problem))

    def batch(self) -> pa.RecordBatch:
        cols = list(zip(*self.rows)) if self.rows else [[], [], [], []]
        schema = ARROW_SCHEMAS["problems"]
        return pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(cols, schema)], schema=schema)


def first_true(lo: int, hi: int, at_or_past) -> int:
    """The first i in [lo, hi) with at_or_past(i) (hi: none), for a predicate false then true."""
    while lo < hi:
        mid = (lo + hi) // 2
        if at_or_past(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _acceptable(buf, base: int, c: int, n: int) -> bool:
    """Is there a record (or the BLANK / end of data) that resynchronisation would accept at c?"""
    if c + 8 > n:
        return True
    total, magic = _HEAD2.unpack_from(buf, c)
    if magic == L.BLANK_MAGIC_CODE:
        return total == n - c
    if total == 0 and magic == 0:
        return True
    if magic in (L.MAGIC_CODE_V1, L.MAGIC_CODE_V2):
        return (L.MIN_RECORD_SIZE <= total <= n - c
                and _PHYS.unpack_from(buf, c + L.V4.pos["physical_offset"])[0] == base + c)
    return False


def _resync(buf, base: int, p: int, n: int) -> int | None:
    """First position >= p where a record (or the end-of-file BLANK) provably starts."""
    for m in _SYNC.finditer(buf, p + 4):
        c = m.start() - 4
        total, magic = _HEAD2.unpack_from(buf, c)
        if magic == L.BLANK_MAGIC_CODE:
            if total == n - c:
                return c
        elif L.MIN_RECORD_SIZE <= total <= n - c and \
                _PHYS.unpack_from(buf, c + L.V4.pos["physical_offset"])[0] == base + c:
            return c
    return None


class _Runs:
    """Runs of records the chain walk can take in one step: where records are expected to start
    (e.g. the consume-queue units of a split's range), those that are well formed and each end
    where the next expected one starts, checked with numpy. The walk still follows the chain:
    it takes a run only when its own position is the run's first record, so the positions it
    yields are exactly those of the record-by-record walk (a record no unit points to, such as
    a transaction's half message, is walked one by one up to the next run)."""

    MIN_RUN = 16

    def __init__(self, u8: np.ndarray, starts: np.ndarray) -> None:
        n = u8.shape[0]
        c = starts[(starts >= 0) & (starts <= n - 8)]
        if c.size > 1 and not (c[1:] > c[:-1]).all():  # a task's units come sorted: usually no sort
            c = np.unique(c)
        # totalSize and magic code of each, one 8-byte item copied per start
        head = _overlapping(u8, 8)[c].view(">i4").reshape(-1, 2).astype(np.int64)
        total, magic = head[:, 0], head[:, 1] & 0xFFFFFFFF
        ok = ((magic == L.MAGIC_CODE_V1) | (magic == L.MAGIC_CODE_V2)) & (total >= L.MIN_RECORD_SIZE) & (total <= n - c)
        c, total = c[ok], total[ok]
        nxt = c + total
        # run k..last: each record ends where the next one starts; ``last`` ends the run
        cut = np.flatnonzero(nxt[:-1] != c[1:])
        first = np.concatenate([[0], cut + 1]) if c.size else cut
        self.last = np.concatenate([cut, [c.size - 1]]) if c.size else cut
        # run start position -> (its first index, its last index) in c; short runs are left to
        # the record-by-record loop (a step costs ~0.2 us there, taking a run a few us)
        long = self.last - first + 1 >= self.MIN_RUN
        self.at: dict[int, tuple[int, int]] = dict(zip(c[first[long]].tolist(),
                                                       zip(first[long].tolist(), self.last[long].tolist())))
        self.c, self.nxt = c, nxt


def _joined(parts: list[np.ndarray], chunk: list[int]) -> np.ndarray:
    return np.concatenate(parts + [np.array(chunk, dtype=np.int64)]) if parts else np.array(chunk, dtype=np.int64)


def _walk(buf, split: CommitLogSplit, rel: str, problems: _Problems | None,
          batch_rows: int, runs: _Runs | None = None) -> Iterator[np.ndarray]:
    """Positions of the records starting in the split, in chunks of at most ``batch_rows``;
    with ``runs``, a run's records are taken in one step when the chain reaches its first
    record (see _Runs), where the plain walk steps through them one by one."""
    n = split.size
    base = split.base
    pos: int | None = split.start if split.start == 0 else _resync(buf, base, split.start, n)
    parts: list[np.ndarray] = []  # runs taken, and record-by-record stretches
    chunk: list[int] = []
    rows = chunk_bytes = 0  # rows: in parts
    at, c, ends = (runs.at, runs.c, runs.nxt) if runs is not None else ({}, None, None)
    cont = cont_last = cont_pos = -1  # the rest of a run a full chunk cut
    unpack = _HEAD2.unpack_from
    v1, v2, blank = L.MAGIC_CODE_V1, L.MAGIC_CODE_V2, L.BLANK_MAGIC_CODE
    min_size = L.MIN_RECORD_SIZE
    end = split.end
    while pos is not None and pos < end:
        run = (cont, cont_last) if cont >= 0 and pos == cont_pos else (at.get(pos) if at else None)
        if run is not None:
            # a run the chain has reached: all of it that fits the chunk in one step
            i, last = run
            lim = min(end, pos + MAX_BATCH_BYTES - chunk_bytes)
            j = min(last + 1, i + batch_rows - rows - len(chunk), int(np.searchsorted(c, lim)))
            if chunk:
                parts.append(np.array(chunk, dtype=np.int64))
                rows += len(chunk)
                chunk = []
            parts.append(c[i:j])
            rows += j - i
            nxt = int(ends[j - 1])
            chunk_bytes += nxt - pos
            pos = nxt
            cont, cont_last, cont_pos = (j, last, pos) if j <= last else (-1, -1, -1)
            if rows >= batch_rows or chunk_bytes >= MAX_BATCH_BYTES:
                yield _joined(parts, chunk)
                parts, chunk, rows, chunk_bytes = [], [], 0, 0
            continue
        if pos + 8 > n:
            if problems is not None and any(buf[pos:n]):
                problems.add(rel, pos, "record", f"{n - pos} trailing bytes too short for a record header")
            pos = None
            break
        total, magic = unpack(buf, pos)
        if magic == v1 or magic == v2:
            if min_size <= total <= n - pos:
                # the hot loop: follow the chain while records are well formed and the chunk
                # has room (rows, and bytes folded into the position limit)
                run0 = pos
                lim = min(end, n - 7, pos + MAX_BATCH_BYTES - chunk_bytes)
                append = chunk.append
                for _ in range(batch_rows - rows - len(chunk)):
                    if pos >= lim or (at and pos in at):  # a run's start: taken whole above
                        break
                    total, magic = unpack(buf, pos)
                    if (magic != v1 and magic != v2) or total < min_size or total > n - pos:
                        break
                    append(pos)
                    pos += total
                chunk_bytes += pos - run0
                if rows + len(chunk) >= batch_rows or chunk_bytes >= MAX_BATCH_BYTES:
                    yield _joined(parts, chunk)
                    parts, chunk, rows, chunk_bytes = [], [], 0, 0
                continue
            if problems is not None:
                problems.add(rel, pos, "record", f"record size {total} does not fit the file "
                                                 f"({n - pos} bytes left, minimum {min_size})")
            pos = _resync(buf, base, pos + 1, n)
            continue
        if magic == blank:
            if problems is not None and total != n - pos:
                problems.add(rel, pos, "blank-tail", f"BLANK record size {total} != {n - pos} bytes to the end of the file")
            pos = None
            break
        if total == 0 and magic == 0:
            if problems is not None:
                tail = np.frombuffer(buf, dtype=np.uint8, count=n - pos, offset=pos)
                nz = np.flatnonzero(tail)
                del tail
                if nz.size:
                    problems.add(rel, pos + int(nz[0]), "blank-tail",
                                 f"non-zero bytes after the end of data at {pos}")
            pos = None
            break
        nxt = _resync(buf, base, pos + 1, n)
        if problems is not None:
            problems.add(rel, pos, "record", f"bad magic code 0x{magic & 0xFFFFFFFF:08X} (size field {total}); "
                                             f"{(nxt if nxt is not None else n) - pos} bytes unreadable up to "
                                             + (f"the next record at {nxt}" if nxt is not None else "the end of the file"))
        pos = nxt
    if chunk or parts:
        yield _joined(parts, chunk)
    if problems is not None and pos is not None and pos < n and not _acceptable(buf, base, pos, n):
        # the next split resynchronises past this position: report it here, where the chain led
        total, magic = unpack(buf, pos) if pos + 8 <= n else (0, 0)
        problems.add(rel, pos, "record", f"record at the split boundary is unreadable "
                                         f"(magic 0x{magic & 0xFFFFFFFF:08X}, size {total}, or its physical offset is wrong)")




# --------------------------------------------------------------------------------------------
# commit log: columns


def _gather(u8: np.ndarray, pos: np.ndarray, code: str) -> np.ndarray:
    """The big-endian field ``code`` at byte positions ``pos`` of every record, as native ints."""
    dt = np.dtype(L.NP_CODE[code])
    idx = pos[:, None] + np.arange(dt.itemsize)
    return u8[idx].view(dt).reshape(-1).astype(dt.newbyteorder("="))


_SHORT_BYTES = 64  # mean length up to which _varbinary gathers bytes instead of building views (property
# strings of ~100 bytes copy faster through views; names, values and topics are shorter)
_INLINE = np.arange(12)  # Arrow binary_view: values up to 12 bytes live inside the 16-byte view
# a longer value's view: its length, its first 4 bytes, data buffer and offset
_VIEW = np.dtype([("length", "<i4"), ("prefix", "V4"), ("buffer", "<i4"), ("offset", "<i4")])


def _byte_index(starts: np.ndarray, lengths: np.ndarray, offsets: np.ndarray, total: int) -> np.ndarray:
    """Positions of the bytes of ranges (starts, lengths) laid end to end: a running sum of 1s
    that jumps at the first byte of each non-empty range."""
    nz = lengths > 0
    s, o, ln = starts[nz], offsets[:-1][nz], lengths[nz]
    idx = np.ones(total, dtype=np.int64)
    if s.size:
        idx[0] = s[0]
        idx[o[1:]] = s[1:] - (s[:-1] + ln[:-1] - 1)
    return np.cumsum(idx, out=idx)


def _varbinary(u8: np.ndarray, starts: np.ndarray, lengths: np.ndarray, typ: pa.DataType) -> pa.Array:
    """A binary/string Arrow array of the byte ranges ``u8[start:start+length]``.

    Short values (topics, properties) have their bytes gathered by one numpy index. Long ones
    (bodies) are first described as an Arrow binary_view array over the mapped file (built
    with numpy, no per-row Python), and Arrow's cast copies them into a contiguous binary or
    string array in one C++ pass. Callers that need valid UTF-8 check it (see _strings)."""
    n = len(starts)
    if n == 0:
        return pa.array([], typ)
    lengths = lengths.astype(np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    if total <= _SHORT_BYTES * n and total < 2 ** 31:
        # short values (topics, property names and values): gathering their bytes directly
        # beats building views; the caller validates UTF-8 where it matters (_strings)
        data = u8[_byte_index(starts, lengths, offsets, total)]
        return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)])
    lo = int(starts.min())
    hi = int((starts + lengths).max())
    # every view written as a long value's (length, 4-byte prefix, buffer 0, offset): field
    # by field, the prefix one 4-byte item per row; then the short values (inline bytes), few
    views = np.empty(n, dtype=_VIEW)
    views["length"] = lengths
    if u8.shape[0] >= 4:  # (a shorter buffer holds short values only: all inline below)
        views["prefix"] = _overlapping(u8, 4)[np.minimum(starts, u8.shape[0] - 4)]
    views["buffer"] = 0
    views["offset"] = starts - lo
    short = np.flatnonzero(lengths <= 12)
    if short.size:
        inline = u8[np.minimum(starts[short, None] + _INLINE, u8.shape[0] - 1)]
        inline[_INLINE[None, :] >= lengths[short, None]] = 0
        views.view(np.uint8).reshape(n, 16)[short, 4:16] = inline
    arr = pa.Array.from_buffers(pa.binary_view(), n, [None, pa.py_buffer(views), pa.py_buffer(u8[lo:max(hi, lo + 1)])])
    return arr.cast(typ)


def _strings(u8: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """UTF-8 strings; rows that are not valid UTF-8 are decoded with replacement characters and
    flagged (returned mask True = was valid)."""
    try:
        # built as binary (a cast to string would check UTF-8 as well as validate below), then
        # viewed as strings: ASCII bytes (usual) are valid UTF-8, anything else is checked
        arr = _varbinary(u8, starts, lengths, pa.binary()).view(pa.string())
        data = arr.buffers()[2]
        if data is not None and data.size and int(np.frombuffer(data, dtype=np.uint8).max()) >= 0x80:
            arr.validate(full=True)
        return arr, np.ones(len(arr), dtype=bool)
    except pa.ArrowInvalid:
        raw = _varbinary(u8, starts, lengths, pa.binary()).to_pylist()
        ok = np.ones(len(raw), dtype=bool)
        out = []
        for i, b in enumerate(raw):
            try:
                out.append(b.decode("utf-8"))
            except UnicodeDecodeError:
                ok[i] = False
                out.append(b.decode("utf-8", "replace"))
        return pa.array(out, type=pa.string()), ok


_MAP_TYPE = ARROW_SCHEMAS["commitlog"].field("properties").type
_LOOKUPS = ("TAGS", "KEYS", "UNIQ_KEY")
_VERIFY_LOOKUPS = _LOOKUPS + ("DELAY",)  # DELAY: the tags code of SCHEDULE_TOPIC_XXXX records


def _property_items(props: pa.Array) -> tuple[np.ndarray, ...]:
    """Byte bounds of the well-formed ``name\\x01value`` items of every ``name\\x01value\\x02...``
    string, found with numpy over the array's data buffer (no per-item Python).

    Returns (data, key start, separator position, item end, row) per kept item, in order. Items
    are skipped exactly as MessageDecoder.string2messageProperties skips them: the first \\x01
    of the item must leave a non-empty name and a non-empty value (hence >= 3 chars)."""
    n = len(props)
    bufs = props.buffers()
    offs = np.frombuffer(bufs[1], dtype=np.int32, count=n + 1, offset=props.offset * 4).astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(1, np.uint8)
    lo, hi = int(offs[0]), int(offs[-1])
    # a pass per separator byte (\x01, \x02) beats one pass for both and telling them apart
    used = data[lo:hi]
    seps = np.flatnonzero(used == 2)
    ones = np.flatnonzero(used == 1)
    if lo:
        seps += lo
        ones += lo
    # every item ends at a separator or at its row's end; a row end sorts before a separator at
    # the same position (such a separator is the first byte of the next row)
    key = np.concatenate([offs[1:] * 2, seps * 2 + 1])
    key.sort(kind="stable")
    is_sep = (key & 1).astype(bool)
    e = key >> 1
    s = np.empty_like(e)
    s[0] = lo
    s[1:] = e[:-1] + is_sep[:-1]
    row = np.zeros(e.size, dtype=np.int64)
    np.cumsum(~is_sep[:-1], out=row[1:])
    if ones.size == 0:
        empty = np.zeros(0, np.int64)
        return data, empty, empty, empty, empty
    full = e > s  # the empty item after each row's last \x02 holds nothing (and is never valid)
    if ones.size == int(np.count_nonzero(full)):
        # usually every non-empty item holds exactly one \x01: then the i-th \x01 lies inside
        # the i-th of them (items are disjoint and in order, so it is that item's first): no
        # search. (Dropping the empty items is right for the search below as well.)
        s, e, row = s[full], e[full], row[full]
        if ((ones >= s) & (ones < e)).all():
            valid = (ones > s) & (ones < e - 1)
            if valid.all():
                return data, s, ones, e, row
            return data, s[valid], ones[valid], e[valid], row[valid]
    j = np.searchsorted(ones, s)
    k = ones[np.minimum(j, ones.size - 1)]
    valid = (j < ones.size) & (k > s) & (k < e - 1)
    return data, s[valid], k[valid], e[valid], row[valid]


def _item_pieces(data: np.ndarray, s: np.ndarray, k: np.ndarray, e: np.ndarray) -> pa.Array:
    """Items that lie in order in one buffer, cut into consecutive string pieces: item i's name
    ``data[s:k]`` is piece 4i, its value ``data[k+1:e]`` piece 4i+2 (the separator and what lies
    before the next item fill 4i+1 and 4i+3). One offsets array over the buffer, no copy; Arrow's
    take then copies out the names, values or lookups wanted (cheaper than a numpy gather by
    byte)."""
    m = s.size
    if m == 0:
        return pa.array([], pa.string())
    lo = int(s[0])
    offsets = np.empty(4 * m + 1, dtype=np.int32)
    cuts = offsets[:-1].reshape(m, 4)
    cuts[:, 0] = s - lo
    cuts[:, 1] = k - lo
    cuts[:, 2] = cuts[:, 1] + 1
    cuts[:, 3] = e - lo
    offsets[-1] = cuts[-1, 3]
    return pa.Array.from_buffers(pa.string(), 4 * m, [None, pa.py_buffer(offsets), pa.py_buffer(data[lo:int(e[-1])])])


def properties_columns(props: pa.Array, with_map: bool = True,
                       names: tuple[str, ...] = _LOOKUPS) -> tuple[pa.MapArray | None, list[pa.Array]]:
    """``name\\x01value\\x02...`` strings -> (map<string,string>, one column per name of ``names``,
    default TAGS, KEYS, UNIQ_KEY); a repeated name keeps every item in the map and the last one
    for the lookups (as the HashMap RocketMQ builds keeps the last put). ``with_map=False``
    skips building the map (None)."""
    n = len(props)
    if n == 0:
        return pa.array([], _MAP_TYPE), [pa.array([], pa.string())] * len(names)
    data, s, k, e, row = _property_items(props)
    pieces = _item_pieces(data, s, k, e)
    m = None
    if with_map:
        offsets = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(np.bincount(row, minlength=n), out=offsets[1:])
        keys = pieces.take(pa.array(np.arange(0, 4 * s.size, 4, dtype=np.int32)))
        values = pieces.take(pa.array(np.arange(2, 4 * s.size, 4, dtype=np.int32)))
        m = pa.MapArray.from_arrays(pa.array(offsets), keys, values, type=_MAP_TYPE)
    looked = []
    key_len = k - s
    for hit in _items_named_each(data, s, key_len, names):
        pick = np.full(n, -1, dtype=np.int64)
        if hit.size:
            r = row[hit]
            last = np.ones(hit.size, dtype=bool)
            last[:-1] = r[:-1] != r[1:]  # items are in row order: the last hit of each row
            pick[r[last]] = hit[last]
        looked.append(pieces.take(pa.array(4 * pick + 2, mask=pick < 0)) if hit.size else pa.nulls(n, pa.string()))
    return m, looked


def _items_named(data: np.ndarray, key_start: np.ndarray, key_len: np.ndarray, name: str) -> np.ndarray:
    """Indexes of the items whose name is ``name``: compared as bytes with numpy (property names
    are compared exactly, as Java's HashMap.get does). A name of up to 8 bytes is compared as
    one big-endian word read at each candidate (one memcpy each, not one index per byte)."""
    want = np.frombuffer(name.encode(), dtype=np.uint8)
    cand = np.flatnonzero(key_len == want.size)
    if cand.size == 0:
        return cand
    starts = key_start[cand]
    if want.size <= 8 and data.size >= 8 and int(starts.max()) + 8 <= data.size:
        words = _overlapping(data, 8)[starts].view(">u8")
        same = (words >> np.uint64(8 * (8 - want.size))) == np.uint64(int.from_bytes(want.tobytes(), "big"))
        return cand[same]
    same = (data[starts[:, None] + np.arange(want.size)] == want).all(axis=1)
    return cand[same]


def _items_named_each(data: np.ndarray, key_start: np.ndarray, key_len: np.ndarray,
                      names: tuple[str, ...]) -> list[np.ndarray]:
    """_items_named of each of ``names``; names of up to 8 bytes (TAGS, KEYS, UNIQ_KEY, DELAY)
    share one gather of every item's first 8 bytes, compared as big-endian words."""
    wants = [np.frombuffer(name.encode(), dtype=np.uint8) for name in names]
    if not (key_start.size and all(0 < w.size <= 8 for w in wants) and data.size >= 8
            and int(key_start.max()) + 8 <= data.size):
        return [_items_named(data, key_start, key_len, name) for name in names]
    words = _overlapping(data, 8)[key_start].view(">u8").astype(np.uint64)
    out = []
    for want in wants:
        same = (words >> np.uint64(8 * (8 - want.size))) == np.uint64(int.from_bytes(want.tobytes(), "big"))
        out.append(np.flatnonzero(same & (key_len == want.size)))
    return out


def properties_map(props: pa.Array) -> pa.MapArray:
    """``name\\x01value\\x02...`` strings -> map<string,string>, skipping malformed items exactly as
    MessageDecoder.string2messageProperties does (no name, no value, shorter than 3 chars)."""
    return properties_columns(props)[0]


def _hosts(octets: np.ndarray, port: np.ndarray) -> pa.Array:
    """'a.b.c.d:port' of IPv4 hosts given as (n, 4) octets. A store has few distinct hosts (one
    store host, a client's host per connection), so each distinct (ip, port) is formatted once
    and the strings are taken by index."""
    ip = octets.astype(np.uint64) @ np.array([1 << 24, 1 << 16, 1 << 8, 1], dtype=np.uint64)
    key = (ip << np.uint64(32)) | port.astype(np.int64).astype(np.uint64) & np.uint64(0xFFFFFFFF)
    if key.size and (key == key[0]).all():  # one host in the batch (the store host always): no sort
        uniq, inverse = key[:1], np.zeros(key.size, dtype=np.int32)
    else:
        uniq, inverse = np.unique(key, return_inverse=True)
    text = [f"{k >> 56}.{(k >> 48) & 255}.{(k >> 40) & 255}.{(k >> 32) & 255}:"
            f"{(k & 0xFFFFFFFF) - ((k & 0x80000000) << 1)}" for k in uniq.tolist()]
    return pa.array(text, pa.string()).take(pa.array(inverse.reshape(-1).astype(np.int32)))


def _hex_upper(rows: np.ndarray) -> pa.Array:
    """Upper-case hex of each row of a 2-D uint8 array: each byte's two digits in one lookup."""
    n, w = rows.shape
    out = _HEX_PAIRS[rows]
    offsets = np.arange(0, n * 2 * w + 1, 2 * w, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(out)])


def _overlapping(u8: np.ndarray, itemsize: int) -> np.ndarray:
    """Every byte position of ``u8`` as the start of an ``itemsize``-byte opaque item (a
    read-only view with a one-byte stride): indexing it with record positions copies whole
    heads, one memcpy each. Opaque (void) items, because numpy copies a structured item field
    by field, ~4x slower; the copy is viewed as the structured head afterwards."""
    n = u8.shape[0] - itemsize + 1
    dt = np.dtype(f"V{itemsize}")
    if n <= 0:
        return np.zeros(0, dt)
    return np.ndarray((n,), dtype=dt, buffer=u8, offset=0, strides=(1,))


@dataclass
class _Decoded:
    """Head fields of a batch of records and the validity of their inner lengths."""

    P: np.ndarray
    f: dict[str, np.ndarray]
    ip_pos: dict[str, np.ndarray]
    body_pos: np.ndarray
    topic_pos: np.ndarray
    topic_len: np.ndarray
    props_pos: np.ndarray
    props_len: np.ndarray
    ok: np.ndarray  # lengths add up to totalSize
    v6: bool
    heads: np.ndarray | None = None  # the IPv4 heads as gathered (batches without IPv6 hosts)


_INT_FIELDS = tuple(name for name, _t, code in L.RECORD_FIELDS if not code.endswith("s"))
_SIZE = {name: struct.calcsize(">" + L.V4.code[name]) for name in _INT_FIELDS}


_DECODE_NEEDS = ("total_size", "magic", "sys_flag", "body_length")  # what _decode_heads itself reads


def _decode_heads(u8: np.ndarray, P: np.ndarray, fields: tuple[str, ...] = _INT_FIELDS) -> _Decoded:
    """Head fields of the records at ``P``: ``fields`` (default every int field; the ones
    the decoding itself needs always) as native ints, the host, body, topic and properties
    positions, and whether the lengths add up."""
    wanted = [name for name in _INT_FIELDS if name in fields or name in _DECODE_NEEDS]
    n_file = u8.shape[0]
    last = n_file - 1

    def within(pos: np.ndarray, size: int) -> np.ndarray:
        # keep a ``size``-byte read inside the file (rows whose fields would not fit are not ok)
        return np.minimum(pos, max(n_file - size, 0))

    f: dict[str, np.ndarray] = {}
    view = _overlapping(u8, L.HEAD_DTYPE_V4.itemsize)
    heads = view[np.minimum(P, view.shape[0] - 1)].view(L.HEAD_DTYPE_V4) if view.shape[0] else None
    if heads is not None:
        sys_flag = heads["sys_flag"]
    else:  # a file shorter than a record head: nothing in it is a record (ok is all False)
        sys_flag = _gather(u8, within(P + L.V4.pos["sys_flag"], 4), "i")
    b6 = (sys_flag & L.MessageSysFlag.BORNHOST_V6_FLAG) != 0
    s6 = (sys_flag & L.MessageSysFlag.STOREHOSTADDRESS_V6_FLAG) != 0
    v6 = bool(b6.any() or s6.any()) or heads is None
    if not v6:
        # every field comes from the one gather of whole heads
        for name in wanted:
            col = heads[name]
            f[name] = col.astype(col.dtype.newbyteorder("="))
        pos = {name: P + p for name, p in (("born_ip", L.V4.pos["born_ip"]), ("store_ip", L.V4.pos["store_ip"]))}
        head = P + L.V4.head_size
    else:
        # IPv6 hosts move every field after them: gather per field at per-record positions
        for name in L.FIXED_FIELDS:
            if name not in wanted:
                continue
            f[name] = _gather(u8, within(P + L.V4.pos[name], _SIZE[name]), L.V4.code[name])
        combo = b6.astype(np.int64) * 2 + s6.astype(np.int64)
        tables = [L.POSITIONS[(bool(c >> 1), bool(c & 1))] for c in range(4)]
        pos = {name: P + np.array([t.pos[name] for t in tables])[combo] for name in L.V4.pos}
        head = P + np.array([t.head_size for t in tables])[combo]
        for name in wanted:
            if name not in f:
                f[name] = _gather(u8, within(pos[name], _SIZE[name]), L.V4.code[name])
        heads = None
    end = P + f["total_size"]
    body_len = f["body_length"]
    ok = (body_len >= 0) & (head + body_len < end) & (end <= n_file) & (head <= n_file)
    tpos = np.where(ok, head + body_len, head)
    v2 = f["magic"] == L.MAGIC_CODE_V2
    t1 = u8[np.minimum(tpos, last)].astype(np.int64)
    t2 = (t1 << 8) | u8[np.minimum(tpos + 1, last)]
    tlen = np.where(v2, t2, t1)
    topic_pos = tpos + np.where(v2, 2, 1)
    ppos = topic_pos + tlen
    ok &= ppos + 2 <= end
    plen = _gather(u8, within(ppos, 2), "h").astype(np.int64)
    ok &= (plen >= 0) & (ppos + 2 + plen == end)
    return _Decoded(P, f, {"born": pos["born_ip"], "store": pos["store_ip"]}, head, topic_pos,
                    np.where(ok, tlen, 0), ppos + 2, np.where(ok, plen, 0), ok, v6, heads)


def _body_crcs(buf, body_pos: np.ndarray, body_len: np.ndarray) -> np.ndarray:
    """UtilAll.crc32 of every body: one CRC-32 call per record over a view of the mapped file."""
    mv = memoryview(buf)
    # a comprehension over zip beats chained map()s of slice objects by ~20 % here
    crcs = [crc32(mv[a:b]) for a, b in zip(body_pos.tolist(), (body_pos + body_len).tolist())]
    return np.array(crcs, dtype=np.int64) & 0x7FFFFFFF


COMMITLOG_COLUMNS = tuple(ARROW_SCHEMAS["commitlog"].names)
VERIFY_COLUMNS = ("expectedTagsCode", "indexKeys")  # the verify kind's own (see spark/schemas.py)
# Spark matches names case-insensitively
_CANONICAL = {name.lower(): name for name in COMMITLOG_COLUMNS + VERIFY_COLUMNS}
_PROPERTY_COLUMNS = frozenset({"properties", "tags", "keys", "uniqKey"} | set(VERIFY_COLUMNS))
_INDEX_KEYS_TYPE = ARROW_SCHEMAS["verify"].field("indexKeys").type


def delay_table(levels: str | None) -> dict[int, int]:
    """messageDelayLevel (default: the store's) as level -> delay in ms, as tags_code_of takes it."""
    cfg = MessageStoreConfig()
    if levels:
        cfg.messageDelayLevel = levels
    return {i + 1: ms for i, ms in enumerate(cfg.delay_levels_ms())}


def expected_tags_codes(topic: pa.Array, tags: pa.Array, delay: pa.Array, store_ts: np.ndarray,
                        table: dict[int, int]) -> pa.Array:
    """The tags code dispatch writes for each record (store.consumequeue.tags_code_of): each
    distinct TAGS value hashed once; only SCHEDULE_TOPIC_XXXX records (delivery time instead)
    take the per-record path."""
    enc = pc.dictionary_encode(tags).combine_chunks() if isinstance(tags, pa.ChunkedArray) else pc.dictionary_encode(tags)
    per_tag = np.array([java_string_hash(t) if t else 0 for t in enc.dictionary.to_pylist()] + [0], dtype=np.int64)
    idx = enc.indices.fill_null(len(enc.dictionary)).to_numpy(zero_copy_only=False)
    codes = per_tag[idx]
    sched = np.flatnonzero(pc.equal(topic, SCHEDULE_TOPIC).fill_null(False).to_numpy(zero_copy_only=False))
    for i in sched.tolist():
        props = {k: v for k, v in ((MessageConst.PROPERTY_TAGS, tags[i].as_py()),
                                   (MessageConst.PROPERTY_DELAY_TIME_LEVEL, delay[i].as_py())) if v is not None}
        codes[i] = tags_code_of(SCHEDULE_TOPIC, props, int(store_ts[i]), table)
    return pa.array(codes, pa.int64())


def _java_hashes(strings: pa.Array) -> np.ndarray:
    """String.hashCode of every (non-empty) string, vectorised over the UTF-8 bytes for ASCII
    strings (there UTF-16 units are the bytes); the others go through wire.javamap's."""
    m = len(strings)
    bufs = strings.buffers()
    offs = np.frombuffer(bufs[1], dtype=np.int32, count=m + 1, offset=strings.offset * 4).astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8)[offs[0]:offs[-1]]
    starts = offs[:-1] - offs[0]
    lens = offs[1:] - offs[:-1]
    exps = np.repeat(starts + lens - 1, lens) - np.arange(data.size)  # 31^(n-1-i) of each byte
    pow31 = np.ones(int(lens.max(initial=1)), dtype=np.uint64)
    for i in range(1, pow31.size):
        pow31[i] = (pow31[i - 1] * np.uint64(31)) & np.uint64(0xFFFFFFFF)
    sums = np.add.reduceat(data.astype(np.uint64) * pow31[exps], starts) & np.uint64(0xFFFFFFFF)
    h = sums.astype(np.uint32).view(np.int32).astype(np.int64)
    wide = np.flatnonzero(np.maximum.reduceat(data, starts) >= 0x80)
    for i in wide.tolist():
        h[i] = java_string_hash(strings[i].as_py())
    return h


def index_keys_column(topic: pa.Array, keys: pa.Array, uniq: pa.Array) -> pa.ListArray:
    """Per record the keys IndexService.buildIndex puts -- topic#UNIQ_KEY, then topic#each
    non-empty KEYS token -- with IndexFile's hash (abs(String.hashCode), 0 for MIN_VALUE)."""
    n = len(topic)
    tokens = pc.split_pattern(keys, MessageConst.KEY_SEPARATOR)
    tok_rows = pc.list_parent_indices(tokens).to_numpy()
    tok_vals = pc.list_flatten(tokens)
    nonempty = pc.greater(pc.utf8_length(tok_vals), 0).to_numpy(zero_copy_only=False)
    uniq_rows = np.flatnonzero(uniq.is_valid().to_numpy(zero_copy_only=False))
    rows = np.concatenate([uniq_rows, tok_rows[nonempty]])
    order = np.argsort(rows, kind="stable")  # per record: UNIQ_KEY first, then the tokens in order
    vals = pa.concat_arrays([uniq.take(pa.array(uniq_rows)).cast(pa.string()),
                             tok_vals.filter(pa.array(nonempty)).cast(pa.string())]).take(pa.array(order))
    rows = rows[order]
    full = pc.binary_join_element_wise(topic.take(pa.array(rows)), vals, "#")
    full = pa.concat_arrays([full]) if len(full) else pa.array([], pa.string())
    h = _java_hashes(full) if len(full) else np.zeros(0, np.int64)
    key_hash = np.where(h == -0x80000000, 0, np.abs(h)).astype(np.int32)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(rows, minlength=n), out=offsets[1:])
    struct = pa.StructArray.from_arrays([full, pa.array(key_hash, pa.int32())],
                                        fields=list(_INDEX_KEYS_TYPE.value_type))
    return pa.ListArray.from_arrays(pa.array(offsets), struct, type=_INDEX_KEYS_TYPE)


def commitlog_batch(buf, u8: np.ndarray, split: CommitLogSplit, positions: list[int], *,
                    read_body: bool = True, check_crc: bool = True,
                    problems: _Problems | None = None, rel: str = "",
                    schema: pa.Schema | None = None, delays: dict[int, int] | None = None) -> pa.RecordBatch | None:
    """Rows of the records at ``positions`` (records whose lengths do not add up are dropped,
    and reported to ``problems`` when given). ``schema`` selects columns of the commit-log
    schema (any subset, any order, names in any case): columns not asked for are not computed."""
    P = np.asarray(positions, dtype=np.int64)
    d = _decode_heads(u8, P)
    if not d.ok.all():
        if problems is not None:
            for p in P[~d.ok].tolist():
                problems.add(rel, p, "record", "body/topic/properties lengths do not add up to the record size")
        keep = d.ok
        P = P[keep]
        if P.size == 0:
            return None
        d = _decode_heads(u8, P)
    f = d.f
    n = len(P)
    body_len = f["body_length"].astype(np.int64)
    if problems is not None:
        crcs = _body_crcs(buf, d.body_pos, body_len)
        bad = np.flatnonzero(crcs != f["body_crc"])
        for i in bad.tolist():
            problems.add(rel, int(P[i]), "body-crc", f"body CRC {int(crcs[i])} != stored BODYCRC {int(f['body_crc'][i])}")
        phys_ok = f["physical_offset"] == split.base + P
        for p, v in zip(P[~phys_ok].tolist(), f["physical_offset"][~phys_ok].tolist()):
            problems.add(rel, p, "record", f"PHYSICALOFFSET field {v} != position {split.base + p}")
        _t, tok = _strings(u8, d.topic_pos, d.topic_len)
        for p in P[~tok].tolist():
            problems.add(rel, p, "record", "topic is not UTF-8")
        _pr, pok = _strings(u8, d.props_pos, d.props_len)
        for p in P[~pok].tolist():
            problems.add(rel, p, "record", "properties are not UTF-8")
        return None

    schema = schema if schema is not None else ARROW_SCHEMAS["commitlog"]
    names = [_CANONICAL[name.lower()] for name in schema.names]
    want = set(names)
    props: dict[str, pa.Array] = {}
    if want & _PROPERTY_COLUMNS:
        props_str, _ = _strings(u8, d.props_pos, d.props_len)
        m, (tags, keys, uniq, delay) = properties_columns(props_str, with_map="properties" in want,
                                                          names=_VERIFY_LOOKUPS)
        props = {"properties": m, "tags": tags, "keys": keys, "uniqKey": uniq, "DELAY": delay}
    topic_col: list[pa.Array] = []

    def topic() -> pa.Array:
        if not topic_col:
            topic_col.append(_strings(u8, d.topic_pos, d.topic_len)[0])
        return topic_col[0]

    def ips(which: str) -> list[bytes]:
        # batches with IPv6 hosts: each record's host bytes, 4 or 16 by its own sysFlag bit
        flag = L.MessageSysFlag.BORNHOST_V6_FLAG if which == "born" else L.MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
        return [bytes(u8[p:p + (16 if sf & flag else 4)])
                for p, sf in zip(d.ip_pos[which].tolist(), f["sys_flag"].tolist())]

    def host(which: str) -> pa.Array:
        port = f[f"{which}_port"]
        if not d.v6:
            return _hosts(d.heads[f"{which}_ip"], port)
        return pa.array([format_socket_address(ip, p)[1:] for ip, p in zip(ips(which), port.tolist())], pa.string())

    def offset_msg_id() -> pa.Array:
        if not d.v6:
            # store host ip + port (adjacent in the record) + the PHYSICALOFFSET field, as hex
            hb = d.heads.view(np.uint8).reshape(n, L.HEAD_DTYPE_V4.itemsize)
            sp, pp = L.V4.pos["store_ip"], L.V4.pos["physical_offset"]
            return _hex_upper(np.concatenate([hb[:, sp:sp + 8], hb[:, pp:pp + 8]], axis=1))
        return pa.array(list(map(create_offset_msg_id, ips("store"), f["store_port"].tolist(),
                                 f["physical_offset"].tolist())), pa.string())

    def crc_ok() -> pa.Array:
        if not check_crc:
            return pa.nulls(n, pa.bool_())
        return pa.array(_body_crcs(buf, d.body_pos, body_len) == f["body_crc"])

    def body() -> pa.Array:
        return _varbinary(u8, d.body_pos, body_len, pa.binary()) if read_body else pa.nulls(n, pa.binary())

    build: dict[str, Callable[[], pa.Array]] = {
        "file": lambda: pa.repeat(pa.scalar(split.name, pa.string()), n),
        "filePos": lambda: pa.array(P),
        "totalSize": lambda: pa.array(f["total_size"].astype(np.int32)),
        "magic": lambda: pa.array(f["magic"].astype(np.int64).astype(np.int32, casting="unsafe")),
        "bodyCRC": lambda: pa.array(f["body_crc"].astype(np.int32)),
        "queueId": lambda: pa.array(f["queue_id"].astype(np.int32)),
        "flag": lambda: pa.array(f["flag"].astype(np.int32)),
        "queueOffset": lambda: pa.array(f["queue_offset"]),
        "physicalOffset": lambda: pa.array(f["physical_offset"]),
        "sysFlag": lambda: pa.array(f["sys_flag"].astype(np.int32)),
        "bornTimestamp": lambda: pa.array(f["born_timestamp"]),
        "bornHost": lambda: host("born"),
        "storeTimestamp": lambda: pa.array(f["store_timestamp"]),
        "storeHost": lambda: host("store"),
        "reconsumeTimes": lambda: pa.array(f["reconsume_times"].astype(np.int32)),
        "preparedTransactionOffset": lambda: pa.array(f["prepared_transaction_offset"]),
        "bodyLength": lambda: pa.array(body_len.astype(np.int32)),
        "body": body,
        "topic": topic,
        "properties": lambda: props["properties"],
        "tags": lambda: props["tags"],
        "keys": lambda: props["keys"],
        "uniqKey": lambda: props["uniqKey"],
        "offsetMsgId": offset_msg_id,
        "crc_ok": crc_ok,
        "expectedTagsCode": lambda: expected_tags_codes(topic(), props["tags"], props["DELAY"], f["store_timestamp"],
                                                        delays if delays is not None else delay_table(None)),
        "indexKeys": lambda: index_keys_column(topic(), props["keys"], props["uniqKey"]),
    }
    return pa.RecordBatch.from_arrays([build[name]() for name in names], schema=schema)


class _Mapped:
    """A read-only mmap of a file plus a numpy view; closes cleanly once views are dropped."""

    def __init__(self, path: str) -> None:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            self.mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        self.u8 = np.frombuffer(self.mm, dtype=np.uint8) if size else np.zeros(0, np.uint8)

    def close(self) -> None:
        self.u8 = None
        if isinstance(self.mm, mmap.mmap):
            try:
                self.mm.close()
            except BufferError:  # a batch still references the map; the GC will close it
                pass

    def __enter__(self) -> "_Mapped":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def scan_commitlog(split: CommitLogSplit, *, read_body: bool = True, check_crc: bool = True,
                   batch_rows: int = DEFAULT_BATCH_ROWS, schema: pa.Schema | None = None,
                   delay_levels: str | None = None, starts: np.ndarray | None = None) -> Iterator[pa.RecordBatch]:
    """Message rows of one commit-log split (unreadable regions are skipped; see check_commitlog);
    ``schema``: the columns to produce (default: all of them; the verify kind's narrow columns
    too, with ``delay_levels`` = messageDelayLevel for the expected tags codes). ``starts``:
    physical offsets where records probably start (spark/walk_hints.py), a shortcut for the
    walk that never changes the rows."""
    if split.size == 0:
        return
    delays = delay_table(delay_levels)
    with _Mapped(split.path) as m:
        runs = _Runs(m.u8, starts - split.base) if starts is not None and starts.size else None
        for chunk in _walk(m.mm, split, "", None, batch_rows, runs):
            b = commitlog_batch(m.mm, m.u8, split, chunk, read_body=read_body, check_crc=check_crc, schema=schema,
                                delays=delays)
            if b is not None:
                yield b


def check_commitlog(split: CommitLogSplit, *, batch_rows: int = DEFAULT_BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """Problems of one commit-log split: magic codes, sizes, lengths, physical offsets, body CRC,
    the BLANK end-of-file record and the zero tail after the end of data."""
    rel = f"{COMMITLOG_DIR}/{split.name}"
    probs = _Problems()
    if split.size == 0:
        return
    with _Mapped(split.path) as m:
        for chunk in _walk(m.mm, split, rel, probs, batch_rows):
            commitlog_batch(m.mm, m.u8, split, chunk, problems=probs, rel=rel)
    if probs.rows:
        yield probs.batch()


# --------------------------------------------------------------------------------------------
# consume queue


def read_units(path: str, size: int) -> np.ndarray:
    return np.fromfile(path, dtype=L.CQ_DTYPE, count=size // L.CQ_STORE_UNIT_SIZE)


def written_units(units: np.ndarray) -> np.ndarray:
    """Units holding a message: size > 0 and not fillPreBlank's (0, Integer.MAX_VALUE, 0)."""
    size = units["size"]
    blank = (units["commitLogOffset"] == 0) & (size == L.INT_MAX) & (units["tagsCode"] == 0)
    return (size > 0) & ~blank


def scan_queue_files(files: list[QueueFile]) -> Iterator[pa.RecordBatch]:
    schema = ARROW_SCHEMAS["consumequeue"]
    for qf in files:
        units = read_units(qf.path, qf.size)
        idx = np.flatnonzero(written_units(units))
        if idx.size == 0:
            continue
        u = units[idx]
        n = idx.size
        file_pos = idx.astype(np.int64) * L.CQ_STORE_UNIT_SIZE
        yield pa.RecordBatch.from_arrays([
            pa.repeat(pa.scalar(qf.topic, pa.string()), n),
            pa.array(np.full(n, qf.queue_id, dtype=np.int32)),
            pa.repeat(pa.scalar(qf.name, pa.string()), n),
            pa.array(file_pos),
            pa.array((int(qf.name) + file_pos) // L.CQ_STORE_UNIT_SIZE),
            pa.array(u["commitLogOffset"].astype(np.int64)),
            pa.array(u["size"].astype(np.int32)),
            pa.array(u["tagsCode"].astype(np.int64)),
        ], schema=schema)


def check_queue_files(files: list[QueueFile], file_size: int) -> Iterator[pa.RecordBatch]:
    """Per file: its length, its name, and no unwritten unit before a written one."""
    probs = _Problems()
    for qf in files:
        check_queue_file(qf, read_units(qf.path, qf.size), file_size, probs)
    if probs.rows:
        yield probs.batch()


def queue_file_rel(qf: QueueFile) -> str:
    """The file's path relative to the store root, as problems name it."""
    return f"{CONSUMEQUEUE_DIR}/{qf.topic}/{qf.queue_id}/{qf.name}"


def check_queue_file(qf: QueueFile, units: np.ndarray, file_size: int, probs: "_Problems") -> None:
    """The file-level checks of one consume-queue file whose units are ``units``."""
    rel = queue_file_rel(qf)
    if qf.size % L.CQ_STORE_UNIT_SIZE:
        probs.add(rel, qf.size - qf.size % L.CQ_STORE_UNIT_SIZE, "cq-file",
                  f"file length {qf.size} ends inside a {L.CQ_STORE_UNIT_SIZE}-byte unit (truncated)")
    if file_size and qf.size != file_size:
        probs.add(rel, min(qf.size, file_size), "cq-file",
                  f"file length {qf.size} != mappedFileSizeConsumeQueue {file_size}")
    if file_size and int(qf.name) % file_size:
        probs.add(rel, 0, "cq-file", f"file name is not a multiple of the file size {file_size}")
    w = written_units(units)
    blank = (units["size"] == L.INT_MAX) & (units["commitLogOffset"] == 0)
    used = w | blank
    if used.any():
        last = int(np.flatnonzero(used)[-1])
        holes = np.flatnonzero(~used[:last])
        for h in holes[:20].tolist():
            probs.add(rel, h * L.CQ_STORE_UNIT_SIZE, "cq-file", "empty unit before written units (hole)")
        bad = np.flatnonzero(w & ((units["commitLogOffset"] < 0)))
        for b in bad[:20].tolist():
            probs.add(rel, b * L.CQ_STORE_UNIT_SIZE, "cq-file", "negative commit-log offset")


# --------------------------------------------------------------------------------------------
# index


@dataclass
class IndexView:
    header: np.void
    slots: np.ndarray    # int32: the entry each slot's chain starts at
    entries: np.ndarray  # entries[0] is the unused entry 0
    slot_num: int
    index_num: int
    count: int           # used entries are 1..count-1


def read_index(ref: IndexFileRef, hash_slot_num: int | None = None, index_num: int | None = None) -> IndexView:
    s, n = index_geometry(ref.size, hash_slot_num, index_num)
    # header, slot table and the used entries only: a default index file is 420 MB, mostly the
    # entries not written yet (a full read cost verify more than all its checks of the file)
    e0 = L.INDEX_HEADER_SIZE + s * L.HASH_SLOT_SIZE
    # mapped, not read: the entries stay a view of the page cache (the map lives as long as
    # they do), which spares copying them and faulting in as much fresh memory (-30 % of
    # verify's index task)
    u8 = _Mapped(ref.path).u8
    head = u8[:min(e0, ref.size)]
    header = np.zeros(1, L.INDEX_HEADER_DTYPE)[0] if head.size < L.INDEX_HEADER_SIZE else \
        head[:L.INDEX_HEADER_SIZE].view(L.INDEX_HEADER_DTYPE)[0].copy()
    slot_bytes = head[L.INDEX_HEADER_SIZE:]
    slot_bytes = slot_bytes[:slot_bytes.size - slot_bytes.size % L.HASH_SLOT_SIZE]
    # int32, as stored (a default table is 5M slots: int64 doubled what each task touched)
    got = slot_bytes.view(L.SLOT_DTYPE)["lastIndex"].astype(np.int32)
    if got.size == s:  # the whole slot table (not a file cut short): the copy is the table
        slots = got
    else:
        slots = np.zeros(s, np.int32)
        slots[:got.size] = got
    have = max(0, min(n, (ref.size - e0) // L.INDEX_ENTRY_SIZE))
    count = max(1, min(int(header["indexCount"]), have))
    data = u8[e0:e0 + count * L.INDEX_ENTRY_SIZE] if have else u8[:0]
    entries = data[:data.size - data.size % L.INDEX_ENTRY_SIZE].view(L.INDEX_ENTRY_DTYPE)
    count = max(1, min(count, entries.size))
    return IndexView(header, slots, entries, s, n, count)


def index_reachability(v: IndexView) -> np.ndarray:
    """True for entries a lookup of their key finds: walking the chain from the slot of the
    entry's own hash (as IndexFile.selectPhyOffset does) reaches it. Vectorised per chain step."""
    count = v.count
    reach_slot = np.full(count, -1, dtype=np.int64)
    if count <= 1:
        return np.zeros(count, dtype=bool)
    prev = v.entries["prevIndex"][:count].astype(np.int64)
    heads = v.slots
    slot_ids = np.flatnonzero((heads > 0) & (heads < count))
    cur, cur_slot = heads[slot_ids], slot_ids
    while cur.size:
        fresh = reach_slot[cur] < 0
        cur, cur_slot = cur[fresh], cur_slot[fresh]
        reach_slot[cur] = cur_slot
        nxt = prev[cur]
        ok = (nxt > 0) & (nxt < count)
        cur, cur_slot = nxt[ok], cur_slot[ok]
    key_hash = v.entries["keyHash"][:count].astype(np.int64)
    own_slot = np.abs(key_hash) % v.slot_num
    out = reach_slot == own_slot
    out[0] = False
    return out


def _index_entry_pos(v: IndexView, i: np.ndarray) -> np.ndarray:
    return L.INDEX_HEADER_SIZE + v.slot_num * L.HASH_SLOT_SIZE + i * L.INDEX_ENTRY_SIZE


def scan_index_files(refs: list[IndexFileRef], hash_slot_num: int | None = None,
                     index_num: int | None = None) -> Iterator[pa.RecordBatch]:
    schema = ARROW_SCHEMAS["index"]
    for ref in refs:
        v = read_index(ref, hash_slot_num, index_num)
        if v.count <= 1:
            continue
        reach = index_reachability(v)
        i = np.arange(1, v.count, dtype=np.int64)
        e = v.entries[1:v.count]
        kh = e["keyHash"].astype(np.int64)
        n = i.size
        yield pa.RecordBatch.from_arrays([
            pa.repeat(pa.scalar(ref.name, pa.string()), n),
            pa.array(_index_entry_pos(v, i)),
            pa.array(i.astype(np.int32)),
            pa.array((np.abs(kh) % v.slot_num).astype(np.int32)),
            pa.array(kh.astype(np.int32)),
            pa.array(e["phyOffset"].astype(np.int64)),
            pa.array(e["timeDiff"].astype(np.int32)),
            pa.array(e["prevIndex"].astype(np.int32)),
            pa.array(np.full(n, int(v.header["beginTimestamp"]), dtype=np.int64)),
            pa.array(reach[1:]),
        ], schema=schema)


def check_index_files(refs: list[IndexFileRef], hash_slot_num: int | None = None,
                      index_num: int | None = None) -> Iterator[pa.RecordBatch]:
    """Header, slot and chain sanity; entries that a lookup of their own key cannot reach are
    reported once per slot, at the slot's position (e.g. a zeroed slot)."""
    probs = _Problems()
    for ref in refs:
        v = read_index_checked(ref, hash_slot_num, index_num, probs)
        if v is not None:
            check_index_file(ref, v, index_reachability(v) if v.count > 1 else None, probs)
    if probs.rows:
        yield probs.batch()


def read_index_checked(ref: IndexFileRef, hash_slot_num: int | None, index_num: int | None,
                       probs: "_Problems") -> IndexView | None:
    """read_index, or None with the reason reported (a file whose geometry cannot be told)."""
    try:
        return read_index(ref, hash_slot_num, index_num)
    except ValueError as e:
        probs.add(f"{INDEX_DIR}/{ref.name}", 0, "index", str(e))
        return None


def check_index_file(ref: IndexFileRef, v: IndexView, reach: np.ndarray | None, probs: "_Problems") -> None:
    """The checks of one index file read as ``v``; ``reach``: index_reachability(v) (None when
    the file has no entries)."""
    rel = f"{INDEX_DIR}/{ref.name}"
    expected = L.index_file_size(v.slot_num, v.index_num)
    if ref.size != expected:
        probs.add(rel, min(ref.size, expected), "index", f"file length {ref.size} != {expected} "
                                                          f"({v.slot_num} slots, {v.index_num} entries)")
    raw_count = int(v.header["indexCount"])
    if raw_count < 1 or raw_count > v.index_num:
        probs.add(rel, 36, "index", f"header indexCount {raw_count} outside 1..{v.index_num}")
    bad_slots = np.flatnonzero((v.slots < 0) | (v.slots >= v.count))
    for s in bad_slots[:20].tolist():
        probs.add(rel, L.INDEX_HEADER_SIZE + s * L.HASH_SLOT_SIZE, "index",
                  f"slot {s} points to entry {int(v.slots[s])} beyond indexCount {v.count}")
    if v.count <= 1 or reach is None:
        return
    prev = v.entries["prevIndex"][1:v.count].astype(np.int64)
    bad_prev = np.flatnonzero((prev < 0) | (prev >= v.count)) + 1
    for i in bad_prev[:20].tolist():
        probs.add(rel, int(_index_entry_pos(v, np.int64(i))), "index",
                  f"entry {i} links to entry {int(v.entries['prevIndex'][i])} beyond indexCount {v.count}")
    lost = np.flatnonzero(~reach[1:]) + 1
    if lost.size:
        kh = v.entries["keyHash"][lost].astype(np.int64)
        slots = np.abs(kh) % v.slot_num
        order = np.argsort(slots, kind="stable")
        uniq, first = np.unique(slots[order], return_index=True)
        counts = np.diff(np.append(first, lost.size))
        for s, fi, c in zip(uniq.tolist(), first.tolist(), counts.tolist()):
            i0 = int(lost[order[fi]])
            probs.add(rel, L.INDEX_HEADER_SIZE + s * L.HASH_SLOT_SIZE, "index",
                      f"slot {s} (value {int(v.slots[s])}) does not lead to {c} entr{'y' if c == 1 else 'ies'} "
                      f"of its keys (first: entry {i0} at {int(_index_entry_pos(v, np.int64(i0)))})")
