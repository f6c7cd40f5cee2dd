"""ReputMessageService driven by its owner (drive_externally) instead of its own thread, the
bounded rounds it runs, the failure policy shared with the thread, and waiters that dispatch
themselves (wait_dispatched) so that an owner blocked behind them never stalls them."""
from __future__ import annotations

import errno
import threading
import time
from pathlib import Path

import pytest

from rmqd.store.commitlog import MessageExtBrokerInner
from rmqd.store.config import MessageStoreConfig
from rmqd.store.dispatch import SAME_OFFSET_FAILURES_BEFORE_SKIP
from rmqd.store.errors import StoreBusyError
from rmqd.store.message_store import DefaultMessageStore
from rmqd.store.tools import verify


def _cfg(root: Path) -> MessageStoreConfig:
    return MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=64 * 1024,
                              mappedFileSizeConsumeQueue=6000, maxHashSlotNum=100, maxIndexNum=400)


def _driven(root: Path, wakes: list[int]) -> DefaultMessageStore:
    s = DefaultMessageStore(_cfg(root))
    s.reput_service.drive_externally(lambda: wakes.append(1))
    s.load()
    s.start()
    return s


def _put(s: DefaultMessageStore, topic: str = "T", queue_id: int = 0, body: bytes = b"x" * 100, keys: str = "") -> int:
    r = s.put_message(MessageExtBrokerInner(topic, queue_id, body, {"KEYS": keys} if keys else {}))
    assert r.is_ok()
    return r.appendMessageResult.wroteOffset


def test_driven_store_starts_no_thread_and_rounds_are_bounded(tmp_path: Path) -> None:
    wakes: list[int] = []
    s = _driven(tmp_path / "s", wakes)
    try:
        reput = s.reput_service
        assert reput._thread is None
        assert not any(t.name == "ReputMessageService" for t in threading.enumerate())
        for i in range(150):
            _put(s, queue_id=i % 2, keys=f"k{i}")
        time.sleep(0.1)
        assert reput.reput_from_offset == 0  # nobody dispatched: the owner has not run a round
        assert wakes == []                   # and the owner was not idle, so it was not woken
        assert reput.run_round(64) == (64, 0.0)
        assert reput.run_round(64) == (64, 0.0)
        assert reput.run_round(64) == (22, 0.0)
        assert reput.run_round(64) == (0, 0.0)
        assert reput.reput_from_offset == s.commit_log.get_max_offset()
        assert s.get_max_offset_in_queue("T", 0) == 75 and s.get_max_offset_in_queue("T", 1) == 75
        assert len(s.query_message("T", "k149", 10, 0, 1 << 62).message_buffers) == 1
        # idle: the next append wakes the owner once, later appends do not
        assert reput.begin_idle() is True
        _put(s)
        _put(s)
        assert wakes == [1]
        reput.end_idle()
        assert reput.run_round(64) == (2, 0.0)
    finally:
        s.shutdown()
    assert verify(str(tmp_path / "s"), _cfg(tmp_path / "s")) == []


def test_begin_idle_refuses_while_records_wait(tmp_path: Path) -> None:
    wakes: list[int] = []
    s = _driven(tmp_path / "s", wakes)
    try:
        _put(s)
        assert s.reput_service.begin_idle() is False  # a record is waiting: no sleeping
        assert s.reput_service._sleeping is False
        s.reput_service.suspend()
        assert s.reput_service.begin_idle() is True   # suspended: sleep until resume wakes us
        s.reput_service.resume()
        assert wakes == [1]
        s.reput_service.end_idle()
    finally:
        s.shutdown()  # the final round on shutdown dispatches what is left
    s2 = DefaultMessageStore(_cfg(tmp_path / "s"))
    s2.load()
    try:
        assert s2.get_max_offset_in_queue("T", 0) == 1
    finally:
        s2.shutdown()


def test_appends_from_another_thread_wake_the_owner(tmp_path: Path) -> None:
    wakes: list[int] = []
    s = _driven(tmp_path / "s", wakes)
    try:
        assert s.reput_service.begin_idle()
        t = threading.Thread(target=_put, args=(s,))
        t.start()
        t.join(5)
        assert wakes == [1]
    finally:
        s.shutdown()


def test_waiters_dispatch_themselves_unless_suspended(tmp_path: Path) -> None:
    """No owner runs rounds here: wait_dispatched still returns, having dispatched itself."""
    wakes: list[int] = []
    s = _driven(tmp_path / "s", wakes)
    try:
        for i in range(10):
            _put(s)
        assert s.wait_dispatched(timeout_s=5)
        assert s.get_max_offset_in_queue("T", 0) == 10
        s.reput_service.suspend()
        _put(s)
        t = time.monotonic()
        assert s.wait_dispatched(timeout_s=0.2) is False  # suspended means suspended
        assert 0.15 < time.monotonic() - t < 2
        threading.Timer(0.2, s.reput_service.resume).start()
        assert s.wait_dispatched(timeout_s=5)
        assert s.get_max_offset_in_queue("T", 0) == 11
    finally:
        s.shutdown()


