"""DefaultMessageStore facade: getMessage statuses and offsets, tag filter, flush listeners,
lock/abort files, reads by time/key/offset."""
from __future__ import annotations

import struct
import threading
import time

import pytest

from rmqd.store.commitlog import MessageExtBrokerInner, PutMessageStatus
from rmqd.store.config import MessageStoreConfig
from rmqd.store.message_store import DefaultMessageStore, GetMessageStatus, StoreLockError, TagsMessageFilter
from rmqd.wire.message import MAGIC_CODE_V2, decode_messages, encode_record, java_string_hash


def _cfg(root, **kw):
    return MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=64 * 1024,
                              mappedFileSizeConsumeQueue=6000, maxHashSlotNum=100, maxIndexNum=400, **kw)


@pytest.fixture
def store(tmp_path):
    s = DefaultMessageStore(_cfg(tmp_path / "s"))
    s.load()
    s.start()
    yield s
    s.shutdown()


def _put(s, n, topic="T", qid=0, tags=("A", "B")):
    out = []
    for i in range(n):
        r = s.put_message(MessageExtBrokerInner(topic, qid, f"m{i}".encode(), {"TAGS": tags[i % len(tags)],
                                                                               "KEYS": f"key{i}"}))
        assert r.is_ok()
        out.append(r)
    assert s.wait_dispatched()
    return out


def test_get_message_statuses_and_next_begin_offset(store):
    r = store.get_message("g", "T", 0, 7, 32)  # unknown queue: created empty, as RocketMQ does
    assert r.status is GetMessageStatus.NO_MESSAGE_IN_QUEUE and r.next_begin_offset == 0
    _put(store, 50)
    r = store.get_message("g", "T", 0, 0, 32)
    assert r.status is GetMessageStatus.FOUND and r.msg_count == 32 and r.next_begin_offset == 32
    assert (r.min_offset, r.max_offset) == (0, 50)
    assert [m.body for m in decode_messages(b"".join(bytes(b) for b in r.message_buffers))][:2] == [b"m0", b"m1"]
    r = store.get_message("g", "T", 0, 40, 32)
    assert r.status is GetMessageStatus.FOUND and r.msg_count == 10 and r.next_begin_offset == 50
    r = store.get_message("g", "T", 0, 50, 32)
    assert r.status is GetMessageStatus.OFFSET_OVERFLOW_ONE and r.next_begin_offset == 50
    r = store.get_message("g", "T", 0, 77, 32)
    assert r.status is GetMessageStatus.OFFSET_OVERFLOW_BADLY and r.next_begin_offset == 50
    store.find_consume_queue("Empty", 0)
    r = store.get_message("g", "Empty", 0, 5, 32)
    assert r.status is GetMessageStatus.NO_MESSAGE_IN_QUEUE and r.next_begin_offset == 0


def test_offset_too_small_after_min_offset_moves(store):
    _put(store, 30)
    cq = store.find_consume_queue("T", 0)
    cq.min_logic_offset = 10 * 20
    r = store.get_message("g", "T", 0, 3, 32)
    assert r.status is GetMessageStatus.OFFSET_TOO_SMALL and r.next_begin_offset == 10


def test_tag_filter_and_no_matched_message(store):
    _put(store, 20)
    flt = TagsMessageFilter({java_string_hash("B")})
    r = store.get_message("g", "T", 0, 0, 32, flt)
    assert r.status is GetMessageStatus.FOUND and r.msg_count == 10
    assert all(m.tags == "B" for m in decode_messages(b"".join(bytes(b) for b in r.message_buffers)))
    assert r.next_begin_offset == 20
    r = store.get_message("g", "T", 0, 0, 32, TagsMessageFilter({java_string_hash("Z")}))
    assert r.status is GetMessageStatus.NO_MATCHED_MESSAGE and r.msg_count == 0 and r.next_begin_offset == 20


def test_max_transfer_bytes_in_memory(tmp_path):
    s = DefaultMessageStore(_cfg(tmp_path / "s", maxTransferBytesOnMessageInMemory=1000))
    s.load(); s.start()
    try:
        _put(s, 20)
        r = s.get_message("g", "T", 0, 0, 32)
        assert r.status is GetMessageStatus.FOUND and 1 <= r.msg_count < 20
        assert r.buffer_total_size <= 1000 and r.next_begin_offset == r.msg_count
    finally:
        s.shutdown()


