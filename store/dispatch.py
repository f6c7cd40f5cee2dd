"""Dispatch (ReputMessageService): build consume queues and the index from the commit log.

Consume queues and index are derived data; this service reads the commit log from
``reput_from_offset`` forward and, for each record, appends the consume-queue unit (normal and
committed messages only) and the index keys, then notifies arrival listeners (long polling).
The same ``dispatch_batch`` is used by crash recovery to rebuild what the crash lost.
"""

from __future__ import annotations

import errno
import logging
import threading
import time
from typing import Callable, Container, NamedTuple, Sequence

from rmqd.store.commitlog import CommitLog, DispatchInfo, DispatchRequest
from rmqd.store.config import MessageStoreConfig
from rmqd.store.consumequeue import ConsumeQueue
from rmqd.store.indexfile import IndexService
from rmqd.wire.message import MessageSysFlag
from rmqd.wire.names import topic_remark

log = logging.getLogger("rmqd.store.dispatch")

ArrivalListener = Callable[[str, int, int, int, int, dict], None]
_TRAN_MASK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
_CQ_TYPES = (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE)
DISPATCH_BATCH = 512  # records per dispatch round: amortizes locks and header writes, bounds wake-up latency
#: ReputMessageService sleeps 1 ms between doReput rounds: appends never wake the thread while
#: it is busy (a wake-up per message cost the appending thread ~10 us of GIL time and made the
#: dispatcher handle one record per round instead of a batch).
POLL_INTERVAL_S = 0.001
#: Empty polls in a row before the thread goes to sleep until an append wakes it (an idle
#: broker does not spin 1,000 times a second; a quiet one still dispatches without delay).
IDLE_POLLS_BEFORE_SLEEP = 20
IDLE_SLEEP_S = 0.05  # safety net: re-check even without a wake-up
#: A waiter that helps dispatch (wait_dispatched) re-checks this often while a round it
#: cannot join is running or dispatch is suspended.
HELP_POLL_S = 0.05
#: Skipped records kept for inspection (``Dispatcher.skipped``); the count keeps going.
SKIPPED_KEPT = 100
#: The same reput offset failing this many rounds in a row is skipped over as unreadable.
SAME_OFFSET_FAILURES_BEFORE_SKIP = 3


class SkippedRecord(NamedTuple):
    """A commit-log record dispatch could not index: reported once and passed over."""

    file: str  # the commit-log file's name (its first offset, 20 digits)
    offset: int  # position in that file
    phy_offset: int
    topic: object
    why: str


#: OS errors that pass (a resource runs out for a while): dispatch retries them forever, as
#: RocketMQ's ReputMessageService does, instead of skipping an acknowledged record.
TRANSIENT_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOSPC, errno.EDQUOT, errno.ENOMEM, errno.EAGAIN,
                              errno.EINTR, errno.EIO, errno.EBUSY})


def is_transient(e: BaseException) -> bool:
    return isinstance(e, OSError) and e.errno in TRANSIENT_ERRNOS


def commit_log_position(phy_offset: int, file_size: int) -> tuple[str, int]:
    """(file name, position in it) of a physical offset: what an operator looks up."""
    base = phy_offset - phy_offset % file_size
    return f"{base:020d}", phy_offset - base


