"""Many consume queues: recovery reads what 4.9.8 reads (the last three files of a queue, each
up to its first empty unit; a page for a queue of a few messages) without mapping a file or
keeping a descriptor; writes go through a bounded set of descriptors; files are mapped only
when read. Counted in bytes and calls, not timed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rmqd.store.commitlog import MessageExtBrokerInner
from rmqd.store.config import MessageStoreConfig
from rmqd.store.consumequeue import CQ_STORE_UNIT_SIZE, ConsumeQueue, read_valid_units
from rmqd.store.mapped_file import FileHandles, LazyMappedFile, MappedFile
from rmqd.store.message_store import DefaultMessageStore

PAGE = 4096


def _store(root: Path, cq_units: int = 300_000) -> DefaultMessageStore:
    s = DefaultMessageStore(MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=8 << 20,
                                               mappedFileSizeConsumeQueue=cq_units * CQ_STORE_UNIT_SIZE))
    s.load()
    s.start()
    return s


def _put(s: DefaultMessageStore, topic: str, queue_id: int, n: int) -> None:
    for i in range(n):
        r = s.put_message(MessageExtBrokerInner(topic, queue_id, b"x" * 50, {"TAGS": "t"}))
        assert r.is_ok(), r


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, int]]:
    """(file, position, bytes asked) of every read of a consume-queue file not mapped."""
    seen: list[tuple[str, int, int]] = []
    real = MappedFile.read

    def counting(self: MappedFile, pos: int, n: int) -> bytes:
        if "consumequeue" in self.path and not self.is_mapped:
            seen.append((self.path, pos, n))
        return real(self, pos, n)

    monkeypatch.setattr(MappedFile, "read", counting)
    return seen


@pytest.mark.parametrize("crash", [False, True], ids=["clean", "after-kill"])
def test_restart_reads_a_page_per_small_queue_and_maps_nothing(tmp_path: Path, reads, crash: bool) -> None:
    s = _store(tmp_path)
    queues = [(f"T{t}", q) for t in range(25) for q in range(8)]
    for topic, q in queues:
        _put(s, topic, q, 3)
    assert s.wait_dispatched(timeout_s=30)
    assert s.cq_handles.open_count == len(queues)  # under the limit: every written queue keeps one
    if crash:
        s._flush_logics(0)
        s.commit_log.mapped_file_queue.flush(0)
        (tmp_path / "abort").write_bytes(b"")  # as a killed broker leaves it
        s.shutdown_flag = True  # skip the clean shutdown's work ...
        s.reput_service.shutdown()
        s.flush_service.shutdown()
        s._stop.set()
        s.clean_service.shutdown()
        s.index_service.shutdown()
        s.cq_handles.close_all()
        s._release_lock()
    else:
        s.shutdown()
    reads.clear()

    again = DefaultMessageStore(MessageStoreConfig(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=8 << 20))
    again.load()
    try:
        assert again.last_exit_ok is (not crash)
        files = [mf for cq in again._all_cqs() for mf in cq.files]
        assert len(files) == len(queues)
        assert not any(mf.is_mapped for mf in files)  # recovery mapped nothing
        assert again.cq_handles.open_count == 0 and again.cq_handles.opened == 0
        pages: dict[str, set[int]] = {}
        for path, pos, n in reads:
            pages.setdefault(path, set()).update(range(pos // PAGE, (pos + n - 1) // PAGE + 1))
        # recover, truncateDirtyLogicFiles and correctMinOffset each read the first page's
        # units (what 4.9's unit-by-unit scans touch): one page of each file, no other
        assert pages == {mf.path: {0} for mf in files}
        assert len(reads) <= 6 * len(files)
        for topic, q in queues:
            assert again.get_max_offset_in_queue(topic, q) == 3
        again.start()
        r = again.get_message("g", "T3", 5, 0, 32)
        assert r.msg_count == 3  # a pull maps the file it reads, and only that one
        assert [mf.is_mapped for cq in again._all_cqs() for mf in cq.files].count(True) == 1
        _put(again, "T3", 5, 1)
        assert again.wait_dispatched(timeout_s=30)
        assert again.get_max_offset_in_queue("T3", 5) == 4 and again.cq_handles.open_count == 1
    finally:
        again.shutdown()


def test_recovery_reads_only_the_last_three_files_of_a_long_queue(tmp_path: Path, reads) -> None:
    units = 1000  # 20,000-byte files (5 pages): 7 files for 6,500 units, the last one half full
    s = _store(tmp_path, cq_units=units)
    _put(s, "Long", 0, 6500)
    assert s.wait_dispatched(timeout_s=60)
    s.shutdown()
    reads.clear()
    again = DefaultMessageStore(MessageStoreConfig(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=8 << 20,
                                                   mappedFileSizeConsumeQueue=units * CQ_STORE_UNIT_SIZE))
    again.load()
    try:
        cq = again.find_consume_queue("Long", 0)
        names = [mf.file_name for mf in cq.files]
        assert len(names) == 7

        def pages(name: str) -> set[int]:
            return {pg for p, pos, n in reads if os.path.basename(p) == name
                    for pg in range(pos // PAGE, (pos + n - 1) // PAGE + 1)}

        assert {os.path.basename(p) for p, _, _ in reads} == {names[0], *names[-3:]}
        assert pages(names[0]) == {0}  # correctMinOffset: the first units of the first file
        assert pages(names[-3]) == pages(names[-2]) == set(range(5))  # full files: read whole, as 4.9
        assert pages(names[-1]) == {0, 1, 2}  # 500 units = 10,000 bytes: up to the first empty unit
        assert not any(mf.is_mapped for mf in cq.files)
        assert cq.get_max_offset_in_queue() == 6500 and cq.get_min_offset_in_queue() == 0
    finally:
        again.shutdown()


def test_read_valid_units_stops_at_the_first_empty_unit_and_the_first_hole(tmp_path: Path) -> None:
    handles = FileHandles()
    cq = ConsumeQueue("T", 0, tmp_path, 300_000 * CQ_STORE_UNIT_SIZE, handles)
    for i in range(500):  # 10,000 bytes: three pages
        assert cq.put_message_position_info(1000 + i * 10, 10, 0, i)
    mf = cq.files[0]
    assert isinstance(mf, LazyMappedFile) and not mf.is_mapped
    asked: list[tuple[int, int]] = []
    real = mf.read.__func__

    class Spy(LazyMappedFile):
        __slots__ = ()

        def read(self, pos: int, n: int) -> bytes:
            asked.append((pos, n))
            return real(self, pos, n)

    mf.__class__ = Spy
    valid, last = read_valid_units(mf, keep=False)
    assert valid == 500 and last == (1000 + 499 * 10).to_bytes(8, "big") + (10).to_bytes(4, "big") + bytes(8)
    assert sum(n for _, n in asked) <= 3 * PAGE  # the file's data; never the 5.7 MiB of it
    valid, data = read_valid_units(mf, keep=True, first_unit=7)
    assert valid == 493 and len(data) == 493 * CQ_STORE_UNIT_SIZE
    assert not mf.is_mapped
    cq.close()
    handles.close_all()


def test_write_descriptors_are_bounded_and_reopened(tmp_path: Path) -> None:
    handles = FileHandles(limit=3)
    cqs = [ConsumeQueue(f"T{i}", 0, tmp_path, 1000 * CQ_STORE_UNIT_SIZE, handles) for i in range(10)]
    for round_ in range(3):
        for cq in cqs:
            assert cq.put_message_position_info(100 + round_, 1, 0, round_)
            assert handles.open_count <= 3
    assert handles.opened == 30  # every write found its file's descriptor closed by the others
    for i, cq in enumerate(cqs):
        assert [u.commit_log_offset for u in cq.iter_units()] == [100, 101, 102]
        cq.close()
    assert handles.open_count == 0
    fd_dir = Path("/proc/self/fd")
    if fd_dir.is_dir():
        left = [os.readlink(p) for p in fd_dir.iterdir() if _readable(p) and str(tmp_path) in os.readlink(p)]
        assert left == []


def _readable(p: Path) -> bool:
    try:
        os.readlink(p)
        return True
    except OSError:
        return False


def test_the_flush_thread_visits_only_queues_written_since_their_last_flush(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    s = _store(tmp_path)
    try:
        for t in range(40):
            _put(s, f"F{t}", t % 8, 1)
        assert s.wait_dispatched(timeout_s=30)
        s._flush_logics(0)
        assert s._cq_dirty == set()
        visited: list[str] = []
        real = ConsumeQueue.flush

        def counting(self: ConsumeQueue, least_pages: int = 0) -> bool:
            visited.append(self.topic)
            return real(self, least_pages)

        monkeypatch.setattr(ConsumeQueue, "flush", counting)
        s._flush_logics(2)  # an idle second: nothing to visit
        assert visited == []
        _put(s, "F3", 3, 1)
        _put(s, "F7", 7, 2)
        assert s.wait_dispatched(timeout_s=30)
        s._flush_logics(2)  # under two dirty pages: not even visited, still to flush
        assert visited == [] and {cq.topic for cq in s._cq_dirty} == {"F3", "F7"}
        s._flush_logics(0)  # thorough: flushed, forgotten
        assert sorted(visited) == ["F3", "F7"] and s._cq_dirty == set()
        assert not any(cq.has_unflushed() for cq in s._all_cqs())
    finally:
        s.shutdown()
