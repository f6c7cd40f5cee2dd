"""The batched dispatch paths (consume-queue runs packed into the mmap, index batches with
one header write, field-subset record heads) write exactly what the one-record paths write."""
from __future__ import annotations

import struct
import threading
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqd.store.commitlog import MessageExtBrokerInner
from rmqd.store.config import MessageStoreConfig
from rmqd.store.consumequeue import ConsumeQueue
from rmqd.store.flush import FlushService
from rmqd.store.indexfile import IndexService
from rmqd.store.mapped_file import MappedFile, MappedFileQueue, sync_file
from rmqd.store.message_store import DefaultMessageStore
from rmqd.wire.javamap import java_string_hash, java_string_hash_from
from rmqd.wire.message import RECORD_FIELDS, MessageSysFlag, encode_record, record_head_reader, record_head_struct

# units as the dispatcher produces them: (size, gap before it, replayed?)
UNITS = st.lists(st.tuples(st.integers(1, 500), st.sampled_from([0, 0, 0, 1]), st.booleans()), max_size=60)


def _plan(spec, first_queue_offset):
    units, phy, qoff = [], 1000, first_queue_offset
    for size, gap, replay in spec:
        qoff += gap  # a gap in queue offsets takes the careful path (RocketMQ logs it and appends)
        units.append((phy, size, size * 7, qoff))
        if replay and units:
            units.append(units[-1])  # re-dispatch of the same record: skipped
        phy += size
        qoff += 1
    return units


@settings(max_examples=60, deadline=None)
@given(spec=UNITS, first=st.sampled_from([0, 3, 10, 11]), chunk=st.integers(1, 7))
def test_put_units_writes_what_unit_by_unit_writes(tmp_path_factory, spec, first, chunk) -> None:
    root = tmp_path_factory.mktemp("cq")
    one = ConsumeQueue("T", 0, root / "one", 10 * 20)
    many = ConsumeQueue("T", 0, root / "many", 10 * 20)
    units = _plan(spec, first)
    for u in units:
        one.put_message_position_info(*u)
    for i in range(0, len(units), chunk):
        many.put_units(units[i:i + chunk])
    assert [f.file_name for f in one.files] == [f.file_name for f in many.files]
    for a, b in zip(one.files, many.files):
        assert a.wrote_position == b.wrote_position and bytes(a.mm) == bytes(b.mm)
    assert (one.max_physic_offset, one.min_logic_offset) == (many.max_physic_offset, many.min_logic_offset)


KEYS = st.lists(st.tuples(st.text("abcé😀 #", max_size=6), st.one_of(st.none(), st.text("0123456789ABCDEF", min_size=1,
                                                                                     max_size=32)),
                          st.sampled_from([0, 0, MessageSysFlag.TRANSACTION_ROLLBACK_TYPE])), max_size=40)


@settings(max_examples=40, deadline=None)
@given(records=KEYS, chunk=st.integers(1, 9))
def test_index_batches_write_what_single_builds_write(tmp_path_factory, records, chunk) -> None:
    root = tmp_path_factory.mktemp("idx")
    clock = iter(range(1_700_000_000_000, 1_700_000_000_000 + 10**6, 1000))
    names = [next(clock) for _ in range(200)]
    one = IndexService(root / "one", 7, 9, clock_ms=iter(names).__next__)
    many = IndexService(root / "many", 7, 9, clock_ms=iter(names).__next__)
    reqs = [("Tp", 0, 100 + i * 10, 10, 0, 1_700_000_000_000 + i * 1500, i, keys, uniq, flag)
            for i, (keys, uniq, flag) in enumerate(records)]
    for r in reqs:
        one.build_index(r[0], r[2], r[5], r[7], r[8], r[9])
    for i in range(0, len(reqs), chunk):
        many.build_index_batch(reqs[i:i + chunk])
    one.shutdown()
    many.shutdown()
    a = sorted((root / "one").iterdir()) if (root / "one").exists() else []
    b = sorted((root / "many").iterdir()) if (root / "many").exists() else []
    assert [p.name for p in a] == [p.name for p in b]
    for x, y in zip(a, b):
        assert x.read_bytes() == y.read_bytes()


@given(prefix=st.text(max_size=20), s=st.text(max_size=40))
def test_hash_from_prefix_equals_hash_of_concatenation(prefix, s) -> None:
    assert java_string_hash_from(java_string_hash(prefix), s) == java_string_hash(prefix + s)


@given(sys_flag=st.sampled_from([0, MessageSysFlag.BORNHOST_V6_FLAG, MessageSysFlag.STOREHOSTADDRESS_V6_FLAG,
                                 MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG]),
       names=st.sets(st.sampled_from([f[0] for f in RECORD_FIELDS]), min_size=1))
def test_head_reader_reads_the_same_fields_as_the_full_head(sys_flag, names) -> None:
    born = b"\x01" * (16 if sys_flag & MessageSysFlag.BORNHOST_V6_FLAG else 4)
    store = b"\x02" * (16 if sys_flag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG else 4)
    rec = encode_record(queue_id=3, flag=4, queue_offset=5, physical_offset=6, sys_flag=sys_flag, born_timestamp=7,
                        born_ip=born, born_port=8, store_timestamp=9, store_ip=store, store_port=10,
                        reconsume_times=11, prepared_transaction_offset=12, body=b"body", topic="T", properties={})
    full = dict(zip([f[0] for f in RECORD_FIELDS], record_head_struct(sys_flag).unpack_from(rec)))
    picked = record_head_reader(tuple(names))[sys_flag & 0x30].unpack_from(rec)
    assert list(picked) == [full[f[0]] for f in RECORD_FIELDS if f[0] in names]