class Dispatcher:
    """CommitLogDispatcherBuildConsumeQueue + CommitLogDispatcherBuildIndex.

    A record it cannot index (a topic name TopicValidator refuses - it would name a path
    outside consumequeue/ or one the OS refuses - or any error building its unit or index
    entries) is logged once with its file and offset and passed over: one bad record must
    never stop dispatch for every other topic, nor recovery at start-up."""

    def __init__(self, config: MessageStoreConfig, find_consume_queue: Callable[[str, int], ConsumeQueue],
                 index_service: IndexService | None, on_logics_timestamp: Callable[[int], None] | None = None):
        self.config = config
        self.find_consume_queue = find_consume_queue
        self.index_service = index_service if config.messageIndexEnable else None
        self.on_logics_timestamp = on_logics_timestamp
        self._good_topics: set[str] = set()  # names already checked: one set lookup per record
        self.skipped: list[SkippedRecord] = []
        self.skipped_count = 0

    def skip(self, phy_offset: int, topic: object, why: str) -> None:
        """Report a record dispatch passes over (once: dispatch then moves past it)."""
        name, pos = commit_log_position(phy_offset, self.config.mappedFileSizeCommitLog)
        rec = SkippedRecord(name, pos, phy_offset, topic, why)
        self.skipped_count += 1
        if len(self.skipped) < SKIPPED_KEPT:
            self.skipped.append(rec)
        log.error("commitlog/%s offset %d (physical %d): record of topic %r not dispatched: %s; "
                  "it stays in the commit log, consume queues and index skip it", name, pos, phy_offset, topic, why)

    def _topic_ok(self, r: DispatchInfo) -> bool:
        topic = r[0]
        if topic in self._good_topics:
            return True
        remark = topic_remark(topic) if isinstance(topic, str) else "topic is not text"
        if remark is None and not (0 <= r[1] <= 0x7FFFFFFF):
            remark = f"queue id {r[1]} is negative"
        if remark is None:
            self._good_topics.add(topic)
            return True
        self.skip(r[2], topic, remark)
        return False

    def do_dispatch(self, req: DispatchRequest) -> None:
        """One record given as a DispatchRequest (the batch path takes plain tuples)."""
        self.dispatch_batch(((req.topic, req.queue_id, req.commit_log_offset, req.msg_size, req.tags_code,
                              req.store_timestamp, req.consume_queue_offset, req.keys, req.uniq_key, req.sys_flag,
                              req.prepared_transaction_offset, req.properties),))

    def dispatch_batch(self, infos: Sequence[DispatchInfo]) -> None:
        """Records as ``CommitLog.dispatch_info`` tuples (DispatchRequest field order), in
        commit-log order: consume-queue units grouped per queue (one batched write each), then
        the index for all of them."""
        groups: dict[tuple[str, int], list[DispatchInfo]] = {}
        last_ts = 0
        good = self._good_topics
        indexable: Sequence[DispatchInfo] = infos
        for r in infos:
            if r[0] not in good and not self._topic_ok(r):
                indexable = [x for x in infos if x[0] in good]  # rare: rebuilt once per bad batch
                continue
            if r[9] & _TRAN_MASK in _CQ_TYPES:
                key = (r[0], r[1])
                units = groups.get(key)
                if units is None:
                    units = groups[key] = []
                units.append(r)
                last_ts = r[5]
        for (topic, queue_id), units in groups.items():
            try:
                self.find_consume_queue(topic, queue_id).put_requests(units)
            except Exception:  # find the record that fails; the others go in (put is idempotent)
                self._one_by_one(units, lambda u: self.find_consume_queue(u[0], u[1]).put_requests((u,)),
                                 "consume queue")
        if last_ts and self.on_logics_timestamp is not None:
            self.on_logics_timestamp(last_ts)
        index = self.index_service
        if index is not None:
            try:
                index.build_index_batch(indexable)
            except Exception:  # entries already built are skipped again by their offset
                self._one_by_one(indexable, lambda u: index.build_index_batch((u,)), "index")

    def _one_by_one(self, records: Sequence[DispatchInfo], put: Callable[[DispatchInfo], None], what: str) -> None:
        for r in records:
            try:
                put(r)
            except Exception as e:
                if is_transient(e):
                    raise  # out of descriptors / space / memory: retried, the record stays due
                self.skip(r[2], r[0], f"building its {what} entry failed: {type(e).__name__}: {e}")


class ReputMessageService:
    """Follows the commit log's end and dispatches every new record: in a thread of its own
    (``start``), or in rounds its owner runs (``drive_externally``; the broker runs them on
    its event loop, where they cost no GIL hand-over per append).

    Rounds never overlap: ``do_reput`` holds the reput lock. Whoever waits for dispatch
    (``wait_dispatched``) dispatches itself while nobody else does, so an owner's loop that is
    blocked behind the waiter (on the put lock) or is the waiter itself never stalls it."""

    def __init__(self, commit_log: CommitLog, dispatcher: Dispatcher, reput_from_offset: int = 0):
        self.commit_log = commit_log
        self.dispatcher = dispatcher
        self.reput_from_offset = reput_from_offset
        #: (listener, the topics it is for or None for all): a listener that waits on a few
        #: topics (POP's long polling) is not called for the others' records
        self.arrival_listeners: list[tuple[ArrivalListener, Container[str] | None]] = []
        self._cv = threading.Condition()
        self._waiters = 0  # threads in wait_dispatched's wait (changed under _cv)
        self._wake = threading.Event()
        self._sleeping = False  # True only while the thread waits on _wake (set by the thread)
        self._stopped = False
        self._suspended = False
        self._thread: threading.Thread | None = None
        self._reput_lock = threading.Lock()
        #: set by drive_externally: called instead of waking the thread (the owner runs rounds)
        self._waker: Callable[[], None] | None = None
        self._failures = 0
        self._failed_at = -1
        self.error: BaseException | None = None

    def notify_appended(self, _end: int = 0) -> None:
        """Called after every append: a plain attribute read unless the thread is asleep.
        No lost wake-up: the thread raises ``_sleeping`` before it re-reads the commit log's
        end, and the appender publishes the end before it reads ``_sleeping``."""
        if self._sleeping:
            self._sleeping = False
            waker = self._waker
            if waker is None:
                self._wake.set()
            else:
                waker()

    def drive_externally(self, waker: Callable[[], None]) -> None:
        """No thread: the owner calls ``run_round`` until it returns nothing done, then
        ``begin_idle`` and sleeps until ``waker`` (called from any thread that appends, or by
        ``resume``) or a timeout, then ``end_idle``. Call before ``start``."""
        if self._thread is not None:
            raise RuntimeError("dispatch already runs in its own thread")
        self._waker = waker

    def begin_idle(self) -> bool:
        """For an external driver with nothing dispatched in its last round: True if it may
        sleep until woken (caught up, or suspended), False if records are waiting (a record
        it could not read yet: poll again shortly). No lost wake-up: the flag is raised before
        the commit log's end is read, and an appender publishes the end before reading it."""
        self._sleeping = True
        if self._suspended or self._stopped or self.reput_from_offset >= self.commit_log.get_max_offset():
            return True
        self._sleeping = False
        return False

    def end_idle(self) -> None:
        self._sleeping = False

    def start(self) -> None:
        if self._waker is not None:
            return  # the owner drives dispatch (drive_externally)
        self._thread = threading.Thread(target=self._run, name="ReputMessageService", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        # stop the thread, then finish what was written before stopping on this thread
        # (RocketMQ waits up to 50 x 100 ms): never two dispatchers at once
        with self._cv:
            self._stopped = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self.error is None:
            try:
                self.do_reput()
            except Exception as e:  # the abort file stays: the next start re-dispatches from the checkpoint
                self.error = e
                log.error("final dispatch at physical offset %d failed: %s: %s",
                          self.reput_from_offset, type(e).__name__, e)
        with self._cv:
            self._cv.notify_all()

    def suspend(self) -> None:
        """Stop dispatching until resume() (bulk loads, benchmarks); appends continue and are
        dispatched afterwards - consume queues and index simply lag behind the commit log.
        Returns once a round already running has ended: nothing appended after the call is
        dispatched before resume(), whoever drives the rounds."""
        self._suspended = True
        with self._reput_lock:  # a round that read the flag before it was raised ends first
            pass

    def resume(self) -> None:
        self._suspended = False
        self._wake.set()
        if self._waker is not None:
            self._sleeping = False
            self._waker()
        with self._cv:
            self._cv.notify_all()  # helping waiters (wait_dispatched) dispatch again

    @property
    def suspended(self) -> bool:
        return self._suspended

    def behind(self) -> int:
        return self.commit_log.get_max_offset() - self.reput_from_offset

    def wait_dispatched(self, offset: int, timeout_s: float = 5.0) -> bool:
        """Block until everything below ``offset`` is dispatched (tests, admin reads, a topic
        deleted under the put lock). Unless dispatch is suspended, the caller dispatches itself
        whenever no round is running: the driver may be blocked behind the caller (a send
        waiting for the put lock on the broker's event loop) or be the caller's own thread.
        Its rounds follow ``run_round``'s failure policy: a failing record is tried the same
        number of times in all, whoever tries it."""
        deadline = time.monotonic() + timeout_s
        while self.reput_from_offset < offset and not self._stopped:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            step = min(remaining, HELP_POLL_S)
            if not self._suspended and self._reput_lock.acquire(timeout=step):
                before = self.reput_from_offset
                try:
                    _, backoff = (0, 0.0) if self._suspended else self._round(None)
                finally:
                    self._reput_lock.release()
                if self.reput_from_offset != before:
                    continue
                step = min(remaining, max(step, backoff))
            with self._cv:
                # counted before the predicate is read: a round that publishes its position
                # after that read sees the count and notifies (the step bounds any miss)
                self._waiters += 1
                try:
                    self._cv.wait_for(lambda: self.reput_from_offset >= offset or self._stopped, step)
                finally:
                    self._waiters -= 1
        return self.reput_from_offset >= offset

    def run_round(self, max_records: int | None = None) -> tuple[int, float]:
        """One ``do_reput`` with the service's failure policy (its thread's and an external
        driver's): (records dispatched, seconds to wait before the next round). A transient OS
        error waits 1 s and retries the same record forever; any other failure waits 0.1 s, and
        the same offset failing SAME_OFFSET_FAILURES_BEFORE_SKIP rounds in a row is skipped."""
        with self._reput_lock:
            if self._suspended:  # raised after the caller looked: suspend() waits for no one here
                return 0, 0.0
            return self._round(max_records)

    def _round(self, max_records: int | None) -> tuple[int, float]:
        """run_round under the reput lock."""
        try:
            count = self._reput(max_records)
        except Exception as e:  # keep the broker up; never retry one offset forever
            self.error = e
            at = self.reput_from_offset
            self._failures = self._failures + 1 if at == self._failed_at else 1
            self._failed_at = at
            if is_transient(e):  # a resource outage, not this record's fault: wait and retry
                if self._failures == 1 or self._failures % 60 == 0:
                    log.error("dispatch at physical offset %d waits for the system: %s: %s (retried every "
                              "second)", at, type(e).__name__, e)
                return 0, 1.0
            log.error("dispatch at physical offset %d failed (%d in a row): %s: %s",
                      at, self._failures, type(e).__name__, e)
            if self._failures >= SAME_OFFSET_FAILURES_BEFORE_SKIP:
                self._skip_failing(at, e)
                self._failures = 0
            return 0, 0.1
        if self._failures:
            self._failures, self.error = 0, None
        return count, 0.0

    def do_reput(self, max_records: int | None = None) -> int:
        """Dispatch everything written so far (or at least ``max_records`` of it, when given,
        in batches of up to DISPATCH_BATCH records: one batched consume-queue / index write,
        then the arrival listeners, then the new position is published); returns the number
        of records dispatched."""
        with self._reput_lock:
            return self._reput(max_records)

    def _reput(self, max_records: int | None) -> int:
        cl = self.commit_log
        info_of = cl.dispatch_info
        appended = cl.appended
        dispatch = self.dispatcher.dispatch_batch
        count = 0
        min_off = cl.get_min_offset()
        if self.reput_from_offset < min_off:
            self.reput_from_offset = min_off
        while self.reput_from_offset < cl.get_max_offset():
            data = cl.get_data(self.reput_from_offset)
            if data is None:
                break
            start, view = data
            end = len(view)
            pos = 0
            info: DispatchInfo | int = -1
            while pos < end:
                if max_records is not None and count >= max_records:
                    break
                limit = DISPATCH_BATCH if max_records is None else min(DISPATCH_BATCH, max_records - count)
                batch: list[DispatchInfo] = []
                while pos < end and len(batch) < limit:
                    taken = appended.pop(start + pos, None) if appended else None
                    info = info_of(view, pos, False) if taken is None else taken
                    if isinstance(info, int):
                        break
                    batch.append(info)
                    pos += info[3]
                if batch:
                    dispatch(batch)
                    self.reput_from_offset = start + pos
                    count += len(batch)
                    if self.arrival_listeners:
                        self._notify_arrivals(batch)
                    if self._waiters:  # Condition.notify_all is interpreted: only when someone waits
                        with self._cv:
                            self._cv.notify_all()
                if isinstance(info, int):
                    break
            view.release()
            if max_records is not None and count >= max_records:
                break
            if pos < end:
                if info == 0:  # BLANK: the rest of this file is filler
                    self.reput_from_offset = cl.roll_next_file(start + pos)
                    continue
                # records are published only after they are complete: this is corruption. Like
                # RocketMQ's master, pass over what is readable of this file so far; what is
                # appended after it is dispatched (the record is reported, once)
                self.skip_unreadable(start + pos, start + end, "not a valid commit-log record")
                continue
            if pos == 0:
                break
        return count

    def _notify_arrivals(self, batch: list[DispatchInfo]) -> None:
        """Wake long-polling pulls; a listener's failure never stops dispatch."""
        try:
            for r in batch:
                for cb, topics in self.arrival_listeners:
                    if topics is None or r[0] in topics:
                        cb(r[0], r[1], r[6] + 1, r[4], r[5], r[11])
        except Exception:
            log.exception("arrival listener failed (dispatch goes on; waiting pulls wake on their timeout)")

    def skip_unreadable(self, offset: int, to: int, why: str) -> None:
        """Pass over [offset, to) of the commit log: reported once, never retried."""
        self.dispatcher.skip(offset, None, f"{why}; dispatch resumes at physical offset {to}")
        self.reput_from_offset = to
        with self._cv:
            self._cv.notify_all()

    def _run(self) -> None:
        idle = 0
        cl = self.commit_log
        while not self._stopped:
            if self._suspended:
                self._wake.wait(IDLE_SLEEP_S)
                self._wake.clear()
                continue
            count, backoff = self.run_round()
            if backoff:
                time.sleep(backoff)
                continue
            if count or idle < IDLE_POLLS_BEFORE_SLEEP:
                idle = 0 if count else idle + 1
                time.sleep(POLL_INTERVAL_S)  # let a backlog build: one batched round handles it
                continue
            # idle: sleep until an append (notify_appended) or shutdown wakes us
            self._wake.clear()
            self._sleeping = True
            woken = True
            if not self._stopped and not self._suspended and self.reput_from_offset >= cl.get_max_offset():
                woken = self._wake.wait(IDLE_SLEEP_S)
            self._sleeping = False
            if woken:  # an append: poll again for a while; a timeout goes straight back to sleep
                idle = 0

    def _skip_failing(self, at: int, e: Exception) -> None:
        """The record at ``at`` fails whatever is tried: skip it (its size when it has one,
        else the rest of what is written of its file)."""
        cl = self.commit_log
        data = cl.get_data(at)
        to = cl.get_max_offset()
        if data is not None:
            start, view = data
            try:
                info = cl.dispatch_info(view, 0, False)
                to = start + (info[3] if not isinstance(info, int) and info[3] > 0 else len(view))
            except Exception:
                to = start + len(view)
            finally:
                view.release()
        self.error = None
        self.skip_unreadable(at, max(to, at + 1), f"dispatch failed {SAME_OFFSET_FAILURES_BEFORE_SKIP} times: {type(e).__name__}: {e}")
