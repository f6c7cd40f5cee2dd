"""The admin codes that look into the broker (processors/admin_observe.py) against a real broker:
VIEW_BROKER_STATS_DATA after a known load, GET_BROKER_CONSUME_STATS, GET_ALL_PRODUCER_INFO,
GET_CONSUMER_RUNNING_INFO relayed to the consumer's connection, QUERY_CONSUME_QUEUE and the
two clean-ups."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from broker_harness import BROKER_NAME, CLUSTER, run_with_broker
from rmqd.wire.bodies import (
    BrokerStatsData, ConsumeStatsList, ProducerTableInfo, QueryConsumeQueueResponseBody,
)
from rmqd.wire.codes import LanguageCode, RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand, make_response


async def _load(h: Any, topic: str = "ObsT", group: str = "ObsG", n: int = 5) -> list[int]:
    """n sends to queue 1, a heartbeat, one pull of all of them; the record sizes."""
    sizes = []
    for i in range(n):
        r = await h.send_v2(topic, b"x" * (100 + i), queue_id=1)
        assert r.code == ResponseCode.SUCCESS
    h.wait_dispatched()
    for i in range(n):
        unit = h.role.store.get_consume_queue(topic, 1).get_unit(i)
        sizes.append(unit[1])
    await h.heartbeat("obs@1", group, topic, producer_groups=("ObsPG",))
    r = await h.pull(topic, group, 1, 0, sys_flag=6, subscription="*")
    assert r.code == ResponseCode.SUCCESS
    return sizes


async def _view(h: Any, name: str, key: str) -> RemotingCommand:
    return await h.invoke(RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key})


def test_view_broker_stats_data_after_a_known_load(tmp_path: Path) -> None:
    async def fn(h) -> None:
        sizes = await _load(h)
        # an item made since the last tick exists, with empty windows (4.9: not sampled yet)
        r = await _view(h, "TOPIC_PUT_NUMS", "ObsT")
        assert r.code == ResponseCode.SUCCESS
        assert BrokerStatsData.decode(r.body).statsMinute.sum == 0
        h.role.stats.sample()  # the 10-s tick
        r = await _view(h, "TOPIC_PUT_NUMS", "ObsT")
        data = BrokerStatsData.decode(r.body)
        assert (data.statsMinute.sum, data.statsMinute.avgpt) == (5, 1.0)
        assert data.statsMinute.tps == 5 / 10  # the first snapshot is a zero one 10 s earlier
        assert data.statsHour.sum == 0 and data.statsDay.sum == 0  # their first tick was at start-up
        data = BrokerStatsData.decode((await _view(h, "TOPIC_PUT_SIZE", "ObsT")).body)
        assert data.statsMinute.sum == sum(sizes)
        data = BrokerStatsData.decode((await _view(h, "GROUP_GET_NUMS", "ObsT@ObsG")).body)
        assert (data.statsMinute.sum, data.statsMinute.avgpt) == (5, 5.0)  # one pull of five
        data = BrokerStatsData.decode((await _view(h, "GROUP_GET_SIZE", "ObsT@ObsG")).body)
        assert data.statsMinute.sum == sum(sizes)
        data = BrokerStatsData.decode((await _view(h, "BROKER_PUT_NUMS", CLUSTER)).body)
        assert (data.statsMinute.sum, data.statsMinute.avgpt) == (5, 0.0)  # incBrokerPutNums counts no times
        r = await _view(h, "GROUP_GET_LATENCY", "1@ObsT@ObsG")
        assert r.code == ResponseCode.SUCCESS
        r = await _view(h, "TOPIC_PUT_NUMS", "Nope")
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "The stats <TOPIC_PUT_NUMS> <Nope> not exist")
        r = await _view(h, "NO_SUCH_STAT", "ObsT")
        assert r.code == ResponseCode.SYSTEM_ERROR

    run_with_broker(tmp_path, fn)


def test_broker_consume_stats_and_producer_info(tmp_path: Path) -> None:
    async def fn(h) -> None:
        await _load(h)
        await h.invoke(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "ObsG", "topic": "ObsT", "queueId": "1",
                                                            "commitOffset": "2"})
        r = await h.invoke(RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "false"})
        assert r.code == ResponseCode.SUCCESS
        body = ConsumeStatsList.decode(r.body)
        assert body.brokerAddr == h.role.settings.broker_addr and body.totalDiff == 3
        by_group = {g: stats for entry in body.consumeStatsList for g, stats in entry.items()}
        assert "ObsG" in by_group and by_group.get("TOOLS_CONSUMER") == []  # every subscription group is listed
        (stats,) = by_group["ObsG"]
        q1 = next(w for mq, w in stats.offsetTable.items() if mq.queueId == 1)
        assert (q1.brokerOffset, q1.consumerOffset) == (5, 2) and q1.lastTimestamp > 0
        assert {mq.brokerName for mq in stats.offsetTable} == {BROKER_NAME}
        r = await h.invoke(RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "true"})
        assert {g: s for e in ConsumeStatsList.decode(r.body).consumeStatsList for g, s in e.items()}["ObsG"] == []

        r = await h.invoke(RequestCode.GET_ALL_PRODUCER_INFO)
        assert r.code == ResponseCode.SUCCESS
        (info,) = ProducerTableInfo.decode(r.body).data["ObsPG"]
        assert info.clientId == "obs@1" and info.language == LanguageCode.JAVA and info.remoteIP.startswith("/127.0.0.1:")

    run_with_broker(tmp_path, fn)


def test_consumer_running_info_is_relayed_to_the_consumer(tmp_path: Path) -> None:
    async def fn(h) -> None:
        asked: list[RemotingCommand] = []

        async def running_info(ctx: Any, request: RemotingCommand) -> RemotingCommand:
            asked.append(request)
            return make_response(request, ResponseCode.SUCCESS, None, body=b'{"properties":{"x":"1"}}')

        h.client.register(RequestCode.GET_CONSUMER_RUNNING_INFO, running_info)
        await h.heartbeat("obs@1", "ObsG", "ObsT")
        ext = {"consumerGroup": "ObsG", "clientId": "obs@1", "jstackEnable": "false"}
        r = await h.invoke(RequestCode.GET_CONSUMER_RUNNING_INFO, ext)
        assert (r.code, bytes(r.body)) == (ResponseCode.SUCCESS, b'{"properties":{"x":"1"}}')
        assert asked and asked[0].ext_fields["clientId"] == "obs@1"
        r = await h.invoke(RequestCode.GET_CONSUMER_RUNNING_INFO, dict(ext, clientId="other@2"))
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "The Consumer <ObsG> <other@2> not online")

    run_with_broker(tmp_path, fn)


def test_query_consume_queue(tmp_path: Path) -> None:
    async def fn(h) -> None:
        await _load(h)
        ext = {"topic": "ObsT", "queueId": "1", "index": "1", "count": "3", "consumerGroup": "ObsG"}
        r = await h.invoke(RequestCode.QUERY_CONSUME_QUEUE, ext)
        assert r.code == ResponseCode.SUCCESS
        body = QueryConsumeQueueResponseBody.decode(r.body)
        assert (body.minQueueIndex, body.maxQueueIndex) == (0, 5)
        cq = h.role.store.get_consume_queue("ObsT", 1)
        assert [(d.physicOffset, d.physicSize, d.tagsCode) for d in body.queueData] == [cq.get_unit(i) for i in (1, 2, 3)]
        assert body.subscriptionData.topic == "ObsT" and body.filterData == "null"  # a tag subscription
        r = await h.invoke(RequestCode.QUERY_CONSUME_QUEUE, dict(ext, consumerGroup="Gone"))
        assert QueryConsumeQueueResponseBody.decode(r.body).filterData == "Gone@ObsT is not online!"
        r = await h.invoke(RequestCode.QUERY_CONSUME_QUEUE, dict(ext, index="9"))
        assert (r.code, r.remark, r.body) == (ResponseCode.SUCCESS, "Index 9 of 1@ObsT is not exist!", None)
        r = await h.invoke(RequestCode.QUERY_CONSUME_QUEUE, dict(ext, queueId="7"))
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "7@ObsT is not exist!")

    run_with_broker(tmp_path, fn)


def test_clean_unused_topic_and_expired_consume_queues(tmp_path: Path) -> None:
    async def fn(h) -> None:
        await _load(h)
        store = h.role.store
        # a queue whose topic the broker no longer has a config for (left by an earlier run)
        await h.send_v2("Orphan", b"o", queue_id=0)
        h.wait_dispatched()
        h.role.topic_config_manager.delete_topic_config("Orphan")
        # a prepared transaction message: its half topic has no config yet, and must survive
        r = await h.send_v2("TxT", b"half", queue_id=0, extra={"TRAN_MSG": "true", "PGROUP": "pg"})
        assert r.code == ResponseCode.SUCCESS
        h.wait_dispatched()
        assert h.role.topic_config_manager.select_topic_config("RMQ_SYS_TRANS_HALF_TOPIC") is None
        r = await h.invoke(RequestCode.CLEAN_UNUSED_TOPIC)
        assert r.code == ResponseCode.SUCCESS
        assert store.get_consume_queue("Orphan", 0) is None and store.get_consume_queue("ObsT", 1) is not None
        assert store.get_max_offset_in_queue("RMQ_SYS_TRANS_HALF_TOPIC", 0) == 1
        # nothing is expired while the commit log still starts at 0
        r = await h.invoke(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)
        assert r.code == ResponseCode.SUCCESS and store.get_consume_queue("ObsT", 1) is not None
        # a queue whose last message lies below the commit log's first offset goes
        real_min = store.commit_log.get_min_offset
        store.commit_log.get_min_offset = lambda: store.commit_log.get_max_offset() + 1
        try:
            r = await h.invoke(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)
        finally:
            store.commit_log.get_min_offset = real_min
        assert r.code == ResponseCode.SUCCESS and store.get_consume_queue("ObsT", 1) is None
        assert "ObsT-1" not in store.commit_log.topic_queue_table

    run_with_broker(tmp_path, fn)


def test_stats_survive_deletes_unless_auto_delete_unused_stats(tmp_path: Path) -> None:
    async def fn(h) -> None:
        await _load(h)
        await h.invoke(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "ObsT"})
        h.role.stats.sample()
        r = await _view(h, "TOPIC_PUT_NUMS", "ObsT")
        assert r.code == ResponseCode.SYSTEM_ERROR
        await h.invoke(RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "ObsG", "removeOffset": "false"})
        assert "ObsG" not in h.role.stats.group_get

    run_with_broker(tmp_path, fn, autoDeleteUnusedStats="true")


def test_schedule_deliveries_are_counted(tmp_path: Path) -> None:
    async def fn(h) -> None:
        r = await h.send_v2("DelayT", b"later", queue_id=0, extra={"DELAY": "1"})  # level 1: 1 s
        assert r.code == ResponseCode.SUCCESS
        stats = h.role.stats
        assert stats.topic_put["SCHEDULE_TOPIC_XXXX"].msgs == 1  # stored there first, as 4.9 counts it
        with trio.fail_after(15):
            while "DelayT" not in stats.topic_put:
                await trio.sleep(0.1)
        stats.sample()
        assert BrokerStatsData.decode((await _view(h, "TOPIC_PUT_NUMS", "DelayT")).body).statsMinute.sum == 1
        r = await _view(h, "GROUP_GET_NUMS", "SCHEDULE_TOPIC_XXXX@SCHEDULE_CONSUMER")
        assert BrokerStatsData.decode(r.body).statsMinute.sum == 1
        r = await _view(h, "QUEUE_GET_NUMS", "SCHEDULE_TOPIC_XXXX@0@SCHEDULE_CONSUMER")
        assert BrokerStatsData.decode(r.body).statsMinute.sum == 1
        r = await _view(h, "QUEUE_PUT_NUMS", "SCHEDULE_TOPIC_XXXX@0")
        assert BrokerStatsData.decode(r.body).statsMinute.sum == 1

    run_with_broker(tmp_path, fn)
