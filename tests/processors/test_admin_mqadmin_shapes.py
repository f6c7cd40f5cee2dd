"""What mqadmin reads from a broker, in 4.9.8's shapes (found by compat_tests/test_mqadmin.py
against Apache RocketMQ): INVOKE_BROKER_TO_RESET_OFFSET (resetOffsetByTime), the full key set
of GET_BROKER_RUNTIME_INFO (brokerStatus, clusterList's #SPACE), GET_BROKER_CONFIG without
null keys, and the ResetOffsetBody codec."""
from __future__ import annotations

import time
from typing import Any

import trio
from hypothesis import given
from hypothesis import strategies as st

from broker_harness import BROKER_NAME, run_with_broker
from rmqd.store.stats import DISTRIBUTE_DESC, StoreStatsService
from rmqd.wire.bodies import KVTable, MessageQueue, ResetOffsetBody
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand

# StoreStatsService.getRuntimeInfo + DefaultMessageStore.getRuntimeInfo + AdminBrokerProcessor (4.9.8)
RUNTIME_KEYS = {
    "bootTimestamp", "runtime", "putMessageEntireTimeMax", "putMessageTimesTotal", "putMessageFailedTimes",
    "putMessageSizeTotal", "putMessageDistributeTime", "putMessageAverageSize", "dispatchMaxBuffer",
    "getMessageEntireTimeMax", "putTps", "getFoundTps", "getMissTps", "getTotalTps", "getTransferedTps",
    "putLatency99", "putLatency999", "commitLogDiskRatio", "consumeQueueDiskRatio", "commitLogMinOffset",
    "commitLogMaxOffset", "brokerVersionDesc", "brokerVersion", "msgPutTotalYesterdayMorning",
    "msgPutTotalTodayMorning", "msgPutTotalTodayNow", "msgGetTotalYesterdayMorning", "msgGetTotalTodayMorning",
    "msgGetTotalTodayNow", "sendThreadPoolQueueSize", "sendThreadPoolQueueCapacity", "pullThreadPoolQueueSize",
    "pullThreadPoolQueueCapacity", "queryThreadPoolQueueSize", "queryThreadPoolQueueCapacity",
    "dispatchBehindBytes", "pageCacheLockTimeMills", "sendThreadPoolQueueHeadWaitTimeMills",
    "pullThreadPoolQueueHeadWaitTimeMills", "queryThreadPoolQueueHeadWaitTimeMills", "earliestMessageTimeStamp",
    "startAcceptSendRequestTimeStamp", "remainTransientStoreBufferNumbs", "remainHowManyDataToFlush",
    "commitLogDirCapacity", "EndTransactionQueueSize", "EndTransactionThreadPoolQueueCapacity",
}


def test_runtime_info_has_every_key_mqadmin_prints(tmp_path):
    async def fn(h) -> None:
        assert (await h.send_v2("RtT", b"x" * 100)).code == ResponseCode.SUCCESS
        r = await h.invoke(RequestCode.GET_BROKER_RUNTIME_INFO)
        table = KVTable.decode(r.body).table
        keys = {k for k in table if not k.startswith("commitLogDiskRatio_")}
        assert keys == RUNTIME_KEYS, sorted(keys ^ RUNTIME_KEYS)
        assert [k for k in table if k.startswith("commitLogDiskRatio_")] == [
            f"commitLogDiskRatio_{h.role.message_store_config.get_store_path_commit_log()}"]
        assert 0.0 < float(table["commitLogDiskRatio"]) < 1.0
        assert table["putMessageTimesTotal"] == "1" and int(table["putMessageSizeTotal"]) > 100
        assert table["putMessageDistributeTime"] == "null"  # filled at the first minute's rotation
        assert table["runtime"].startswith("[ 0 days, 0 hours, 0 minutes, ")
        assert table["earliestMessageTimeStamp"] == "-1"  # less than 2 x maxMessageSize written
    run_with_broker(tmp_path, fn)


def test_broker_config_leaves_out_null_keys(tmp_path):
    async def fn(h) -> None:
        r = await h.invoke(RequestCode.GET_BROKER_CONFIG)
        text = bytes(r.body).decode()
        assert "haMasterAddress=" not in text and "storePathCommitLog=" not in text
        assert "mappedFileSizeConsumeQueueExt=50331648" in text and "scheduleAsyncDeliverMaxPendingLimit=2000" in text
    run_with_broker(tmp_path, fn)


def test_reset_offset_by_time_reaches_the_online_consumer(tmp_path):
    pushed: list[RemotingCommand] = []

    async def fn(h) -> None:
        async def on_reset(ctx: Any, request: RemotingCommand) -> None:
            pushed.append(request)
            return None

        h.client.register(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, on_reset)
        ext = {"topic": "RsT", "group": "RsG", "timestamp": "-1", "isForce": "true"}
        r = await h.invoke(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext)
        assert r.code == ResponseCode.SYSTEM_ERROR and r.remark.endswith("no topic in this broker. topic=RsT")
        for _ in range(3):
            assert (await h.send_v2("RsT", b"m", queue_id=1)).code == ResponseCode.SUCCESS
        h.wait_dispatched()
        r = await h.invoke(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext)
        assert r.code == ResponseCode.SYSTEM_ERROR and r.remark == "THe consumer group <RsG> not exist"
        for q in range(4):
            await h.invoke(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "RsG", "topic": "RsT",
                                                                "queueId": str(q), "commitOffset": "0"})
        r = await h.invoke(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext)
        assert r.code == ResponseCode.CONSUMER_NOT_ONLINE
        assert r.remark == "Consumer not online, so can not reset offset, Group: RsG Topic: RsT Timestamp: -1"
        assert (await h.heartbeat("c1@1", "RsG", "RsT")).code == ResponseCode.SUCCESS
        r = await h.invoke(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext)
        assert r.code == ResponseCode.SUCCESS, r.remark
        want = {MessageQueue("RsT", BROKER_NAME, q): (3 if q == 1 else 0) for q in range(4)}
        assert ResetOffsetBody.decode(r.body).offsetTable == want
        deadline = time.monotonic() + 5
        while not pushed and time.monotonic() < deadline:
            await trio.sleep(0.02)
        assert len(pushed) == 1
        assert pushed[0].ext_fields == {"topic": "RsT", "group": "RsG", "timestamp": "-1", "isForce": "false"}
        assert ResetOffsetBody.decode(pushed[0].body).offsetTable == want
        # not forced, by time 0: every queue keeps the smaller consumer offset (0)
        r = await h.invoke(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, dict(ext, timestamp="0", isForce="false"))
        assert set(ResetOffsetBody.decode(r.body).offsetTable.values()) == {0}
    run_with_broker(tmp_path, fn)


@given(st.dictionaries(st.builds(MessageQueue, st.text(max_size=10), st.text(max_size=10), st.integers(0, 1000)),
                       st.integers(-2**63, 2**63 - 1), max_size=8))
def test_reset_offset_body_round_trips(table):
    assert ResetOffsetBody.decode(ResetOffsetBody(table).encode()).offsetTable == table


def test_store_stats_rates_and_distribution(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr("rmqd.store.stats.time.monotonic", lambda: clock[0])
    wall = [1_700_000_000.0]
    monkeypatch.setattr("rmqd.store.stats.time.time", lambda: wall[0])
    s = StoreStatsService()
    for i in range(12):
        for _ in range(5):
            s.on_put(True, 1, 100, 3)
        s.on_get(i % 2 == 0, 4, 0)
        s.sample()
        clock[0] += 1.0
        wall[0] += 1.0
    info = s.runtime_info()
    assert info["putTps"] == "5.0  "  # 10 s window filled; 60 and 600 s not yet
    assert info["getTotalTps"] == "1.0 0.0 0.0"
    assert info["putMessageAverageSize"] == "100.0"
    clock[0] += 60
    s.sample()
    dist = s.runtime_info()["putMessageDistributeTime"]
    assert dist.startswith("[<=0ms]:0 [0~10ms]:60 [10~50ms]:0 ") and len(dist.split()) == len(DISTRIBUTE_DESC)
    assert float(s.runtime_info()["putLatency99"]) <= 10.0
