"""Open real RocketMQ 4.9.8 stores (clean and SIGKILLed), recover them like the real broker did,
and read back every message the client sent, byte-exactly."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from fixtures import CLEAN, CRASHED, facts, require
from rmqd.store.config import MessageStoreConfig
from rmqd.store.message_store import DefaultMessageStore, GetMessageStatus
from rmqd.wire.message import decode_messages, decode_record, parse_offset_msg_id


def fixture_config(root: Path) -> MessageStoreConfig:
    return MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=1048576,
                              mappedFileSizeConsumeQueue=6000, maxHashSlotNum=1000, maxIndexNum=4000)


def copy_store(src: Path, dst: Path) -> Path:
    shutil.copytree(require(src / "store"), dst)
    for dirpath, dirnames, filenames in os.walk(dst):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            os.chmod(p, os.stat(p).st_mode | stat.S_IWUSR)
    return dst


def _open(tmp_path_factory, src: Path) -> DefaultMessageStore:
    root = copy_store(src, tmp_path_factory.mktemp(src.name) / "store")
    s = DefaultMessageStore(fixture_config(root))
    s.load()
    s.start()
    assert s.wait_dispatched()
    return s


@pytest.fixture(scope="module")
def clean_store(tmp_path_factory):
    s = _open(tmp_path_factory, CLEAN)
    yield s
    s.shutdown()


@pytest.fixture(scope="module")
def crashed_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("crashed") / "store"
    copy_store(CRASHED, root)
    s = DefaultMessageStore(fixture_config(root))
    s.load()
    s.start()
    assert s.wait_dispatched()
    yield s, root
    s.shutdown()


def _manifest(path: Path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def _check_manifest_message(store: DefaultMessageStore, m: dict) -> None:
    """The stored message for one manifest entry matches what the client sent."""
    uniq = m["msgId"]
    if m.get("offsetMsgId"):
        _ip, port, phy = parse_offset_msg_id(m["offsetMsgId"])
        assert port == 10921
        rec = store.look_message_by_offset(phy)
        assert rec is not None and rec.offset_msg_id == m["offsetMsgId"]
    else:  # oneway and transactional sends carry no offsetMsgId: find them through the index
        topic = "RMQ_SYS_TRANS_HALF_TOPIC" if m["kind"].startswith("tx-") else m["topic"]
        q = store.query_message(topic, uniq, 32, 0, 2**62)
        recs = [r for r in decode_messages(b"".join(bytes(v) for v in q.message_buffers)) if r.uniq_key == uniq]
        assert recs, f"{m['kind']} seq {m['seq']} not found by key"
        rec = min(recs, key=lambda r: r.physical_offset)  # the original, not a check-back re-put
    assert rec.uniq_key == uniq
    assert hashlib.sha256(rec.uncompressed_body()).hexdigest() == m["bodySha256"]
    assert len(rec.uncompressed_body()) == m["bodyLength"]
    assert rec.flag == m["flag"]
    for k, v in m["properties"].items():
        if k != "WAIT":
            assert rec.properties.get(k) == v, (m["seq"], k)
    if m["kind"].startswith("delayed"):
        level = m["delayTimeLevel"]
        assert rec.topic == "SCHEDULE_TOPIC_XXXX" and rec.queue_id == level - 1
        assert rec.properties["REAL_TOPIC"] == m["topic"] and rec.properties["REAL_QID"] == str(m["queueId"])
        assert rec.queue_offset == m["queueOffset"]
    elif m["kind"].startswith("tx-"):
        assert rec.topic == "RMQ_SYS_TRANS_HALF_TOPIC" and rec.queue_offset == m["queueOffset"]
        committed = store.query_message(m["topic"], uniq, 32, 0, 2**62)
        copies = [r for r in decode_messages(b"".join(bytes(v) for v in committed.message_buffers))
                  if r.uniq_key == uniq and r.topic == m["topic"]]
        if m["kind"] == "tx-rollback":
            assert copies == []
        else:
            assert len(copies) == 1 and copies[0].sys_flag & 0xC == 0x8
    else:
        assert rec.topic == m["topic"]
        if "queueId" in m:
            assert (rec.queue_id, rec.queue_offset) == (m["queueId"], m["queueOffset"])
            got = store.get_message("g", m["topic"], m["queueId"], m["queueOffset"], 1)
            assert got.status is GetMessageStatus.FOUND
            assert bytes(got.message_buffers[0]) == rec.encode()


def _reported_queues(topics: dict) -> dict[tuple[str, int], dict]:
    """(topic, queue id) -> {minOffset, maxOffset} as the Apache broker reported them."""
    return {(t, int(q)): o for t, queues in topics.items() for q, o in queues.items()}


def test_clean_store_recovers_without_loss(clean_store):
    end = facts(CLEAN)["commitlog"]["endOfData"]["physicalOffset"]
    rep = clean_store.recovery_report
    assert not rep.abnormal and rep.process_offset == end and rep.deleted_files == []
    assert clean_store.get_max_phy_offset() == end


def test_clean_store_every_manifest_message(clean_store):
    ms = _manifest(CLEAN / "manifest.jsonl")
    assert len(ms) == 2047
    for m in ms:
        _check_manifest_message(clean_store, m)


def test_clean_store_queue_counts_match_what_apache_reported(clean_store):
    """Every queue's min/max offset equals what the Apache broker answered GET_TOPIC_STATS_INFO
    with before it was stopped (bulk 500 per queue, the 5-message batch, the pending level-18
    delay, 4 half messages, 1 DLQ message among them)."""
    reported = _reported_queues(facts(CLEAN)["reported"]["topics"])
    assert reported[("FixBulkTopic", 3)]["maxOffset"] == 500 and reported[("%DLQ%FixRetryGroup", 0)]["maxOffset"] == 1
    assert reported[("SCHEDULE_TOPIC_XXXX", 17)]["maxOffset"] == 1 and reported[("FixBatchTopic", 2)]["maxOffset"] == 5
    for (t, q), o in reported.items():
        assert clean_store.get_max_offset_in_queue(t, q) == o["maxOffset"], (t, q)
        assert clean_store.get_min_offset_in_queue(t, q) == o["minOffset"], (t, q)


def test_clean_store_reads_consume_queue_units_like_the_dump(clean_store):
    import gzip
    with gzip.open(CLEAN / "dump" / "consumequeue-dump.jsonl.gz", "rt") as f:
        units = [json.loads(line) for line in f]
    for u in units[:400]:
        assert clean_store.get_commit_log_offset_in_queue(u["topic"], u["queueId"], u["logicalOffset"]) == u["commitLogOffset"]


def test_crashed_store_recovers_like_rocketmq(crashed_store):
    store, root = crashed_store
    apache = facts(CRASHED)["apacheRecovery"]  # what Apache did when it started on a copy
    rep = store.recovery_report
    assert rep.abnormal
    assert rep.start_file == apache["startFile"]
    assert rep.process_offset == apache["processOffset"]
    assert rep.deleted_files == apache["deletedCommitlogFiles"] != []
    assert not (root / "commitlog" / apache["deletedCommitlogFiles"][0]).exists()
    # newer than the checkpoint: Apache deletes it and rebuilds it from the walk; rmqd keeps it,
    # rolled back to where the walk starts (the next test finds every key through it)
    index = store.index_service.index_files
    names = [f["file"] for f in facts(CRASHED)["index"]]
    assert len(names) == 2 and apache["deletedIndexFiles"] == names[1:]
    assert [f.file_name for f in index] == names
    assert index[0].end_phy_offset < int(apache["startFile"]) + rep.start_position
    traffic = apache["reported"]["topics"]["FixTrafficTopic"]
    assert [store.get_max_offset_in_queue("FixTrafficTopic", q) for q in range(4)] == \
        [traffic[str(q)]["maxOffset"] for q in range(4)]


def test_crashed_store_every_acknowledged_message(crashed_store):
    store, _ = crashed_store
    for m in _manifest(CLEAN / "manifest.jsonl"):
        _check_manifest_message(store, m)
    traffic = _manifest(CRASHED / "traffic-manifest.jsonl")
    acked = [m for m in traffic if m.get("sendStatus") == "SEND_OK"]
    reported = facts(CRASHED)["apacheRecovery"]["reported"]["topics"]["FixTrafficTopic"]
    assert len(acked) == sum(q["maxOffset"] for q in reported.values()) > 0  # Apache kept exactly these
    for m in acked:
        _check_manifest_message(store, m)
        q = store.query_message(m["topic"], m["keys"], 32, 0, 2**62)  # rebuilt index finds it by key
        assert any(decode_record(v, 0).uniq_key == m["msgId"] for v in q.message_buffers)


def test_crashed_store_appends_continue_after_recovery(crashed_store):
    from rmqd.store.commitlog import MessageExtBrokerInner
    store, _ = crashed_store
    r = store.put_message(MessageExtBrokerInner("FixTrafficTopic", 0, b"after", {"TAGS": "TagTraffic"},
                                                store_port=10921))
    apache = facts(CRASHED)["apacheRecovery"]
    assert r.is_ok() and r.appendMessageResult.wroteOffset == apache["processOffset"]
    assert r.appendMessageResult.logicsOffset == apache["reported"]["topics"]["FixTrafficTopic"]["0"]["maxOffset"]
