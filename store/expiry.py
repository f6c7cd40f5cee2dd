"""File expiry and disk-space guard (``DefaultMessageStore.CleanCommitLogService`` and
``CleanConsumeQueueService``, 4.9.8).

Why the store needs it: the commit log only grows; RocketMQ deletes whole commit-log files
once they are older than ``fileReservedTime`` hours, at the ``deleteWhen`` hour(s) or at
once when the disk passes ``diskMaxUsedSpaceRatio`` percent, and deletes even young files
when the disk passes 85 % (``diskSpaceCleanForciblyRatio``). Above 90 %
(``diskSpaceWarningLevelRatio``) the store stops taking writes: ``is_writeable()`` is what
DefaultMessageStore asks before appending (False -> PutMessageStatus.SERVICE_NOT_AVAILABLE, as
RocketMQ's RunningFlags DISK_FULL bit does). The file in use (the last one) is never
deleted. Consume queues and the index follow the commit log's new min offset.

Plain calls, no trio: ``run_once()`` is one tick of RocketMQ's ``cleanFilesPeriodically``
(every ``cleanResourceInterval`` ms); ``CleanService.start()`` runs it on a daemon thread.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterable

from rmqd.store.config import MessageStoreConfig
from rmqd.store.consumequeue import ConsumeQueue
from rmqd.store.indexfile import IndexService
from rmqd.store.mapped_file import MappedFileQueue

MAX_MANUAL_DELETE_FILE_TIMES = 20
CLEAN_INITIAL_DELAY_MS = 60_000  # cleanFilesPeriodically's first run, as DefaultMessageStore schedules it
DISK_CHECK_INTERVAL_MS = 10_000  # the diskCheckScheduledExecutorService period
log = logging.getLogger("rmqd.store.expiry")


def disk_partition_space_used_percent(path: str) -> float:
    """``UtilAll.getDiskPartitionSpaceUsedPercent``: used/total of the partition holding
    ``path`` as a fraction, -1 if the path does not exist or cannot be read."""
    if not path:
        return -1.0
    try:
        st = os.statvfs(path)
    except OSError:
        return -1.0
    total = st.f_blocks * st.f_frsize
    if total <= 0:
        return -1.0
    free = st.f_bfree * st.f_frsize  # File.getFreeSpace: unallocated, root's reserve included
    return (total - free) / total


def is_it_time_to_do(when: str, hour: int) -> bool:
    """``UtilAll.isItTimeToDo``: ``deleteWhen`` is hours separated by ';' (``"04"``,
    ``"04;16"``); true during those local hours. Unparsable items are ignored."""
    for item in when.split(";"):
        try:
            if int(item.strip()) == hour:
                return True
        except ValueError:
            continue
    return False


@dataclass(slots=True)
class DiskState:
    physic_ratio: float = 0.0
    logics_ratio: float = 0.0
    disk_full: bool = False  # above diskSpaceWarningLevelRatio: writes refused
    clean_immediately: bool = False  # above diskSpaceCleanForciblyRatio: delete even young files
    space_to_delete: bool = False  # above diskMaxUsedSpaceRatio


@dataclass(slots=True)
class CleanResult:
    commitlog_files: int = 0
    consume_queue_files: int = 0
    index_files: int = 0
    min_offset: int = 0


class CleanService:
    """``commit_log_queue`` is the commit log's MappedFileQueue; ``consume_queues`` returns
    the live consume queues; ``disk_usage(path)`` and the clocks are injectable for tests.

    The background thread does what 4.9.8 schedules: the disk check (``isSpaceFull``, commit-
    log partition only) at start and every ``disk_check_interval_ms`` (10 s), and the clean
    pass (``cleanFilesPeriodically``) after ``clean_initial_delay_ms`` (60 s) and then every
    ``cleanResourceInterval`` ms."""

    def __init__(self, config: MessageStoreConfig, commit_log_queue: MappedFileQueue,
                 consume_queues: Callable[[], Iterable[ConsumeQueue]],
                 index_service: IndexService | None = None,
                 disk_usage: Callable[[str], float] = disk_partition_space_used_percent,
                 now_ms: Callable[[], int] | None = None,
                 local_hour: Callable[[], int] | None = None,
                 clean_initial_delay_ms: int = CLEAN_INITIAL_DELAY_MS,
                 disk_check_interval_ms: int = DISK_CHECK_INTERVAL_MS) -> None:
        self.config = config
        self.commit_log_queue = commit_log_queue
        self.consume_queues = consume_queues
        self.index_service = index_service
        self.disk_usage = disk_usage
        self.now_ms = now_ms or (lambda: time.time_ns() // 1_000_000)
        self.local_hour = local_hour or (lambda: time.localtime().tm_hour)
        self.clean_initial_delay_ms = clean_initial_delay_ms
        self.disk_check_interval_ms = disk_check_interval_ms
        self.state = DiskState()
        self.disk_full = False  # RunningFlags' DISK_FULL bit
        self.manual_delete_file_several_times = 0
        self.last_physical_min_offset = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- what the store asks before appending --------------------------------------------
    def is_writeable(self) -> bool:
        return not self.disk_full

    def execute_delete_files_manually(self) -> None:
        """Admin ``DELETE_EXPIRED_COMMITLOG``: the next 20 ticks delete regardless of hour."""
        self.manual_delete_file_several_times = MAX_MANUAL_DELETE_FILE_TIMES

    # -- disk -------------------------------------------------------------------------------
    def _set_disk_full(self, full: bool, ratio: float) -> None:
        if full != self.disk_full:
            if full:
                log.error("disk maybe full soon (%.3f used): writes refused", ratio)
            else:
                log.info("disk space OK again (%.3f used): writes accepted", ratio)
        self.disk_full = full
        self.state.disk_full = full

    def _mark(self, ratio: float, st: DiskState) -> None:
        """One partition's verdict on the shared flags, in ``isSpaceToDelete``'s order: above
        the warning level the disk is full, above the forcible level files go at once (the
        full flag is left as it was), below both the disk is OK again."""
        c = self.config
        if ratio > c.diskSpaceWarningLevelRatio:
            self._set_disk_full(True, ratio)
            st.clean_immediately = True
        elif ratio > c.diskSpaceCleanForciblyRatio:
            st.clean_immediately = True
        else:
            self._set_disk_full(False, ratio)
        st.disk_full = self.disk_full

    def check_disk_space(self) -> DiskState:
        """``isSpaceToDelete``: the commit-log partition first - when it alone is above
        ``diskMaxUsedSpaceRatio`` (or unreadable) the consume-queue partition is not looked
        at - then the consume-queue partition; sets the full / clean-at-once flags."""
        c = self.config
        ratio = c.diskMaxUsedSpaceRatio / 100.0
        st = DiskState()
        st.physic_ratio = self.disk_usage(c.get_store_path_commit_log())
        self._mark(st.physic_ratio, st)
        if st.physic_ratio < 0 or st.physic_ratio > ratio:
            st.space_to_delete = True
        else:
            st.logics_ratio = self.disk_usage(c.get_store_path_consume_queue())
            self._mark(st.logics_ratio, st)
            st.space_to_delete = st.logics_ratio < 0 or st.logics_ratio > ratio
        self.state = st
        return st

    def is_space_full(self) -> bool:
        """``CleanCommitLogService.isSpaceFull`` (the 10 s disk check): commit-log partition
        only; sets or clears the full flag."""
        r = self.disk_usage(self.config.get_store_path_commit_log())
        self._set_disk_full(r > self.config.diskSpaceWarningLevelRatio, r)
        return self.disk_full

    # -- one tick ---------------------------------------------------------------------------
    def delete_expired_commit_log_files(self) -> int:
        c = self.config
        time_up = is_it_time_to_do(c.deleteWhen, self.local_hour())
        space = self.check_disk_space().space_to_delete
        manual = self.manual_delete_file_several_times > 0
        if not (time_up or space or manual):
            return 0
        if manual:
            self.manual_delete_file_several_times -= 1
        clean_at_once = c.cleanFileForciblyEnable and self.state.clean_immediately
        return self.commit_log_queue.delete_expired_file_by_time(
            c.fileReservedTime * 3_600_000, c.deleteCommitLogFilesInterval, clean_at_once, now_ms=self.now_ms())

    def delete_expired_logic_files(self) -> tuple[int, int, int]:
        """``CleanConsumeQueueService``: only when the commit log's min offset moved.
        Returns (min offset, consume-queue files deleted, index files deleted)."""
        files = self.commit_log_queue.mapped_files
        min_offset = files[0].file_from_offset if files else 0
        if min_offset <= self.last_physical_min_offset:
            return min_offset, 0, 0
        self.last_physical_min_offset = min_offset
        cq_deleted = sum(cq.delete_expired_file(min_offset) for cq in list(self.consume_queues()))
        idx_deleted = self.index_service.delete_expired_file(min_offset) if self.index_service else 0
        return min_offset, cq_deleted, idx_deleted

    def run_once(self) -> CleanResult:
        res = CleanResult()
        res.commitlog_files = self.delete_expired_commit_log_files()
        res.min_offset, res.consume_queue_files, res.index_files = self.delete_expired_logic_files()
        return res

    # -- background -------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self.is_space_full()
        self._thread = threading.Thread(target=self._loop, name="CleanService", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        now = time.monotonic()
        next_clean = now + self.clean_initial_delay_ms / 1000
        next_check = now + self.disk_check_interval_ms / 1000
        while not self._stop.wait(max(min(next_clean, next_check) - time.monotonic(), 0)):
            try:
                now = time.monotonic()
                if now >= next_check:
                    next_check = now + self.disk_check_interval_ms / 1000
                    self.is_space_full()
                if now >= next_clean:
                    next_clean = now + self.config.cleanResourceInterval / 1000
                    self.run_once()
            except OSError:
                # a transient filesystem error must not kill expiry; the next tick retries
                log.exception("clean service tick failed")

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
