"""The store side of HA replication: raw commit-log bytes out (master) and in (slave).

RocketMQ's slave never re-encodes a message: the master ships its commit-log bytes as they
are on disk (records, and at the end of each file the BLANK record plus the zero fill up to
the file size) and the slave writes them at the same physical offsets
(DefaultMessageStore.appendToCommitLog -> CommitLog.appendData), then its reput thread
builds consume queues and indexes from them like from its own appends. So master and slave
files come out byte-identical.

A master transfer never crosses a file: getCommitLogData selects from one mapped file only,
so the slave appends each chunk into the file that starts at the chunk's offset rounded down
to mappedFileSizeCommitLog, creating it when the previous one is full (or none exists yet:
a slave that starts empty takes the master's last file as its first).
"""

from __future__ import annotations

from typing import Any

from rmqd.store.commitlog import CommitLog


class HAAppendError(ValueError):
    """Bytes that cannot go at the offset given (names offset and file)."""


def read_commit_log(commit_log: CommitLog, offset: int, max_bytes: int) -> memoryview | None:
    """Up to ``max_bytes`` written commit-log bytes from ``offset``, within the one file that
    holds it (HAConnection's getCommitLogData + the batch cut); None when nothing is there yet.
    """
    mfq = commit_log.mapped_file_queue
    mf = mfq.find_mapped_file_by_offset(offset, offset == 0)
    if mf is None:
        return None
    pos = offset - mf.file_from_offset
    if pos < 0 or pos >= mf.wrote_position:
        return None
    view = mf.select_mapped_buffer(pos)
    if view is None:
        return None
    return view[:max_bytes]


def master_start_offset(commit_log: CommitLog, slave_offset: int) -> int:
    """Where the master starts streaming (WriteSocketService): the slave's reported offset,
    or - when the slave reports 0 (an empty slave) - the start of the master's LAST
    commit-log file, so a new slave does not copy the whole history."""
    if slave_offset != 0:
        return slave_offset
    size = commit_log.config.mappedFileSizeCommitLog
    master = commit_log.get_max_offset()
    return max(master - master % size, 0)


def append_at(store: Any, offset: int, data: bytes | memoryview) -> int:
    """Write master bytes at ``offset`` on the slave and wake its dispatch; returns the new max
    offset. The offset must be the slave's max offset, or the start of a file when the slave
    has none yet; the bytes must fit in that file (a master transfer never spans two)."""
    commit_log: CommitLog = store.commit_log
    size = commit_log.config.mappedFileSizeCommitLog
    n = len(data)
    if n == 0:
        return commit_log.get_max_offset()
    with commit_log.put_message_lock:
        mfq = commit_log.mapped_file_queue
        last = mfq.get_last_mapped_file()
        if last is None:
            if offset % size:
                raise HAAppendError(f"the slave has no commit-log file and offset {offset} is not a file start")
        else:
            here = last.file_from_offset + last.wrote_position
            if offset != here:
                raise HAAppendError(f"offset {offset} is not the slave's max commit-log offset {here} "
                                    f"(file {last.file_name})")
        mf = mfq.get_last_mapped_file(offset)
        if mf is None or mf.file_from_offset != offset - offset % size:
            raise HAAppendError(f"no commit-log file for offset {offset}")
        pos = offset - mf.file_from_offset
        if pos != mf.wrote_position or pos + n > mf.file_size:
            raise HAAppendError(f"{n} bytes at offset {offset} do not fit file {mf.file_name} "
                                f"(wrote position {mf.wrote_position}, size {mf.file_size})")
        mf.write(pos, data)
        mf.wrote_position = pos + n
    end = offset + n
    if commit_log.on_appended is not None:
        commit_log.on_appended(end)
    return end


class SlaveReceiver:
    """The slave's view of the master's stream: appends only whole records.

    A master transfer is cut at haTransferBatchSize, so it may end inside a record. RocketMQ's
    slave writes the partial record and its reput thread waits at it (on a slave a short read is
    not corruption); rmqd's dispatch treats a short record as damage, so instead the slave keeps
    the incomplete tail here and writes it once the rest arrives. The commit log then only ever
    holds whole records (BLANK end-of-file records included: their size runs to the file end),
    and the offset the slave reports is a record boundary - which a SYNC_MASTER waiter needs
    anyway, since a send's end offset is one. A new connection starts a new receiver: the tail
    of a broken one is dropped and asked for again from the reported offset.
    """

    def __init__(self, store: Any) -> None:
        self.store = store
        self._tail = bytearray()
        self._tail_offset = -1

    @property
    def expected_offset(self) -> int:
        """Where the master's next transfer must start: the slave's max offset + held bytes."""
        if self._tail_offset >= 0:
            return self._tail_offset + len(self._tail)
        return self.store.commit_log.get_max_offset()

    def feed(self, offset: int, data: bytes | memoryview) -> int:
        """Take a transfer at ``offset``; returns the commit log's max offset afterwards."""
        if not data:
            return self.store.commit_log.get_max_offset()
        if self._tail_offset < 0:
            self._tail_offset = offset
        elif offset != self._tail_offset + len(self._tail):
            raise HAAppendError(f"transfer at offset {offset}, expected {self._tail_offset + len(self._tail)}")
        self._tail += data
        size = self.store.commit_log.config.mappedFileSizeCommitLog
        whole = _whole_records(self._tail, self._tail_offset, size)
        end = self.store.commit_log.get_max_offset()
        if whole:
            end = append_at(self.store, self._tail_offset, bytes(self._tail[:whole]))
            del self._tail[:whole]
            self._tail_offset += whole
        if not self._tail:
            self._tail_offset = -1
        return end


def _whole_records(buf: bytearray, offset: int, file_size: int) -> int:
    """How many leading bytes of ``buf`` (starting at commit-log ``offset``) are whole records.
    A size that cannot be a record (< 8, or past the file end) is left to append_at/dispatch to
    report: those bytes go through as they are."""
    pos, n = 0, len(buf)
    while n - pos >= 4:
        total = int.from_bytes(buf[pos:pos + 4], "big", signed=True)
        room = file_size - (offset + pos) % file_size
        if total < 8 or total > room:
            return n
        if pos + total > n:
            break
        pos += total
    return pos


__all__ = ["HAAppendError", "SlaveReceiver", "append_at", "master_start_offset", "read_commit_log"]
