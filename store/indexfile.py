"""RocketMQ's message index (``index/{yyyyMMddHHmmssSSS}``), byte-compatible with 4.9.x.

Why a hash file at all: clients look messages up by key (``QUERY_MESSAGE``) and by UNIQ_KEY
(``VIEW_MESSAGE_BY_ID`` through the admin tools); the index answers those without scanning
the commit log.

File layout (``store/.../index/IndexFile.java``, ``IndexHeader.java``), all big-endian::

    header   40 B  beginTimestamp i64, endTimestamp i64, beginPhyOffset i64, endPhyOffset i64,
                   hashSlotCount i32, indexCount i32 (starts at 1: entry 0 is never used)
    slots    hashSlotNum x i32   last entry number whose key hashed into the slot (0 = empty)
    entries  indexNum x 20 B     keyHash i32, phyOffset i64, timeDiff i32 (seconds since
                                 beginTimestamp, clamped to [0, Integer.MAX_VALUE]), prevIndex i32

Quirks kept on purpose because a real store carries them: the time difference of an entry
is computed *before* the first entry resets ``beginTimestamp`` (so entry 1 of a fresh file
has timeDiff 0 and entry 1 of a rolled-over file is measured from the previous file's end
time); ``hashSlotCount`` counts writes into a slot that was empty *or stale*.

Interface used by the dispatcher (STORE-LOG's ``store/dispatch.py``), like
``IndexService.buildIndex(DispatchRequest)``::

    IndexService.build_index(topic: str, commit_log_offset: int, store_timestamp: int,
                             keys: str | None, uniq_key: str | None, sys_flag: int = 0) -> None

and for reads ``IndexService.query_offset(topic, key, max_num, begin, end) -> QueryOffsetResult``.
"""
from __future__ import annotations

import mmap
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from construct import Int32sb, Int64sb, Struct

from rmqd.store.errors import StoreFileError
from rmqd.store.layout import struct_of
from rmqd.store.mapped_file import create_file_atomically, remove_temp_files, sync_file
from rmqd.wire.javamap import java_string_hash_from
from rmqd.wire.message import MessageConst, MessageSysFlag, java_string_hash

INDEX_HEADER = Struct(
    "beginTimestamp" / Int64sb,
    "endTimestamp" / Int64sb,
    "beginPhyOffset" / Int64sb,
    "endPhyOffset" / Int64sb,
    "hashSlotCount" / Int32sb,
    "indexCount" / Int32sb,
)
INDEX_ENTRY = Struct(
    "keyHash" / Int32sb,
    "phyOffset" / Int64sb,
    "timeDiff" / Int32sb,
    "prevIndex" / Int32sb,
)
HASH_SLOT = Struct("lastIndex" / Int32sb)

_HEADER = struct_of(INDEX_HEADER)
_ENTRY = struct_of(INDEX_ENTRY)
_SLOT = struct_of(HASH_SLOT)
_QQ = struct_of(Struct("begin" / Int64sb, "end" / Int64sb))  # a begin/end pair of the header
INDEX_HEADER_SIZE = _HEADER.size  # 40
INDEX_ENTRY_SIZE = _ENTRY.size  # 20
HASH_SLOT_SIZE = _SLOT.size  # 4
INVALID_INDEX = 0
_TRAN_MASK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
_ROLLBACK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
INT_MAX = 0x7FFFFFFF


def index_file_size(hash_slot_num: int, index_num: int) -> int:
    return INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + index_num * INDEX_ENTRY_SIZE


def index_key_hash(key: str) -> int:
    """``IndexFile.indexKeyHashMethod``: abs(String.hashCode), and 0 for Integer.MIN_VALUE
    (whose Java abs stays negative)."""
    h = java_string_hash(key)
    if h == -0x80000000:
        return 0
    return -h if h < 0 else h


def build_key(topic: str, key: str) -> str:
    return topic + "#" + key


