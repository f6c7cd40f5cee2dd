"""End to end: a name server and a broker in one trio run on free loopback ports, driven by
the raw Remoting client the way a Java 4.9.8 client drives them: route lookup, send
(auto-creating the topic from TBW102), heartbeat, long-polling pull woken by a send,
offset commit, broker restart on the same store (messages and offsets survive), and
unregistration from the name server on shutdown."""

from __future__ import annotations

import json
from pathlib import Path

import trio

from broker_harness import BROKER_NAME, Harness, decode_pull_body, make_settings
from rmqd.broker.broker import BrokerRole
from rmqd.broker.namesrv import NamesrvRole
from rmqd.broker.remoting_client import RemotingClient
from rmqd.wire.bodies import TopicRouteData
from rmqd.wire.codes import RequestCode, ResponseCode
from support import wait_until


async def _route(h: Harness, topic: str) -> TopicRouteData | None:
    r = await h.invoke(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, addr=h.namesrv_addr)
    return TopicRouteData.decode(r.body) if r.code == ResponseCode.SUCCESS else None


async def _wait_route(h: Harness, topic: str, present: bool = True) -> TopicRouteData | None:
    last: list[TopicRouteData | None] = [None]

    async def seen() -> bool:
        last[0] = await _route(h, topic)
        return (last[0] is not None) == present
    await wait_until(seen, 5, f"the name server's route of {topic} {'to appear' if present else 'to go'}",
                     interval=0.05)
    return last[0]


def test_send_long_poll_offsets_restart(tmp_path: Path) -> None:
    async def main() -> None:
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                namesrv = NamesrvRole(host="127.0.0.1", port=0)
                _, ns_port = await nursery.start(namesrv.run)
                ns_addr = f"127.0.0.1:{ns_port}"
                settings = make_settings(tmp_path, ns_addr)
                role = BrokerRole(settings, host="127.0.0.1")
                bound = await nursery.start(role.run)
                broker_addr = f"127.0.0.1:{bound['broker'][1]}"
                assert bound["fast"][1] == bound["broker"][1] - 2

                async with RemotingClient("e2e") as client:
                    h = Harness(role, namesrv, client, broker_addr, ns_addr)
                    # the broker registered: TBW102 is routable, the new topic is not yet
                    tbw = await _wait_route(h, "TBW102")
                    assert tbw.brokerDatas[0].brokerName == BROKER_NAME
                    assert tbw.brokerDatas[0].brokerAddrs == {0: broker_addr}
                    assert await _route(h, "E2E") is None

                    r = await h.send_v2("E2E", b"m0", queue_id=0)
                    assert r.code == ResponseCode.SUCCESS and r.ext_fields["queueOffset"] == "0"
                    route = await _wait_route(h, "E2E")
                    assert route.queueDatas[0].writeQueueNums == 4

                    # push consumer: heartbeat, query offset, long-polling pull woken by a send
                    assert (await h.heartbeat("e2e@1", "E2EG", "E2E")).code == ResponseCode.SUCCESS
                    q = await h.invoke(RequestCode.QUERY_CONSUMER_OFFSET,
                                       {"consumerGroup": "E2EG", "topic": "E2E", "queueId": "0"})
                    assert q.ext_fields == {"offset": "0"}
                    h.wait_dispatched()
                    r = await h.pull("E2E", "E2EG", 0, 0, sys_flag=2, sub_version=1)
                    assert [m.body for m in decode_pull_body(r)] == [b"m0"]
                    async with trio.open_nursery() as inner:
                        async def send_later() -> None:
                            await wait_until(lambda: h.role.pull_hold_service.held_count == 1, 5,
                                             "the long-polling pull to be held")
                            await h.send_v2("E2E", b"m1", queue_id=0)
                        inner.start_soon(send_later)
                        t0 = trio.current_time()
                        r = await h.pull("E2E", "E2EG", 0, 1, sys_flag=3, sub_version=1, suspend_ms=15_000,
                                         commit_offset=1)
                        assert trio.current_time() - t0 < 5
                    assert r.code == ResponseCode.SUCCESS
                    assert [m.body for m in decode_pull_body(r)] == [b"m1"]
                    await h.invoke(RequestCode.UPDATE_CONSUMER_OFFSET,
                                   {"consumerGroup": "E2EG", "topic": "E2E", "queueId": "0", "commitOffset": "2"},
                                   oneway=True)
                    await h.send_v2("E2E", b"m2", queue_id=0)
                    r = await h.invoke(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "E2EG"})
                    assert json.loads(bytes(r.body))["consumerIdList"] == ["e2e@1"]
                    client.close_channel(broker_addr)

                await role.stop()
                # shutdown unregistered the broker: no route any more, store closed cleanly
                async with RemotingClient("e2e-check") as client:
                    h = Harness(role, namesrv, client, broker_addr, ns_addr)
                    await _wait_route(h, "E2E", present=False)
                assert not (tmp_path / "abort").exists()

                # restart on the same store: messages and the committed offset are still there
                role2 = BrokerRole(make_settings(tmp_path, ns_addr), host="127.0.0.1")
                bound2 = await nursery.start(role2.run)
                addr2 = f"127.0.0.1:{bound2['broker'][1]}"
                async with RemotingClient("e2e-2") as client:
                    h = Harness(role2, namesrv, client, addr2, ns_addr)
                    q = await h.invoke(RequestCode.QUERY_CONSUMER_OFFSET,
                                       {"consumerGroup": "E2EG", "topic": "E2E", "queueId": "0"})
                    assert q.ext_fields == {"offset": "2"}
                    r = await h.pull("E2E", "E2EG", 0, 2, sys_flag=6, subscription="*")
                    assert [m.body for m in decode_pull_body(r)] == [b"m2"]
                    assert (await _wait_route(h, "E2E")).brokerDatas[0].brokerAddrs == {0: addr2}
                    client.close_channel(addr2)
                await role2.stop()
                await namesrv.stop()

    trio.run(main)


