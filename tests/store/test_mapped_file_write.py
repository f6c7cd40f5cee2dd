"""MappedFile.write: pwrite through a descriptor of the file's own, seen through the mapping."""
from __future__ import annotations

import errno
import gc
import os
from pathlib import Path

import pytest

from rmqd.store.commitlog import MessageExtBrokerInner, PutMessageStatus
from rmqd.store.config import MessageStoreConfig
from rmqd.store.mapped_file import MappedFile, MappedFileQueue
from rmqd.store.message_store import DefaultMessageStore

LOCALHOST = b"\x7f\x00\x00\x01"


def _open_fds() -> set[int]:
    return {int(n) for n in os.listdir("/proc/self/fd")}


def test_written_bytes_are_seen_through_the_mapping_at_once(tmp_path: Path) -> None:
    mf = MappedFile(tmp_path / f"{0:020d}", 1 << 20)
    try:
        assert mf.append_message(b"abc")
        mf.write(4096 - 2, b"XYZW")  # across a page boundary
        assert bytes(mf.mm[:3]) == b"abc"
        assert bytes(mf.mm[4094:4098]) == b"XYZW"
        assert mf.wrote_position == 3
        assert bytes(mf.select_mapped_buffer(0)) == b"abc"
    finally:
        mf.destroy()


def test_a_file_only_read_holds_no_write_descriptor(tmp_path: Path) -> None:
    path = tmp_path / f"{0:020d}"
    MappedFile(path, 1 << 16).close()
    before = _open_fds()
    mf = MappedFile(path, 1 << 16, create=False)
    assert len(_open_fds() - before) <= 1  # the mapping's own (CPython keeps a dup of the fd)
    with_mapping = _open_fds()
    mf.write(0, b"x")
    assert len(_open_fds() - with_mapping) == 1
    mf.close()
    del mf
    gc.collect()
    assert not (_open_fds() - before)  # both gone with the object


def test_a_closed_file_refuses_writes(tmp_path: Path) -> None:
    mf = MappedFile(tmp_path / f"{0:020d}", 1 << 16)
    mf.write(0, b"first")
    mf.destroy()
    with pytest.raises(ValueError, match="closed"):
        mf.write(5, b"late")
    with pytest.raises(ValueError):
        mf.append_message(b"late")


def test_without_descriptors_the_file_is_written_through_the_mapping(tmp_path: Path, monkeypatch) -> None:
    mf = MappedFile(tmp_path / f"{0:020d}", 1 << 16)
    real_open = os.open

    def no_fds(path, flags, *a, **kw):
        if str(path) == mf.path:
            raise OSError(errno.EMFILE, "Too many open files")
        return real_open(path, flags, *a, **kw)

    monkeypatch.setattr(os, "open", no_fds)
    try:
        assert mf.append_message(b"still written")
        monkeypatch.setattr(os, "open", real_open)
        assert mf.append_message(b"!")  # stays on the mapping for this file: no retry per write
        assert bytes(mf.mm[:14]) == b"still written!"
        assert (tmp_path / f"{0:020d}").read_bytes()[:14] == b"still written!"
    finally:
        mf.destroy()


def test_consume_queue_units_written_in_runs_read_back(tmp_path: Path) -> None:
    s = DefaultMessageStore(MessageStoreConfig(storePathRootDir=str(tmp_path / "s"), mappedFileSizeCommitLog=1 << 20,
                                               mappedFileSizeConsumeQueue=20 * 50))
    s.load()
    s.start()
    try:
        for i in range(120):  # rolls the 50-unit consume-queue files twice
            msg = MessageExtBrokerInner("T", i % 2, b"b%d" % i, {}, born_host=LOCALHOST, born_port=1,
                                        store_host=LOCALHOST, store_port=2)
            assert s.put_message(msg).is_ok()
        assert s.wait_dispatched(timeout_s=10.0)
        cq = s.find_consume_queue("T", 0)
        assert cq.get_max_offset_in_queue() == 60
        offsets = [cq.get_unit(k)[0] for k in range(60)]
        assert offsets == sorted(offsets) and len(set(offsets)) == 60
        for k in (0, 49, 50, 59):
            got = s.get_message("g", "T", 0, k, 1)
            assert got.message_buffers and bytes(got.message_buffers[0]).find(b"b%d" % (2 * k)) > 0
    finally:
        s.shutdown()


def test_a_failed_commit_log_write_is_refused_and_publishes_nothing(tmp_path: Path, monkeypatch) -> None:
    s = DefaultMessageStore(MessageStoreConfig(storePathRootDir=str(tmp_path / "s"), mappedFileSizeCommitLog=1 << 20))
    s.load()
    s.start()
    try:
        def put(body: bytes):
            return s.put_message(MessageExtBrokerInner("T", 0, body, {}, born_host=LOCALHOST, born_port=1,
                                                       store_host=LOCALHOST, store_port=2))

        assert put(b"one").is_ok()
        end = s.commit_log.get_max_offset()

        def full(pos, data):
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(MappedFile, "write", lambda self, pos, data: full(pos, data))
        r = put(b"two")
        assert r.putMessageStatus is PutMessageStatus.UNKNOWN_ERROR
        assert s.commit_log.get_max_offset() == end  # nothing published
        monkeypatch.undo()
        r = put(b"three")
        assert r.is_ok() and r.appendMessageResult.wroteOffset == end  # the next one takes the same place
        assert r.appendMessageResult.logicsOffset == 1  # and the queue offset the failed one did not use
    finally:
        s.shutdown()


def test_mapped_file_queue_files_written_by_pwrite_reload_the_same(tmp_path: Path) -> None:
    q = MappedFileQueue(tmp_path / "q", 4096)
    mf = q.get_last_mapped_file(0)
    assert mf.append_message(b"\x01" * 4000)
    q.flush(0)
    q.shutdown()
    q2 = MappedFileQueue(tmp_path / "q", 4096)
    q2.load()
    assert bytes(q2.mapped_files[0].mm[:4000]) == b"\x01" * 4000
