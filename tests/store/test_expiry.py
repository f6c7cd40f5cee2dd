"""Expiry: fileReservedTime / deleteWhen / disk thresholds, never the file in use."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from store.config import MessageStoreConfig
from store.consumequeue import ConsumeQueue
from store.expiry import CleanService, disk_partition_space_used_percent, is_it_time_to_do
from store.indexfile import IndexService
from store.mapped_file import MappedFileQueue

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
    world.age([100, 100, 100, 100, 100])
    world.hour = 4
    world.svc.start()
    try:
        for _ in range(200):
            if world.names() == [4000]:
                break
            import time
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
