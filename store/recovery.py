"""Commit-log recovery as RocketMQ 4.9.8 does it (CommitLog.recoverNormally / recoverAbnormally).

Clean start (no ``abort`` file): walk the last three files validating every record (magic,
sizes, CRC when checkCRCOnRecover) and cut the log where valid data ends.
Crash start (``abort`` present): start at the newest file whose first message is not newer than
the checkpoint (minus 3 s), validate forward, re-dispatch every valid record into consume queues
and index (idempotent for units already there), then cut the torn tail. In both cases consume
queues pointing beyond the cut are truncated and files wholly beyond it (e.g. the pre-allocated
empty next file) are deleted.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from rmqd.store.checkpoint import StoreCheckpoint
from rmqd.store.commitlog import CommitLog, DispatchInfo
from rmqd.store.consumequeue import ConsumeQueue, each_queue
from rmqd.store.dispatch import DISPATCH_BATCH
from rmqd.store.mapped_file import MappedFile
from rmqd.wire.message import MAGIC_CODE_V1, MAGIC_CODE_V2, SYSFLAG_POSITION, store_timestamp_position

log = logging.getLogger("rmqd.store.recovery")
_I = struct.Struct(">i")
_U = struct.Struct(">I")
_Q = struct.Struct(">q")


@dataclass
class RecoveryReport:
    """What recovery did (logged, and checked by tests)."""

    abnormal: bool
    start_file: str | None
    process_offset: int
    stop_reason: str
    dispatched: int = 0
    truncated_bytes: int = 0
    deleted_files: list[str] | None = None
    truncated_consume_queues: bool = False
    start_position: int = 0  # where in start_file the crash-recovery walk began


def _walk(commit_log: CommitLog, index: int, check_crc: bool,
          dispatch: Callable[[Sequence[DispatchInfo]], None] | None, start_pos: int = 0) -> tuple[int, str, int]:
    """Validate records from file ``index`` (position ``start_pos``, a record boundary) on;
    with ``dispatch``, hand every valid record to it (``CommitLog.dispatch_info`` tuples, in
    batches) as crash recovery re-dispatches."""
    files = commit_log.mapped_file_queue.mapped_files
    mf = files[index]
    process_offset = mf.file_from_offset
    pos = start_pos
    count = 0
    reason = "end of data"
    view = mf.view()
    batch: list[DispatchInfo] = []
    while True:
        if dispatch is None:  # clean recovery: sizes and CRC only, nothing to dispatch
            size = commit_log.validate_record(view, pos, check_crc)
        else:
            info = commit_log.dispatch_info(view, pos, check_crc)
            if isinstance(info, int):
                size = info
            else:
                size = info[3]
                batch.append(info)
                if len(batch) >= DISPATCH_BATCH:
                    dispatch(batch)
                    batch = []
        if size > 0:
            pos += size
            count += 1
        elif size == 0:  # BLANK: go on with the next file
            index += 1
            if index >= len(files):
                reason = "last file ends with a BLANK record"
                pos = mf.file_size
                break
            mf = files[index]
            view = mf.view()
            process_offset = mf.file_from_offset
            pos = 0
        else:
            total = _I.unpack_from(mf.mm, pos)[0] if pos + 4 <= mf.file_size else 0
            reason = ("end of data" if total == 0 else
                      f"invalid record in {mf.file_name} at file position {pos} (bad magic, size or CRC)")
            break
    if batch and dispatch is not None:  # (a batch is only gathered with a dispatch)
        dispatch(batch)
    return process_offset + pos, reason, count


def _truncate(commit_log: CommitLog, process_offset: int, max_phy_offset_of_cq: int,
              consume_queues: Iterable[ConsumeQueue], report: RecoveryReport) -> None:
    mfq = commit_log.mapped_file_queue
    commit_log.appended.clear()  # offsets past process_offset are written anew
    before = {m.file_name for m in mfq.mapped_files}
    mfq.flushed_where = process_offset
    mfq.committed_where = process_offset
    mfq.truncate_dirty_files(process_offset)
    # bytes after the end of data are zeroed so a later recovery never resurrects a torn record
    last = mfq.get_last_mapped_file()
    if last is not None and last.wrote_position < last.file_size:
        pos = last.wrote_position
        tail = bytes(last.mm[pos:pos + 8])
        if tail != bytes(len(tail)):
            declared = _I.unpack_from(last.mm, pos)[0] if pos + 4 <= last.file_size else 0
            end = pos + declared if 0 < declared <= last.file_size - pos else pos
            end = max(end, pos + len(tail))
            while end < last.file_size:
                chunk = min(4096, last.file_size - end)
                if last.mm[end:end + chunk] == bytes(chunk):
                    break
                end += chunk
            last.mm[pos:end] = bytes(end - pos)
            last.mm.flush()
            report.truncated_bytes = end - pos
    report.deleted_files = sorted(before - {m.file_name for m in mfq.mapped_files})
    if report.stop_reason.startswith("invalid record"):
        log.warning("commit log recovery stopped: %s; data after offset %d is not served (%d bytes cleared)",
                    report.stop_reason, process_offset, report.truncated_bytes)
    if max_phy_offset_of_cq >= process_offset:
        log.info("maxPhyOffsetOfConsumeQueue(%d) >= processOffset(%d), truncate dirty logic files",
                 max_phy_offset_of_cq, process_offset)
        # 4.9 runs truncateDirtyLogicFiles on every queue; one whose last unit (as recover()
        # found it) ends at or before the end would keep every unit: left as it is (a clean
        # restart reads the last page of 80,000 queues once, not twice)
        each_queue([cq for cq in consume_queues if not 0 < cq.max_physic_offset <= process_offset],
                   lambda cq: cq.truncate_dirty_logic_files(process_offset))
        report.truncated_consume_queues = True


def _no_commit_log(commit_log: CommitLog, consume_queues: Iterable[ConsumeQueue], abnormal: bool) -> RecoveryReport:
    """Without a commit log every consume queue points at nothing: they are destroyed."""
    commit_log.mapped_file_queue.flushed_where = 0
    for cq in consume_queues:
        cq.destroy()
    return RecoveryReport(abnormal, None, 0, "no commit log files")


def recover_normally(commit_log: CommitLog, max_phy_offset_of_cq: int, consume_queues: Iterable[ConsumeQueue],
                     check_crc: bool = True) -> RecoveryReport:
    files = commit_log.mapped_file_queue.mapped_files
    if not files:
        return _no_commit_log(commit_log, consume_queues, abnormal=False)
    index = max(len(files) - 3, 0)
    start = files[index].file_name
    offset, reason, _ = _walk(commit_log, index, check_crc, None)
    report = RecoveryReport(False, start, offset, reason)
    _truncate(commit_log, offset, max_phy_offset_of_cq, consume_queues, report)
    return report


def is_mapped_file_matched_recover(mf: MappedFile, checkpoint: StoreCheckpoint, index_safe: bool) -> bool:
    """The file's first message is a message and not newer than what the checkpoint covers."""
    magic = _U.unpack_from(mf.mm, 4)[0]
    if magic not in (MAGIC_CODE_V1, MAGIC_CODE_V2):
        return False
    sys_flag = _I.unpack_from(mf.mm, SYSFLAG_POSITION)[0]
    ts = _Q.unpack_from(mf.mm, store_timestamp_position(sys_flag))[0]
    if ts == 0:
        return False
    limit = checkpoint.get_min_timestamp_index() if index_safe else checkpoint.get_min_timestamp()
    return ts <= limit