def test_suspend_waits_for_a_running_round_and_no_round_dispatches_after_it(tmp_path: Path) -> None:
    """suspend() is a barrier: a round that looked at the flag before it was raised ends
    before suspend() returns, and no round started later (the owner's, a helping waiter's)
    dispatches what is appended while suspended. Without the barrier a record appended right
    after suspend() could still be dispatched by the round in flight."""
    s = _driven(tmp_path / "s", [])
    reput = s.reput_service
    inside, release = threading.Event(), threading.Event()
    real = s.dispatcher.dispatch_batch

    def slow(batch):
        inside.set()
        assert release.wait(5)
        return real(batch)

    s.dispatcher.dispatch_batch = slow  # type: ignore[method-assign]
    try:
        _put(s)
        owner = threading.Thread(target=reput.run_round)
        owner.start()
        assert inside.wait(5)  # the owner's round is dispatching
        done = threading.Event()
        suspender = threading.Thread(target=lambda: (reput.suspend(), done.set()))
        suspender.start()
        assert not done.wait(0.2)  # suspend() waits for the round in flight
        release.set()
        assert done.wait(5)
        owner.join(5)
        suspender.join(5)
        assert s.get_max_offset_in_queue("T", 0) == 1
        _put(s)
        assert reput.run_round() == (0, 0.0)  # the owner's next round: suspended
        assert s.wait_dispatched(timeout_s=0.2) is False  # nor does a waiter dispatch it
        assert s.get_max_offset_in_queue("T", 0) == 1
        reput.resume()
        assert reput.run_round() == (1, 0.0)
        assert s.get_max_offset_in_queue("T", 0) == 2
    finally:
        release.set()
        s.shutdown()


def test_delete_topic_under_the_put_lock_needs_no_owner_round(tmp_path: Path) -> None:
    """The broker's loop may itself be blocked on the put lock that delete_topics holds while it
    waits for dispatch: the deleting thread dispatches the earlier sends itself."""
    s = _driven(tmp_path / "s", [])
    try:
        for i in range(5):
            _put(s, "Q", body=f"old{i}".encode())
        assert s.delete_topics({"Q"}, dispatch_timeout_s=5) == 1
        for i in range(3):
            r = s.put_message(MessageExtBrokerInner("Q", 0, f"new{i}".encode(), {}))
            assert r.is_ok() and r.appendMessageResult.logicsOffset == i
        s.reput_service.suspend()
        _put(s, "Q")
        with pytest.raises(StoreBusyError, match="not deleted"):
            s.delete_topics({"Q"}, dispatch_timeout_s=0.2)
        s.reput_service.resume()
    finally:
        s.shutdown()
    assert verify(str(tmp_path / "s"), _cfg(tmp_path / "s")) == []


def test_a_round_never_overlaps_another(tmp_path: Path) -> None:
    """An owner's round and a helping waiter share the reput lock: every record is dispatched
    exactly once (a unit written twice would move the queue's max offset past the sends)."""
    s = _driven(tmp_path / "s", [])
    stop = threading.Event()

    def owner() -> None:
        while not stop.is_set():
            if s.reput_service.run_round(8)[0] == 0:
                time.sleep(0.0005)

    t = threading.Thread(target=owner)
    t.start()
    try:
        for i in range(400):
            _put(s, queue_id=i % 3)
            if i % 50 == 0:
                assert s.wait_dispatched(timeout_s=5)
        assert s.wait_dispatched(timeout_s=5)
    finally:
        stop.set()
        t.join(5)
    try:
        assert [s.get_max_offset_in_queue("T", q) for q in range(3)] == [134, 133, 133]
    finally:
        s.shutdown()
    assert verify(str(tmp_path / "s"), _cfg(tmp_path / "s")) == []


def test_run_round_failure_policy(tmp_path: Path, monkeypatch) -> None:
    """A transient OS error waits 1 s and keeps the record due; any other failure waits 0.1 s
    and the same offset failing SAME_OFFSET_FAILURES_BEFORE_SKIP rounds in a row is skipped."""
    s = _driven(tmp_path / "s", [])
    try:
        reput = s.reput_service
        first = _put(s, body=b"first")
        real = s.dispatcher.dispatch_batch
        outage = [OSError(errno.EMFILE, "Too many open files")] * 2
        bad: list[int] = []

        def failing(batch):
            if outage:
                raise outage.pop()
            if any(r[2] in bad for r in batch):
                raise ValueError("cannot index this one")
            return real(batch)

        monkeypatch.setattr(s.dispatcher, "dispatch_batch", failing)
        assert reput.run_round(64) == (0, 1.0)
        assert reput.run_round(64) == (0, 1.0)
        assert reput.reput_from_offset == first and isinstance(reput.error, OSError)
        assert reput.run_round(64) == (1, 0.0)  # the outage is over: the record went in
        assert reput.error is None
        bad.append(_put(s, body=b"bad"))
        for _ in range(SAME_OFFSET_FAILURES_BEFORE_SKIP - 1):
            assert reput.run_round(64) == (0, 0.1)
            assert reput.reput_from_offset == bad[0]
        assert reput.run_round(64) == (0, 0.1)   # the last failure in a row: skipped
        assert reput.reput_from_offset > bad[0]
        assert [r.phy_offset for r in s.dispatcher.skipped] == bad
        _put(s, body=b"third")
        assert reput.run_round(64) == (1, 0.0)
        assert reput.error is None
        assert s.get_max_offset_in_queue("T", 0) == 2  # the skipped record has no unit
    finally:
        s.shutdown()
