"""CONSUMER_SEND_MSG_BACK over a real store (and against the fixture's 4.9.8 retry/DLQ copies)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import trio

from fixtures import CLEAN, require, sent, stored
from rmqd.processors.retry import ConsumerSendMsgBackProcessor
from rmqd.store.broker_stats import SNDBCK_PUT_NUMS, BrokerStatsManager
from rmqd.store.commitlog import MessageExtBrokerInner
from rmqd.store.config import MessageStoreConfig
from rmqd.store.message_store import DefaultMessageStore
from rmqd.store.schedule import ScheduleMessageService
from rmqd.store.delay_offset import DelayOffsetManager
from rmqd.store.subscription_group import SubscriptionGroupConfig
from rmqd.store.topic_config import TopicConfig
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand
from rmqd.wire.headers import ConsumerSendMsgBackRequestHeader
from rmqd.wire.message import decode_record

pytestmark = pytest.mark.timeout(60)
FIXTURE = CLEAN
SCHEDULE = "SCHEDULE_TOPIC_XXXX"


class Broker:
    def __init__(self, root: Path) -> None:
        cfg = MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=1024 * 1024,
                                 mappedFileSizeConsumeQueue=6000, maxHashSlotNum=1000, maxIndexNum=4000)
        self.store = DefaultMessageStore(cfg)
        self.store.load()
        self.store.start()
        self.groups = {"g": SubscriptionGroupConfig(groupName="g"),
                       "FixRetryGroup": SubscriptionGroupConfig(groupName="FixRetryGroup"),
                       "noretry": SubscriptionGroupConfig(groupName="noretry", retryQueueNums=0)}
        self.subscription_group_manager = SimpleNamespace(find_subscription_group_config=self.groups.get)
        self.broker_config = SimpleNamespace(brokerPermission=6, brokerIP1="127.0.0.1")
        self.stats = BrokerStatsManager("DefaultCluster")
        self.topics: dict[str, TopicConfig] = {}

    def create_topic_in_send_message_back_method(self, topic: str, queue_nums: int, perm: int, sys_flag: int):
        return self.topics.setdefault(topic, TopicConfig(topicName=topic, readQueueNums=queue_nums,
                                                         writeQueueNums=queue_nums, perm=perm, topicSysFlag=sys_flag))

    def put(self, topic: str, body: bytes, **props: str) -> int:
        msg = MessageExtBrokerInner(topic=topic, queue_id=0, body=body, properties={"UNIQ_KEY": "U" + body.hex(),
                                                                                   **props},
                                    born_timestamp=int(time.time() * 1000), born_port=4242)
        r = self.store.put_message(msg)
        assert r.is_ok()
        return r.appendMessageResult.wroteOffset

    def messages(self, topic: str, queue_id: int = 0) -> list:
        self.store.wait_dispatched()
        r = self.store.get_message("t", topic, queue_id, 0, 1000)
        return [decode_record(b) for b in (r.message_buffers if r else [])]


def send_back(proc: ConsumerSendMsgBackProcessor, offset: int, group: str = "g", delay: int = 0,
              max_times: int | None = None, version: int = 409) -> RemotingCommand:
    h = ConsumerSendMsgBackRequestHeader(offset=offset, group=group, delayLevel=delay, originMsgId=None,
                                         originTopic=None, unitMode=False, maxReconsumeTimes=max_times)
    req = RemotingCommand(code=RequestCode.CONSUMER_SEND_MSG_BACK, opaque=3, version=version, ext_fields=h.to_ext())

    async def call() -> RemotingCommand:
        return await proc.consumer_send_msg_back(None, req)

    return trio.run(call)


@pytest.fixture
def broker(tmp_path: Path):
    b = Broker(tmp_path / "store")
    yield b
    b.store.shutdown()


def test_first_failure_goes_to_retry_via_level_3(broker: Broker) -> None:
    proc = ConsumerSendMsgBackProcessor(broker)
    off = broker.put("Orig", b"m", TAGS="T1", KEYS="k1")
    resp = send_back(proc, off)
    assert resp.code == ResponseCode.SUCCESS and resp.opaque == 3
    assert broker.topics["%RETRY%g"].perm == 6
    sched = broker.messages(SCHEDULE, 2)
    assert len(sched) == 1
    m = sched[0]
    assert m.reconsume_times == 1 and m.body == b"m" and m.born_port == 4242
    p = m.properties
    assert p["DELAY"] == "3" and p["REAL_TOPIC"] == "%RETRY%g" and p["REAL_QID"] == "0"
    assert p["RETRY_TOPIC"] == "Orig" and p["WAIT"] == "false" and p["TAGS"] == "T1"
    assert p["ORIGIN_MESSAGE_ID"] == broker.store.look_message_by_offset(off).offset_msg_id

    # the schedule service delivers it to %RETRY%g; failing again -> level 4, origin id kept
    svc = ScheduleMessageService(broker.store, DelayOffsetManager(broker.store.config.storePathRootDir),
                                 "1s 5s 10s 30s 1m")
    svc.tick(int(time.time() * 1000) + 11_000)
    retry = broker.messages("%RETRY%g")
    assert len(retry) == 1 and retry[0].reconsume_times == 1
    assert send_back(proc, retry[0].physical_offset).code == ResponseCode.SUCCESS
    again = broker.messages(SCHEDULE, 3)
    assert len(again) == 1 and again[0].reconsume_times == 2 and again[0].properties["DELAY"] == "4"
    assert again[0].properties["ORIGIN_MESSAGE_ID"] == p["ORIGIN_MESSAGE_ID"]
    assert again[0].properties["RETRY_TOPIC"] == "Orig"


def test_max_reconsume_times_sends_to_dlq(broker: Broker) -> None:
    proc = ConsumerSendMsgBackProcessor(broker)
    off = broker.put("%RETRY%g", b"r", RETRY_TOPIC="Orig", ORIGIN_MESSAGE_ID="AB")
    rec = broker.store.look_message_by_offset(off)
    assert rec.reconsume_times == 0
    assert send_back(proc, off, max_times=0).code == ResponseCode.SUCCESS
    dlq = broker.messages("%DLQ%g")
    assert len(dlq) == 1
    d = dlq[0]
    assert d.reconsume_times == 1 and d.properties["DELAY"] == "0" and d.properties["ORIGIN_MESSAGE_ID"] == "AB"
    assert broker.topics["%DLQ%g"].perm == 6  # 4.9.8 creates the DLQ read+write (fixture topics.json)
    # an old client (< V3_4_9) cannot lower maxReconsumeTimes: the group's 16 applies
    off2 = broker.put("Orig", b"old")
    assert send_back(proc, off2, max_times=0, version=100).code == ResponseCode.SUCCESS
    assert len(broker.messages("%DLQ%g")) == 1
    # a negative delay level means "straight to the DLQ"
    assert send_back(proc, off2, delay=-1).code == ResponseCode.SUCCESS
    assert len(broker.messages("%DLQ%g")) == 2
    # counted as 4.9 (SNDBCK_PUT_NUMS by the message's first topic) and 5.x (DLQ sends by origin topic)
    broker.stats.sample()
    assert broker.stats.view(SNDBCK_PUT_NUMS, "Orig@g")[0].sum == 3
    assert broker.stats.group_get["g"]["Orig"].dlq == 2


def test_explicit_delay_level_and_errors(broker: Broker) -> None:
    proc = ConsumerSendMsgBackProcessor(broker)
    off = broker.put("Orig", b"x")
    assert send_back(proc, off, delay=5).code == ResponseCode.SUCCESS
    assert broker.messages(SCHEDULE, 4)[0].properties["DELAY"] == "5"
    r = send_back(proc, off, group="nope")
    assert r.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST and r.remark.startswith("subscription group not exist, nope")
    assert send_back(proc, off, group="noretry").code == ResponseCode.SUCCESS
    assert "%RETRY%noretry" not in broker.topics
    r = send_back(proc, 10 ** 9)
    assert r.code == ResponseCode.SYSTEM_ERROR and r.remark == f"look message by offset failed, {10 ** 9}"
    broker.broker_config.brokerPermission = 4
    assert send_back(proc, off).code == ResponseCode.NO_PERMISSION


def test_matches_the_fixture_retry_and_dlq_copies(tmp_path: Path) -> None:
    root = tmp_path / "store"
    shutil.copytree(require(FIXTURE / "store"), root)
    uniq = sent(FIXTURE, "retry-fail-always")["msgId"]
    original = stored(FIXTURE, "FixRetryTopic", uniq)["physicalOffset"]
    scheduled = stored(FIXTURE, SCHEDULE, uniq)["physicalOffset"]  # RocketMQ's SCHEDULE copy of fail-always
    retried = stored(FIXTURE, "%RETRY%FixRetryGroup", uniq)["physicalOffset"]
    dead = stored(FIXTURE, "%DLQ%FixRetryGroup", uniq)["physicalOffset"]
    b = Broker(root)
    try:
        proc = ConsumerSendMsgBackProcessor(b)
        expected = b.store.look_message_by_offset(scheduled)
        max_before = b.store.get_max_offset_in_queue(SCHEDULE, 2)
        assert send_back(proc, original, group="FixRetryGroup").code == ResponseCode.SUCCESS
        got = b.messages(SCHEDULE, 2)[max_before]
        assert bytes(got.properties_raw) == bytes(expected.properties_raw)  # same bytes, same HashMap order
        assert got.reconsume_times == expected.reconsume_times and got.body == expected.body
        assert got.born_timestamp == expected.born_timestamp and got.sys_flag == expected.sys_flag
        # the %RETRY% copy that failed again with maxReconsumeTimes=1 -> like 4.9.8's DLQ record
        dlq_expected = b.store.look_message_by_offset(dead)
        before = len(b.messages("%DLQ%FixRetryGroup"))
        assert send_back(proc, retried, group="FixRetryGroup", max_times=1).code == ResponseCode.SUCCESS
        dlq = b.messages("%DLQ%FixRetryGroup")
        assert len(dlq) == before + 1
        assert bytes(dlq[-1].properties_raw) == bytes(dlq_expected.properties_raw)
        assert dlq[-1].reconsume_times == dlq_expected.reconsume_times == 2
    finally:
        b.store.shutdown()
