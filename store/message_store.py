"""DefaultMessageStore: the store facade the broker's processors use.

Owns the commit log, consume queues, index, checkpoint, flush and dispatch threads, and the
``lock`` / ``abort`` files. Plain blocking calls (no trio here); durability waits are either a
callback from the flush thread (``add_flush_listener``) or a blocking ``wait_for_flush``.
"""

from __future__ import annotations

import enum
import fcntl
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Container, Iterable

from rmqd.store.checkpoint import StoreCheckpoint
from rmqd.store.commitlog import (
    AppendMessageStatus, CommitLog, DispatchRequest, MessageExtBatch, MessageExtBrokerInner, PutMessageResult,
    PutMessageStatus,
)
from rmqd.store.commitlog import _put_message as _commit_log_put  # CommitLog.put_message's body
from rmqd.store.config import SLAVE, MessageStoreConfig
from rmqd.store.consumequeue import CQ_STORE_UNIT_SIZE, SCHEDULE_TOPIC, ConsumeQueue, each_queue, load_consume_queues
from rmqd.store.dispatch import ArrivalListener, Dispatcher, ReputMessageService
from rmqd.store.expiry import CLEAN_INITIAL_DELAY_MS, CleanService, disk_partition_space_used_percent
from rmqd.store.flush import FlushCallback, FlushService, quiet_point
from rmqd.store.indexfile import IndexService
from rmqd.store.mapped_file import FileHandles, MappedFile
from rmqd.store.errors import StoreBusyError, StoreFileError, StoreLockError, StoreNameError
from rmqd.store.stats import StoreStatsService
from rmqd.store.topic_config import RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC
from rmqd.store.recovery import RecoveryReport, recover_abnormally, recover_normally, store_timestamp_at
from rmqd.wire.message import SYSFLAG_POSITION, MessageRecord, decode_record, store_timestamp_position
from rmqd.wire.fastjson import java_double
from rmqd.wire.names import topic_remark

_PUT_OK = PutMessageStatus.PUT_OK  # a module constant: Enum class attributes cost a metaclass hook
_APPEND_OK = AppendMessageStatus.PUT_OK
_monotonic_ns = time.monotonic_ns

log = logging.getLogger("rmqd.store")

try:
    TOTAL_PHYSICAL_MEMORY_SIZE = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
    TOTAL_PHYSICAL_MEMORY_SIZE = 24 * 1024 ** 3


class GetMessageStatus(enum.Enum):
    FOUND = 0
    NO_MATCHED_MESSAGE = 1
    MESSAGE_WAS_REMOVING = 2
    OFFSET_FOUND_NULL = 3
    OFFSET_OVERFLOW_BADLY = 4
    OFFSET_OVERFLOW_ONE = 5
    OFFSET_TOO_SMALL = 6
    NO_MATCHED_LOGIC_QUEUE = 7
    NO_MESSAGE_IN_QUEUE = 8


@dataclass(slots=True)
class GetMessageResult:
    status: GetMessageStatus = GetMessageStatus.NO_MESSAGE_IN_QUEUE
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    message_buffers: list[memoryview] = field(default_factory=list)
    message_queue_offsets: list[int] = field(default_factory=list)
    buffer_total_size: int = 0
    suggest_pulling_from_slave: bool = False

    @property
    def msg_count(self) -> int:
        return len(self.message_buffers)


@dataclass(slots=True)
class QueryMessageResult:
    message_buffers: list[memoryview] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0
    buffer_total_size: int = 0


class TagsMessageFilter:
    """The consume-queue side of ExpressionMessageFilter for TAG subscriptions:
    ``tags_codes`` None means "*" (everything)."""

    def __init__(self, tags_codes: Iterable[int] | None):
        self.tags_codes = None if tags_codes is None else set(tags_codes)

    def is_matched_by_consume_queue(self, tags_code: int | None, cq_ext_unit: Any = None) -> bool:
        if self.tags_codes is None or tags_code is None:
            return True
        return tags_code in self.tags_codes

    def is_matched_by_commit_log(self, msg_buffer: memoryview, properties: dict | None = None) -> bool:
        return True


#: consume-queue files written through open descriptors at once (the least recently written
#: closed first): a broker's hot queues keep theirs, 80,000 cold ones cost none
CQ_WRITE_DESCRIPTORS = 1024


