"""Issue 11 item 1 (store side): a record dispatch cannot index never wedges dispatch or
start-up. Such records are written here straight through CommitLog.put_message, as an older
rmqd or a damaged file could have left them; the store's own put refuses them."""
from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from rmqd.store.commitlog import MessageExtBrokerInner, PutMessageStatus
from rmqd.store.config import MessageStoreConfig
from rmqd.store.consumequeue import ConsumeQueue
from rmqd.store.dispatch import SAME_OFFSET_FAILURES_BEFORE_SKIP, commit_log_position
from rmqd.store.errors import StoreNameError
from rmqd.store.message_store import DefaultMessageStore, GetMessageStatus
from rmqd.store.tools import verify

FILE0 = "00000000000000000000"
# the names: NUL (the "embedded null byte" wedge), traversal, too long, not a topic char
BAD_TOPICS = ["%DLQ%\x00", "%RETRY%\x00", "%RETRY%../../../../escape", "x" * 128, "with space", "dot.ted", "ü"]


def _cfg(root: Path, **kw) -> MessageStoreConfig:
    return MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=64 * 1024,
                              mappedFileSizeConsumeQueue=6000, maxHashSlotNum=100, maxIndexNum=400, **kw)


def _open(root: Path, **kw) -> DefaultMessageStore:
    s = DefaultMessageStore(_cfg(root, **kw))
    s.load()
    s.start()
    return s


def _raw_put(s: DefaultMessageStore, topic: str, body: bytes = b"bad", keys: str | None = "k1"):
    """Past the store's name check, as a store written before it could hold."""
    props = {"KEYS": keys} if keys else {}
    r = s.commit_log.put_message(MessageExtBrokerInner(topic, 0, body, props))
    assert r.is_ok()
    return r.appendMessageResult.wroteOffset


def _good(s: DefaultMessageStore, topic: str = "Good", body: bytes = b"ok") -> int:
    r = s.put_message(MessageExtBrokerInner(topic, 0, body, {"KEYS": "k1"}))
    assert r.is_ok()
    return r.appendMessageResult.wroteOffset


def _later_round(s: DefaultMessageStore) -> None:
    """One more append and its dispatch: a round after the one that skipped the bad record
    has run (where a dispatcher that went back to it would log it again), with no fixed wait."""
    _good(s, "Later", b"later")
    assert s.wait_dispatched(timeout_s=5.0), "dispatch wedged after the bad record"
    assert _bodies(s, "Later")[-1:] == [b"later"]


def _outside_files(tmp_path: Path, root: Path) -> list[str]:
    return [str(p) for p in tmp_path.rglob("*") if root not in p.parents and p != root and p not in root.parents]


def _bodies(s: DefaultMessageStore, topic: str) -> list[bytes]:
    res = s.get_message("g", topic, 0, 0, 32)
    if res.status is not GetMessageStatus.FOUND:
        return []
    from rmqd.wire.message import decode_messages
    return [m.body for m in decode_messages(b"".join(bytes(v) for v in res.message_buffers))]


@pytest.mark.parametrize("topic", BAD_TOPICS)
def test_bad_record_is_skipped_once_and_dispatch_goes_on(tmp_path, caplog, topic):
    root = tmp_path / "a" / "store"
    s = _open(root)
    try:
        _good(s, body=b"before")
        with caplog.at_level(logging.ERROR, logger="rmqd.store.dispatch"):
            bad = _raw_put(s, topic)
            _good(s, body=b"after")
            _good(s, "Other", b"other")
            assert s.wait_dispatched(timeout_s=5.0), "dispatch wedged on the bad record"
            _later_round(s)  # a retrying dispatcher would log again
        assert _bodies(s, "Good") == [b"before", b"after"]
        assert _bodies(s, "Other") == [b"other"]
        assert s.query_message("Good", "k1", 10, 0, 2**62).message_buffers  # the index goes on too
        assert s.dispatcher.skipped_count == 1
        rec = s.dispatcher.skipped[0]
        assert (rec.file, rec.offset, rec.phy_offset, rec.topic) == (FILE0, bad, bad, topic)
        lines = [r.getMessage() for r in caplog.records if "not dispatched" in r.getMessage()]
        assert len(lines) == 1 and f"commitlog/{FILE0} offset {bad}" in lines[0]
        assert s.get_consume_queue(topic, 0) is None
    finally:
        s.shutdown()
    assert _outside_files(tmp_path, root) == []
    assert not any("%RETRY%.." in p.name or "\x00" in p.name for p in root.rglob("*"))
    problems = verify(root, _cfg(root))
    assert [(Path(p.file).name, p.offset) for p in problems] == [(FILE0, bad)]
    assert "not a valid topic name" in problems[0].message