def test_dispatch_info_matches_check_message(tmp_path: Path) -> None:
    with DefaultMessageStore(MessageStoreConfig(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=1 << 20)) as s:
        r = s.put_message(MessageExtBrokerInner("T", 2, b"hello", {"TAGS": "a", "KEYS": "k1 k2", "UNIQ_KEY": "U1"}))
        view = s.select_one_message_by_offset(r.appendMessageResult.wroteOffset)
        info = s.commit_log.dispatch_info(view, 0, True)
        req = s.commit_log.check_message_and_return_size(view, 0, True)
        assert req.success and info == (req.topic, req.queue_id, req.commit_log_offset, req.msg_size, req.tags_code,
                                        req.store_timestamp, req.consume_queue_offset, req.keys, req.uniq_key,
                                        req.sys_flag, req.prepared_transaction_offset, req.properties)
        assert info[:4] == ("T", 2, r.appendMessageResult.wroteOffset, r.appendMessageResult.wroteBytes)
        bad = bytearray(view)
        bad[-10] ^= 0xFF  # inside the properties: the body CRC still holds, the layout too
        assert s.commit_log.dispatch_info(bytes(bad), 0, True) != -1
        bad[struct.calcsize(">iIiiiqqiq4si q4sii q i")] ^= 0xFF  # first body byte: CRC mismatch
        assert s.commit_log.dispatch_info(bytes(bad), 0, True) == -1
        assert s.commit_log.dispatch_info(bytes(bad), 0, False) != -1
        view.release()


def test_sync_file_of_a_deleted_file_reports_failure(tmp_path: Path) -> None:
    assert not sync_file(str(tmp_path / "gone"))
    p = tmp_path / "here"
    p.write_bytes(b"x")
    assert sync_file(str(p))


def test_blocking_flush_waiters_share_group_commits_and_time_out(tmp_path: Path) -> None:
    cfg = MessageStoreConfig(storePathRootDir=str(tmp_path), flushDiskType="SYNC_FLUSH",
                             mappedFileSizeCommitLog=1 << 20)
    with DefaultMessageStore(cfg) as s:
        results = []

        def writer(i: int) -> None:
            for j in range(20):
                r = s.put_message(MessageExtBrokerInner("T", i, b"x" * 100))
                results.append(s.wait_for_flush(r.end_offset))

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert results == [True] * 160
        assert s.commit_log.mapped_file_queue.flushed_where == s.get_max_phy_offset()
        assert s.flush_service.flush_count <= 160  # no more fsyncs than messages: groups shared
    # a flush service that never runs: the waiter gets False at its deadline, not a hang
    mfq = MappedFileQueue(tmp_path / "cl2", 1 << 20)
    mf = mfq.get_last_mapped_file(0)
    mf.append_message(b"y" * 10)
    fs = FlushService(mfq, cfg)
    fs._thread = threading.Thread()  # "started" but not flushing
    t = time.monotonic()
    assert fs.wait_for_flush(10, timeout_ms=50) is False
    assert time.monotonic() - t < 2
    mfq.shutdown()


def test_reput_polls_under_load_and_sleeps_when_idle(tmp_path: Path) -> None:
    """ReputMessageService: while appends keep coming the thread polls every ms and handles
    them in batches (appends do not wake it); once idle it sleeps until an append wakes it,
    and that append is dispatched (and its arrival listener called) without waiting a poll."""
    with DefaultMessageStore(MessageStoreConfig(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=1 << 22)) as s:
        reput = s.reput_service
        rounds = []
        real = reput._reput  # every round, the thread's or a waiter's (wait_dispatched helps)

        def counting(max_records: int | None) -> int:
            n = real(max_records)
            if n:
                rounds.append(n)
            return n

        reput._reput = counting
        arrived = threading.Event()
        s.add_arrival_listener(lambda topic, *_: topic == "W" and arrived.set())
        for i in range(2000):
            s.put_message(MessageExtBrokerInner("B", i & 3, b"x" * 64))
        assert s.wait_dispatched(timeout_s=10)
        assert sum(rounds) == 2000 and len(rounds) < 1000  # batches, not a round per append
        deadline = time.monotonic() + 5
        while not reput._sleeping and time.monotonic() < deadline:
            time.sleep(0.005)
        assert reput._sleeping  # idle: waiting for a wake-up, not polling
        sets = []
        wake_set = reput._wake.set
        reput._wake.set = lambda: (sets.append(1), wake_set())
        s.put_message(MessageExtBrokerInner("W", 0, b"late"))
        assert sets  # the append woke the sleeping thread (not its 50 ms safety timeout)
        assert arrived.wait(5) and s.wait_dispatched(timeout_s=5)
        assert s.get_max_offset_in_queue("W", 0) == 1
