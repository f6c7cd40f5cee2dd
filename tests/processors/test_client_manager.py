"""HEART_BEAT / UNREGISTER_CLIENT, the consumer and producer tables, NOTIFY_CONSUMER_IDS_CHANGED
over each member's own connection, and expiry of silent clients."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from broker_harness import run_with_broker
from rmqd.broker.remoting_client import RemotingClient
from rmqd.processors.client_manager import (
    ClientChannelInfo, ConsumerGroupEvent, ConsumerManager, ProducerManager, scan_exception_channels,
)
from rmqd.wire.bodies import ConsumerConnection, SubscriptionData
from rmqd.wire.codes import LanguageCode, RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand, make_request
from support import wait_until


class FakeChannel:
    def __init__(self, name: str) -> None:
        self.remote_addr = name
        self.closed = False

    def close(self, reason: str = "") -> None:
        self.closed = True


def test_consumer_manager_membership_events() -> None:
    events: list[tuple] = []
    clock = [1_000_000]
    cm = ConsumerManager(lambda *a: events.append(a), clock=lambda: clock[0])
    c1, c2 = FakeChannel("a"), FakeChannel("b")
    subs = [SubscriptionData(topic="T", subString="*", subVersion=1)]
    assert cm.register_consumer("g", ClientChannelInfo(c1, "id1"), "CONSUME_PASSIVELY", "CLUSTERING",
                                "CONSUME_FROM_FIRST_OFFSET", subs)
    assert events[0] == (ConsumerGroupEvent.CHANGE, "g", [c1])
    events.clear()
    # the same member again: no change, only REGISTER
    assert not cm.register_consumer("g", ClientChannelInfo(c1, "id1"), "CONSUME_PASSIVELY", "CLUSTERING",
                                    "CONSUME_FROM_FIRST_OFFSET", subs)
    assert [e[0] for e in events] == [ConsumerGroupEvent.REGISTER]
    events.clear()
    cm.register_consumer("g", ClientChannelInfo(c2, "id2"), "CONSUME_PASSIVELY", "CLUSTERING",
                         "CONSUME_FROM_FIRST_OFFSET", subs)
    assert events[0] == (ConsumerGroupEvent.CHANGE, "g", [c1, c2])
    assert cm.get_consumer_group_info("g").get_all_client_id() == ["id1", "id2"]
    # a newer subVersion replaces silently; a dropped topic is a change
    newer = [SubscriptionData(topic="T", subString="A", subVersion=5)]
    assert not cm.register_consumer("g", ClientChannelInfo(c1, "id1"), "CONSUME_PASSIVELY", "CLUSTERING",
                                    "CONSUME_FROM_FIRST_OFFSET", newer)
    assert cm.find_subscription_data("g", "T").subString == "A"
    assert cm.register_consumer("g", ClientChannelInfo(c1, "id1"), "CONSUME_PASSIVELY", "CLUSTERING",
                                "CONSUME_FROM_FIRST_OFFSET", [SubscriptionData(topic="U", subVersion=6)])
    assert cm.query_topic_consume_by_who("U") == {"g"}
    events.clear()
    cm.do_channel_close_event(c2)
    assert events == [(ConsumerGroupEvent.CHANGE, "g", [c1])]
    events.clear()
    cm.unregister_consumer("g", ClientChannelInfo(c1, "id1"))
    assert events == [(ConsumerGroupEvent.UNREGISTER, "g"), (ConsumerGroupEvent.CHANGE, "g", [])]
    assert cm.get_consumer_group_info("g") is None


def test_expiry_after_120s_closes_channels() -> None:
    clock = [0]
    cm = ConsumerManager(clock=lambda: clock[0])
    pm = ProducerManager(clock=lambda: clock[0])
    ch_c, ch_p, ch_live = FakeChannel("c"), FakeChannel("p"), FakeChannel("live")
    cm.register_consumer("g", ClientChannelInfo(ch_c, "c", last_update_timestamp=0), None, None, None, [])
    pm.register_producer("pg", ClientChannelInfo(ch_p, "p", last_update_timestamp=0))
    clock[0] = 100_000
    pm.register_producer("pg", ClientChannelInfo(ch_live, "live", last_update_timestamp=100_000))
    clock[0] = 120_000
    scan_exception_channels(pm, cm)
    assert not (ch_c.closed or ch_p.closed)
    clock[0] = 120_001
    scan_exception_channels(pm, cm)
    assert ch_c.closed and ch_p.closed and not ch_live.closed
    assert cm.get_consumer_group_info("g") is None
    assert list(pm.group_channel_table["pg"]) == [ch_live]
    assert pm.get_available_channel("pg") is ch_live and pm.find_channel("live") is ch_live
    assert pm.find_channel("p") is None


def test_producer_manager_register_unregister() -> None:
    pm = ProducerManager()
    ch = FakeChannel("x")
    info = ClientChannelInfo(ch, "cid")
    pm.register_producer("pg", info)
    pm.register_producer("pg", ClientChannelInfo(ch, "cid"))
    assert len(pm.group_channel_table["pg"]) == 1
    pm.unregister_producer("pg", info)
    assert "pg" not in pm.group_channel_table and pm.get_available_channel("pg") is None
    pm.register_producer("pg", info)
    pm.do_channel_close_event(ch)
    assert pm.group_channel_table["pg"] == {} and pm.find_channel("cid") is None


async def _second_client(h, notes: list[RemotingCommand]) -> RemotingClient:
    client = RemotingClient("second")
    await client.__aenter__()

    async def on_notify(ctx: Any, request: RemotingCommand) -> None:
        notes.append(request)

    client.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, on_notify)
    return client


def test_heartbeat_notify_unregister_and_close(tmp_path: Path) -> None:
    async def fn(h) -> None:
        r = await h.heartbeat("c1@1", "NG", "NT", producer_groups=("PG1",))
        assert r.code == ResponseCode.SUCCESS and r.ext_fields is None
        # auto-created subscription group and retry topic (1 queue, RW)
        assert h.role.subscription_group_manager.subscription_group_table.get("NG") is not None
        retry = h.role.topic_config_manager.select_topic_config("%RETRY%NG")
        assert (retry.readQueueNums, retry.writeQueueNums, retry.perm) == (1, 1, 6)
        assert "PG1" in h.role.producer_manager.group_channel_table
        await wait_until(lambda: len(h.notifications) == 1, 3, "the first NOTIFY_CONSUMER_IDS_CHANGED")
        note = h.notifications[0]
        assert note.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED and note.flag & 2
        assert note.ext_fields == {"consumerGroup": "NG"}

        notes2: list[RemotingCommand] = []
        c2 = await _second_client(h, notes2)
        try:
            body = json.dumps({"clientID": "c2@2", "consumerDataSet": [{
                "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "consumeType": "CONSUME_PASSIVELY",
                "groupName": "NG", "messageModel": "CLUSTERING", "subscriptionDataSet": [
                    {"subString": "*", "subVersion": 1, "topic": "NT"}], "unitMode": False}],
                "producerDataSet": []}).encode()
            r = await c2.invoke(h.broker_addr, make_request(RequestCode.HEART_BEAT, None, body))
            assert r.code == ResponseCode.SUCCESS
            await wait_until(lambda: len(h.notifications) == 2 and len(notes2) == 1, 3,
                             "both members told of the second one joining")
            r = await h.invoke(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "NG"})
            assert sorted(json.loads(bytes(r.body))["consumerIdList"]) == ["c1@1", "c2@2"]
            # the first member leaves politely: the second is told
            r = await h.invoke(RequestCode.UNREGISTER_CLIENT, {"clientID": "c1@1", "consumerGroup": "NG",
                                                               "producerGroup": "PG1"})
            assert (r.code, r.ext_fields) == (ResponseCode.SUCCESS, {})
            await wait_until(lambda: len(notes2) == 2, 3, "the second member told of the unregister")
            assert "PG1" not in h.role.producer_manager.group_channel_table
            # re-join, then the second member's connection drops: the first is told
            await h.heartbeat("c1@1", "NG", "NT")
            await wait_until(lambda: len(notes2) == 3, 3, "the second member told of the re-join")
            n_before = len(h.notifications)
        finally:
            c2.close_channel(h.broker_addr)
            await c2.__aexit__(None, None, None)
        await wait_until(lambda: len(h.notifications) > n_before, 3, "the first member told of the drop")
        info = h.role.consumer_manager.get_consumer_group_info("NG")
        assert info.get_all_client_id() == ["c1@1"]

    run_with_broker(tmp_path, fn)


def test_cpp_heartbeat_with_ordinals(tmp_path: Path) -> None:
    cpp = ('{"clientID":"7747-127.0.0.1@DEFAULT","consumerDataSet":[{"consumeFromWhere":0,"consumeType":1,'
           '"groupName":"cg_cpp","messageModel":1,"subscriptionDataSet":[{"subString":"*",'
           '"subVersion":"1795317555988","topic":"%RETRY%cg_cpp"},{"subString":"TagA || TagB",'
           '"subVersion":"1795317555988","topic":"t_cpp"}]}],"producerDataSet":[{"groupName":"pg_cpp"}]}')

    async def fn(h) -> None:
        cmd = make_request(RequestCode.HEART_BEAT, {"AccessKey": "", "OnsChannel": "ALIYUN"}, cpp.encode())
        cmd.language = LanguageCode.CPP
        cmd.version = 63
        r = await h.client.invoke(h.broker_addr, cmd, 5.0)
        assert r.code == ResponseCode.SUCCESS
        r = await h.invoke(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "cg_cpp"})
        assert r.code == ResponseCode.SUCCESS
        conn = ConsumerConnection.decode(r.body)
        assert conn.consumeType.name == "CONSUME_PASSIVELY" and conn.messageModel.name == "CLUSTERING"
        assert conn.consumeFromWhere.name == "CONSUME_FROM_LAST_OFFSET"
        (c,) = conn.connectionSet
        assert (c.clientId, c.language.name, c.version) == ("7747-127.0.0.1@DEFAULT", "CPP", 63)
        assert set(conn.subscriptionTable) == {"%RETRY%cg_cpp", "t_cpp"}
        assert conn.subscriptionTable["t_cpp"].subVersion == 1795317555988

    run_with_broker(tmp_path, fn)


def test_check_client_config(tmp_path: Path) -> None:
    async def fn(h) -> None:
        def body(expr: str, typ: str) -> bytes:
            return json.dumps({"clientId": "c", "group": "g", "subscriptionData": {
                "topic": "T", "subString": expr, "expressionType": typ, "subVersion": 1}}).encode()
        r = await h.invoke(RequestCode.CHECK_CLIENT_CONFIG, None, body("TagA", "TAG"))
        assert r.code == ResponseCode.SUCCESS
        r = await h.invoke(RequestCode.CHECK_CLIENT_CONFIG, None, body("a > 1", "SQL92"))
        if h.role.broker_config.enablePropertyFilter:
            assert r.code == ResponseCode.SUCCESS
            r = await h.invoke(RequestCode.CHECK_CLIENT_CONFIG, None, body("a >", "SQL92"))
            assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and r.remark
        else:
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR,
                                          "The broker does not support consumer to filter message by SQL92")

    run_with_broker(tmp_path / "off", fn)
    run_with_broker(tmp_path / "on", fn, enablePropertyFilter="true")
