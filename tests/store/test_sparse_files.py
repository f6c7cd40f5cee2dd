"""A new store reserves no disk it has not written (issue 41): mapped files are created sparse,
at their full logical size, as RocketMQ's are (RandomAccessFile.setLength); only
warmMapedFileEnable=true reserves a commit-log file's blocks up front. Recovery, clean and
after a crash, walks the sparse files as it walked preallocated ones."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rmqd.store.commitlog import MessageExtBrokerInner
from rmqd.store.config import MessageStoreConfig
from rmqd.store.mapped_file import MappedFileQueue
from rmqd.store.message_store import DefaultMessageStore, GetMessageStatus

pytestmark = pytest.mark.timeout(60)

MiB = 1 << 20
LOCALHOST = b"\x7f\x00\x00\x01"


def _disk_bytes(path: Path) -> int:
    """What ``du`` counts: the blocks the file system really gave the file."""
    return os.stat(path).st_blocks * 512


def _store_disk_bytes(root: Path) -> int:
    return sum(_disk_bytes(p) for p in root.rglob("*") if p.is_file())


def _put(s: DefaultMessageStore, n: int, body: bytes = b"m" * 200) -> None:
    for i in range(n):
        r = s.put_message(MessageExtBrokerInner("SparseT", i % 2, body, {"KEYS": f"k{i}"}, born_host=LOCALHOST,
                                                born_port=1, store_host=LOCALHOST, store_port=2))
        assert r.is_ok(), r


def test_a_new_store_takes_only_what_it_wrote_at_rocketmqs_default_sizes(tmp_path: Path) -> None:
    """The 4.9 defaults: a 1 GiB commit-log file, 5.7 MiB consume-queue files, a 420 MB index
    file. Before, the commit-log file alone took 1 GiB of disk on the first message."""
    root = tmp_path / "store"
    config = MessageStoreConfig(storePathRootDir=str(root))
    s = DefaultMessageStore(config)
    s.load()
    s.start()
    try:
        assert _store_disk_bytes(root) < MiB  # started: checkpoint, lock, abort
        _put(s, 10)
        assert s.wait_dispatched()
        commit_log = root / "commitlog" / f"{0:020d}"
        assert commit_log.stat().st_size == config.mappedFileSizeCommitLog == 1 << 30  # full logical size
        assert _disk_bytes(commit_log) < MiB
        cq_file = root / "consumequeue" / "SparseT" / "0" / f"{0:020d}"
        assert cq_file.stat().st_size == config.get_mapped_file_size_consume_queue()
        assert _store_disk_bytes(root) < 4 * MiB, sorted((str(p), _disk_bytes(p)) for p in root.rglob("*"))
    finally:
        s.shutdown()
    assert _store_disk_bytes(root) < 4 * MiB


def test_sparse_files_recover_cleanly_and_after_a_crash(tmp_path: Path) -> None:
    root = tmp_path / "store"

    def cfg() -> MessageStoreConfig:
        return MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=4 * MiB,
                                  mappedFileSizeConsumeQueue=2000)

    s = DefaultMessageStore(cfg())
    s.load()
    s.start()
    _put(s, 40, b"x" * 1000)  # 40 records of ~1.1 KB: a few pages of a 4 MiB file
    end = s.get_max_phy_offset()
    s.shutdown()
    commit_log = root / "commitlog" / f"{0:020d}"
    assert _disk_bytes(commit_log) < MiB <= commit_log.stat().st_size

    queue0 = 20
    for crashed in (False, True):
        if crashed:
            (root / "abort").touch()  # the abort file a killed broker leaves: the whole walk
        s = DefaultMessageStore(cfg())
        assert s.load()
        s.start()
        try:
            assert s.recovery_report.abnormal is crashed
            assert s.get_max_phy_offset() == end  # the hole after the last record is not data
            assert s.get_max_offset_in_queue("SparseT", 0) == queue0
            got = s.get_message("g", "SparseT", 1, 0, 32)
            assert got.status is GetMessageStatus.FOUND and len(got.message_buffers) == 20
            r = s.put_message(MessageExtBrokerInner("SparseT", 0, b"after", {}, born_host=LOCALHOST, born_port=1,
                                                    store_host=LOCALHOST, store_port=2))
            assert r.is_ok() and r.appendMessageResult.wroteOffset == end
            end = s.get_max_phy_offset()
            queue0 += 1
        finally:
            s.shutdown()
    from rmqd.store import tools
    assert tools.verify(root, cfg()) == []


def test_warm_maped_file_enable_reserves_the_commit_log_up_front(tmp_path: Path) -> None:
    """warmMapedFileEnable=true (4.9's warm-up of each new commit-log file): its blocks are
    reserved when the file is created, so a full disk fails the creation, not a later write."""
    size = 2 * MiB
    for warm in (False, True):
        root = tmp_path / f"warm-{warm}"
        s = DefaultMessageStore(MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=size,
                                                   warmMapedFileEnable=warm))
        s.load()
        s.start()
        try:
            _put(s, 1)
            reserved = _disk_bytes(root / "commitlog" / f"{0:020d}")
        finally:
            s.shutdown()
        assert (reserved >= size) is warm, (warm, reserved)


def test_a_mapped_file_queue_is_sparse_unless_asked(tmp_path: Path) -> None:
    for preallocate in (False, True):
        q = MappedFileQueue(tmp_path / f"q{preallocate}", MiB, preallocate=preallocate)
        try:
            mf = q.get_last_mapped_file(0)
            assert mf is not None and mf.append_message(b"\x01" * 5000)
            path = Path(mf.path)
            assert path.stat().st_size == MiB
            assert (_disk_bytes(path) >= MiB) is preallocate
            assert mf.read(0, 5000) == b"\x01" * 5000 and mf.read(5000, 10) == bytes(10)
        finally:
            q.shutdown()