def test_reads_by_time_key_and_offset(store):
    rs = _put(store, 10)
    ts = [x.appendMessageResult.storeTimestamp for x in rs]
    assert store.get_earliest_message_time("T", 0) == ts[0]
    assert store.get_message_store_timestamp("T", 0, 5) == ts[5]
    # 4.9.8's binary search stops at any unit stored in that millisecond (several may share it)
    at = store.get_offset_in_queue_by_time("T", 0, ts[5])
    assert ts[at] == ts[5]
    assert store.get_offset_in_queue_by_time("T", 0, ts[0] - 10_000) == 0
    assert store.get_commit_log_offset_in_queue("T", 0, 3) == rs[3].appendMessageResult.wroteOffset
    q = store.query_message("T", "key7", 32, 0, 2**62)
    assert [m.body for m in decode_messages(b"".join(bytes(v) for v in q.message_buffers))] == [b"m7"]
    rec = store.look_message_by_offset(rs[2].appendMessageResult.wroteOffset)
    assert rec.body == b"m2" and rec.offset_msg_id == rs[2].appendMessageResult.msgId


def test_arrival_listener_gets_max_offset(store):
    seen = []
    store.add_arrival_listener(lambda *a: seen.append(a))
    _put(store, 3, topic="L", qid=2)
    assert [(t, q, off) for t, q, off, *_ in seen] == [("L", 2, 1), ("L", 2, 2), ("L", 2, 3)]


def test_arrival_listener_with_topics_hears_only_those_topics(store):
    """POP's long polling registers with its waiters table: records of other topics never
    reach it, and a topic added to the (live) table later is heard from then on."""
    waiting: dict[str, set] = {"A": set()}
    seen = []
    store.add_arrival_listener(lambda topic, qid, off, *_: seen.append((topic, off)), waiting)
    _put(store, 2, topic="A", qid=0)
    _put(store, 2, topic="B", qid=0)
    store.wait_dispatched()
    assert seen == [("A", 1), ("A", 2)]
    waiting["B"] = set()
    _put(store, 1, topic="B", qid=0)
    store.wait_dispatched()
    assert seen[-1] == ("B", 3)


def test_sync_flush_group_commit_listeners(tmp_path):
    s = DefaultMessageStore(_cfg(tmp_path / "s", flushDiskType="SYNC_FLUSH"))
    s.load(); s.start()
    try:
        results = []
        done = threading.Event()

        def writer():
            for i in range(20):
                r = s.put_message(MessageExtBrokerInner("S", 0, b"x" * 100))
                results.append(s.wait_for_flush(r.end_offset, 2000))
        th = [threading.Thread(target=writer) for _ in range(8)]
        for t in th:
            t.start()
        for t in th:
            t.join()
        assert results == [True] * 160
        assert s.commit_log.mapped_file_queue.flushed_where >= s.get_max_phy_offset() - 100 * 0
        r = s.put_message(MessageExtBrokerInner("S", 0, b"y"))
        s.add_flush_listener(r.end_offset, lambda ok: (results.append(ok), done.set()))
        assert done.wait(5) and results[-1] is True
        assert s.flush_service.flush_count < 160  # senders shared fsyncs
    finally:
        s.shutdown()


def test_lock_abort_and_clean_restart(tmp_path):
    root = tmp_path / "s"
    s = DefaultMessageStore(_cfg(root))
    s.load(); s.start()
    assert (root / "abort").exists() and (root / "lock").read_bytes() == b"lock"
    other = DefaultMessageStore(_cfg(root))
    with pytest.raises(StoreLockError, match="lock"):
        other.load()
    _put(s, 5)
    s.shutdown()
    assert not (root / "abort").exists()
    assert (root / "checkpoint").stat().st_size == 4096
    s = DefaultMessageStore(_cfg(root))
    s.load(); s.start()
    try:
        assert not s.recovery_report.abnormal and s.get_max_offset_in_queue("T", 0) == 5
        r = s.put_message(MessageExtBrokerInner("T", 0, b"next"))
        assert r.appendMessageResult.logicsOffset == 5
    finally:
        s.shutdown()


def test_slave_and_shutdown_refuse_writes(tmp_path):
    s = DefaultMessageStore(_cfg(tmp_path / "s", brokerRole="SLAVE"))
    s.load(); s.start()
    assert s.put_message(MessageExtBrokerInner("T", 0, b"x")).putMessageStatus is PutMessageStatus.SERVICE_NOT_AVAILABLE
    s.shutdown()
    assert s.get_message("g", "T", 0, 0, 1) is None


