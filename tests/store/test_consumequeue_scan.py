"""The C-speed scans of consume-queue recovery (valid_unit_prefix, bisected truncation) find
exactly what RocketMQ's unit-by-unit loops find (ConsumeQueue.recover / truncateDirtyLogicFiles),
on arbitrary unit contents: valid runs, zero tails, negative sizes and offsets, garbage."""
from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqd.store.consumequeue import CQ_STORE_UNIT_SIZE, ConsumeQueue, valid_unit_prefix

_U = struct.Struct(">qiq")
UNITS = 12


def _loop_prefix(buf: bytes, units: int) -> int:
    n = 0
    for offset, size, _ in _U.iter_unpack(buf[:units * CQ_STORE_UNIT_SIZE]):
        if offset >= 0 and size > 0:
            n += 1
        else:
            break
    return n


def _loop_truncate(buf: bytes, phy: int) -> tuple[str, int, int]:
    """RocketMQ's loop over one last file: ('delete', 0, 0) or ('keep', wrote_position, max_phy)."""
    wrote = max_phy = 0
    for i, (offset, size, _) in enumerate(_U.iter_unpack(buf)):
        pos = i * CQ_STORE_UNIT_SIZE
        if i == 0:
            if offset >= phy:
                return "delete", 0, 0
        elif not (offset >= 0 and size > 0) or offset >= phy:
            return "keep", wrote, max_phy
        wrote, max_phy = pos + CQ_STORE_UNIT_SIZE, offset + size
    return "keep", wrote, max_phy


unit = st.one_of(
    st.tuples(st.integers(0, 10_000), st.integers(1, 500), st.integers(-5, 5)),  # valid
    st.just((0, 0, 0)),  # empty
    st.tuples(st.integers(-2**63, -1), st.integers(1, 500), st.integers(0, 5)),  # negative offset
    st.tuples(st.integers(0, 10_000), st.integers(-2**31, 0), st.integers(0, 5)),  # bad size
)


@settings(max_examples=300, deadline=None)
@given(units=st.lists(unit, min_size=UNITS, max_size=UNITS), ascending=st.booleans())
def test_valid_unit_prefix_equals_the_loop(units, ascending):
    if ascending:
        units = sorted(units)
    buf = b"".join(_U.pack(*u) for u in units)
    assert valid_unit_prefix(buf, UNITS) == _loop_prefix(buf, UNITS)
    assert valid_unit_prefix(memoryview(buf)[CQ_STORE_UNIT_SIZE:], UNITS - 1) == _loop_prefix(buf[20:], UNITS - 1)


@settings(max_examples=200, deadline=None)
@given(valid=st.lists(st.tuples(st.integers(1, 300), st.integers(1, 50)), min_size=0, max_size=UNITS),
       tail=st.lists(unit, max_size=3), phy=st.integers(0, 6000))
def test_truncate_dirty_logic_files_equals_the_loop(tmp_path_factory, valid, tail, phy):
    units, off = [], 0
    for gap, size in valid:  # valid units ascend by offset, as dispatch writes them
        off += gap
        units.append((off, size, 7))
        off += size
    units = (units + tail)[:UNITS]
    buf = b"".join(_U.pack(*u) for u in units).ljust(UNITS * CQ_STORE_UNIT_SIZE, b"\0")
    root = tmp_path_factory.mktemp("cq")
    cq = ConsumeQueue("T", 0, root, UNITS * CQ_STORE_UNIT_SIZE)
    cq.put_message_position_info(1, 1, 0, 0)  # creates the file; overwritten below
    mf = cq.files[-1]
    mf.mm[:] = buf
    cq.truncate_dirty_logic_files(phy)
    kind, wrote, max_phy = _loop_truncate(buf, phy)
    if kind == "delete":
        assert cq.files == []
    else:
        assert mf.wrote_position == wrote and cq.max_physic_offset == max_phy
        assert bytes(mf.mm[:wrote]) == buf[:wrote]


def test_consume_queue_and_commit_log_files_are_sparse(tmp_path):
    """RocketMQ's mapped files are sparse (RandomAccessFile.setLength; warmMapedFileEnable=false):
    rmqd's were fully allocated, so a topic of 1024 queues (BenchmarkTest) took ~6 GB of disk at
    once and every new store 1 GiB for its first commit-log file."""
    from rmqd.store.commitlog import MessageExtBrokerInner
    from rmqd.store.config import MessageStoreConfig
    from rmqd.store.message_store import DefaultMessageStore
    s = DefaultMessageStore(MessageStoreConfig(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=8 << 20))
    s.load()
    s.start()
    try:
        assert s.put_message(MessageExtBrokerInner("T", 0, b"x")).is_ok()
        assert s.wait_dispatched()
    finally:
        s.shutdown()
    cq = next((tmp_path / "consumequeue" / "T" / "0").iterdir())
    assert cq.stat().st_size == 300_000 * CQ_STORE_UNIT_SIZE and cq.stat().st_blocks * 512 < 1 << 20
    cl = next((tmp_path / "commitlog").iterdir())
    assert cl.stat().st_size == 8 << 20 and cl.stat().st_blocks * 512 < 1 << 20
