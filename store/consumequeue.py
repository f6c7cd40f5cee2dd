"""RocketMQ's consume queue (``consumequeue/{topic}/{queueId}/{20-digit start offset}``).

A consume queue is the per topic-queue list of (commit-log offset, size, tags code) that
lets a pull find the n-th message of a queue without scanning the commit log. It is derived
data: the dispatcher rebuilds it from the commit log, so recovery may truncate it freely.

Unit layout (``store/.../ConsumeQueue.java``), big-endian, 20 bytes::

    commitLogOffset i64 | size i32 | tagsCode i64

Files hold ``mappedFileSizeConsumeQueue`` bytes (default 300,000 units = 6,000,000 B) and
are named by the byte offset of their first unit. A queue whose first unit is not unit 0
(e.g. rebuilt from a commit log whose first files have expired) starts with
``(0, Integer.MAX_VALUE, 0)`` filler units up to the first real one (``fillPreBlank``);
an unwritten tail is zeros.

Interface used by the dispatcher (``ConsumeQueue.putMessagePositionInfo``)::

    ConsumeQueue.put_message_position_info(offset: int, size: int, tags_code: int,
                                           cq_offset: int) -> bool

and by the rest of the store: ``load()``, ``recover()``, ``truncate_dirty_logic_files(phy)``,
``correct_min_offset(phy_min)``, ``get_index_buffer(index) -> memoryview | None``,
``get_unit(index)``, ``get_min_offset_in_queue()``, ``get_max_offset_in_queue()``,
``get_last_offset()``, ``get_offset_in_queue_by_time(ts, pickup_store_timestamp, min_phy)``,
``delete_expired_file(phy_min)``, ``flush(least_pages)``, ``close()``, ``destroy()``;
``load_consume_queues(dir, size)`` opens a whole ``consumequeue/`` tree.

``tags_code_of`` computes the tags code exactly as ``CommitLog.checkMessageAndReturnSize``
does (TAGS ``String.hashCode``, or the delivery time in SCHEDULE_TOPIC_XXXX).
"""
from __future__ import annotations

import concurrent.futures
import functools
import logging
import os
import sys
from array import array
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping, NamedTuple, Sequence

from construct import Int32sb, Int64sb, Struct

from rmqd.store.layout import struct_of
from rmqd.store.mapped_file import OS_PAGE_SIZE, FileHandles, MappedFile, MappedFileQueue
from rmqd.wire.message import MessageConst, ReadableBuffer, java_string_hash

CQ_UNIT = Struct(
    "commitLogOffset" / Int64sb,
    "size" / Int32sb,
    "tagsCode" / Int64sb,
)


log = logging.getLogger("rmqd.store.consumequeue")

_UNIT = struct_of(CQ_UNIT)
CQ_STORE_UNIT_SIZE = _UNIT.size  # 20
INT_MAX = 0x7FFFFFFF
PRE_BLANK_UNIT = _UNIT.pack(0, INT_MAX, 0)
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"  # TopicValidator.RMQ_SYS_SCHEDULE_TOPIC


_tags_hash = functools.lru_cache(maxsize=4096)(java_string_hash)  # tags repeat: hash each once


def tags_code_of(topic: str, properties: Mapping[str, str], store_timestamp: int,
                 delay_level_table: Mapping[int, int] | None = None) -> int:
    """Tags code as ``CommitLog.checkMessageAndReturnSize`` computes it: TAGS'
    ``String.hashCode``; in SCHEDULE_TOPIC_XXXX the delivery time (store time + the level's
    delay, level capped at the highest, 1 s for an unknown level) instead.

    ``delay_level_table`` maps level -> delay in ms
    (``dict(enumerate(MessageStoreConfig.delay_levels_ms(), 1))``). A DELAY that is not a
    number counts as no delay (RocketMQ would stop dispatching at such a record)."""
    code = 0
    tags = properties.get(MessageConst.PROPERTY_TAGS)
    if tags:
        code = _tags_hash(tags)
    if topic == SCHEDULE_TOPIC:
        t = properties.get(MessageConst.PROPERTY_DELAY_TIME_LEVEL)
        if t is not None:
            try:
                level = int(t)
            except ValueError:
                return code
            table = delay_level_table or {}
            max_level = max(table, default=0)
            if level > max_level:
                level = max_level
            if level > 0:
                delay = table.get(level)
                code = store_timestamp + (delay if delay is not None else 1000)
    return code