def store_timestamp_at(commit_log: CommitLog, phy: int) -> int | None:
    """The store timestamp of the record at ``phy`` (None if no record starts there)."""
    mf = commit_log.mapped_file_queue.find_mapped_file_by_offset(phy)
    if mf is None:
        return None
    pos = phy - mf.file_from_offset
    if pos < 0 or pos + SYSFLAG_POSITION + 4 > mf.file_size:
        return None
    if _U.unpack_from(mf.mm, pos + 4)[0] not in (MAGIC_CODE_V1, MAGIC_CODE_V2):
        return None
    at = pos + store_timestamp_position(_I.unpack_from(mf.mm, pos + SYSFLAG_POSITION)[0])
    return _Q.unpack_from(mf.mm, at)[0] if at + 8 <= mf.file_size else None


def covered_position(commit_log: CommitLog, mf: MappedFile, consume_queues: Iterable[ConsumeQueue],
                     limit: int) -> int:
    """A record boundary in ``mf`` before which the checkpoint covers everything: the last
    consume-queue unit in ``mf`` whose record was stored at or before ``limit``.

    Store times grow in commit-log order, so every record before that one was stored at or
    before ``limit`` too: the checkpoint says they were flushed and dispatched, and crash
    recovery may start its walk there instead of at the file's first byte (4.9.8 walks the
    whole file: up to 1 GiB re-read, re-checked and re-dispatched after every crash). A
    binary search per queue; 0 when no unit qualifies."""
    lo_phy, hi_phy = mf.file_from_offset, mf.file_from_offset + mf.file_size
    best = lo_phy
    # queues by their last unit, latest first: once one is covered whole, every queue after
    # it ends before the boundary found, so only queues written after the checkpoint are
    # searched (80,000 queues must not cost 80,000 searches and their commit-log reads)
    ends = []
    for cq in consume_queues:
        a, b = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue() - 1
        last = cq.get_unit(b) if b >= a else None
        if last is not None and last[0] > best:
            ends.append((last[0], a, b, cq))
    ends.sort(key=lambda e: e[0], reverse=True)
    for last_phy, a, b, cq in ends:
        if last_phy <= best:
            break  # this queue, and every one after it, ends before the best boundary found
        while a <= b:
            m = (a + b) // 2
            u = cq.get_unit(m)
            if u is None:
                break
            phy = u[0]
            if phy >= hi_phy:
                b = m - 1
                continue
            if phy < lo_phy:
                a = m + 1
                continue
            ts = store_timestamp_at(commit_log, phy)
            if ts is not None and 0 < ts <= limit:
                best = max(best, phy)
                a = m + 1
            else:
                b = m - 1
    return best - lo_phy