def time_millis_to_human_string(ms: int) -> str:
    """``UtilAll.timeMillisToHumanString``: local time, yyyyMMddHHmmssSSS."""
    t = time.localtime(ms // 1000)
    return time.strftime("%Y%m%d%H%M%S", t) + "%03d" % (ms % 1000)


def human_string_to_time_millis(name: str) -> int:
    """Inverse of :func:`time_millis_to_human_string` (local time); raises ValueError."""
    if len(name) != 17 or not name.isdigit():
        raise ValueError(f"not an index file name: {name!r}")
    t = time.strptime(name[:14], "%Y%m%d%H%M%S")
    return int(time.mktime(t)) * 1000 + int(name[14:])


@dataclass(slots=True)
class IndexHeader:
    beginTimestamp: int = 0
    endTimestamp: int = 0
    beginPhyOffset: int = 0
    endPhyOffset: int = 0
    hashSlotCount: int = 0
    indexCount: int = 1


@dataclass(slots=True, frozen=True)
class IndexEntry:
    index_no: int
    keyHash: int
    phyOffset: int
    timeDiff: int
    prevIndex: int


def _put_hashes(mm: mmap.mmap, h: IndexHeader, entries_base: int, slot_num: int, index_num: int,
                entries: list[tuple[int, int, int, int]], i: int) -> int:
    """IndexFile.putKey for each entry from ``i`` while the file has room; the header's fields
    live in locals meanwhile (typed in indexfile.pxd when compiled: the arithmetic in C, the
    header's attributes read and written once per batch, not six times per key)."""
    count = h.indexCount
    slot_count = h.hashSlotCount
    begin_ts = h.beginTimestamp
    begin_phy = h.beginPhyOffset
    end_phy = h.endPhyOffset
    end_ts = h.endTimestamp
    n = len(entries)
    # the layout's constants as (typed) locals: compiled, every sum below stays in C
    header_size, slot_size, entry_size, invalid, int_max = (INDEX_HEADER_SIZE, HASH_SLOT_SIZE, INDEX_ENTRY_SIZE,
                                                            INVALID_INDEX, INT_MAX)
    read_slot, write_slot, write_entry = _SLOT.unpack_from, _SLOT.pack_into, _ENTRY.pack_into
    while i < n and count < index_num:
        key_hash, phy, ts, _tag = entries[i]
        abs_slot = header_size + (key_hash % slot_num) * slot_size
        slot_value = read_slot(mm, abs_slot)[0]
        if slot_value <= invalid or slot_value > count:
            slot_value = invalid
            slot_count += 1
        time_diff = 0
        if begin_ts > 0:  # measured before entry 1 resets the begin time (a quirk RocketMQ has)
            d = ts - begin_ts
            if d > 0:
                time_diff = min(d // 1000, int_max)
        write_entry(mm, entries_base + count * entry_size, key_hash, phy, time_diff, slot_value)
        write_slot(mm, abs_slot, count)
        if count <= 1:
            begin_phy = phy
            begin_ts = ts
        count += 1
        end_phy = phy
        end_ts = ts
        i += 1
    h.indexCount = count
    h.hashSlotCount = slot_count
    h.beginTimestamp = begin_ts
    h.beginPhyOffset = begin_phy
    h.endPhyOffset = end_phy
    h.endTimestamp = end_ts
    return i


class IndexFile:
    """One index file, memory-mapped whole (like RocketMQ's MappedFile for it)."""

    def __init__(self, path: str | os.PathLike, hash_slot_num: int, index_num: int,
                 end_phy_offset: int = 0, end_timestamp: int = 0) -> None:
        self.path = Path(path)
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.file_size = index_file_size(hash_slot_num, index_num)
        self._entries_base = INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE
        self.header = IndexHeader()
        if end_phy_offset > 0:
            self.header.beginPhyOffset = self.header.endPhyOffset = end_phy_offset
        if end_timestamp > 0:
            self.header.beginTimestamp = self.header.endTimestamp = end_timestamp
        if self.path.exists():
            size = self.path.stat().st_size
            if size != self.file_size:
                raise StoreFileError(str(self.path), 0,
                                     f"index file is {size} bytes, expected {self.file_size} "
                                     f"(maxHashSlotNum {hash_slot_num}, maxIndexNum {index_num})")
            fd = os.open(self.path, os.O_RDWR)
            try:
                self._mm = mmap.mmap(fd, self.file_size)
            finally:
                os.close(fd)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            mm = create_file_atomically(str(self.path), self.file_size, prepare=self._init_header)
            assert mm is not None  # (prepare implies a mapping)
            self._mm = mm

    def _init_header(self, mm: mmap.mmap) -> None:
        """Like IndexHeader's setters, only the begin/end fields inherited from the previous
        file reach a new file at once; the counts are written by the first put or flush."""
        h = self.header
        if h.endPhyOffset > 0:
            _QQ.pack_into(mm, 16, h.beginPhyOffset, h.endPhyOffset)
        if h.endTimestamp > 0:
            _QQ.pack_into(mm, 0, h.beginTimestamp, h.endTimestamp)

    # -- header -------------------------------------------------------------------------
    def load(self) -> None:
        h = _HEADER.unpack_from(self._mm, 0)
        self.header = IndexHeader(*h)
        if self.header.indexCount <= 0:
            self.header.indexCount = 1

    def _write_header(self) -> None:
        h = self.header
        _HEADER.pack_into(self._mm, 0, h.beginTimestamp, h.endTimestamp, h.beginPhyOffset,
                          h.endPhyOffset, h.hashSlotCount, h.indexCount)

    @property
    def file_name(self) -> str:
        return self.path.name

    @property
    def begin_timestamp(self) -> int:
        return self.header.beginTimestamp

    @property
    def end_timestamp(self) -> int:
        return self.header.endTimestamp

    @property
    def end_phy_offset(self) -> int:
        return self.header.endPhyOffset

    def is_write_full(self) -> bool:
        return self.header.indexCount >= self.index_num

    def is_time_matched(self, begin: int, end: int) -> bool:
        b, e = self.header.beginTimestamp, self.header.endTimestamp
        return (begin < b and end > e) or (b <= begin <= e) or (b <= end <= e)

    # -- write --------------------------------------------------------------------------
    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        """``IndexFile.putKey``; False when the file is full."""
        if not self.put_hash(index_key_hash(key), phy_offset, store_timestamp):
            return False
        self._write_header()
        return True

    def put_hash(self, key_hash: int, phy_offset: int, store_timestamp: int) -> bool:
        """``putKey`` for a key already hashed (:func:`index_key_hash`), leaving the header
        in memory: a batch writes it once (:meth:`write_header`), and readers use
        ``self.header``. False when the file is full."""
        return self.put_hashes([(key_hash, phy_offset, store_timestamp, 0)], 0) == 1

    def put_hashes(self, entries: list[tuple[int, int, int, int]], i: int) -> int:
        """:meth:`put_hash` for ``entries[i:]`` (key hash, commit-log offset, store time, and
        a tag of the caller's) in order: the index of the first entry that did not fit (the
        file is full), ``len(entries)`` when all did."""
        return _put_hashes(self._mm, self.header, self._entries_base, self.hash_slot_num, self.index_num,
                           entries, i)

    def write_header(self) -> None:
        if not self._mm.closed:
            self._write_header()

    # -- read ---------------------------------------------------------------------------
    def select_phy_offset(self, phy_offsets: list[int], key: str, max_num: int,
                          begin: int, end: int) -> None:
        """``IndexFile.selectPhyOffset``: walk the slot's chain newest first, appending
        matching offsets whose time lies in [begin, end]."""
        key_hash = index_key_hash(key)
        abs_slot = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * HASH_SLOT_SIZE
        (slot_value,) = _SLOT.unpack_from(self._mm, abs_slot)
        count = self.header.indexCount
        if slot_value <= INVALID_INDEX or slot_value > count or count <= 1:
            return
        nxt = slot_value
        base_ts = self.header.beginTimestamp
        while len(phy_offsets) < max_num:
            kh, off, tdiff, prev = _ENTRY.unpack_from(self._mm, self._entries_base + nxt * INDEX_ENTRY_SIZE)
            if tdiff < 0:
                break
            time_read = base_ts + tdiff * 1000
            if kh == key_hash and begin <= time_read <= end:
                phy_offsets.append(off)
            if prev <= INVALID_INDEX or prev > count or prev == nxt or time_read < begin:
                break
            nxt = prev

    def slot(self, slot_no: int) -> int:
        return _SLOT.unpack_from(self._mm, INDEX_HEADER_SIZE + slot_no * HASH_SLOT_SIZE)[0]

    def iter_slots(self) -> Iterator[tuple[int, int]]:
        """Used slots as (slot, last index number)."""
        for i, (v,) in enumerate(_SLOT.iter_unpack(self._mm[INDEX_HEADER_SIZE:self._entries_base])):
            if v != 0:
                yield i, v

    def entry(self, index_no: int) -> IndexEntry:
        return IndexEntry(index_no, *_ENTRY.unpack_from(self._mm, self._entries_base + index_no * INDEX_ENTRY_SIZE))

    def iter_entries(self) -> Iterator[IndexEntry]:
        """Entries 1 .. indexCount-1 (entry 0 is never written)."""
        for n in range(1, min(self.header.indexCount, self.index_num)):
            yield self.entry(n)

    # -- crash recovery -----------------------------------------------------------------
    def take_in_unwritten_tail(self, store_timestamp_of: Callable[[int], int]) -> int:
        """The header is written once per dispatch batch: after a SIGKILL, entries of the last
        batch may lie past its indexCount (and slots point at them) - in a file just rolled
        over, past a header that still holds only what it inherited from the previous file.
        Take them into the header in memory, so a rollback removes them like any other
        instead of the next put overwriting them under live slots (a put treats a slot past
        indexCount as empty, which cuts that slot's older chain off). Returns how many."""
        h = self.header
        count = min(h.indexCount, self.index_num)
        base, mm = self._entries_base, self._mm
        last_off = _ENTRY.unpack_from(mm, base + (count - 1) * INDEX_ENTRY_SIZE)[1] if count > 1 else -1
        first = count
        while count < self.index_num:
            key_hash, off, time_diff, prev = _ENTRY.unpack_from(mm, base + count * INDEX_ENTRY_SIZE)
            if (key_hash == 0 and off == 0 and time_diff == 0 and prev == 0) or off < last_off or prev >= count:
                break
            if prev <= INVALID_INDEX:
                h.hashSlotCount += 1  # what its put added to the header that was never written
            if count == 1:  # the put that set the begin fields never reached the header
                h.beginPhyOffset = off
                h.beginTimestamp = store_timestamp_of(off) or h.beginTimestamp
            last_off = off
            count += 1
        if count > first:
            h.indexCount = count
            h.endPhyOffset = last_off
            h.endTimestamp = store_timestamp_of(last_off) or h.endTimestamp
        return count - first

    def rollback_to(self, phy_limit: int, store_timestamp_of: Callable[[int], int]) -> int:
        """Forget the entries of records at or after ``phy_limit`` (entries are written in
        commit-log order), leaving the file exactly as if those records had never been
        indexed: slots pointing at a forgotten entry point at the newest older one of their
        chain, hashSlotCount loses what those entries added, the header ends at the last kept
        record. Crash recovery then re-indexes from ``phy_limit``. Returns the entries kept."""
        self.take_in_unwritten_tail(store_timestamp_of)
        h = self.header
        count = h.indexCount
        base, mm = self._entries_base, self._mm
        lo, hi = 1, count  # first entry at or after the limit, by binary search
        while lo < hi:
            mid = (lo + hi) // 2
            if _ENTRY.unpack_from(mm, base + mid * INDEX_ENTRY_SIZE)[1] < phy_limit:
                lo = mid + 1
            else:
                hi = mid
        keep = lo
        if keep >= count:
            self._write_header()
            return keep - 1
        for n in range(count - 1, keep - 1, -1):
            key_hash, _off, _td, prev = _ENTRY.unpack_from(mm, base + n * INDEX_ENTRY_SIZE)
            abs_slot = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * HASH_SLOT_SIZE
            if _SLOT.unpack_from(mm, abs_slot)[0] == n:
                _SLOT.pack_into(mm, abs_slot, prev if prev > INVALID_INDEX else INVALID_INDEX)  # fixed further down
            if prev <= INVALID_INDEX:
                h.hashSlotCount -= 1
        mm[base + keep * INDEX_ENTRY_SIZE:base + count * INDEX_ENTRY_SIZE] = bytes((count - keep) * INDEX_ENTRY_SIZE)
        h.indexCount = keep
        if keep > 1:
            h.endPhyOffset = _ENTRY.unpack_from(mm, base + (keep - 1) * INDEX_ENTRY_SIZE)[1]
            h.endTimestamp = store_timestamp_of(h.endPhyOffset) or h.endTimestamp
        self._write_header()
        return keep - 1

    # -- lifecycle ----------------------------------------------------------------------
    def flush(self) -> None:
        if self._mm.closed:  # deleted by expiry meanwhile
            return
        self._write_header()
        sync_file(str(self.path))

    def close(self) -> None:
        if not self._mm.closed:
            self._mm.close()

    def destroy(self) -> bool:
        self.close()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        return True


@dataclass(slots=True)
class QueryOffsetResult:
    phy_offsets: list[int] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0


class IndexService:
    """The list of index files in ``<storePathRootDir>/index``, like ``IndexService``.

    ``on_index_file_full(ts)`` receives the end timestamp of a file that became full and
    was flushed (from the background flush thread): the caller stores it as the checkpoint's
    indexMsgTimestamp, as ``IndexService.flush`` does. ``clock_ms`` names new files.

    Public: ``load(last_exit_ok, index_msg_timestamp)``, ``build_index(...)``,
    ``query_offset(topic, key, max_num, begin, end)``, ``get_and_create_last_index_file()``,
    ``delete_expired_file(min_phy)``, ``flush()``, ``shutdown()``, ``destroy()``;
    ``index_files`` is the ordered list of :class:`IndexFile`.
    """

    def __init__(self, store_path: str | os.PathLike, hash_slot_num: int = 5_000_000,
                 index_num: int = 20_000_000, max_msgs_num_batch: int = 64,
                 on_index_file_full: Callable[[int], None] | None = None,
                 clock_ms: Callable[[], int] | None = None) -> None:
        self.store_path = Path(store_path)
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.max_msgs_num_batch = max_msgs_num_batch
        self.on_index_file_full = on_index_file_full
        self._clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self.index_files: list[IndexFile] = []
        self._lock = threading.RLock()
        self._flush_threads: list[threading.Thread] = []
        self._prefix_hashes: dict[str, int] = {}  # topic -> hash of "topic#"

    def load(self, last_exit_ok: bool = True, index_msg_timestamp: int = 0, keep_after_crash: bool = False) -> None:
        """Open every file in name order. After a crash, files newer than the checkpoint's
        indexMsgTimestamp are deleted (RocketMQ rebuilds them from the commit log) - unless
        ``keep_after_crash``: then recovery calls :meth:`rollback_to` with the offset its
        walk starts at. A file of the wrong size raises :class:`StoreFileError`."""
        if not self.store_path.is_dir():
            return
        remove_temp_files(self.store_path)
        for p in sorted(self.store_path.iterdir()):
            if not p.is_file():
                continue
            f = IndexFile(p, self.hash_slot_num, self.index_num)
            f.load()
            if not last_exit_ok and not keep_after_crash and f.end_timestamp > index_msg_timestamp:
                f.destroy()
                continue
            self.index_files.append(f)

    def rollback_to(self, phy_limit: int, store_timestamp_of: Callable[[int], int]) -> None:
        """Crash recovery restarts indexing at ``phy_limit``: files that begin at or after it
        go, the one spanning it forgets its entries from there (:meth:`IndexFile.rollback_to`)."""
        with self._lock:
            kept = []
            for f in self.index_files:
                f.take_in_unwritten_tail(store_timestamp_of)
                # a file left empty by a crash right after it was created holds only the
                # previous file's end: kept, that end would make the re-indexing skip records
                if f.header.endPhyOffset >= phy_limit:
                    if f.rollback_to(phy_limit, store_timestamp_of) == 0:
                        f.destroy()
                        continue
                kept.append(f)
            self.index_files = kept

    def _new_file_name(self) -> Path:
        ms = self._clock_ms()
        taken = {f.file_name for f in self.index_files}
        name = time_millis_to_human_string(ms)
        while name in taken:  # two rollovers in one millisecond: never reopen a live file
            ms += 1
            name = time_millis_to_human_string(ms)
        return self.store_path / name

    def get_and_create_last_index_file(self) -> IndexFile:
        with self._lock:
            prev = None
            last_phy = last_ts = 0
            if self.index_files:
                tmp = self.index_files[-1]
                if not tmp.is_write_full():
                    return tmp
                prev, last_phy, last_ts = tmp, tmp.end_phy_offset, tmp.end_timestamp
            f = IndexFile(self._new_file_name(), self.hash_slot_num, self.index_num, last_phy, last_ts)
            self.index_files.append(f)
        if prev is not None:  # syncing a full file takes a while: off the dispatch thread
            t = threading.Thread(target=self.flush, args=(prev,), name="FlushIndexFileThread", daemon=True)
            self._flush_threads = [x for x in self._flush_threads if x.is_alive()] + [t]
            t.start()
        return f

    def flush(self, f: IndexFile | None = None) -> None:
        if f is None:
            with self._lock:
                files = list(self.index_files[-1:])
            for x in files:
                x.flush()
            return
        full_ts = f.end_timestamp if f.is_write_full() else 0
        f.flush()
        if full_ts > 0 and self.on_index_file_full is not None:
            self.on_index_file_full(full_ts)

    def build_index(self, topic: str, commit_log_offset: int, store_timestamp: int,
                    keys: str | None, uniq_key: str | None, sys_flag: int = 0) -> None:
        """``IndexService.buildIndex``: index ``topic#UNIQ_KEY`` then ``topic#k`` for each
        space-separated KEYS token; rollback messages and records already covered by the
        last file (offset < its endPhyOffset) are skipped."""
        self.build_index_batch(((topic, 0, commit_log_offset, 0, 0, store_timestamp, 0, keys, uniq_key, sys_flag),))

    def build_index_batch(self, requests: Iterable[Sequence]) -> None:
        """:meth:`build_index` for many records, each a DispatchRequest-ordered tuple (topic,
        queue id, commit-log offset, size, tags code, store time, queue offset, KEYS,
        UNIQ_KEY, sysFlag, ...): the keys hashed first (``topic#`` once per topic,
        :func:`java_string_hash_from`), then put with one header write per file. A file is
        rolled where buildIndex would roll it: before a record's first key when it is full,
        and at the start of any later record once it is."""
        f = self.get_and_create_last_index_file()
        prefixes = self._prefix_hashes
        entries: list[tuple[int, int, int, int]] = []
        end_phy = f.header.endPhyOffset  # buildIndex skips records below it (a replay)
        last = -1
        for last, r in enumerate(requests):
            phy = r[2]
            keys, uniq = r[7], r[8]
            if (uniq is None and not keys) or phy < end_phy or r[9] & _TRAN_MASK == _ROLLBACK:
                continue
            topic, ts = r[0], r[5]
            ph = prefixes.get(topic)
            if ph is None:
                ph = prefixes[topic] = java_string_hash(topic + "#")
            if uniq is not None:
                h = java_string_hash_from(ph, uniq)
                entries.append((0 if h == -0x80000000 else abs(h), phy, ts, last))
                end_phy = phy
            if keys:
                for k in keys.split(MessageConst.KEY_SEPARATOR):
                    if k:
                        h = java_string_hash_from(ph, k)
                        entries.append((0 if h == -0x80000000 else abs(h), phy, ts, last))
                        end_phy = phy
        try:
            i = f.put_hashes(entries, 0) if entries else 0
            while i < len(entries):  # full: the rest go to the next file
                f.write_header()
                f = self.get_and_create_last_index_file()
                i = f.put_hashes(entries, i)
            if f.is_write_full() and entries and entries[-1][3] < last:
                f.write_header()  # a record after the one that filled it: buildIndex rolled there
                f = self.get_and_create_last_index_file()
        finally:
            f.write_header()

    def query_offset(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryOffsetResult:
        """``IndexService.queryOffset``: newest file first, at most
        min(max_num, maxMsgsNumBatch) offsets."""
        res = QueryOffsetResult()
        max_num = min(max_num, self.max_msgs_num_batch)
        full_key = build_key(topic, key)
        with self._lock:
            files = list(self.index_files)
        for i in range(len(files), 0, -1):
            f = files[i - 1]
            if i == len(files):
                res.index_last_update_timestamp = f.end_timestamp
                res.index_last_update_phyoffset = f.end_phy_offset
            if f.is_time_matched(begin, end):
                f.select_phy_offset(res.phy_offsets, full_key, max_num, begin, end)
            if f.begin_timestamp < begin or len(res.phy_offsets) >= max_num:
                break
        return res

    def delete_expired_file(self, offset: int) -> int:
        """``IndexService.deleteExpiredFile``: drop leading files wholly below the commit
        log's min offset, never the last (current) file. Returns how many were deleted."""
        with self._lock:
            doomed = []
            for f in self.index_files[:-1]:
                if f.end_phy_offset < offset:
                    doomed.append(f)
                else:
                    break
            for f in doomed:
                f.destroy()
                self.index_files.remove(f)
        return len(doomed)

    def shutdown(self) -> None:
        for t in self._flush_threads:
            t.join()
        self._flush_threads.clear()
        with self._lock:
            for f in self.index_files:
                f.flush()
                f.close()

    def destroy(self) -> None:
        with self._lock:
            for f in self.index_files:
                f.destroy()
            self.index_files.clear()