class DefaultMessageStore:
    """Public API used by broker processors (see CONTRACTS.md)."""

    def __init__(self, config: MessageStoreConfig, *,
                 disk_usage: Callable[[str], float] = disk_partition_space_used_percent,
                 clean_initial_delay_ms: int = CLEAN_INITIAL_DELAY_MS):
        """``disk_usage(path)`` (used fraction of the partition holding ``path``) and the
        first clean pass's delay are injectable so tests can play a full disk."""
        self.config = config
        self.commit_log = CommitLog(config)
        self.consume_queue_table: dict[str, dict[int, ConsumeQueue]] = {}
        # consume-queue files are mapped when read and written through a bounded set of
        # descriptors: 10,000 topics x 8 queues must not take 80,000 mappings and descriptors
        self.cq_handles = FileHandles(CQ_WRITE_DESCRIPTORS)
        # the consume queues written since they were last flushed whole: the flush thread
        # visits these every second, not every queue (80,000 idle queues cost nothing)
        self._cq_dirty: set[ConsumeQueue] = set()
        self._cq_lock = threading.Lock()
        self._valid_topics: set[str] = set()
        self.stats = StoreStatsService()
        self.checkpoint: StoreCheckpoint | None = None
        self.index_service = IndexService(
            config.get_store_path_index(), config.maxHashSlotNum, config.maxIndexNum, config.maxMsgsNumBatch,
            on_index_file_full=self._on_index_file_full)
        self.dispatcher = Dispatcher(config, self.find_consume_queue, self.index_service,
                                     on_logics_timestamp=self._on_logics_timestamp)
        self.reput_service = ReputMessageService(self.commit_log, self.dispatcher)
        self.clean_service = CleanService(config, self.commit_log.mapped_file_queue, self._all_cqs,
                                          self.index_service, disk_usage=disk_usage,
                                          clean_initial_delay_ms=clean_initial_delay_ms)
        self.flush_service: FlushService | None = None
        self.last_exit_ok = True
        self.recovery_report: RecoveryReport | None = None
        self.shutdown_flag = True
        self.writeable = True
        self._lock_fd: int | None = None
        self._cq_flush_thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._logics_ts = 0

    # ---- lifecycle ---------------------------------------------------------------------------
    def _on_index_file_full(self, ts: int) -> None:
        if self.checkpoint is not None:
            self.checkpoint.indexMsgTimestamp = ts

    def _on_logics_timestamp(self, ts: int) -> None:
        self._logics_ts = ts

    def _acquire_lock(self) -> None:
        os.makedirs(self.config.storePathRootDir, exist_ok=True)
        fd = os.open(self.config.get_lock_file(), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            # flock excludes other rmqd stores (even in this process); lockf is the POSIX record
            # lock Java's FileChannel.tryLock takes, so a RocketMQ broker is excluded too
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise StoreLockError(f"{self.config.get_lock_file()}: lock failed, the store is already in use") from None
        os.pwrite(fd, b"lock", 0)
        self._lock_fd = fd

    def load(self) -> bool:
        """Lock, map every file, recover (clean or crash) - raises StoreFileError for foreign or
        corrupt files naming the file."""
        self._acquire_lock()
        try:
            self.last_exit_ok = not os.path.exists(self.config.get_abort_file())
            self.commit_log.load()
            for (topic, qid), cq in load_consume_queues(self.config.get_store_path_consume_queue(),
                                                        self.config.get_mapped_file_size_consume_queue(),
                                                        self.cq_handles).items():
                cq.on_write = self._cq_dirty.add
                self.consume_queue_table.setdefault(topic, {})[qid] = cq
            self.checkpoint = StoreCheckpoint(self.config.get_store_checkpoint())
            self.index_service.load(self.last_exit_ok, self.checkpoint.indexMsgTimestamp,
                                    keep_after_crash=self._fast_crash_recovery)
            self._recover()
        except BaseException:
            self._release_lock()
            raise
        return True

    @property
    def _fast_crash_recovery(self) -> bool:
        """Crash recovery starts at the last record the checkpoint covers and rolls the kept
        index back to it; with messageIndexSafe, 4.9.8's way (index files newer than the
        checkpoint deleted, the checkpoint's whole file walked)."""
        return not self.config.messageIndexSafe

    def _rollback_index(self, phy: int) -> None:
        self.index_service.rollback_to(phy, lambda p: store_timestamp_at(self.commit_log, p) or 0)

    def _recover(self) -> None:
        each_queue(self._all_cqs(), ConsumeQueue.recover)
        max_phy_cq = max((cq.max_physic_offset for cq in self._all_cqs()), default=-1)
        cqs = self._all_cqs()
        if self.last_exit_ok:
            rep = recover_normally(self.commit_log, max_phy_cq, cqs, self.config.checkCRCOnRecover)
        else:
            rollback = self._rollback_index if self._fast_crash_recovery else None
            assert self.checkpoint is not None  # (read by load(), before recovery)
            rep = recover_abnormally(self.commit_log, self.checkpoint, max_phy_cq, cqs, self.dispatcher.dispatch_batch,
                                     self.config.checkCRCOnRecover, self.config.messageIndexSafe, rollback)
        self.recovery_report = rep
        log.info("store recovery (%s): %s", "abnormal" if rep.abnormal else "normal", rep)
        # recoverTopicQueueTable
        min_phy = self.commit_log.get_min_offset()
        table = {}
        for cq in self._all_cqs():
            table[f"{cq.topic}-{cq.queue_id}"] = cq.get_max_offset_in_queue()
            cq.correct_min_offset(min_phy)
        self.commit_log.topic_queue_table = table

    def _all_cqs(self) -> list[ConsumeQueue]:
        return [cq for qs in list(self.consume_queue_table.values()) for cq in list(qs.values())]

    def start(self) -> None:
        with open(self.config.get_abort_file(), "wb"):
            pass
        reput_from = self.commit_log.get_min_offset()
        for cq in self._all_cqs():
            reput_from = max(reput_from, cq.max_physic_offset)
        reput_from = max(reput_from, 0, self.commit_log.get_min_offset())
        self.reput_service.reput_from_offset = reput_from
        self.flush_service = FlushService(self.commit_log.mapped_file_queue, self.config, self.checkpoint,
                                          self.commit_log.put_message_lock)
        self.commit_log.on_appended = self.reput_service.notify_appended
        self.flush_service.start()
        self.reput_service.start()
        self._stop.clear()
        self._cq_flush_thread = threading.Thread(target=self._cq_flush_loop, name="FlushConsumeQueueService",
                                                 daemon=True)
        self._cq_flush_thread.start()
        self.clean_service.start()
        self.shutdown_flag = False

    def _flush_logics(self, least_pages: int) -> None:
        ts = self._logics_ts
        if least_pages == 0:
            # dispatch caught up with the quiet point: every record stored until its time
            # has its unit, made durable by this thorough flush
            quiet_ts, quiet_end = quiet_point(self.commit_log.put_message_lock, self.commit_log.mapped_file_queue)
            if self.reput_service.reput_from_offset >= quiet_end:
                ts = max(ts, quiet_ts)
        dirty = self._cq_dirty
        for cq in list(dirty):
            if cq.flush_would_wait(least_pages):
                continue  # stays to flush
            # forget it first, then look: a write after the look adds it again (writers add
            # after writing), so a queue with unflushed units is never left out
            dirty.discard(cq)
            cq.flush(least_pages)
            if cq.has_unflushed():
                dirty.add(cq)
        if least_pages == 0 and self.checkpoint is not None:
            if ts > 0:
                self.checkpoint.logicsMsgTimestamp = ts
            self.checkpoint.flush()

    def _checkpoint_behind(self, end_before: int) -> bool:
        """The store is idle (nothing appended since ``end_before``) while crash recovery
        would still re-walk its last writes (the checkpoint file's time, less the 3 s margin,
        is before the last append): then a thorough round moves the checkpoint to the present.
        4.9.8 waits for its next thorough round (flushConsumeQueueThoroughInterval, 60 s)."""
        mfs = self.commit_log.mapped_file_queue.mapped_files
        if self.checkpoint is None or not mfs or self.commit_log.get_max_offset() != end_before:
            return False
        last_append = mfs[-1].store_timestamp
        return last_append > 0 and self.checkpoint.flushed_min_timestamp <= last_append

    def _cq_flush_loop(self) -> None:
        interval = self.config.flushIntervalConsumeQueue / 1000
        thorough = self.config.flushConsumeQueueThoroughInterval / 1000
        # FlushConsumeQueueService's lastFlushTimestamp starts at 0: the first round (one
        # interval after start) is thorough and writes the checkpoint, so a crash in the
        # first minute recovers from the checkpoint instead of the first commit-log file
        last = -thorough
        end = self.commit_log.get_max_offset()
        while not self._stop.wait(interval):
            pages = self.config.flushConsumeQueueLeastPages
            if time.monotonic() >= last + thorough or self._checkpoint_behind(end):
                last = time.monotonic()
                pages = 0
            end = self.commit_log.get_max_offset()
            try:
                self._flush_logics(pages)
            except Exception:  # pragma: no cover - logged, retried next round
                log.exception("consume queue flush failed")
            self.stats.sample()

    def shutdown(self) -> None:
        """Flush everything, write the checkpoint, remove ``abort``, release the lock."""
        if not self.shutdown_flag:
            self.shutdown_flag = True
            self.clean_service.shutdown()
            self._stop.set()
            if self._cq_flush_thread is not None:
                self._cq_flush_thread.join()
            self.reput_service.shutdown()
            if self.flush_service is not None:
                self.flush_service.shutdown()
            self.index_service.shutdown()
            self._flush_logics(0)
            if self.reput_service.error is None:
                try:
                    os.unlink(self.config.get_abort_file())
                except FileNotFoundError:
                    pass
        if self.checkpoint is not None:
            self.checkpoint.shutdown()
            self.checkpoint = None
        for cq in self._all_cqs():
            cq.close()
        self.cq_handles.close_all()
        self.commit_log.shutdown()
        self._release_lock()

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            try:
                fcntl.lockf(self._lock_fd, fcntl.LOCK_UN)
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            finally:
                os.close(self._lock_fd)
                self._lock_fd = None

    def __enter__(self) -> "DefaultMessageStore":
        self.load()
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # ---- expiry ------------------------------------------------------------------------------
    def execute_delete_files_manually(self) -> None:
        """Admin DELETE_EXPIRED_COMMITLOG: expired files go on the next clean passes, any hour."""
        self.clean_service.execute_delete_files_manually()

    def is_disk_full(self) -> bool:
        return not self.clean_service.is_writeable()

    # ---- put ---------------------------------------------------------------------------------
    def _check_store_status(self) -> PutMessageStatus:
        if self.shutdown_flag:
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        if self.config.brokerRole == SLAVE:
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        if not self.writeable or self.clean_service.disk_full:  # RunningFlags: DISK_FULL et al.
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        if self.is_os_page_cache_busy():
            return PutMessageStatus.OS_PAGECACHE_BUSY
        return _PUT_OK

    def is_os_page_cache_busy(self) -> bool:
        begin = self.commit_log.begin_time_in_lock
        return begin > 0 and time.time_ns() // 1_000_000 - begin > self.config.osPageCacheBusyTimeOutMills

    def put_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        # one method, the commit log's append called as the module function it is, and
        # PutMessageResult.is_ok written out: each interpreted call left out runs once per send
        t0 = _monotonic_ns()
        status = self._check_store_status()
        if status is not _PUT_OK:
            res = PutMessageResult(status, None)
        elif msg.topic not in self._valid_topics and not self._topic_valid(msg.topic):
            res = PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, None)
        elif msg.properties_string is not None and len(msg.properties_string) > 0x7FFF:
            res = PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, None)
        else:
            res = _commit_log_put(self.commit_log, msg)
        a = res.appendMessageResult
        ok = a is not None and a.status is _APPEND_OK and res.putMessageStatus is _PUT_OK
        self.stats.on_put(ok, 1, a.wroteBytes if a is not None else 0, (_monotonic_ns() - t0) // 1_000_000)
        return res

    def put_messages(self, batch: MessageExtBatch) -> PutMessageResult:
        t0 = time.monotonic_ns()
        res = self._put_messages(batch)
        a = res.appendMessageResult
        self.stats.on_put(res.is_ok(), a.msgNum if a is not None else 0, a.wroteBytes if a is not None else 0,
                          (time.monotonic_ns() - t0) // 1_000_000)
        return res

    def _put_messages(self, batch: MessageExtBatch) -> PutMessageResult:
        status = self._check_store_status()
        if status is not _PUT_OK:
            return PutMessageResult(status, None)
        if batch.topic not in self._valid_topics and not self._topic_valid(batch.topic):
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, None)
        return self.commit_log.put_messages(batch)

    def _topic_valid(self, topic: str) -> bool:
        """TopicValidator's rules (4.9.8 checks only the length here; rmqd refuses every name
        dispatch could not index, so no such record is ever written)."""
        if topic_remark(topic) is not None:
            return False
        self._valid_topics.add(topic)
        return True

    def add_flush_listener(self, offset_end: int, callback: FlushCallback, timeout_ms: int | None = None) -> None:
        """callback(ok) from the flush thread once [0, offset_end) is on disk (SYNC_FLUSH)."""
        assert self.flush_service is not None, "store not started"
        self.flush_service.add_flush_listener(offset_end, callback, timeout_ms)

    def wait_for_flush(self, offset_end: int, timeout_ms: int | None = None) -> bool:
        assert self.flush_service is not None, "store not started"
        return self.flush_service.wait_for_flush(offset_end, timeout_ms)

    def put_message_sync(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        """put_message + (SYNC_FLUSH and WAIT!=false) wait for durability -> FLUSH_DISK_TIMEOUT."""
        res = self.put_message(msg)
        if res.is_ok() and self.config.is_sync_flush and msg.properties.get("WAIT", "true") != "false":
            if not self.wait_for_flush(res.end_offset):
                res.putMessageStatus = PutMessageStatus.FLUSH_DISK_TIMEOUT
        return res

    # ---- consume queues ----------------------------------------------------------------------
    def find_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        qs = self.consume_queue_table.get(topic)
        cq = qs.get(queue_id) if qs is not None else None
        if cq is not None:
            return cq
        with self._cq_lock:
            if topic not in self.consume_queue_table:
                remark = topic_remark(topic)
                if remark is not None:
                    raise StoreNameError(f"no consume queue for topic {topic!r}: {remark}")
            qs = self.consume_queue_table.setdefault(topic, {})
            cq = qs.get(queue_id)
            if cq is None:
                cq = ConsumeQueue(topic, queue_id, self.config.get_store_path_consume_queue(),
                                  self.config.get_mapped_file_size_consume_queue(), self.cq_handles)
                cq.on_write = self._cq_dirty.add
                qs[queue_id] = cq
        return cq

    def get_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """The queue if it exists (find_consume_queue creates it, like RocketMQ's findConsumeQueue)."""
        qs = self.consume_queue_table.get(topic)
        return None if qs is None else qs.get(queue_id)

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.get_consume_queue(topic, queue_id)
        return 0 if cq is None else cq.get_max_offset_in_queue()

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.get_consume_queue(topic, queue_id)
        return 0 if cq is None else cq.get_min_offset_in_queue()

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, consume_queue_offset: int) -> int:
        cq = self.get_consume_queue(topic, queue_id)
        if cq is None:
            return 0
        unit = cq.get_unit(consume_queue_offset)
        return 0 if unit is None else unit[0]

    def _queue_closed(self, topic: str, queue_id: int) -> bool:
        cq = self.get_consume_queue(topic, queue_id)
        return cq is None or any(not mf.is_available() for mf in cq.files)

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        cq = self.get_consume_queue(topic, queue_id)
        if cq is None:
            return 0
        try:
            return cq.get_offset_in_queue_by_time(timestamp, self.commit_log.pickup_store_timestamp,
                                                  max(self.commit_log.get_min_offset(), 0))
        except ValueError:  # "mmap closed": the topic was deleted while the search ran
            return 0

    def get_message_store_timestamp(self, topic: str, queue_id: int, consume_queue_offset: int) -> int:
        cq = self.get_consume_queue(topic, queue_id)
        if cq is None:
            return -1
        unit = cq.get_unit(consume_queue_offset)
        if unit is None:
            return -1
        return self.commit_log.pickup_store_timestamp(unit[0], unit[1])

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        cq = self.get_consume_queue(topic, queue_id)
        if cq is None:
            return -1
        return self.get_message_store_timestamp(topic, queue_id, cq.get_min_offset_in_queue())

    def get_message_total_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.get_consume_queue(topic, queue_id)
        return 0 if cq is None else cq.get_message_total_in_queue()

    def get_earliest_message_time_of_store(self) -> int:
        """Store time of the first message still in the commit log (-1 if empty)."""
        off = self.commit_log.get_min_offset()
        if off < 0:
            return -1
        head = self.select_one_message_by_offset(off)
        if head is None:
            return -1
        return self.commit_log.pickup_store_timestamp(off, len(head))

    def check_in_disk_by_consume_offset(self, topic: str, queue_id: int, consume_offset: int) -> bool:
        """True if the message is probably no longer in page cache (accessMessageInMemoryMaxRatio)."""
        phy = self.get_commit_log_offset_in_queue(topic, queue_id, consume_offset)
        memory = int(TOTAL_PHYSICAL_MEMORY_SIZE * (self.config.accessMessageInMemoryMaxRatio / 100.0))
        return self.commit_log.get_max_offset() - phy > memory

    def get_topics(self) -> list[str]:
        """Topics that have a consume queue (loaded from disk or created by dispatch)."""
        return list(self.consume_queue_table)

    def delete_topics(self, topics: Iterable[str], dispatch_timeout_s: float = 10.0) -> int:
        """Destroy the consume queues of these topics (DefaultMessageStore.cleanUnusedTopic).

        Ordered against sends, which 4.9.8 does not do: under the put lock no send can take a
        queue offset, and every record already written is dispatched before its queue goes.
        Otherwise a record that got offset N before the delete would be dispatched into the
        new, empty queue after it, at position N, where a later send of the same offset
        belongs: a unit pointing at a record with another queue offset. Raises StoreBusyError
        (nothing deleted) when dispatch does not catch up in time."""
        topics = set(topics)
        n = 0
        with self.commit_log.put_message_lock:
            end = self.commit_log.get_max_offset()
            if not self.reput_service.wait_dispatched(end, dispatch_timeout_s):
                raise StoreBusyError(f"dispatch is behind the commit log (at {self.reput_service.reput_from_offset}"
                                     f" of {end}): topics {sorted(topics)} not deleted, try again")
            for t in topics:
                # the files go under the lock that creates queues: a reader on another thread
                # (a pop or pull touching every queue) must not create the topic's queue again
                # while its old files are still there
                with self._cq_lock:
                    qs = self.consume_queue_table.pop(t, None)
                    for qid, cq in (qs or {}).items():
                        cq.destroy()
                        self.commit_log.topic_queue_table.pop(f"{t}-{qid}", None)
                        n += 1
        return n

    def clean_unused_topic(self, topics_in_use: Iterable[str]) -> list[str]:
        """CLEAN_UNUSED_TOPIC (DefaultMessageStore.cleanUnusedTopic): the consume queues of every
        topic the broker has no config for are destroyed, but SCHEDULE_TOPIC_XXXX's and
        RMQ_SYS_TRANS_OP_HALF_TOPIC's (as 4.9.7 keeps them) and, unlike 4.9.7, those of the
        other topics the broker writes without a config: the transaction half topic (4.9.7
        creates its config only when the check service first runs, so a clean-up before that
        loses every prepared message) and 5.x's timer topic. Returns the topics removed;
        ordered against sends as ``delete_topics`` is (StoreBusyError when dispatch lags)."""
        keep = set(topics_in_use) | {SCHEDULE_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC}
        unused = [t for t in list(self.consume_queue_table)
                  if t not in keep and not t.startswith("rmq_sys_")]  # TopicValidator.SYSTEM_TOPIC_PREFIX
        if unused:
            self.delete_topics(unused)
            for topic in unused:
                log.info("cleanUnusedTopic: %s, topic destroyed", topic)
        return unused

    def clean_expired_consumer_queue(self) -> int:
        """CLEAN_EXPIRED_CONSUMEQUEUE (DefaultMessageStore.cleanExpiredConsumerQueue): a queue whose
        last unit points below the commit log's first offset holds nothing readable any more;
        it is destroyed and its queue offset forgotten (a topic left without queues goes too).
        SCHEDULE_TOPIC_XXXX is left alone. Under the put lock, so no send takes an offset in a
        queue while it goes. Returns how many queues were destroyed."""
        n = 0
        with self.commit_log.put_message_lock:
            min_offset = self.commit_log.get_min_offset()
            for topic, qs in list(self.consume_queue_table.items()):
                if topic == SCHEDULE_TOPIC:
                    continue
                for qid, cq in list(qs.items()):
                    last = cq.get_last_offset()
                    if last == -1:
                        log.warning("maybe ConsumeQueue was created just now. topic=%s queueId=%d", topic, qid)
                    elif last < min_offset:
                        log.info("cleanExpiredConsumerQueue: %s %d consumer queue destroyed, minCommitLogOffset: %d "
                                 "maxCLOffsetInConsumeQueue: %d", topic, qid, min_offset, last)
                        with self._cq_lock:
                            qs.pop(qid, None)
                        self.commit_log.topic_queue_table.pop(f"{topic}-{qid}", None)
                        cq.destroy()
                        n += 1
                if not qs:
                    with self._cq_lock:
                        if not qs:
                            self.consume_queue_table.pop(topic, None)
                    log.info("cleanExpiredConsumerQueue: %s, topic destroyed", topic)
        return n

    # ---- get ---------------------------------------------------------------------------------
    def _next_offset_correction(self, old: int, new: int) -> int:
        if self.config.brokerRole != SLAVE or self.config.offsetCheckInSlave:
            return new
        return old

    def get_message(self, group: str, topic: str, queue_id: int, offset: int, max_msg_nums: int,
                    message_filter: Any = None) -> GetMessageResult | None:
        """DefaultMessageStore.getMessage: status, nextBeginOffset, min/max offsets and views of
        the stored records (the pull response body parts, zero-copy). None if shut down."""
        t0 = time.monotonic_ns()
        try:
            res = self._get_message(group, topic, queue_id, offset, max_msg_nums, message_filter)
        except ValueError:  # "mmap closed": the queue was deleted (or expired) while it was read
            if self.get_consume_queue(topic, queue_id) is not None and not self._queue_closed(topic, queue_id):
                raise
            res = GetMessageResult(next_begin_offset=offset)
            res.status = GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
        if res is not None:
            self.stats.on_get(res.status is GetMessageStatus.FOUND, res.msg_count,
                              (time.monotonic_ns() - t0) // 1_000_000)
        return res

    def _get_message(self, group: str, topic: str, queue_id: int, offset: int, max_msg_nums: int,
                     message_filter: Any = None) -> GetMessageResult | None:
        if self.shutdown_flag:
            return None
        res = GetMessageResult(next_begin_offset=offset)
        max_offset_py = self.commit_log.get_max_offset()
        # like RocketMQ, an unknown queue is created (empty), so it answers NO_MESSAGE_IN_QUEUE;
        # NO_MATCHED_LOGIC_QUEUE exists in the enum but 4.9.8 never returns it from here
        if topic not in self.consume_queue_table and topic_remark(topic) is not None:
            res.status = GetMessageStatus.NO_MATCHED_LOGIC_QUEUE  # a name no queue can have
            return res
        cq = self.find_consume_queue(topic, queue_id)
        min_offset = cq.get_min_offset_in_queue()
        max_offset = cq.get_max_offset_in_queue()
        res.min_offset, res.max_offset = min_offset, max_offset
        if max_offset == 0:
            res.status = GetMessageStatus.NO_MESSAGE_IN_QUEUE
            res.next_begin_offset = self._next_offset_correction(offset, 0)
        elif offset < min_offset:
            res.status = GetMessageStatus.OFFSET_TOO_SMALL
            res.next_begin_offset = self._next_offset_correction(offset, min_offset)
        elif offset == max_offset:
            res.status = GetMessageStatus.OFFSET_OVERFLOW_ONE
            res.next_begin_offset = self._next_offset_correction(offset, offset)
        elif offset > max_offset:
            res.status = GetMessageStatus.OFFSET_OVERFLOW_BADLY
            res.next_begin_offset = self._next_offset_correction(offset, max_offset)
        else:
            buf = cq.get_index_buffer(offset)
            if buf is None:
                res.status = GetMessageStatus.OFFSET_FOUND_NULL
                res.next_begin_offset = self._next_offset_correction(offset, cq.roll_next_file(offset))
                return res
            res.status = GetMessageStatus.NO_MATCHED_MESSAGE
            c = self.config
            memory = int(TOTAL_PHYSICAL_MEMORY_SIZE * (c.accessMessageInMemoryMaxRatio / 100.0))
            max_filter_count = max(16000, max_msg_nums * CQ_STORE_UNIT_SIZE)  # a multiple of the unit
            # _is_batch_full's limits, read once: (bytes, count - 1) in memory and on disk
            mem_bytes, mem_count = c.maxTransferBytesOnMessageInMemory, c.maxTransferCountOnMessageInMemory - 1
            disk_bytes, disk_count = c.maxTransferBytesOnMessageInDisk, c.maxTransferCountOnMessageInDisk - 1
            cq_match = None if message_filter is None else message_filter.is_matched_by_consume_queue
            cl_match = None if message_filter is None else message_filter.is_matched_by_commit_log
            cl = self.commit_log
            find_file = cl.mapped_file_queue.find_mapped_file_by_offset
            cl_file_size = c.mappedFileSizeCommitLog
            buffers, queue_offsets = res.message_buffers, res.message_queue_offsets
            total = 0  # res.buffer_total_size
            # the commit-log file of the previous message (a batch almost always stays in one):
            # its start, its written end when looked up, and a view of its mapping
            mf_cur: MappedFile | None = None
            mf_start = mf_end = 0
            mf_view: memoryview | None = None
            next_phy_file_start = None
            max_phy_pulling = 0
            i = 0
            size = len(buf) - len(buf) % CQ_STORE_UNIT_SIZE
            for offset_py, size_py, tags_code in ConsumeQueue.iter_buffer(buf[:min(size, max_filter_count)]):
                i_this = i
                i += CQ_STORE_UNIT_SIZE
                max_phy_pulling = offset_py
                if next_phy_file_start is not None and offset_py < next_phy_file_start:
                    continue
                if total and buffers:  # _is_batch_full
                    if max_msg_nums <= len(buffers):
                        i = i_this
                        break
                    if max_offset_py - offset_py > memory:  # on disk
                        if total + size_py > disk_bytes or len(buffers) > disk_count:
                            i = i_this
                            break
                    elif total + size_py > mem_bytes or len(buffers) > mem_count:
                        i = i_this
                        break
                if cq_match is not None and not cq_match(tags_code, None):
                    if total == 0:
                        res.status = GetMessageStatus.NO_MATCHED_MESSAGE
                    continue
                # (mf_end > 0 only once mf_cur and mf_view are set)
                if mf_start <= offset_py and offset_py + size_py <= mf_end and mf_cur._available:  # type: ignore[union-attr]
                    sel = mf_view[offset_py - mf_start:offset_py - mf_start + size_py]  # type: ignore[index]
                else:  # CommitLog.get_message, remembering the file for the next message
                    sel = None
                    mf = find_file(offset_py, offset_py == 0)
                    if mf is not None:
                        sel = mf.select_mapped_buffer(offset_py % cl_file_size, size_py)
                        if sel is not None and mf.file_from_offset <= offset_py < mf.file_from_offset + cl_file_size:
                            mf_cur, mf_start, mf_end = mf, mf.file_from_offset, mf.file_from_offset + mf.wrote_position
                            mf_view = memoryview(mf.mm)
                if sel is None:
                    if total == 0:
                        res.status = GetMessageStatus.MESSAGE_WAS_REMOVING
                    next_phy_file_start = cl.roll_next_file(offset_py)
                    continue
                if cl_match is not None and not cl_match(sel, None):
                    if total == 0:
                        res.status = GetMessageStatus.NO_MATCHED_MESSAGE
                    continue
                buffers.append(sel)
                queue_offsets.append(offset + i_this // CQ_STORE_UNIT_SIZE)
                total += size_py
                res.status = GetMessageStatus.FOUND
                next_phy_file_start = None
            res.buffer_total_size = total
            res.next_begin_offset = offset + i // CQ_STORE_UNIT_SIZE
            res.suggest_pulling_from_slave = max_offset_py - max_phy_pulling > memory
        return res

    # ---- by commit-log offset / key ---------------------------------------------------------
    def get_runtime_info(self) -> dict[str, str]:
        """DefaultMessageStore.getRuntimeInfo: the stats service's keys, disk ratios, offsets."""
        info = self.stats.runtime_info()
        path = self.config.get_store_path_commit_log()
        ratio = disk_partition_space_used_percent(path) if os.path.exists(path) else -1.0
        info[f"commitLogDiskRatio_{path}"] = java_double(ratio)
        info["commitLogDiskRatio"] = java_double(ratio)
        info["consumeQueueDiskRatio"] = java_double(
            disk_partition_space_used_percent(self.config.get_store_path_consume_queue()))
        info["commitLogMinOffset"] = str(self.get_min_phy_offset())
        info["commitLogMaxOffset"] = str(self.get_max_phy_offset())
        return info

    def get_earliest_message_time_all(self) -> int:
        """DefaultMessageStore.getEarliestMessageTime: the store time of the first message, read
        as a (2 x maxMessageSize) slice from it, so -1 while less than that is written there."""
        phy = self.get_min_phy_offset()
        mf = self.commit_log.mapped_file_queue.find_mapped_file_by_offset(phy)
        size = self.config.maxMessageSize * 2
        if mf is None or phy - mf.file_from_offset + size > mf.wrote_position:
            return -1
        rec_ts = self.get_earliest_message_time_of_store()
        return rec_ts if rec_ts > 0 else -1

    def get_max_phy_offset(self) -> int:
        return self.commit_log.get_max_offset()

    def get_min_phy_offset(self) -> int:
        return self.commit_log.get_min_offset()

    def select_one_message_by_offset(self, commit_log_offset: int, size: int | None = None) -> memoryview | None:
        if size is None:
            head = self.commit_log.get_message(commit_log_offset, 4)
            if head is None:
                return None
            size = int.from_bytes(head, "big", signed=True)
            if size <= 0:
                return None
        return self.commit_log.get_message(commit_log_offset, size)

    def look_message_by_offset(self, commit_log_offset: int, size: int | None = None) -> MessageRecord | None:
        view = self.select_one_message_by_offset(commit_log_offset, size)
        if view is None:
            return None
        return decode_record(view, 0, where=f"commit log offset {commit_log_offset}")

    def query_message(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryMessageResult:
        """Messages whose KEYS or UNIQ_KEY is ``key`` stored in [begin, end] (ms) via the index
        (hash collisions are possible: clients re-check keys, as with RocketMQ)."""
        out = QueryMessageResult()
        last_query_msg_time = end
        for _ in range(3):  # DefaultMessageStore.queryMessage: retry earlier if nothing readable
            q = self.index_service.query_offset(topic, key, max_num, begin, last_query_msg_time)
            if not q.phy_offsets:
                break
            offsets = sorted(q.phy_offsets)
            out.index_last_update_timestamp = q.index_last_update_timestamp
            out.index_last_update_phyoffset = q.index_last_update_phyoffset
            for m, phy in enumerate(offsets):
                v = self.select_one_message_by_offset(phy)
                if v is None:
                    continue
                if m == 0:
                    sys_flag = int.from_bytes(v[SYSFLAG_POSITION:SYSFLAG_POSITION + 4], "big", signed=True)
                    pos = store_timestamp_position(sys_flag)
                    last_query_msg_time = int.from_bytes(v[pos:pos + 8], "big", signed=True)
                out.message_buffers.append(v)
                out.buffer_total_size += len(v)
            if out.buffer_total_size > 0 or last_query_msg_time < begin:
                break
        return out

    # ---- listeners / dispatch ----------------------------------------------------------------
    def add_arrival_listener(self, cb: ArrivalListener, topics: Container[str] | None = None) -> None:
        """cb(topic, queue_id, max_logic_offset (= queue offset + 1, as RocketMQ), tags_code,
        store_timestamp, properties) after each dispatch, from the dispatch thread; with
        ``topics`` (a live container, e.g. a waiters table) only for records of those topics."""
        self.reput_service.arrival_listeners.append((cb, topics))

    def wait_dispatched(self, offset: int | None = None, timeout_s: float = 5.0) -> bool:
        """Block until consume queues / index cover the commit log up to ``offset`` (default: all)."""
        if offset is None:
            offset = self.commit_log.get_max_offset()
        return self.reput_service.wait_dispatched(offset, timeout_s)

    def dispatch_behind_bytes(self) -> int:
        return self.reput_service.behind()

    def now(self) -> int:
        return time.time_ns() // 1_000_000


__all__ = [
    "DefaultMessageStore", "GetMessageResult", "GetMessageStatus", "QueryMessageResult", "TagsMessageFilter",
    "StoreBusyError", "StoreLockError", "StoreFileError", "MessageExtBrokerInner", "MessageExtBatch",
    "PutMessageResult", "PutMessageStatus", "DispatchRequest",
]