def test_torn_tail_is_truncated_on_crash_recovery(tmp_path):
    root = tmp_path / "s"
    s = DefaultMessageStore(_cfg(root))
    s.load(); s.start()
    _put(s, 5)
    end = s.get_max_phy_offset()
    mf = s.commit_log.mapped_file_queue.get_last_mapped_file()
    s.shutdown()
    # simulate a half-written record after the last one, and a crash (abort left behind)
    with open(root / "commitlog" / mf.file_name, "r+b") as f:
        f.seek(end)
        f.write((200).to_bytes(4, "big") + bytes.fromhex("DAA320A7") + b"\x01" * 50)
    (root / "abort").touch()
    s = DefaultMessageStore(_cfg(root))
    s.load(); s.start()
    try:
        assert s.recovery_report.abnormal and s.recovery_report.process_offset == end
        assert s.recovery_report.truncated_bytes >= 58
        assert s.get_max_phy_offset() == end and s.get_max_offset_in_queue("T", 0) == 5
        r = s.put_message(MessageExtBrokerInner("T", 0, b"new"))
        assert r.appendMessageResult.wroteOffset == end
    finally:
        s.shutdown()


def test_corrupt_record_is_reported_with_file_and_position_and_never_served(tmp_path, caplog):
    root = tmp_path / "s"
    s = DefaultMessageStore(_cfg(root))
    s.load(); s.start()
    rs = _put(s, 6)
    s.shutdown()
    bad = rs[3].appendMessageResult.wroteOffset
    with open(root / "commitlog" / "00000000000000000000", "r+b") as f:
        f.seek(bad + 88)  # first body byte (IPv4 header is 88 bytes): CRC mismatch
        f.write(b"\xff")
    s = DefaultMessageStore(_cfg(root))
    with caplog.at_level("WARNING", logger="rmqd.store.recovery"):
        s.load()
    s.start()
    try:
        rep = s.recovery_report
        assert rep.process_offset == bad
        assert f"00000000000000000000 at file position {bad}" in rep.stop_reason
        assert f"00000000000000000000 at file position {bad}" in caplog.text
        assert s.get_max_offset_in_queue("T", 0) == 3  # the bad record and what follows are not served
        assert s.get_message("g", "T", 0, 3, 1).status is GetMessageStatus.OFFSET_OVERFLOW_ONE
    finally:
        s.shutdown()


def test_checkpoint_and_async_flush(tmp_path):
    from rmqd.store.checkpoint import StoreCheckpoint
    root = tmp_path / "s"
    s = DefaultMessageStore(_cfg(root, flushIntervalCommitLog=20, flushCommitLogThoroughInterval=50))
    s.load(); s.start()
    rs = _put(s, 3)
    done = threading.Event()
    s.add_flush_listener(rs[-1].end_offset, lambda ok: ok and done.set())
    assert done.wait(5)  # ASYNC_FLUSH still reports durability once a thorough flush covered it
    s.shutdown()
    cp = StoreCheckpoint(root / "checkpoint")
    # the last append's time, or later: a quiet point once everything was flushed / dispatched
    last = rs[-1].appendMessageResult.storeTimestamp
    assert last <= cp.physicMsgTimestamp <= time.time() * 1000
    assert last <= cp.logicsMsgTimestamp <= time.time() * 1000
    assert cp.get_min_timestamp() == min(cp.physicMsgTimestamp, cp.logicsMsgTimestamp) - 3000
    cp.shutdown()
    assert (root / "checkpoint").stat().st_size == 4096


def test_config_defaults_and_broker_conf_mapping():
    c = MessageStoreConfig(storePathRootDir="/r")
    assert (c.mappedFileSizeCommitLog, c.mappedFileSizeConsumeQueue, c.maxHashSlotNum, c.maxIndexNum) == (
        1 << 30, 6_000_000, 5_000_000, 20_000_000)
    assert (c.flushDiskType, c.brokerRole, c.maxMessageSize, c.fileReservedTime, c.deleteWhen) == (
        "ASYNC_FLUSH", "ASYNC_MASTER", 4 << 20, 72, "04")
    assert c.get_store_path_commit_log() == "/r/commitlog" and c.get_abort_file() == "/r/abort"
    assert c.delay_levels_ms()[:4] == [1000, 5000, 10000, 30000] and c.max_delay_level == 18
    unknown = c.update({"mappedFileSizeConsumeQueue": "6001", "flushDiskType": "SYNC_FLUSH",
                        "messageIndexEnable": "false", "brokerName": "b"})
    assert unknown == ["brokerName"] and c.is_sync_flush and c.messageIndexEnable is False
    assert c.get_mapped_file_size_consume_queue() == 6020  # rounded up to whole units, as RocketMQ
    with pytest.raises(ValueError, match="maxMessageSize"):
        c.update({"maxMessageSize": "big"})