@pytest.mark.parametrize("crash", [False, True])
def test_restart_over_a_bad_record_serves_everything_else(tmp_path, crash):
    root = tmp_path / "store"
    s = _open(root)
    _good(s, body=b"1")
    bad = _raw_put(s, "%DLQ%\x00")
    _good(s, body=b"2")
    assert s.wait_dispatched()
    s.shutdown()
    if crash:  # abnormal recovery re-dispatches from the checkpoint: through the bad record again
        (root / "abort").write_bytes(b"")
        (root / "checkpoint").unlink()
    s = _open(root)
    try:
        assert s.last_exit_ok is not crash
        _good(s, body=b"3")
        assert s.wait_dispatched()
        assert _bodies(s, "Good") == [b"1", b"2", b"3"]
        if crash:
            assert [r.phy_offset for r in s.dispatcher.skipped] == [bad]
    finally:
        s.shutdown()


def test_unreadable_record_is_passed_over_not_retried(tmp_path, caplog):
    root = tmp_path / "store"
    s = _open(root)
    try:
        s.reput_service.suspend()
        a = _good(s, body=b"A")
        b = _good(s, body=b"B")
        mf = s.commit_log.mapped_file_queue.mapped_files[0]
        mf.mm[b + 4:b + 8] = b"\x00\x00\x00\x01"  # B's magic code destroyed before dispatch saw it
        with caplog.at_level(logging.ERROR, logger="rmqd.store.dispatch"):
            s.reput_service.resume()
            assert s.wait_dispatched(timeout_s=5.0)
            d = _good(s, body=b"D")
            assert s.wait_dispatched(timeout_s=5.0)
            _later_round(s)
        assert a < b < d
        assert _bodies(s, "Good") == [b"A", b"D"]
        assert [r.phy_offset for r in s.dispatcher.skipped] == [b]
        assert sum("not dispatched" in r.getMessage() for r in caplog.records) == 1
    finally:
        s.shutdown()


def test_one_failing_consume_queue_write_skips_only_that_record(tmp_path, monkeypatch):
    root = tmp_path / "store"
    s = _open(root)
    try:
        first = _good(s, body=b"1")
        assert s.wait_dispatched()
        s.reput_service.suspend()
        poisoned = _good(s, body=b"2")
        _good(s, body=b"3")
        real = ConsumeQueue.put_requests

        def put(self, units):
            if any(u[2] == poisoned for u in units):
                raise ValueError("a unit that cannot be written")  # not a transient OS error
            return real(self, units)

        monkeypatch.setattr(ConsumeQueue, "put_requests", put)
        s.reput_service.resume()
        assert s.wait_dispatched(timeout_s=5.0)
        assert _bodies(s, "Good") == [b"1", b"3"] and first < poisoned
        skipped = s.dispatcher.skipped
        assert [(r.phy_offset, r.topic) for r in skipped] == [(poisoned, "Good")]
        assert "a unit that cannot be written" in skipped[0].why
    finally:
        s.shutdown()


def test_a_dispatch_round_that_always_fails_is_skipped_after_a_few_tries(tmp_path, monkeypatch):
    root = tmp_path / "store"
    s = _open(root)
    try:
        _good(s, body=b"1")
        assert s.wait_dispatched()
        s.reput_service.suspend()
        poisoned = _good(s, body=b"2")
        real = s.dispatcher.dispatch_batch
        calls = []

        def dispatch(infos):
            if any(r[2] == poisoned for r in infos):
                calls.append(1)
                raise RuntimeError("boom")
            return real(infos)

        monkeypatch.setattr(s.reput_service.dispatcher, "dispatch_batch", dispatch)
        s.reput_service.resume()
        assert s.wait_dispatched(timeout_s=5.0)
        _good(s, body=b"3")
        assert s.wait_dispatched(timeout_s=5.0)
        assert len(calls) == SAME_OFFSET_FAILURES_BEFORE_SKIP
        assert [r.phy_offset for r in s.dispatcher.skipped] == [poisoned]
        assert s.reput_service.error is None
        assert _bodies(s, "Good")[0] == b"1" and _bodies(s, "Good")[-1] == b"3"
    finally:
        s.shutdown()
    assert not (root / "abort").exists()


