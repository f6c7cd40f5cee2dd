"""``verify --against``: a store written by rmqd holds the same messages, laid out alike, as
the real RocketMQ 4.9.8 store it replays; a changed message is found and located."""
from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from rmqd.spark.verify import format_report, verify_store  # noqa: E402
from rmqd.store.commitlog import MessageExtBrokerInner  # noqa: E402
from rmqd.store.config import MessageStoreConfig  # noqa: E402
from rmqd.store.message_store import DefaultMessageStore  # noqa: E402
from fixtures import facts  # noqa: E402
from tests.spark.conftest import CLEAN  # noqa: E402
from rmqd.wire.message import MessageConst, iter_records  # noqa: E402

pytestmark = pytest.mark.timeout(300)
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"


def replay(fixture_store, target):
    """Put every message of the fixture's commit log, in order, into a new rmqd store with the
    fixture broker's file sizes. Messages RocketMQ wrote into SCHEDULE_TOPIC_XXXX are put as the
    producer sent them (their real topic/queue and DELAY level), so rmqd redirects them itself;
    the others are put as the broker put them (its stored property string, and no DELAY level in
    the property map, as ScheduleMessageService re-puts a due message)."""
    cfg = MessageStoreConfig(storePathRootDir=str(target))
    cfg.mappedFileSizeCommitLog = 1024 * 1024
    cfg.mappedFileSizeConsumeQueue = 6000
    cfg.maxHashSlotNum = 1000
    cfg.maxIndexNum = 4000
    store = DefaultMessageStore(cfg)
    store.load()
    store.start()
    n = 0
    try:
        for f in sorted((fixture_store / "commitlog").iterdir()):
            for _pos, rec in iter_records(f.read_bytes()):
                if rec is None:
                    break
                props = dict(rec.properties)
                common = dict(body=rec.body, flag=rec.flag, sys_flag=rec.sys_flag, born_timestamp=rec.born_timestamp,
                              born_host=rec.born_ip, born_port=rec.born_port, reconsume_times=rec.reconsume_times,
                              prepared_transaction_offset=rec.prepared_transaction_offset)
                if rec.topic == SCHEDULE_TOPIC:
                    topic = props.pop(MessageConst.PROPERTY_REAL_TOPIC)
                    qid = int(props.pop(MessageConst.PROPERTY_REAL_QUEUE_ID))
                    msg = MessageExtBrokerInner(topic=topic, queue_id=qid, properties=props, **common)
                else:
                    props.pop(MessageConst.PROPERTY_DELAY_TIME_LEVEL, None)
                    msg = MessageExtBrokerInner(topic=rec.topic, queue_id=rec.queue_id, properties=props,
                                                properties_string=rec.properties_raw.decode("utf-8"), **common)
                r = store.put_message(msg)
                assert r.is_ok(), r
                n += 1
        assert store.wait_dispatched(timeout_s=30)
    finally:
        store.shutdown()
    return n


@pytest.fixture(scope="module")
def rmqd_store(tmp_path_factory):
    target = tmp_path_factory.mktemp("rmqd") / "store"
    assert replay(CLEAN / "store", target) == facts(CLEAN)["commitlog"]["messages"]
    return target


def test_rmqd_store_matches_rocketmq_store(spark, rmqd_store):
    report = verify_store(spark, str(rmqd_store), against=str(CLEAN / "store"))
    text = format_report(report)
    assert report.ok, text
    assert {c.name: c.checked for c in report.checks}["same messages (--against)"] == facts(CLEAN)["commitlog"]["messages"]


def test_a_changed_message_is_found(spark, rmqd_store, tmp_path):
    import shutil
    other = tmp_path / "store"
    shutil.copytree(rmqd_store, other)
    cl = other / "commitlog" / "00000000000000000000"
    data = bytearray(cl.read_bytes())
    data[0 + 88] = ord("y")  # body of the first message ("x" -> "y"), CRC left as it was
    cl.write_bytes(bytes(data))
    report = verify_store(spark, str(other), against=str(CLEAN / "store"), checks=("records", "against"))
    content = {c.name: c.problems for c in report.checks}["same messages (--against)"]
    assert [(p.file, p.offset) for p in content] == [("commitlog/00000000000000000000", 0)]
    assert "in: body" in content[0].problem and "commitlog/00000000000000000000:0" in content[0].problem
    assert [(p.file, p.offset, p.check) for p in report.problems if p.check == "body-crc"] == [
        ("commitlog/00000000000000000000", 0, "body-crc")]
