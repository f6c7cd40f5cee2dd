"""CommitLog append: layout vs. real RocketMQ records, queue offsets, roll, limits, delay, tx, batch."""
from __future__ import annotations

from pathlib import Path

import pytest

from store.commitlog import MessageExtBatch, MessageExtBrokerInner, PutMessageStatus
from store.config import MessageStoreConfig
from store.message_store import DefaultMessageStore
from wire.message import BLANK_MAGIC_CODE, decode_record, encode_batch, iter_records

FIXTURES = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures"
LOCALHOST = b"\x7f\x00\x00\x01"


@pytest.fixture
def store(tmp_path):
    s = DefaultMessageStore(MessageStoreConfig(storePathRootDir=str(tmp_path / "s"), mappedFileSizeCommitLog=64 * 1024,
                                               mappedFileSizeConsumeQueue=600, maxHashSlotNum=100, maxIndexNum=400,
                                               maxMessageSize=16 * 1024))
    s.load()
    s.start()
    yield s
    s.shutdown()


def _fixture_record(pos: int):
    buf = (FIXTURES / "rocketmq-4.9-store" / "store" / "commitlog" / "00000000000000000000").read_bytes()
    return decode_record(buf, pos)


def test_layout_matches_a_real_rocketmq_record(store):
    ref = _fixture_record(0)  # FixTopicA, 1-byte body, tags/keys/uniq/cluster
    msg = MessageExtBrokerInner(ref.topic, ref.queue_id, ref.body, dict(ref.properties), flag=ref.flag,
                                sys_flag=ref.sys_flag, born_timestamp=ref.born_timestamp, born_host=ref.born_ip,
                                born_port=ref.born_port, store_host=ref.store_ip, store_port=ref.store_port,
                                properties_string=ref.properties_raw.decode())
    r = store.put_message(msg)
    assert r.is_ok()
    mine = store.look_message_by_offset(r.appendMessageResult.wroteOffset)
    raw = bytes(store.select_one_message_by_offset(r.appendMessageResult.wroteOffset))
    assert len(raw) == ref.total_size == 193
    # only timestamps, hosts and offsets may differ: here only store time and physical offset do
    assert mine.store_timestamp > 0
    mine.store_timestamp = ref.store_timestamp
    mine.physical_offset = ref.physical_offset
    assert mine.encode() == ref.encode()
    assert r.appendMessageResult.msgId == mine.offset_msg_id


def test_queue_offsets_per_topic_queue_and_roll_with_blank(store):
    ends = []
    for i in range(200):
        r = store.put_message(MessageExtBrokerInner("T", i % 3, b"x" * 900, {"TAGS": "a"}))
        assert r.is_ok() and r.appendMessageResult.logicsOffset == i // 3
        ends.append(r.end_offset)
    files = store.commit_log.mapped_file_queue.mapped_files
    assert len(files) >= 3 and all(f.file_name == f"{f.file_from_offset:020d}" for f in files)
    first = files[0]
    items = list(iter_records(first.view()))
    pos, last = items[-1]
    assert last is None
    assert int.from_bytes(first.mm[pos:pos + 4], "big") == first.file_size - pos
    assert int.from_bytes(first.mm[pos + 4:pos + 8], "big") == BLANK_MAGIC_CODE
    assert files[1].file_from_offset == 64 * 1024
    assert store.wait_dispatched()
    assert [store.get_max_offset_in_queue("T", q) for q in range(3)] == [67, 67, 66]


def test_max_message_size_refused(store):
    r = store.put_message(MessageExtBrokerInner("T", 0, b"x" * (16 * 1024 + 1)))
    assert r.putMessageStatus is PutMessageStatus.MESSAGE_ILLEGAL and r.appendMessageResult is None
    r = store.put_message(MessageExtBrokerInner("T" * 128, 0, b"x"))
    assert r.putMessageStatus is PutMessageStatus.MESSAGE_ILLEGAL
    r = store.put_message(MessageExtBrokerInner("T", 0, b"x", {"big": "v" * 40000}))
    assert r.putMessageStatus is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
    assert store.get_max_phy_offset() == 0


def test_delay_goes_to_schedule_topic_with_delivery_time_tags_code(store):
    r = store.put_message(MessageExtBrokerInner("FixDelayTopic", 2, b"d", {"TAGS": "TagDelay", "DELAY": "3"}))
    assert r.is_ok()
    rec = store.look_message_by_offset(r.appendMessageResult.wroteOffset)
    assert rec.topic == "SCHEDULE_TOPIC_XXXX" and rec.queue_id == 2
    assert rec.properties["REAL_TOPIC"] == "FixDelayTopic" and rec.properties["REAL_QID"] == "2"
    assert store.wait_dispatched()
    unit = store.find_consume_queue("SCHEDULE_TOPIC_XXXX", 2).get_unit(0)
    assert unit[2] == rec.store_timestamp + 10_000  # level 3 = 10 s
    r = store.put_message(MessageExtBrokerInner("X", 0, b"d", {"DELAY": "99"}))
    assert store.look_message_by_offset(r.appendMessageResult.wroteOffset).queue_id == 17


def test_transaction_prepared_and_rollback_get_queue_offset_zero_and_no_cq_unit(store):
    for sysflag in (0x4, 0xC, 0x4):
        r = store.put_message(MessageExtBrokerInner("TxT", 1, b"t", {"UNIQ_KEY": "U1"}, sys_flag=sysflag))
        assert r.appendMessageResult.logicsOffset == 0
    r = store.put_message(MessageExtBrokerInner("TxT", 1, b"t", {}, sys_flag=0x8))
    assert r.appendMessageResult.logicsOffset == 0
    r = store.put_message(MessageExtBrokerInner("TxT", 1, b"t", {}, sys_flag=0x8))
    assert r.appendMessageResult.logicsOffset == 1
    assert store.wait_dispatched()
    assert store.get_max_offset_in_queue("TxT", 1) == 2


def test_batch_layout_matches_rocketmq(store):
    """Rebuild the fixture's real 5-message batch with rmqd: records equal field for field."""
    buf = (FIXTURES / "rocketmq-4.9-store" / "store" / "commitlog" / "00000000000000000000").read_bytes()
    suffix = b"\x02CLUSTER\x01FixtureCluster\x02WAIT\x01true"  # the batch's own properties
    real, pos = [], 0x233E7
    for _ in range(5):
        rec = decode_record(buf, pos)
        assert rec.topic == "FixBatchTopic" and rec.properties_raw.endswith(suffix)
        real.append(rec)
        pos += rec.total_size
    body = encode_batch([(r.flag, r.body, r.properties_raw[:-len(suffix)]) for r in real])
    r0 = real[0]
    r = store.put_messages(MessageExtBatch("FixBatchTopic", 2, body, {"CLUSTER": "FixtureCluster", "WAIT": "true"},
                                           born_timestamp=r0.born_timestamp, born_host=r0.born_ip,
                                           born_port=r0.born_port, store_host=r0.store_ip, store_port=r0.store_port))
    assert r.is_ok() and r.appendMessageResult.msgNum == 5 and r.appendMessageResult.logicsOffset == 0
    ids = r.appendMessageResult.msgId.split(",")
    pos = r.appendMessageResult.wroteOffset
    for i, ref in enumerate(real):
        mine = store.look_message_by_offset(pos)
        assert mine.offset_msg_id == ids[i] and mine.queue_offset == ref.queue_offset == i
        pos += mine.total_size
        mine.store_timestamp, mine.physical_offset = ref.store_timestamp, ref.physical_offset
        assert mine.encode() == ref.encode()
    assert r.appendMessageResult.wroteBytes == pos - r.appendMessageResult.wroteOffset


def test_wrong_size_file_is_reported_with_name(tmp_path):
    cfg = MessageStoreConfig(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=4096)
    (tmp_path / "commitlog").mkdir(parents=True)
    (tmp_path / "commitlog" / "00000000000000000000").write_bytes(b"\0" * 100)
    s = DefaultMessageStore(cfg)
    with pytest.raises(ValueError, match=r"commitlog/00000000000000000000:0: file size 100"):
        s.load()
    # the lock was released: a fixed store opens
    (tmp_path / "commitlog" / "00000000000000000000").unlink()
    s = DefaultMessageStore(cfg)
    s.load()
    s.shutdown()