def test_small_queries(store):
    rs = _put(store, 4, topic="Q", qid=1)
    assert store.get_message_total_in_queue("Q", 1) == 4 and store.get_message_total_in_queue("Q", 9) == 0
    assert store.get_earliest_message_time_of_store() == rs[0].appendMessageResult.storeTimestamp
    assert store.check_in_disk_by_consume_offset("Q", 1, 0) is False
    assert "Q" in store.get_topics()
    assert store.delete_topics({"Q"}) == 1
    assert store.get_max_offset_in_queue("Q", 1) == 0 and "Q" not in store.get_topics()



def test_v2_magic_records_are_walked_like_v1(store):
    """5.x writes topics over 127 bytes (POP retry topics reach 255) with the v2 magic and a
    2-byte topic length; recovery and dispatch of such a store must walk those records too
    (4.9.x itself refuses to write them: MESSAGE_ILLEGAL)."""
    topic = "%RETRY%" + "g" * 200
    rec = encode_record(queue_id=1, flag=0, queue_offset=7, physical_offset=0, sys_flag=0,
                        born_timestamp=1, born_ip=b"\x7f\0\0\1", born_port=1, store_timestamp=2,
                        store_ip=b"\x7f\0\0\1", store_port=10911, reconsume_times=0,
                        prepared_transaction_offset=0, body=b"body", topic=topic,
                        properties={"TAGS": "A", "KEYS": "k1"})
    assert struct.unpack_from(">I", rec, 4)[0] == MAGIC_CODE_V2
    buf = rec + bytes(8)
    assert store.commit_log.validate_record(buf, 0) == len(rec)
    info = store.commit_log.dispatch_info(buf, 0)
    assert isinstance(info, tuple) and topic in info and 7 in info
    assert store.commit_log.dispatch_info(bytes(4) + rec[4:] + bytes(8), 0) == -1  # bad size
    assert store.put_message(MessageExtBrokerInner(topic, 0, b"x")).putMessageStatus.name == "MESSAGE_ILLEGAL"


def test_delete_topic_waits_for_dispatch_of_earlier_sends(tmp_path):
    """A send that took queue offsets before DELETE_TOPIC_IN_BROKER must be dispatched into the
    queue that is deleted, never into the new one after it (found by the live fuzzer: a unit
    pointing at a record with another queue offset)."""
    from rmqd.store.errors import StoreBusyError
    from rmqd.store.tools import verify

    cfg = _cfg(tmp_path / "s")
    s = DefaultMessageStore(cfg)
    s.load()
    s.start()
    try:
        s.reput_service.suspend()   # dispatch lags behind the sends, as under load
        for i in range(5):
            assert s.put_message(MessageExtBrokerInner("Q", 0, f"old{i}".encode(), {})).is_ok()
        with pytest.raises(StoreBusyError, match="not deleted"):
            s.delete_topics({"Q"}, dispatch_timeout_s=0.2)
        assert s.commit_log.topic_queue_table["Q-0"] == 5   # nothing changed
        threading.Timer(0.3, s.reput_service.resume).start()
        assert s.delete_topics({"Q"}) == 1                   # waited for the five to be dispatched
        for i in range(3):
            r = s.put_message(MessageExtBrokerInner("Q", 0, f"new{i}".encode(), {}))
            assert r.is_ok() and r.appendMessageResult.logicsOffset == i
        assert s.wait_dispatched()
        got = s.get_message("g", "Q", 0, 0, 32)
        assert got.status is GetMessageStatus.FOUND and (got.min_offset, got.max_offset) == (0, 3)
        msgs = decode_messages(b"".join(bytes(b) for b in got.message_buffers))
        assert [(m.body, m.queue_offset) for m in msgs] == [(f"new{i}".encode(), i) for i in range(3)]
    finally:
        s.shutdown()
    assert verify(cfg.storePathRootDir, cfg) == []
