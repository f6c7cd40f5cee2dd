"""Admin codes: topics, stats, connections, broker config (writes refused unless enabled)."""

from __future__ import annotations

import json
from pathlib import Path

import trio

from broker_harness import BROKER_NAME, CLUSTER, run_with_broker
from rmqd.processors.admin import human_readable_bytes, string_to_properties
from rmqd.wire import fastjson
from rmqd.wire.bodies import ConsumeStats, KVTable, TopicList, TopicStatsTable
from rmqd.wire.codes import RequestCode, ResponseCode


def test_helpers() -> None:
    assert human_readable_bytes(512) == "512 B"
    assert human_readable_bytes(1536) == "1.5 KiB"
    assert human_readable_bytes(3 * 1024 ** 3) == "3.0 GiB"
    assert string_to_properties("# c\na=1\nb : 2\n\nflag\n") == {"a": "1", "b": "2", "flag": ""}


CREATE = {"topic": "AdmT", "defaultTopic": "TBW102", "readQueueNums": "2", "writeQueueNums": "3", "perm": "6",
          "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}


def test_create_topic_route_config_and_delete(tmp_path: Path) -> None:
    async def fn(h) -> None:
        r = await h.invoke(RequestCode.UPDATE_AND_CREATE_TOPIC, CREATE)
        assert (r.code, r.ext_fields) == (ResponseCode.SUCCESS, None)
        tc = h.role.topic_config_manager.select_topic_config("AdmT")
        assert (tc.readQueueNums, tc.writeQueueNums, tc.perm) == (2, 3, 6)
        r = await h.invoke(RequestCode.UPDATE_AND_CREATE_TOPIC, dict(CREATE, topic="TBW102"))
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "The topic[TBW102] is conflict with system topic.")
        r = await h.invoke(RequestCode.UPDATE_AND_CREATE_TOPIC, dict(CREATE, topic="a b"))
        assert r.code == ResponseCode.SYSTEM_ERROR
        # the name server learns it (registration after the update)
        from rmqd.wire.bodies import TopicRouteData
        with trio.fail_after(5):
            while True:
                route = await h.invoke(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "AdmT"}, addr=h.namesrv_addr)
                if route.code == ResponseCode.SUCCESS:
                    break
                await trio.sleep(0.05)
        qd = TopicRouteData.decode(route.body).queueDatas[0]
        assert (qd.brokerName, qd.readQueueNums, qd.writeQueueNums) == (BROKER_NAME, 2, 3)
        r = await h.invoke(RequestCode.GET_ALL_TOPIC_CONFIG)
        assert r.code == ResponseCode.SUCCESS and r.ext_fields == {}
        table = fastjson.loads(bytes(r.body).decode())["topicConfigTable"]
        assert table["AdmT"]["writeQueueNums"] == 3 and "TBW102" in table
        await h.send_v2("AdmT", b"x", queue_id=0)
        h.wait_dispatched()
        r = await h.invoke(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "AdmT"})
        assert r.code == ResponseCode.SUCCESS
        assert h.role.topic_config_manager.select_topic_config("AdmT") is None
        assert h.role.store.get_max_offset_in_queue("AdmT", 0) == 0
        r = await h.invoke(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "SCHEDULE_TOPIC_XXXX"})
        assert r.code == ResponseCode.SYSTEM_ERROR

    run_with_broker(tmp_path, fn)


def test_broker_config_writes_refused_by_default(tmp_path: Path) -> None:
    evil = b"rocketmqHome=-c $@|sh . echo pwned;\nfilterServerNums=1\n"

    async def fn(h) -> None:
        r = await h.invoke(RequestCode.UPDATE_BROKER_CONFIG, None, evil)
        assert r.code == ResponseCode.NO_PERMISSION and "disabled" in r.remark
        r = await h.invoke(RequestCode.UPDATE_BROKER_CONFIG, None, b"filterServerNums=1\n")
        assert r.code == ResponseCode.NO_PERMISSION
        assert h.role.broker_config.filterServerNums == 0
        r = await h.invoke(RequestCode.GET_BROKER_CONFIG)
        assert r.code == ResponseCode.SUCCESS
        props = string_to_properties(bytes(r.body).decode())
        assert props["brokerName"] == BROKER_NAME and props["autoCreateTopicEnable"] == "true"
        assert props["flushDiskType"] == "ASYNC_FLUSH"
        assert json.loads(r.ext_fields["version"])["counter"] == 0

    run_with_broker(tmp_path, fn)