@pytest.mark.parametrize("topic", BAD_TOPICS)
def test_store_refuses_bad_names_and_creates_nothing(tmp_path, topic):
    root = tmp_path / "a" / "store"
    s = _open(root)
    try:
        before = s.commit_log.get_max_offset()
        r = s.put_message(MessageExtBrokerInner(topic, 0, b"x"))
        assert r.putMessageStatus is PutMessageStatus.MESSAGE_ILLEGAL
        assert s.commit_log.get_max_offset() == before
        with pytest.raises(StoreNameError):
            s.find_consume_queue(topic, 0)
        assert s.get_message("g", topic, 0, 0, 1).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    finally:
        s.shutdown()
    assert _outside_files(tmp_path, root) == []
    assert not (root / "consumequeue").exists() or os.listdir(root / "consumequeue") == []


def test_commit_log_position_names_the_file():
    assert commit_log_position(0, 1024) == (FILE0, 0)
    assert commit_log_position(1024 * 3 + 7, 1024) == ("00000000000000003072", 7)


def test_a_transient_os_error_is_retried_never_skipped(tmp_path, monkeypatch):
    """Out of file descriptors (or space) is the system's state, not the record's fault: the
    acknowledged record stays due and is dispatched once the resource is back (H3's F2)."""
    import errno
    root = tmp_path / "store"
    s = _open(root)
    try:
        s.reput_service.suspend()
        first = _good(s, body=b"1")
        real = ConsumeQueue.put_requests
        failures = [3]

        def put(self, units):
            if failures[0] > 0:
                failures[0] -= 1
                raise OSError(errno.EMFILE, "Too many open files")
            return real(self, units)

        monkeypatch.setattr(ConsumeQueue, "put_requests", put)
        monkeypatch.setattr("rmqd.store.dispatch.time.sleep", lambda _s: None)
        s.reput_service.resume()
        assert s.wait_dispatched(timeout_s=10.0)
        assert failures[0] == 0 and s.dispatcher.skipped == [] and first == 0
        assert _bodies(s, "Good") == [b"1"]
    finally:
        s.shutdown()


def test_a_consume_queue_closed_under_a_reader_answers_as_a_missing_queue(tmp_path):
    """A topic deleted while SEARCH_OFFSET_BY_TIMESTAMP or a pull reads its queue (H3's F5)."""
    root = tmp_path / "store"
    s = _open(root)
    try:
        _good(s, body=b"1")
        assert s.wait_dispatched()
        cq = s.get_consume_queue("Good", 0)
        for mf in cq.files:
            mf.mm.close()  # what the deletion does under the reader's feet
        assert s.get_offset_in_queue_by_time("Good", 0, 0) == 0
        s.consume_queue_table.pop("Good")  # the deletion took it out of the table too

        def reading_a_closed_map(*_a):
            raise ValueError("mmap closed or invalid")

        s._get_message = reading_a_closed_map
        assert s.get_message("g", "Good", 0, 0, 1).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
        _good(s, "Other", b"2")
        assert s.wait_dispatched()
        with pytest.raises(ValueError):  # a live queue's error is not hidden
            s.get_message("g", "Other", 0, 0, 1)
    finally:
        s.consume_queue_table.pop("Good", None)
        s.shutdown()


def test_a_full_disk_fails_file_creation_instead_of_a_later_sigbus(tmp_path, monkeypatch):
    """posix_fallocate's ENOSPC used to be swallowed: the sparse file then killed the broker
    with SIGBUS on a write (H3's F4)."""
    import errno
    import os as _os
    from rmqd.store.mapped_file import create_file_atomically

    def full(fd, off, size):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_os, "posix_fallocate", full)
    with pytest.raises(OSError) as info:
        create_file_atomically(str(tmp_path / "00000000000000000000"), 1 << 20, allocate=True)
    assert info.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []
