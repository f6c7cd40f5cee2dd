"""CommitLog append: layout vs. real RocketMQ records, queue offsets, roll, limits, delay, tx, batch."""
from __future__ import annotations

from pathlib import Path

import pytest

from fixtures import CLEAN, facts, require
from rmqd.store.commitlog import MessageExtBatch, MessageExtBrokerInner, PutMessageStatus
from rmqd.store.config import MessageStoreConfig
from rmqd.store.message_store import DefaultMessageStore
from rmqd.wire.message import BLANK_MAGIC_CODE, decode_record, encode_batch, iter_records, parse_offset_msg_id

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


def _fixture_commitlog() -> bytes:
    """The clean fixture's commit log, all files joined (positions are physical offsets)."""
    files = facts(CLEAN)["commitlog"]["files"]
    return b"".join(require(CLEAN / "store" / "commitlog" / name).read_bytes() for name in files)


def _fixture_record(pos: int):
    return decode_record(_fixture_commitlog(), pos)


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


def test_message_larger_than_a_file_is_refused(tmp_path):
    with DefaultMessageStore(MessageStoreConfig(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=4096)) as s:
        r = s.put_message(MessageExtBrokerInner("T", 0, b"x" * 5000))
        assert r.putMessageStatus is PutMessageStatus.MESSAGE_ILLEGAL and s.get_max_phy_offset() == 0


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
    buf = _fixture_commitlog()
    suffix = b"\x02CLUSTER\x01FixtureCluster\x02WAIT\x01true"  # the batch's own properties
    first = next(m for m in _manifest() if m["kind"] == "batch")
    real, pos = [], parse_offset_msg_id(first["offsetMsgId"])[2]
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


def _manifest() -> list[dict]:
    import json
    with open(require(CLEAN / "manifest.jsonl")) as f:
        return [json.loads(line) for line in f]


def _manifest_records():
    buf = _fixture_commitlog()
    seen = set()
    for m in _manifest():
        if m["kind"] in seen or not m.get("offsetMsgId") or m["kind"] == "batch":
            continue
        seen.add(m["kind"])
        yield m, decode_record(buf, parse_offset_msg_id(m["offsetMsgId"])[2])


@pytest.mark.parametrize("m,ref", list(_manifest_records()), ids=lambda x: x["kind"] if isinstance(x, dict) else "")
def test_every_message_kind_is_stored_exactly_like_rocketmq(tmp_path, m, ref):
    """Hand rmqd what the real broker's send processor had (the client's message) and compare
    the stored record with the real one; only store time and offsets may differ."""
    props = dict(ref.properties)
    topic, qid = ref.topic, ref.queue_id
    if ref.topic == "SCHEDULE_TOPIC_XXXX":  # rmqd's delay hook must redo what the real one did
        topic, qid = props.pop("REAL_TOPIC"), int(props.pop("REAL_QID"))
    msg = MessageExtBrokerInner(topic, qid, ref.body, props, flag=ref.flag, sys_flag=ref.sys_flag,
                                born_timestamp=ref.born_timestamp, born_host=ref.born_ip, born_port=ref.born_port,
                                store_host=ref.store_ip, store_port=ref.store_port,
                                reconsume_times=ref.reconsume_times,
                                prepared_transaction_offset=ref.prepared_transaction_offset)
    with DefaultMessageStore(MessageStoreConfig(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=1 << 20,
                                                mappedFileSizeConsumeQueue=6000, maxHashSlotNum=100,
                                                maxIndexNum=400)) as store:
        r = store.put_message(msg)
        assert r.is_ok()
        mine = store.look_message_by_offset(r.appendMessageResult.wroteOffset)
    assert (mine.topic, mine.queue_id) == (ref.topic, ref.queue_id)
    mine.store_timestamp, mine.physical_offset, mine.queue_offset = ref.store_timestamp, ref.physical_offset, \
        ref.queue_offset
    assert mine.properties_raw == ref.properties_raw  # Java HashMap order, as the real broker wrote it
    assert mine.encode() == ref.encode()


def test_bad_batches_are_refused(store):
    good = encode_batch([(0, b"a", {"TAGS": "x"})])
    for batch in (MessageExtBatch("B", 0, good[:-1]), MessageExtBatch("B", 0, good, {"DELAY": "2"}),
                  MessageExtBatch("B", 0, good, sys_flag=0x4), MessageExtBatch("B", 0, b"")):
        assert store.put_messages(batch).putMessageStatus is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.get_max_phy_offset() == 0


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=300, deadline=None)
@given(flip=st.integers(0, 10_000), val=st.integers(0, 255), cut=st.integers(0, 300))
def test_clean_recovery_validator_agrees_with_the_dispatch_parser(flip, val, cut):
    from rmqd.store.commitlog import CommitLog
    from rmqd.wire.message import encode_record
    raw = bytearray(encode_record(queue_id=1, flag=0, queue_offset=2, physical_offset=3, sys_flag=0, born_timestamp=4,
                                  born_ip=b"\1\2\3\4", born_port=5, store_timestamp=6, store_ip=b"\1\2\3\4",
                                  store_port=7, reconsume_times=0, prepared_transaction_offset=0, body=b"body" * 9,
                                  topic="Topic", properties={"TAGS": "x", "KEYS": "k"}))
    raw[flip % len(raw)] = val
    buf = bytes(raw[:cut]) if cut < len(raw) else bytes(raw)
    cl = CommitLog(MessageStoreConfig(storePathRootDir="/nonexistent"))
    size = CommitLog.validate_record(buf, 0, True)
    req = cl.check_message_and_return_size(buf, 0, True)
    assert (size > 0) == (req.success and req.msg_size > 0)
    if size > 0:
        assert size == req.msg_size


def test_file_creation_failure_is_reported(tmp_path, monkeypatch):
    import errno
    from rmqd.store.mapped_file import MappedFileQueue

    with DefaultMessageStore(MessageStoreConfig(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=4096)) as s:
        assert s.put_message(MessageExtBrokerInner("T", 0, b"x" * 3000)).is_ok()

        def no_space(self, *a, **k):
            if a:  # creating a file
                raise OSError(errno.ENOSPC, "No space left on device")
            return orig(self)
        orig = MappedFileQueue.get_last_mapped_file
        monkeypatch.setattr(MappedFileQueue, "get_last_mapped_file", no_space)
        r = s.put_message(MessageExtBrokerInner("T", 0, b"y" * 3000))  # needs a new file
        assert r.putMessageStatus is PutMessageStatus.CREATE_MAPEDFILE_FAILED
        monkeypatch.undo()
        assert s.put_message(MessageExtBrokerInner("T", 0, b"z" * 3000)).appendMessageResult.logicsOffset == 1


def test_compiled_constructors_make_the_dataclasses_objects():
    """new_inner_message and _put_ok build what the dataclasses' own __init__ builds, every
    field set (a field added to a dataclass and not to its constructor fails here)."""
    import dataclasses
    from rmqd.store import commitlog
    from rmqd.store.commitlog import AppendMessageResult, PutMessageResult, new_inner_message
    args = dict(topic="T", queue_id=3, body=b"b", properties={"TAGS": "a"}, flag=5, sys_flag=0x4, born_timestamp=6,
                born_host=b"\1\2\3\4", born_port=7, store_host=b"\4\3\2\1", store_port=8, reconsume_times=9,
                properties_string="TAGS\x01a")
    fast = new_inner_message(**args)
    assert fast == MessageExtBrokerInner(**args)
    assert all(hasattr(fast, f.name) for f in dataclasses.fields(MessageExtBrokerInner))
    ok = commitlog._put_ok(10, 11, 12, 13, b"\4\3\2\1", 8)
    assert ok == PutMessageResult(commitlog._PUT_OK, AppendMessageResult(commitlog._APPEND_OK, 10, 11, 12, 13, 1, 0,
                                                                         b"\4\3\2\1", 8))
    assert all(hasattr(ok.appendMessageResult, f.name) for f in dataclasses.fields(AppendMessageResult))
    assert ok.is_ok() and ok.end_offset == 21
