"""Issue 11 item 4: the checkpoint is written about one flush interval after start (RocketMQ's
FlushConsumeQueueService starts with lastFlushTimestamp = 0, so its first round is thorough),
not a minute later: a crash in the first minute recovers from the checkpoint's file."""
from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

from rmqd.store.commitlog import MessageExtBrokerInner
from rmqd.store.config import MessageStoreConfig
from rmqd.store.message_store import DefaultMessageStore

FILE_SIZE = 64 * 1024


def _cfg(root: Path) -> MessageStoreConfig:
    return MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=FILE_SIZE,
                              mappedFileSizeConsumeQueue=6000, maxHashSlotNum=100, maxIndexNum=400)


def _checkpoint(root: Path) -> tuple[int, int, int]:
    data = (root / "checkpoint").read_bytes()
    return struct.unpack(">qqq", data[:24])


def test_checkpoint_file_is_written_within_seconds_of_start(tmp_path):
    root = tmp_path / "s"
    s = DefaultMessageStore(_cfg(root))
    s.load()
    s.start()
    try:
        r = s.put_message(MessageExtBrokerInner("T", 0, b"x" * 100))
        assert r.is_ok()
        stored = r.appendMessageResult.storeTimestamp
        deadline = time.monotonic() + 4.0
        while time.monotonic() < deadline and min(_checkpoint(root)[:2]) < stored:
            time.sleep(0.05)
        physic, logics, _ = _checkpoint(root)
        assert physic >= stored and logics >= stored, "no checkpoint within 4 s of start"
    finally:
        s.shutdown()


_CHILD = r"""
import sys, time
from rmqd.store.commitlog import MessageExtBrokerInner
from rmqd.store.config import MessageStoreConfig
from rmqd.store.message_store import DefaultMessageStore
s = DefaultMessageStore(MessageStoreConfig(storePathRootDir=sys.argv[1], mappedFileSizeCommitLog=%d,
                        mappedFileSizeConsumeQueue=6000, maxHashSlotNum=100, maxIndexNum=400))
s.load(); s.start()
for i in range(150):
    assert s.put_message(MessageExtBrokerInner("T", 0, b"y" * 1000)).is_ok()
print(s.commit_log.get_max_offset(), flush=True)
time.sleep(60)
""" % FILE_SIZE


def _run_and_kill(root: Path) -> int:
    """A broker-like process that writes, then is SIGKILLed once its first checkpoint is out."""
    before = _checkpoint(root)[1] if (root / "checkpoint").exists() else 0
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(root)], stdout=subprocess.PIPE, text=True)
    try:
        end = int(child.stdout.readline())
        deadline = time.monotonic() + 5.0  # the first checkpoint: about 1 s after start
        while time.monotonic() < deadline and _checkpoint(root)[1] <= before:
            time.sleep(0.05)
        time.sleep(0.1)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
    assert _checkpoint(root)[1] > before, "no checkpoint within 5 s of start"
    return end


def test_crashes_in_the_first_minute_recover_from_the_checkpoint_file(tmp_path):
    root = tmp_path / "s"
    first_end = _run_and_kill(root)
    time.sleep(3.2)  # past the checkpoint's 3 s safety margin
    _run_and_kill(root)
    files = sorted(os.listdir(root / "commitlog"))
    s = DefaultMessageStore(_cfg(root))
    s.load()
    try:
        rep = s.recovery_report
        assert rep.abnormal and rep.start_file is not None
        start = int(Path(rep.start_file).name)
        assert start >= first_end - FILE_SIZE and start > 0, (rep, files)
        assert s.get_max_offset_in_queue("T", 0) == 300
    finally:
        s.start()
        s.shutdown()


def _started_with_puts(root: Path, n: int, queues: int = 1) -> tuple[DefaultMessageStore, int]:
    """A started store with n 1000-byte messages (KEYS k<i>); the last one's store time."""
    s = DefaultMessageStore(_cfg(root))
    s.load()
    s.start()
    last = 0
    for i in range(n):
        r = s.put_message(MessageExtBrokerInner("T", i % queues, b"q" * 1000, {"KEYS": f"k{i}"}))
        assert r.is_ok()
        last = r.appendMessageResult.storeTimestamp
    return s, last


def test_checkpoint_store_time_follows_every_complete_flush(tmp_path):
    """The checkpoint's physicMsgTimestamp says "everything stored until then is on disk".
    4.9.8 moves it on thorough flushes only (every 10 s), so a crash re-walks up to 13 s of
    writes (with recovery's 3 s margin); rmqd moves it on any flush that reached every byte,
    and shutdown always ends with a thorough flush(0), as 4.9.8's last round does, even
    when the regular rounds had already flushed every byte (rmqd skipped it, and the
    checkpoint kept a stale time: the next crash walked from long before the real end)."""
    root = tmp_path / "s"
    s, last = _started_with_puts(root, 40)
    try:
        mfq = s.commit_log.mapped_file_queue
        while not mfq.flush(1):   # a regular round (flushCommitLogLeastPages > 0) reaching every byte
            pass
        assert mfq.flushed_where == s.commit_log.get_max_offset() and mfq.store_timestamp == last
        mfq.store_timestamp = 0   # as after a start: nothing appended yet in this run
        s.flush_service.flush_all()
        assert s.checkpoint.physicMsgTimestamp >= last   # the last append's time, or the quiet point's
    finally:
        s.shutdown()
    assert _checkpoint(root)[0] >= last


def test_idle_store_checkpoint_moves_past_the_last_writes(tmp_path):
    """Once nothing is appended, the checkpoint's times move to the present within a few
    seconds (quiet points, idle thorough rounds), so a crash then re-walks nothing: crash
    recovery starts at the commit log's end instead of 3 s (4.9.8: up to 60 s) before it."""
    root = tmp_path / "s"
    s, last = _started_with_puts(root, 60, queues=2)
    try:
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline and min(_checkpoint(root)[:2]) - 3000 <= last:
            time.sleep(0.1)
        assert min(_checkpoint(root)[:2]) - 3000 > last, _checkpoint(root)   # in the file, not only in memory
        end = s.commit_log.get_max_offset()
    finally:
        s.shutdown()
    (root / "abort").write_bytes(b"")          # as after a SIGKILL
    s2 = DefaultMessageStore(_cfg(root))
    s2.load()
    try:
        rep = s2.recovery_report
        assert rep is not None and rep.abnormal
        # the walk starts at the last record the checkpoint covers: that one record at most
        assert rep.dispatched <= 1 and rep.process_offset == end, rep
        s2.start()
        got = s2.get_message("g", "T", 1, 0, 64)
        assert got.msg_count == 30
        assert len(s2.query_message("T", "k59", 10, 0, 2**62).message_buffers) == 1
    finally:
        s2.shutdown()