def recover_abnormally(commit_log: CommitLog, checkpoint: StoreCheckpoint, max_phy_offset_of_cq: int,
                       consume_queues: Iterable[ConsumeQueue], dispatch: Callable[[Sequence[DispatchInfo]], None],
                       check_crc: bool = True, index_safe: bool = False,
                       index_rollback: Callable[[int], None] | None = None) -> RecoveryReport:
    """``index_rollback(phy)``: given, the walk may start inside the checkpoint's file (at
    :func:`covered_position`) and the index is first rolled back to where the walk starts
    (the index files were kept through the crash); else the file is walked whole, as 4.9.8."""
    files = commit_log.mapped_file_queue.mapped_files
    if not files:
        return _no_commit_log(commit_log, consume_queues, abnormal=True)
    index = len(files) - 1
    while index >= 0:
        if is_mapped_file_matched_recover(files[index], checkpoint, index_safe):
            break
        index -= 1
    if index < 0:
        index = 0
    start = files[index].file_name
    start_pos = 0
    if index_rollback is not None:
        if is_mapped_file_matched_recover(files[index], checkpoint, index_safe):
            limit = checkpoint.get_min_timestamp_index() if index_safe else checkpoint.get_min_timestamp()
            start_pos = covered_position(commit_log, files[index], consume_queues, limit)
        index_rollback(files[index].file_from_offset + start_pos)
    offset, reason, count = _walk(commit_log, index, check_crc, dispatch, start_pos)
    report = RecoveryReport(True, start, offset, reason, count, start_position=start_pos)
    _truncate(commit_log, offset, max_phy_offset_of_cq, consume_queues, report)
    return report
