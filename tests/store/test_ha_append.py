"""store.ha_append: a slave store fed the master's raw bytes in HA-sized chunks ends up with
byte-identical commit-log files (BLANK end-of-file records included) and serves reads."""

from __future__ import annotations

import os

import pytest

from rmqd.store.commitlog import MessageExtBrokerInner
from rmqd.store.config import MessageStoreConfig
from rmqd.store.ha_append import HAAppendError, SlaveReceiver, append_at, master_start_offset, read_commit_log
from rmqd.store.message_store import DefaultMessageStore, GetMessageStatus

FILE = 4096


def _open(root, **kw) -> DefaultMessageStore:
    s = DefaultMessageStore(MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=FILE,
                                               mappedFileSizeConsumeQueue=600, maxHashSlotNum=10, maxIndexNum=40,
                                               **kw))
    s.load()
    s.start()
    return s


def _fill(s: DefaultMessageStore, n: int) -> None:
    for i in range(n):
        assert s.put_message(MessageExtBrokerInner("T", i % 2, os.urandom(50 + i % 200), {"KEYS": f"k{i}"})).is_ok()


def _replicate(master: DefaultMessageStore, slave: DefaultMessageStore, start: int, batch: int) -> int:
    at, receiver = start, SlaveReceiver(slave)
    while True:
        chunk = read_commit_log(master.commit_log, at, batch)
        if chunk is None:
            assert receiver.expected_offset == at
            return slave.commit_log.get_max_offset()
        receiver.feed(at, bytes(chunk))
        assert slave.commit_log.get_max_offset() <= at + len(chunk)
        at += len(chunk)


def _files(root) -> dict[str, bytes]:
    d = os.path.join(root, "commitlog")
    return {n: open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d))}


@pytest.mark.parametrize("batch", [100, 1000, 32 * 1024])
def test_slave_gets_identical_files_and_serves_reads(tmp_path, batch: int) -> None:
    master, slave = _open(tmp_path / "m"), _open(tmp_path / "s", brokerRole="SLAVE")
    try:
        _fill(master, 90)  # several files, each ending in a BLANK record
        assert master.commit_log.get_max_offset() > 3 * FILE
        end = _replicate(master, slave, 0, batch)
        assert end == master.commit_log.get_max_offset() == slave.commit_log.get_max_offset()
        assert slave.wait_dispatched(end)
        # the master dispatches in its own thread too: a compiled store holds the GIL longer
        # between checks, so without this wait its consume queues could still lag the reads
        assert master.wait_dispatched(end)
        assert _files(tmp_path / "m") == _files(tmp_path / "s")
        for qid in (0, 1):
            a = master.get_message("g", "T", qid, 0, 32)
            b = slave.get_message("g", "T", qid, 0, 32)
            assert b.status is GetMessageStatus.FOUND and a.msg_count == b.msg_count > 0 and a.max_offset == b.max_offset == 45
            assert [bytes(x) for x in a.message_buffers] == [bytes(x) for x in b.message_buffers]
    finally:
        master.shutdown()
        slave.shutdown()


def test_receiver_holds_a_cut_record_until_it_is_whole(tmp_path) -> None:
    master, slave = _open(tmp_path / "m"), _open(tmp_path / "s", brokerRole="SLAVE")
    try:
        _fill(master, 3)
        assert master.wait_dispatched()
        first = master.get_message("g", "T", 0, 0, 1).message_buffers[0]
        size = len(first)
        r = SlaveReceiver(slave)
        assert r.feed(0, bytes(read_commit_log(master.commit_log, 0, size - 5))) == 0  # cut: nothing written
        assert r.expected_offset == size - 5
        with pytest.raises(HAAppendError, match="expected"):
            r.feed(size, b"x")
        assert r.feed(size - 5, bytes(read_commit_log(master.commit_log, size - 5, 5))) == size
        assert r.expected_offset == size
    finally:
        master.shutdown()
        slave.shutdown()


def test_empty_slave_starts_at_the_masters_last_file(tmp_path) -> None:
    master, slave = _open(tmp_path / "m"), _open(tmp_path / "s", brokerRole="SLAVE")
    try:
        _fill(master, 90)
        max_off = master.commit_log.get_max_offset()
        start = master_start_offset(master.commit_log, 0)
        assert start == max_off - max_off % FILE and start > 0
        assert master_start_offset(master.commit_log, 123) == 123
        assert _replicate(master, slave, start, 32 * 1024) == max_off
        assert slave.commit_log.get_min_offset() == start
        last = f"{start:020d}"
        assert _files(tmp_path / "s") == {last: _files(tmp_path / "m")[last]}
        assert slave.wait_dispatched(max_off)
    finally:
        master.shutdown()
        slave.shutdown()


def test_refuses_bytes_not_at_the_slaves_end(tmp_path) -> None:
    slave = _open(tmp_path / "s", brokerRole="SLAVE")
    try:
        with pytest.raises(HAAppendError, match="not a file start"):
            append_at(slave, 10, b"x" * 8)
        assert append_at(slave, 0, b"\0" * 16) == 16
        with pytest.raises(HAAppendError, match="max commit-log offset 16"):
            append_at(slave, 8, b"x")
        with pytest.raises(HAAppendError, match="do not fit"):
            append_at(slave, 16, b"x" * FILE)
        assert slave.commit_log.get_max_offset() == 16
    finally:
        slave.shutdown()


def test_read_commit_log_stays_in_one_file(tmp_path) -> None:
    master = _open(tmp_path / "m")
    try:
        _fill(master, 90)
        assert read_commit_log(master.commit_log, master.commit_log.get_max_offset(), 100) is None
        chunk = read_commit_log(master.commit_log, FILE - 10, 1 << 20)
        assert chunk is not None and len(chunk) == 10
    finally:
        master.shutdown()
