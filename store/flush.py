"""Commit-log flushing: ASYNC_FLUSH (FlushRealTimeService) and SYNC_FLUSH group commit
(GroupCommitService), plus the durability listeners the broker waits on.

Group commit: senders register (end offset, callback); the flush thread wakes, fdatasyncs
everything written so far once, and completes every request that flush covered - so
concurrent senders share one fsync. Callbacks run on the flush thread and must be quick
(the trio broker hands them to trio.from_thread / a TrioToken).
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from rmqd.store.checkpoint import StoreCheckpoint
from rmqd.store.config import MessageStoreConfig
from rmqd.store.mapped_file import MappedFileQueue

FlushCallback = Callable[[bool], None]


def quiet_point(put_lock: threading.Lock | None, mfq: MappedFileQueue) -> tuple[int, int]:
    """(a store time, a commit-log end) read together under the put lock: no append is half
    done then, and store times are taken inside the lock, so every record stored at or
    before that time lies below that end. Once the end is flushed (or dispatched), the
    checkpoint may say so with that time - on an idle store, the present rather than the
    last record's time, so crash recovery's 3 s margin no longer re-walks the last writes."""
    if put_lock is None:
        return 0, mfq.get_max_offset()
    with put_lock:
        return time.time_ns() // 1_000_000 - 1, mfq.get_max_offset()


class FlushService:
    """One background thread flushing the commit log according to flushDiskType."""

    def __init__(self, mfq: MappedFileQueue, config: MessageStoreConfig, checkpoint: StoreCheckpoint | None = None,
                 put_lock: threading.Lock | None = None):
        self.mfq = mfq
        self.config = config
        self.checkpoint = checkpoint
        self.put_lock = put_lock  # the commit log's put lock, for quiet_point
        self.sync = config.is_sync_flush
        self._cv = threading.Condition()  # flush requests
        self._requests: list[tuple[int, FlushCallback, float]] = []
        self._stopped = False
        self._thread: threading.Thread | None = None
        self.flush_count = 0  # number of flush rounds that wrote something (bench/tests)

    @property
    def flushed_offset(self) -> int:
        """Commit-log offset up to which everything is on disk (runtime info: remain to flush)."""
        return self.mfq.flushed_where

    # ---- listeners --------------------------------------------------------------------------
    def add_flush_listener(self, offset_end: int, callback: FlushCallback, timeout_ms: int | None = None) -> None:
        """callback(True) once the commit log is durable up to ``offset_end``; callback(False) if
        that did not happen within syncFlushTimeout (-> FLUSH_DISK_TIMEOUT)."""
        if self.mfq.flushed_where >= offset_end:
            callback(True)
            return
        timeout_ms = self.config.syncFlushTimeout if timeout_ms is None else timeout_ms
        with self._cv:
            if self._stopped and self._thread is None:
                callback(False)
                return
            self._requests.append((offset_end, callback, time.monotonic() + timeout_ms / 1000))
            self._cv.notify()

    def wait_for_flush(self, offset_end: int, timeout_ms: int | None = None) -> bool:
        """Blocking variant for non-trio callers, built on :meth:`add_flush_listener`: the
        flush thread releases exactly the senders a group commit covered (one lock release
        each), instead of waking every waiter to re-check."""
        if self.mfq.flushed_where >= offset_end:
            return True
        timeout_ms = self.config.syncFlushTimeout if timeout_ms is None else timeout_ms
        done = threading.Lock()
        done.acquire()
        result = [False]

        def callback(ok: bool) -> None:
            result[0] = ok
            done.release()

        self.add_flush_listener(offset_end, callback, timeout_ms)
        if not done.acquire(timeout=timeout_ms / 1000):  # the deadline holds even if flushing hangs
            return self.mfq.flushed_where >= offset_end
        return result[0]

    # ---- the thread -------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="GroupCommitService" if self.sync
                                        else "FlushRealTimeService", daemon=True)
        self._thread.start()

    def wakeup(self) -> None:
        with self._cv:
            self._cv.notify()

    def shutdown(self) -> None:
        with self._cv:
            self._stopped = True
            self._cv.notify()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.flush_all()
        self._complete(final=True)

    def flush_all(self) -> None:
        """Flush everything written (also used at shutdown). At least one thorough flush(0)
        runs even when the regular rounds already flushed every byte, as 4.9.8's last round
        does: only a thorough flush moves the store timestamp the checkpoint records, and a
        stale one makes the next crash recovery walk from long before the real end."""
        quiet = quiet_point(self.put_lock, self.mfq)
        for _ in range(len(self.mfq.mapped_files) + 1):
            if self.mfq.flush(0) or self.mfq.flushed_where >= self.mfq.get_max_offset():
                break
        self._update_checkpoint(quiet)

    def _update_checkpoint(self, quiet: tuple[int, int] | None = None) -> None:
        """physicMsgTimestamp: the store time of the last flushed append (4.9.8), or the quiet
        point's time when everything below its end is flushed now."""
        ts = self.mfq.store_timestamp
        if quiet is not None and self.mfq.flushed_where >= quiet[1]:
            ts = max(ts, quiet[0])
        if self.checkpoint is not None and ts > 0:
            self.checkpoint.physicMsgTimestamp = ts

    def _complete(self, final: bool = False) -> None:
        with self._cv:
            reqs, self._requests = self._requests, []
        if not reqs:
            return
        flushed = self.mfq.flushed_where
        now = time.monotonic()
        keep = []
        for off, cb, deadline in reqs:
            if flushed >= off:
                cb(True)
            elif final or now >= deadline:
                cb(False)
            else:
                keep.append((off, cb, deadline))
        if keep:
            with self._cv:
                self._requests = keep + self._requests

    def _flush_to(self, target: int) -> None:
        # a request may end in the next file: at most one flush per file
        for _ in range(len(self.mfq.mapped_files) + 1):
            if self.mfq.flushed_where >= target:
                break
            if self.mfq.flush(0):
                break

    def _run(self) -> None:
        if self.sync:
            self._run_group_commit()
        else:
            self._run_real_time()

    def _run_group_commit(self) -> None:
        mfq = self.mfq
        refresh_s = self.config.flushIntervalCommitLog / 1000
        next_refresh = time.monotonic() + refresh_s
        while True:
            with self._cv:
                if not self._requests and not self._stopped:
                    self._cv.wait(0.01)
                stopped = self._stopped
                target = max((r[0] for r in self._requests), default=0)
            end = mfq.get_max_offset()
            if target > mfq.flushed_where or mfq.flushed_where < end:
                before = mfq.flushed_where
                self._flush_to(end)  # one fdatasync covers every sender waiting so far
                progressed = mfq.flushed_where != before
                if progressed:
                    self.flush_count += 1
                    self._update_checkpoint()
                elif not stopped:
                    with self._cv:
                        self._cv.wait(0.001)  # flush failing (file being unmapped): don't spin
            elif time.monotonic() >= next_refresh:  # idle: everything is flushed
                next_refresh = time.monotonic() + refresh_s
                self._update_checkpoint(quiet_point(self.put_lock, mfq))
            self._complete()  # also requests a concurrent flush satisfied before they were queued
            if stopped:
                return

    def _run_real_time(self) -> None:
        interval = self.config.flushIntervalCommitLog / 1000
        thorough_interval = self.config.flushCommitLogThoroughInterval / 1000
        last_thorough = -thorough_interval  # FlushRealTimeService: lastFlushTimestamp = 0, first round thorough
        while True:
            with self._cv:
                if not self._stopped:
                    self._cv.wait(interval)
                stopped = self._stopped
            pages = self.config.flushCommitLogLeastPages
            now = time.monotonic()
            if now >= last_thorough + thorough_interval:
                last_thorough = now
                pages = 0
            before = self.mfq.flushed_where
            quiet = quiet_point(self.put_lock, self.mfq)
            for _ in range(len(self.mfq.mapped_files) + 1):
                if self.mfq.flush(pages):
                    break
            if self.mfq.flushed_where != before:
                self.flush_count += 1
            self._update_checkpoint(quiet)
            self._complete()
            if stopped:
                return
