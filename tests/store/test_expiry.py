"""Expiry: fileReservedTime / deleteWhen / disk thresholds, never the file in use."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from rmqd.store.commitlog import MessageExtBatch, MessageExtBrokerInner, PutMessageStatus
from rmqd.store.config import MessageStoreConfig
from rmqd.store.consumequeue import ConsumeQueue
from rmqd.store.expiry import CleanService, disk_partition_space_used_percent, is_it_time_to_do
from rmqd.store.indexfile import IndexService
from rmqd.store.mapped_file import MappedFileQueue
from rmqd.store.message_store import DefaultMessageStore, GetMessageStatus
from rmqd.wire.message import encode_batch

HOUR = 3_600_000
NOW = 1_800_000_000_000
FILE = 1000  # commit-log file size in these tests


class World:
    def __init__(self, root: Path, files: int = 5) -> None:
        self.config = MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=FILE,
                                         deleteCommitLogFilesInterval=0)
        self.clq = MappedFileQueue(self.config.get_store_path_commit_log(), FILE)
        self.cq = ConsumeQueue("T", 0, self.config.get_store_path_consume_queue(), 200)  # 10 units per file
        self.index = IndexService(self.config.get_store_path_index(), 5, 6,  # 5 entries per file
                                  clock_ms=iter(range(NOW, NOW + 10**6, 1000)).__next__)
        n = 0
        for f in range(files):
            mf = self.clq.get_last_mapped_file(f * FILE)
            for i in range(10):  # ten 100-byte "records" per file
                assert mf.append_message(bytes(100))
                self.cq.put_message_position_info(f * FILE + i * 100, 100, 0, n)
                self.index.build_index("T", f * FILE + i * 100, NOW + n, None, f"k{n}")
                n += 1
        self.disk = 0.5
        self.hour = 12
        self.svc = CleanService(self.config, self.clq, lambda: [self.cq], self.index,
                                disk_usage=lambda path: self.disk, now_ms=lambda: NOW, local_hour=lambda: self.hour)

    def age(self, hours_by_file: list[float]) -> None:
        for mf, h in zip(self.clq.mapped_files, hours_by_file):
            t = (NOW - h * HOUR) / 1000
            os.utime(mf.path, (t, t))

    def names(self) -> list[int]:
        return [mf.file_from_offset for mf in self.clq.mapped_files]


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


def test_nothing_happens_off_hours_with_disk_ok(world: World) -> None:
    world.age([100, 100, 100, 100, 100])
    res = world.svc.run_once()
    assert res.commitlog_files == 0 and world.names() == [0, 1000, 2000, 3000, 4000]
    assert world.svc.is_writeable()


def test_delete_when_hour_removes_only_expired_and_never_the_last(world: World) -> None:
    world.age([100, 80, 73, 10, 100])
    world.hour = 4  # deleteWhen "04"
    res = world.svc.run_once()
    assert res.commitlog_files == 3 and world.names() == [3000, 4000]
    # consume queue and index follow the new min offset
    assert res.min_offset == 3000
    assert world.cq.get_min_offset_in_queue() == 30
    assert [f.file_name for f in world.cq.files] == ["00000000000000000600", "00000000000000000800"]
    assert world.cq.get_unit(29) is None and world.cq.get_unit(30) == (3000, 100, 0)
    assert res.index_files > 0
    assert all(f.end_phy_offset >= 3000 for f in world.index.index_files)
    # the oldest remaining file is young: a second tick deletes nothing more
    assert world.svc.run_once().commitlog_files == 0
    world.age([100, 100])
    assert world.svc.run_once().commitlog_files == 1 and world.names() == [4000]  # never the file in use


def test_disk_over_max_used_ratio_deletes_expired_files_any_hour(world: World) -> None:
    world.age([100, 10, 10, 10, 10])
    world.disk = 0.80  # > diskMaxUsedSpaceRatio 75
    assert world.svc.run_once().commitlog_files == 1
    assert world.svc.state.space_to_delete and not world.svc.state.clean_immediately
    assert world.svc.is_writeable()


def test_disk_over_85_percent_deletes_young_files_too(world: World) -> None:
    world.age([1, 1, 1, 1, 1])
    world.disk = 0.86
    res = world.svc.run_once()
    assert res.commitlog_files == 4 and world.names() == [4000]
    assert world.svc.is_writeable()


def test_disk_over_90_percent_refuses_writes_until_it_drops(world: World) -> None:
    world.disk = 0.91
    world.svc.run_once()
    assert not world.svc.is_writeable() and world.svc.state.disk_full
    world.disk = 0.40
    world.svc.run_once()
    assert world.svc.is_writeable()


def test_clean_forcibly_can_be_disabled(world: World) -> None:
    world.config.cleanFileForciblyEnable = False
    world.age([1, 1, 1, 1, 1])
    world.disk = 0.86
    assert world.svc.run_once().commitlog_files == 0


def test_manual_delete(world: World) -> None:
    world.age([100, 100, 1, 1, 1])
    world.svc.execute_delete_files_manually()
    assert world.svc.run_once().commitlog_files == 2
    assert world.svc.manual_delete_file_several_times == 19


def test_background_thread_runs_and_stops(world: World) -> None:
    world.config.cleanResourceInterval = 10
    world.svc.clean_initial_delay_ms = 0
    world.age([100, 100, 100, 100, 100])
    world.hour = 4
    world.svc.start()
    try:
        for _ in range(200):
            if world.names() == [4000]:
                break
            time.sleep(0.01)
    finally:
        world.svc.shutdown()
    assert world.names() == [4000]


def test_helpers(tmp_path: Path) -> None:
    assert is_it_time_to_do("04", 4) and not is_it_time_to_do("04", 5)
    assert is_it_time_to_do("04;16", 16) and not is_it_time_to_do("x;y", 4)
    r = disk_partition_space_used_percent(str(tmp_path))
    assert 0 <= r <= 1
    assert disk_partition_space_used_percent(str(tmp_path / "missing")) == -1


def test_physic_partition_over_max_ratio_skips_the_logics_check(world: World) -> None:
    """isSpaceToDelete returns after the commit-log partition when it alone asks for
    deletion; the consume-queue partition is then not looked at (4.9.8 order)."""
    seen = []
    world.svc.disk_usage = lambda path: seen.append(path) or (0.80 if path.endswith("commitlog") else 0.95)
    st = world.svc.check_disk_space()
    assert st.space_to_delete and not st.disk_full and world.svc.is_writeable()
    assert seen == [world.config.get_store_path_commit_log()]
    world.svc.disk_usage = lambda path: 0.50 if path.endswith("commitlog") else 0.95
    st = world.svc.check_disk_space()
    assert st.disk_full and st.clean_immediately and not world.svc.is_writeable()


def test_between_85_and_90_percent_the_full_flag_is_kept(world: World) -> None:
    world.disk = 0.95
    world.svc.check_disk_space()
    world.disk = 0.87  # cleans at once but does not declare the disk OK yet
    assert world.svc.check_disk_space().clean_immediately and not world.svc.is_writeable()
    world.disk = 0.70
    world.svc.check_disk_space()
    assert world.svc.is_writeable()


def test_periodic_disk_check_is_commit_log_only(world: World) -> None:
    world.svc.disk_usage = lambda path: 0.95 if path.endswith("commitlog") else 0.1
    assert world.svc.is_space_full() and not world.svc.is_writeable()
    world.svc.disk_usage = lambda path: 0.1 if path.endswith("commitlog") else 0.95
    assert not world.svc.is_space_full() and world.svc.is_writeable()


# ---- through the store facade ------------------------------------------------------------------

def _store(root: Path, disk: list[float], **kw) -> DefaultMessageStore:
    cfg = MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=4096,
                             mappedFileSizeConsumeQueue=10 * 20, maxHashSlotNum=16, maxIndexNum=8,
                             deleteCommitLogFilesInterval=0, **kw)
    s = DefaultMessageStore(cfg, disk_usage=lambda path: disk[0])
    s.load()
    s.start()
    return s


def _put(s: DefaultMessageStore, n: int, start: int = 0) -> list:
    out = []
    for i in range(start, start + n):
        r = s.put_message(MessageExtBrokerInner("ExpT", 0, b"b" * 300, {"KEYS": f"k{i}", "TAGS": "t"}))
        assert r.is_ok(), r
        out.append(r.appendMessageResult)
    assert s.wait_dispatched()
    return out


def test_store_refuses_writes_when_the_disk_is_full_and_resumes(tmp_path: Path) -> None:
    disk = [0.95]  # above diskSpaceWarningLevelRatio from the first check at start
    s = _store(tmp_path, disk)
    try:
        assert s.is_disk_full()
        r = s.put_message(MessageExtBrokerInner("ExpT", 0, b"x", {}))
        assert r.putMessageStatus is PutMessageStatus.SERVICE_NOT_AVAILABLE and r.appendMessageResult is None
        b = s.put_messages(MessageExtBatch("ExpT", 0, encode_batch([(0, b"x", {})])))
        assert b.putMessageStatus is PutMessageStatus.SERVICE_NOT_AVAILABLE
        assert s.get_max_phy_offset() == 0  # nothing was appended
        disk[0] = 0.30
        s.clean_service.is_space_full()  # the 10 s disk check
        assert not s.is_disk_full()
        assert s.put_message(MessageExtBrokerInner("ExpT", 0, b"x", {})).is_ok()
    finally:
        s.shutdown()


def test_background_disk_check_flips_the_store_to_read_only(tmp_path: Path) -> None:
    disk = [0.10]
    s = _store(tmp_path, disk)
    s.clean_service.shutdown()
    s.clean_service.disk_check_interval_ms = 10
    s.clean_service.start()
    try:
        assert s.put_message(MessageExtBrokerInner("ExpT", 0, b"x", {})).is_ok()
        disk[0] = 0.91
        deadline = time.monotonic() + 5
        while not s.is_disk_full() and time.monotonic() < deadline:
            time.sleep(0.01)
        r = s.put_message(MessageExtBrokerInner("ExpT", 0, b"x", {}))
        assert r.putMessageStatus is PutMessageStatus.SERVICE_NOT_AVAILABLE
        assert s.get_message("g", "ExpT", 0, 0, 32).status is GetMessageStatus.FOUND  # reads go on
    finally:
        s.shutdown()


def test_expiry_through_the_store_deletes_old_commit_log_cq_and_index_files(tmp_path: Path) -> None:
    disk = [0.10]
    s = _store(tmp_path, disk)
    try:
        wrote = _put(s, 60)  # ~350 B records, 11 per 4 KiB file: 6 commit-log files
        files = list(s.commit_log.mapped_file_queue.mapped_files)
        assert len(files) >= 5
        cq = s.get_consume_queue("ExpT", 0)
        assert len(cq.files) == 6 and len(s.index_service.index_files) > 3
        old = time.time() - 100 * 3600  # older than fileReservedTime (72 h)
        for mf in files[:3]:
            os.utime(mf.path, (old, old))
        s.clean_service.local_hour = lambda: 4  # deleteWhen "04"
        res = s.clean_service.run_once()
        assert res.commitlog_files == 3
        new_min = files[3].file_from_offset
        assert s.get_min_phy_offset() == new_min and not any(os.path.exists(mf.path) for mf in files[:3])
        assert res.consume_queue_files >= 1 and res.index_files >= 1
        first_kept = next(i for i, w in enumerate(wrote) if w.wroteOffset >= new_min)
        assert s.get_min_offset_in_queue("ExpT", 0) == first_kept
        assert all(f.end_phy_offset >= new_min for f in s.index_service.index_files)
        # old messages are gone for pulls and key queries, young ones still served
        got = s.get_message("g", "ExpT", 0, 0, 1)
        assert got.status is GetMessageStatus.OFFSET_TOO_SMALL and got.next_begin_offset == first_kept
        assert s.get_message("g", "ExpT", 0, first_kept, 1).status is GetMessageStatus.FOUND
        assert not s.query_message("ExpT", "k0", 1, 0, 2**62).message_buffers
        assert s.query_message("ExpT", f"k{len(wrote) - 1}", 1, 0, 2**62).message_buffers
        # the store still restarts cleanly on what expiry left
    finally:
        s.shutdown()
    s = _store(tmp_path, disk)
    try:
        assert s.get_min_phy_offset() == new_min and s.get_min_offset_in_queue("ExpT", 0) == first_kept
        assert s.get_max_offset_in_queue("ExpT", 0) == len(wrote)
    finally:
        s.shutdown()


def test_full_disk_cleans_young_files_at_once_but_never_the_file_in_use(tmp_path: Path) -> None:
    disk = [0.10]
    s = _store(tmp_path, disk)
    try:
        wrote = _put(s, 40)
        last = s.commit_log.mapped_file_queue.mapped_files[-1]
        disk[0] = 0.95
        res = s.clean_service.run_once()
        assert res.commitlog_files >= 2 and s.is_disk_full()
        assert s.commit_log.mapped_file_queue.mapped_files == [last] and os.path.exists(last.path)
        tail = wrote[-1]
        v = s.select_one_message_by_offset(tail.wroteOffset)
        assert v is not None and len(v) == tail.wroteBytes
        assert s.put_message(MessageExtBrokerInner("ExpT", 0, b"x", {})).putMessageStatus \
            is PutMessageStatus.SERVICE_NOT_AVAILABLE
        disk[0] = 0.50
        s.clean_service.run_once()
        assert s.put_message(MessageExtBrokerInner("ExpT", 0, b"x", {})).is_ok()
    finally:
        s.shutdown()


def test_expiry_thread_of_a_started_store_runs_on_its_interval(tmp_path: Path) -> None:
    disk = [0.10]
    s = DefaultMessageStore(MessageStoreConfig(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=4096,
                                               mappedFileSizeConsumeQueue=200, cleanResourceInterval=10,
                                               deleteCommitLogFilesInterval=0),
                            disk_usage=lambda path: disk[0], clean_initial_delay_ms=0)
    s.load()
    s.start()
    try:
        _put(s, 30)
        n = len(s.commit_log.mapped_file_queue.mapped_files)
        assert n >= 3
        s.execute_delete_files_manually()
        for mf in s.commit_log.mapped_file_queue.mapped_files:
            os.utime(mf.path, (1, 1))
        deadline = time.monotonic() + 5
        while len(s.commit_log.mapped_file_queue.mapped_files) > 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(s.commit_log.mapped_file_queue.mapped_files) == 1
    finally:
        s.shutdown()