def test_messaging_semantics_are_wired(tmp_path: Path) -> None:
    """The issue-5 processors answer through this broker's dispatch table: delayed delivery,
    send-back to retry, END_TRANSACTION, queue locks, queries by key."""
    from broker_harness import run_with_broker
    from rmqd.wire.message import parse_offset_msg_id

    async def fn(h: Harness) -> None:
        # delay level 1 (1 s): parked in SCHEDULE_TOPIC_XXXX, then delivered to its topic
        r = await h.send_v2("DelayT", b"later", queue_id=0, extra={"DELAY": "1"})
        assert r.code == ResponseCode.SUCCESS
        await wait_until(lambda: h.role.store.get_max_offset_in_queue("DelayT", 0) >= 1, 6,
                         "the level-1 message delivered to DelayT", interval=0.05)
        h.wait_dispatched()
        (delivered,) = decode_pull_body(await h.pull("DelayT", "dg", 0, 0, sys_flag=4, subscription="*"))
        assert delivered.body == b"later" and delivered.properties["REAL_TOPIC"] == "DelayT"

        # a failed message goes back: DELAY = 3 + reconsumeTimes, on its way to %RETRY%group
        r = await h.invoke(RequestCode.CONSUMER_SEND_MSG_BACK, {
            "offset": str(delivered.physical_offset), "group": "dg", "delayLevel": "0",
            "originMsgId": delivered.offset_msg_id, "originTopic": "DelayT", "maxReconsumeTimes": "16"})
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert h.role.topic_config_manager.select_topic_config("%RETRY%dg") is not None
        h.wait_dispatched()
        assert h.role.store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 2) == 1

        # transaction: half message hidden until END_TRANSACTION commit
        r = await h.send_v2("TxE2E", b"tx", queue_id=1, sys_flag=4,
                            extra={"TRAN_MSG": "true", "PGROUP": "txg", "UNIQ_KEY": "AB01"})
        assert r.code == ResponseCode.SUCCESS
        _, _, phy = parse_offset_msg_id(r.ext_fields["msgId"])
        h.wait_dispatched()
        assert h.role.store.get_max_offset_in_queue("TxE2E", 1) == 0
        r = await h.invoke(RequestCode.END_TRANSACTION, {
            "producerGroup": "txg", "tranStateTableOffset": r.ext_fields["queueOffset"], "commitLogOffset": str(phy),
            "commitOrRollback": "8", "fromTransactionCheck": "false", "msgId": "AB01", "transactionId": "AB01"})
        assert r.code == ResponseCode.SUCCESS, r.remark
        h.wait_dispatched()
        (committed,) = decode_pull_body(await h.pull("TxE2E", "txc", 1, 0, sys_flag=4, subscription="*"))
        assert committed.body == b"tx"

        # orderly consumers lock queues
        body = json.dumps({"consumerGroup": "og", "clientId": "c1",
                           "mqSet": [{"topic": "TxE2E", "brokerName": BROKER_NAME, "queueId": 1}]}).encode()
        r = await h.invoke(RequestCode.LOCK_BATCH_MQ, None, body)
        assert r.code == ResponseCode.SUCCESS and json.loads(bytes(r.body))["lockOKMQSet"][0]["queueId"] == 1

        # query by key through the index
        await h.send_v2("KeyT", b"keyed", queue_id=0, keys="order-42")
        h.wait_dispatched()
        import time as _time
        now = int(_time.time() * 1000)
        r = await h.invoke(RequestCode.QUERY_MESSAGE, {"topic": "KeyT", "key": "order-42", "maxNum": "32",
                                                       "beginTimestamp": str(now - 60_000),
                                                       "endTimestamp": str(now + 60_000)})
        assert r.code == ResponseCode.SUCCESS
        assert [m.body for m in decode_pull_body(r)] == [b"keyed"]

    run_with_broker(tmp_path, fn, timeout=40)