def test_broker_config_writes_when_enabled(tmp_path: Path) -> None:
    async def fn(h) -> None:
        r = await h.invoke(RequestCode.UPDATE_BROKER_CONFIG, None, b"rocketmqHome=/tmp/x\n")
        assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        r = await h.invoke(RequestCode.UPDATE_BROKER_CONFIG, None, b"shortPollingTimeMills=2000\n")
        assert r.code == ResponseCode.SUCCESS
        assert h.role.broker_config.shortPollingTimeMills == 2000
        r = await h.invoke(RequestCode.UPDATE_BROKER_CONFIG, None, b"noSuchKey=1\n")
        assert r.code == ResponseCode.SYSTEM_ERROR and "noSuchKey" in r.remark

    run_with_broker(tmp_path, fn, enableUpdateConfig="true")


def test_runtime_info_and_stats(tmp_path: Path) -> None:
    async def fn(h) -> None:
        for i in range(3):
            await h.send_v2("StT", f"{i}".encode(), queue_id=1)
        h.wait_dispatched()
        await h.heartbeat("c@1", "StG", "StT")
        await h.pull("StT", "StG", 1, 0, sys_flag=6, subscription="*")
        await h.invoke(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "StG", "topic": "StT", "queueId": "1",
                                                            "commitOffset": "2"})
        r = await h.invoke(RequestCode.GET_BROKER_RUNTIME_INFO)
        table = KVTable.decode(r.body).table
        assert table["brokerVersion"] == "409" and table["brokerVersionDesc"] == "V4_9_8"
        assert table["msgPutTotalTodayNow"] == "3" and table["msgGetTotalTodayNow"] == "3"
        assert "commitLogDirCapacity" in table and table["dispatchBehindBytes"] == "0"

        r = await h.invoke(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "StT"})
        stats = TopicStatsTable.decode(r.body)
        by_q = {mq.queueId: off for mq, off in stats.offsetTable.items()}
        assert sorted(by_q) == [0, 1, 2, 3] and by_q[1].maxOffset == 3 and by_q[0].maxOffset == 0
        assert by_q[1].lastUpdateTimestamp > 0
        r = await h.invoke(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Nope"})
        assert (r.code, r.remark) == (ResponseCode.TOPIC_NOT_EXIST, "topic[Nope] not exist")

        # consumeTps is GROUP_GET_NUMS' minute window: 0 until the 10-s sampling tick has seen the pull
        r = await h.invoke(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "StG"})
        assert ConsumeStats.decode(r.body).consumeTps == 0
        h.role.stats.sample()
        r = await h.invoke(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "StG"})
        cs = ConsumeStats.decode(r.body)
        q1 = next(w for mq, w in cs.offsetTable.items() if mq.queueId == 1 and mq.topic == "StT")
        assert (q1.brokerOffset, q1.consumerOffset) == (3, 2) and q1.lastTimestamp > 0
        assert cs.consumeTps > 0

        r = await h.invoke(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "NoGroup"})
        assert (r.code, r.remark) == (ResponseCode.CONSUMER_NOT_ONLINE, "the consumer group[NoGroup] not online")
        r = await h.invoke(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
        system = TopicList.decode(r.body).topicList
        assert "TBW102" in system and {CLUSTER, BROKER_NAME, f"{CLUSTER}_REPLY_TOPIC"} <= set(system)
        r = await h.invoke(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        assert "StG" in fastjson.loads(bytes(r.body).decode())["subscriptionGroupTable"]
        r = await h.invoke(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "StT"})
        assert json.loads(bytes(r.body))["groupList"] == ["StG"]

    run_with_broker(tmp_path, fn)


def test_delete_expired_commit_log_triggers_manual_delete(tmp_path: Path) -> None:
    async def fn(h) -> None:
        clean = h.role.store.clean_service
        assert clean.manual_delete_file_several_times == 0
        r = await h.invoke(RequestCode.DELETE_EXPIRED_COMMITLOG)
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        assert clean.manual_delete_file_several_times > 0  # the next clean passes ignore deleteWhen

    run_with_broker(tmp_path, fn)