class CqUnit(NamedTuple):
    file: str
    file_pos: int
    logical_offset: int
    commit_log_offset: int
    size: int
    tags_code: int



class ConsumeQueue:
    """One topic-queue's consume queue (``ConsumeQueue``) over a MappedFileQueue.

    Offsets are in units unless named ``*_logic_offset`` (bytes)."""

    def __init__(self, topic: str, queue_id: int, store_path: str | os.PathLike,
                 mapped_file_size: int = 300_000 * CQ_STORE_UNIT_SIZE, handles: FileHandles | None = None) -> None:
        """``handles``: the store's consume-queue descriptors; files are then mapped only when
        read through ``mm`` (see :class:`LazyMappedFile`), recovery reads them with pread."""
        if mapped_file_size % CQ_STORE_UNIT_SIZE:
            raise ValueError(f"mappedFileSizeConsumeQueue {mapped_file_size} is not a multiple of 20")
        self.topic = topic
        self.queue_id = queue_id
        self.store_path = store_path  # (plain: 80,000 queues, no Path objects each)
        self.mapped_file_size = mapped_file_size
        self.mapped_file_queue = MappedFileQueue(os.path.join(store_path, topic, str(queue_id)), mapped_file_size,
                                                 preallocate=False, handles=handles)
        self.max_physic_offset = -1
        self.min_logic_offset = 0
        #: told about every write (after it): the store's set of queues to flush
        self.on_write: Callable[[ConsumeQueue], None] | None = None

    def _written(self) -> None:
        if self.on_write is not None:
            self.on_write(self)

    def has_unflushed(self) -> bool:
        return any(mf.flushed_position < mf.wrote_position for mf in self.files)

    def flush_would_wait(self, least_pages: int) -> bool:
        """True when ``flush(least_pages)`` would flush nothing yet: the file it flushes is the
        last, not full, with fewer than ``least_pages`` dirty pages (MappedFile.is_able_to_flush)
        - decided without the call, for the many queues that hold a unit or two since the
        last thorough flush."""
        files = self.mapped_file_queue.mapped_files
        if not files or least_pages <= 0:
            return False
        last = files[-1]
        if self.mapped_file_queue.flushed_where < last.file_from_offset or last.is_full():
            return False
        return last.wrote_position // OS_PAGE_SIZE - last.flushed_position // OS_PAGE_SIZE < least_pages

    @property
    def queue_dir(self) -> Path:
        return Path(self.mapped_file_queue.store_path)

    @property
    def files(self) -> list:
        return self.mapped_file_queue.mapped_files

    # -- load / recover ---------------------------------------------------------------------
    def load(self) -> bool:
        """Map every file; a wrong size or foreign name raises :class:`StoreFileError`."""
        self.mapped_file_queue.load()
        return True

    def recover(self) -> None:
        """``ConsumeQueue.recover``: from the third-last file, find the end of valid units
        and truncate everything after it. Reads what 4.9.8 reads: those files' units up to
        the first invalid one (see :func:`read_valid_units`), nothing of the files before."""
        files = self.files
        if not files:
            return
        index = max(len(files) - 3, 0)
        mf = files[index]
        while True:
            valid, last = read_valid_units(mf, keep=False)
            file_offset = valid * CQ_STORE_UNIT_SIZE
            if valid:
                offset, size, _tags = _UNIT.unpack(last)
                self.max_physic_offset = offset + size
            if file_offset == self.mapped_file_size and index + 1 < len(files):
                index += 1
                mf = files[index]
            else:
                break
        process_offset = mf.file_from_offset + file_offset
        mfq = self.mapped_file_queue
        mfq.flushed_where = mfq.committed_where = process_offset
        mfq.truncate_dirty_files(process_offset)

    def truncate_dirty_logic_files(self, phy_offset: int) -> None:
        """``ConsumeQueue.truncateDirtyLogicFiles``: drop units pointing at or beyond
        ``phy_offset`` (the recovered end of the commit log). Cut units are zeroed so a
        later recovery cannot bring them back."""
        self.max_physic_offset = phy_offset
        mfq = self.mapped_file_queue
        while True:
            mf = mfq.get_last_mapped_file()
            if mf is None:
                return
            mf.wrote_position = mf.flushed_position = 0
            units = mf.file_size // CQ_STORE_UNIT_SIZE
            if units == 0:
                return
            first = mf.read(0, CQ_STORE_UNIT_SIZE)
            offset, size, _tags = _UNIT.unpack(first)
            if offset >= phy_offset:  # the whole file points past the end (unit 0 is not validated, as Java)
                mfq.delete_last_mapped_file()
                continue
            # units 1.. stay while valid and before phy_offset
            valid, data = read_valid_units(mf, keep=True, first_unit=1)
            buf = first + data
            valid += 1
            keep = 1 + _first_offset_at_least(buf, 1, valid, phy_offset)
            last_offset, last_size, _ = _UNIT.unpack_from(buf, (keep - 1) * CQ_STORE_UNIT_SIZE)
            mf.wrote_position = mf.flushed_position = keep * CQ_STORE_UNIT_SIZE
            self.max_physic_offset = last_offset + last_size
            if keep < units:
                self._zero_tail(mf, keep * CQ_STORE_UNIT_SIZE)
            return

    @staticmethod
    def _zero_tail(mf: MappedFile, pos: int) -> None:
        """Zero the units from ``pos`` up to the first all-zero one (what was written past
        the new end)."""
        end, chunk = pos, CQ_STORE_UNIT_SIZE  # usually the first unit is zero already
        limit = min(mf.file_size, _round_up_to_unit(mf.data_end()))
        while end < limit:
            stop = min(end + chunk, limit)
            cut = (stop // _PAGE * _PAGE) // CQ_STORE_UNIT_SIZE * CQ_STORE_UNIT_SIZE
            data = mf.read(end, (cut if end < cut < stop else stop) - end)
            at = _first_zero_unit(data)
            if at >= 0:
                end += at
                break
            end += len(data) - len(data) % CQ_STORE_UNIT_SIZE
            chunk = min(max(chunk * 2, _SCAN_FIRST), _SCAN_MAX)
        if end > pos:
            mf.write_at(pos, bytes(end - pos))

    # -- write ------------------------------------------------------------------------------
    def put_message_position_info(self, offset: int, size: int, tags_code: int, cq_offset: int) -> bool:
        """Append one unit for queue offset ``cq_offset`` (``putMessagePositionInfo``).

        Idempotent for replays: a unit at or below what is already written returns True
        without writing, which is what lets recovery re-dispatch from a checkpoint."""
        if offset + size <= self.max_physic_offset:
            return True
        expect = cq_offset * CQ_STORE_UNIT_SIZE
        mfq = self.mapped_file_queue
        mf = mfq.get_last_mapped_file(expect)
        if mf is None:
            return False
        if mf.first_create_in_queue and cq_offset != 0 and mf.wrote_position == 0:
            self.min_logic_offset = expect
            mfq.flushed_where = mfq.committed_where = expect
            self._fill_pre_blank(mf, expect)
        current = mf.wrote_position + mf.file_from_offset
        if cq_offset == 0 and current > 0:
            # 4.9.8 appends such a unit anyway. It comes from a deleted topic's later life: a
            # recovery after a crash walks the commit log again, and once the topic's last
            # queue is gone (deleted, then SIGKILL) the records of each earlier life are
            # dispatched in turn, every life starting over at offset 0.  Appended, unit N
            # would point at a record of queue offset 0; the first life stays indexed instead.
            log.warning("consume queue %s-%d: record at %d has queue offset 0 but the queue holds %d units "
                        "(a deleted topic's later messages, found again by recovery): not indexed",
                        self.topic, self.queue_id, offset, current // CQ_STORE_UNIT_SIZE)
            return True
        if cq_offset != 0:
            if expect < current:
                return True  # built already (a replay)
            if expect != current:
                # RocketMQ logs "[BUG]logic queue order maybe wrong" and appends anyway
                log.error("consume queue %s-%d: unit for queue offset %d written at queue offset %d",
                          self.topic, self.queue_id, cq_offset, current // CQ_STORE_UNIT_SIZE)
        self.max_physic_offset = offset + size
        ok = mf.append_message(_UNIT.pack(offset, size, tags_code))
        self._written()
        return ok

    def put_units(self, units: Sequence[tuple[int, int, int, int]]) -> None:
        """:meth:`put_message_position_info` for many (offset, size, tags code, queue offset)
        units in queue order."""
        self.put_requests([(0, 0, o, s, t, 0, q) for o, s, t, q in units])

    def put_requests(self, requests: Sequence[Sequence]) -> None:
        """:meth:`put_message_position_info` for many records of this queue in queue order,
        each a DispatchRequest-ordered tuple (commit-log offset [2], size [3], tags code [4],
        queue offset [6]): runs that continue the last file are packed into one buffer, written
        with one pwrite and published with one position update; anything else (a new file, a
        replay, a gap) takes the careful one-unit path."""
        units = requests
        mfq = self.mapped_file_queue
        pack = _UNIT.pack
        i, n = 0, len(units)
        while i < n:
            mf = mfq.get_last_mapped_file()
            j = i
            if mf is not None and 0 < mf.wrote_position < mf.file_size:
                start = wp = mf.wrote_position
                base, size_limit = mf.file_from_offset, mf.file_size
                max_phy = self.max_physic_offset
                packed = []
                while j < n and wp < size_limit:
                    r = units[j]
                    offset, size, tags_code, cq_offset = r[2], r[3], r[4], r[6]
                    if offset + size <= max_phy or cq_offset * CQ_STORE_UNIT_SIZE != base + wp:
                        break
                    packed.append(pack(offset, size, tags_code))
                    wp += CQ_STORE_UNIT_SIZE
                    max_phy = offset + size
                    j += 1
                if j > i:
                    mf.write(start, b"".join(packed))
                    self.max_physic_offset = max_phy
                    mf.wrote_position = wp  # publish after the bytes
                    self._written()
            if j == i:
                r = units[i]
                self.put_message_position_info(r[2], r[3], r[4], r[6])
                j = i + 1
            i = j

    def _fill_pre_blank(self, mf: MappedFile, until_where: int) -> None:
        until = until_where % self.mapped_file_size
        mf.write_at(0, PRE_BLANK_UNIT * (until // CQ_STORE_UNIT_SIZE))
        mf.wrote_position = until

    # -- read -------------------------------------------------------------------------------
    def get_index_buffer(self, start_index: int) -> memoryview | None:
        """Units from queue offset ``start_index`` to the end of the written part of its
        file (``getIndexBuffer``); None below the min offset or past the end."""
        offset = start_index * CQ_STORE_UNIT_SIZE
        if offset < self.min_logic_offset:
            return None
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        pos = offset % self.mapped_file_size
        if pos >= mf.wrote_position:
            return None
        return mf.select_mapped_buffer(pos)

    def get_unit(self, index: int) -> tuple[int, int, int] | None:
        """(commitLogOffset, size, tagsCode) of queue offset ``index``, or None."""
        offset = index * CQ_STORE_UNIT_SIZE
        if offset < self.min_logic_offset:
            return None
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        pos = offset % self.mapped_file_size
        if mf is None or pos >= mf.wrote_position:
            return None
        if mf.is_mapped:
            return _UNIT.unpack_from(mf.mm, pos)
        return _UNIT.unpack(mf.read(pos, CQ_STORE_UNIT_SIZE))  # (recovery: no mapping for one unit)

    @staticmethod
    def iter_buffer(buf: memoryview | bytes) -> Iterator[tuple[int, int, int]]:
        """Decode a buffer returned by :meth:`get_index_buffer`."""
        return _UNIT.iter_unpack(buf[:len(buf) - len(buf) % CQ_STORE_UNIT_SIZE])

    def iter_units(self, include_blank: bool = False) -> Iterator[CqUnit]:
        """Every written unit of every file; pre-blank units only if asked."""
        for mf in self.files:
            for u in iter_unit_bytes(mf.mm[:mf.wrote_position], mf.file_name, mf.file_from_offset):
                if include_blank or not is_pre_blank(u):
                    yield u

    def get_min_offset_in_queue(self) -> int:
        return self.min_logic_offset // CQ_STORE_UNIT_SIZE

    def get_max_offset_in_queue(self) -> int:
        return self.mapped_file_queue.get_max_offset() // CQ_STORE_UNIT_SIZE

    def get_message_total_in_queue(self) -> int:
        return self.get_max_offset_in_queue() - self.get_min_offset_in_queue()

    def get_last_offset(self) -> int:
        """Commit-log end (offset + size) of the last unit, -1 if none (``getLastOffset``)."""
        mf = self.mapped_file_queue.get_last_mapped_file()
        if mf is None:
            return -1
        last = -1
        w = mf.wrote_position
        for offset, size, _ in _UNIT.iter_unpack(mf.read(max(w - CQ_STORE_UNIT_SIZE, 0), min(w, CQ_STORE_UNIT_SIZE))):
            if offset >= 0 and size > 0:
                last = offset + size
        return last

    def roll_next_file(self, index: int) -> int:
        units = self.mapped_file_size // CQ_STORE_UNIT_SIZE
        return index + units - index % units

    def get_offset_in_queue_by_time(self, timestamp: int,
                                    pickup_store_timestamp: Callable[[int, int], int],
                                    min_phy_offset: int = 0) -> int:
        """``getOffsetInQueueByTime``: pick the file by modification time, then binary
        search its units by the store time read back from the commit log
        (``pickup_store_timestamp(phy_offset, size)``, negative when unreadable)."""
        files = self.files
        if not files:
            return 0
        mf = next((x for x in files if x.get_last_modified_timestamp() >= timestamp), files[-1])
        low = max(self.min_logic_offset - mf.file_from_offset, 0)
        high = mf.wrote_position - CQ_STORE_UNIT_SIZE
        target = left = right = -1
        left_val = right_val = -1
        while high >= low:
            mid = (low + high) // (2 * CQ_STORE_UNIT_SIZE) * CQ_STORE_UNIT_SIZE
            phy, size, _ = _UNIT.unpack_from(mf.mm, mid)
            if phy < min_phy_offset:
                low = mid + CQ_STORE_UNIT_SIZE
                left = mid
                continue
            st = pickup_store_timestamp(phy, size)
            if st < 0:
                return 0
            if st == timestamp:
                target = mid
                break
            if st > timestamp:
                high = mid - CQ_STORE_UNIT_SIZE
                right, right_val = mid, st
            else:
                low = mid + CQ_STORE_UNIT_SIZE
                left, left_val = mid, st
        if target != -1:
            offset = target
        elif left_val == -1:
            offset = right
        elif right_val == -1:
            offset = left
        else:
            offset = right if abs(timestamp - left_val) > abs(timestamp - right_val) else left
        return (mf.file_from_offset + offset) // CQ_STORE_UNIT_SIZE

    # -- expiry -----------------------------------------------------------------------------
    def correct_min_offset(self, phy_min_offset: int) -> None:
        """``correctMinOffset``: the first unit still pointing into the commit log."""
        mf = self.mapped_file_queue.get_first_mapped_file()
        if mf is None:
            return
        pos, chunk, end = 0, _SCAN_FIRST, mf.wrote_position
        while pos < end:  # the units a forward scan reads, a page's worth at a time at first
            data = mf.read(pos, min(chunk, end - pos))
            data = data[:len(data) - len(data) % CQ_STORE_UNIT_SIZE]
            if not data:
                return
            for i, (offset, _size, _tags) in enumerate(_UNIT.iter_unpack(data)):
                if offset >= phy_min_offset:
                    self.min_logic_offset = mf.file_from_offset + pos + i * CQ_STORE_UNIT_SIZE
                    return
            pos += len(data)
            chunk = min(chunk * 2, _SCAN_MAX)

    def delete_expired_file(self, phy_min_offset: int) -> int:
        """``deleteExpiredFile``: remove leading files whose last unit points below the
        commit log's min offset; never the last file. Returns how many were removed."""
        n = self.mapped_file_queue.delete_expired_file_by_offset(phy_min_offset, CQ_STORE_UNIT_SIZE)
        self.correct_min_offset(phy_min_offset)
        return n

    # -- lifecycle --------------------------------------------------------------------------
    def flush(self, flush_least_pages: int = 0) -> bool:
        """Flush like ``MappedFileQueue.flush`` (True when nothing new was flushed); with
        0 pages, every written file is flushed (shutdown)."""
        if flush_least_pages == 0:
            for mf in self.files:
                mf.flush(0)
            self.mapped_file_queue.flushed_where = self.mapped_file_queue.get_max_offset()
            return True
        return self.mapped_file_queue.flush(flush_least_pages)

    def close(self) -> None:
        self.mapped_file_queue.shutdown()

    def destroy(self) -> None:
        self.max_physic_offset = -1
        self.min_logic_offset = 0
        self.mapped_file_queue.destroy()
        try:
            self.queue_dir.parent.rmdir()  # the topic directory, once its last queue is gone
        except OSError:
            pass


def is_pre_blank(u: CqUnit) -> bool:
    return u.commit_log_offset == 0 and u.size == INT_MAX and u.tags_code == 0


def iter_unit_bytes(data: bytes | memoryview, file_name: str, file_from_offset: int) -> Iterator[CqUnit]:
    """Decode raw consume-queue file bytes (whole units only) into :class:`CqUnit`s."""
    n = len(data) - len(data) % CQ_STORE_UNIT_SIZE
    for i, (offset, size, tags) in enumerate(_UNIT.iter_unpack(data[:n])):
        pos = i * CQ_STORE_UNIT_SIZE
        yield CqUnit(file_name, pos, (file_from_offset + pos) // CQ_STORE_UNIT_SIZE, offset, size, tags)


def valid_unit_prefix(buf: ReadableBuffer, units: int) -> int:
    """How many leading units of ``buf`` are valid (offset >= 0 and size > 0), exactly as a
    unit-by-unit scan finds, at C speed: the first all-zero unit (where written data ends)
    is found with bytes.find, the units before it are checked as big-endian int32 columns
    with min(), and only a damaged run is bisected."""
    if units <= 0:
        return 0
    data = bytes(buf[:units * CQ_STORE_UNIT_SIZE])
    end, pos = units, 0
    while True:  # the first all-zero unit at a unit boundary
        at = data.find(_ZERO_UNIT, pos)
        if at < 0:
            break
        if at % CQ_STORE_UNIT_SIZE == 0:
            end = at // CQ_STORE_UNIT_SIZE
            break
        pos = at + CQ_STORE_UNIT_SIZE - at % CQ_STORE_UNIT_SIZE
    if end == 0:
        return 0
    arr = array("i")
    arr.frombytes(data[:end * CQ_STORE_UNIT_SIZE])
    if sys.byteorder == "little":
        arr.byteswap()
    offset_high, sizes = arr[0::5], arr[2::5]  # the offset's sign word, the size

    def ok(k: int) -> bool:
        return k == 0 or (min(sizes[:k]) > 0 and min(offset_high[:k]) >= 0)

    if ok(end):
        return end
    lo, hi = 0, end  # ok(lo), not ok(hi): a damaged unit before the zeros
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


_ZERO_UNIT = bytes(CQ_STORE_UNIT_SIZE)
_PAGE = 4096
_SCAN_FIRST = (_PAGE // CQ_STORE_UNIT_SIZE) * CQ_STORE_UNIT_SIZE  # the units of the first page
_SCAN_MAX = (1 << 20) // CQ_STORE_UNIT_SIZE * CQ_STORE_UNIT_SIZE


def _round_up_to_unit(n: int) -> int:
    return -(-n // CQ_STORE_UNIT_SIZE) * CQ_STORE_UNIT_SIZE


def _first_zero_unit(data: bytes) -> int:
    """Byte position of the first all-zero unit of ``data``, -1 if none."""
    pos = 0
    while True:
        at = data.find(_ZERO_UNIT, pos)
        if at < 0 or at + CQ_STORE_UNIT_SIZE > len(data):
            return -1
        if at % CQ_STORE_UNIT_SIZE == 0:
            return at
        pos = at + CQ_STORE_UNIT_SIZE - at % CQ_STORE_UNIT_SIZE


def read_valid_units(mf: MappedFile, *, keep: bool, first_unit: int = 0) -> tuple[int, bytes]:
    """How many units of ``mf`` from ``first_unit`` on are valid (offset >= 0, size > 0)
    before the first one that is not, and their bytes (``keep``) or just the last valid
    unit's (else; b"" when none).

    Reads as 4.9.8's unit-by-unit scan touches the file - up to the first invalid unit -
    with pread in chunks, without mapping the file: the first chunk is the units of one
    page, each next one twice as long (up to 1 MiB), and none goes past the file's first
    hole (SEEK_HOLE; a consume queue is sparse, written from its start), so a queue of a
    few messages costs one page and a 5.7 MiB file is not read whole for them."""
    limit = min(mf.file_size, _round_up_to_unit(max(mf.data_end(), 1)))
    pos = first_unit * CQ_STORE_UNIT_SIZE
    chunk = _SCAN_FIRST
    valid = 0
    parts: list[bytes] = []
    last = b""
    while pos < limit:
        end = min(pos + chunk, limit)
        cut = (end // _PAGE * _PAGE) // CQ_STORE_UNIT_SIZE * CQ_STORE_UNIT_SIZE
        if pos < cut < end:  # stop at the last whole unit before a page boundary: the next page
            end = cut        # is read only if every unit before it is valid, as a unit-by-unit scan
        data = mf.read(pos, end - pos)
        units = len(data) // CQ_STORE_UNIT_SIZE
        if units == 0:
            break
        v = valid_unit_prefix(data, units)
        valid += v
        if v:
            if keep:
                parts.append(data[:v * CQ_STORE_UNIT_SIZE])
            else:
                last = data[(v - 1) * CQ_STORE_UNIT_SIZE:v * CQ_STORE_UNIT_SIZE]
        if v < units:
            break
        pos += units * CQ_STORE_UNIT_SIZE
        chunk = min(chunk * 2, _SCAN_MAX)
    return valid, (b"".join(parts) if keep else last)


def _first_offset_at_least(buf: ReadableBuffer, first: int, end: int, phy_offset: int) -> int:
    """Units [first, end) of ``buf``: how many lead with a commit-log offset below
    ``phy_offset`` - what a forward scan finds. Units ascend by offset as dispatch writes
    them, so the answer is bisected and then confirmed at C speed (max over the units
    before it, as unsigned int32 columns); units out of order fall back to the scan."""
    n = end - first
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if _UNIT.unpack_from(buf, (first + mid) * CQ_STORE_UNIT_SIZE)[0] < phy_offset:
            lo = mid + 1
        else:
            hi = mid
    if lo == 0:
        return 0
    arr = array("I")
    arr.frombytes(bytes(buf[first * CQ_STORE_UNIT_SIZE:(first + lo) * CQ_STORE_UNIT_SIZE]))
    if sys.byteorder == "little":
        arr.byteswap()
    high, low = arr[0::5], arr[1::5]
    top = max(high)
    if top < phy_offset >> 32 or (top == phy_offset >> 32 and min(high) == top
                                   and max(low) < phy_offset & 0xFFFFFFFF):
        return lo
    for k in range(n):  # out of order: the scan itself
        if _UNIT.unpack_from(buf, (first + k) * CQ_STORE_UNIT_SIZE)[0] >= phy_offset:
            return k
    return n


def load_consume_queues(consumequeue_dir: str | os.PathLike,
                        mapped_file_size: int = 300_000 * CQ_STORE_UNIT_SIZE,
                        handles: FileHandles | None = None) -> dict[tuple[str, int], ConsumeQueue]:
    """Open every ``{topic}/{queueId}`` directory (``DefaultMessageStore.loadConsumeQueue``);
    non-numeric queue directories are skipped as RocketMQ does. Call ``recover()`` next."""
    root = Path(consumequeue_dir)
    out: dict[tuple[str, int], ConsumeQueue] = {}
    try:
        topics = sorted((e for e in os.scandir(root) if e.is_dir()), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return out
    for topic_dir in topics:
        queues = sorted((e for e in os.scandir(topic_dir.path) if e.is_dir()), key=lambda e: e.name)
        for qdir in queues:
            if not qdir.name.lstrip("-").isdigit():
                continue
            cq = ConsumeQueue(topic_dir.name, int(qdir.name), root, mapped_file_size, handles)
            cq.load()
            out[(topic_dir.name, int(qdir.name))] = cq
    return out


def each_queue(consume_queues: Iterable[ConsumeQueue], fn: Callable[[ConsumeQueue], None]) -> None:
    """``fn(cq)`` for every queue; tens of thousands of them on a few threads, so that their
    reads (a page or so each, from a disk that serves several at once) overlap. The first
    error is raised once all are done."""
    cqs = list(consume_queues)
    if len(cqs) < _PARALLEL_FROM:
        for cq in cqs:
            fn(cq)
        return
    with concurrent.futures.ThreadPoolExecutor(_RECOVERY_THREADS, thread_name_prefix="cq-recover") as pool:
        for future in [pool.submit(fn, cq) for cq in cqs]:
            future.result()


_PARALLEL_FROM = 256
_RECOVERY_THREADS = 16
