"""POP with a group and topic whose POP retry topic ``%RETRY%<group>_<topic>`` is longer than 127
characters (issue 44: a 57-char group and a 64-char topic make 129).

RocketMQ 5.x (apache/rocketmq develop 8fc57f1 and 5.3.3) never validates that name: an orderly
(FIFO) pop neither reads nor writes the retry topic - PopMessageProcessor reads it only
``!requestHeader.isOrder()`` and orderly pops write no checkpoint, so nothing is ever revived
into it; an unacknowledged message is popped again from its own queue. So rmqd refuses nothing
for FIFO. A non-FIFO pop's unacked messages are revived into that topic
(PopReviveService.reviveRetry); rmqd's store keeps no topic over 127 chars (5.x would write
such a record in the v2 format 4.9.x cannot read), so rmqd refuses such a pop up front instead of
losing its messages later (docs/pop.md).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio

from broker_harness import BROKER_NAME, Harness, run_with_broker
from rmqd.processors.pop import PopError
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.message import decode_messages, decode_record
from rmqd.wire.pop import POP_ORDER_REVIVE_QUEUE, pop_retry_topic

pytestmark = pytest.mark.timeout(120)

GROUP = "G" * 57
TOPIC = "T" * 64
CREATE = {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6",
          "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false", "attributes": "+message.type=FIFO"}


async def _setup(h: Harness, n: int) -> None:
    assert len(pop_retry_topic(TOPIC, GROUP)) == 129
    assert (await h.invoke(RequestCode.UPDATE_AND_CREATE_TOPIC, CREATE)).code == ResponseCode.SUCCESS
    for i in range(n):
        r = await h.send_v2(TOPIC, f"m{i}".encode(), queue_id=0)
        assert r.code == ResponseCode.SUCCESS, r.remark
    h.wait_dispatched()


def test_fifo_pop_with_a_too_long_retry_topic_name_delivers_and_redelivers_from_the_queue(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await _setup(h, 2)
        svc = h.role.pop_service
        first = await svc.pop(group=GROUP, topic=TOPIC, invisible_time_ms=1000, max_count=2, fifo=True,
                              attempt_id="a1", init_mode=0)
        assert [m.queue_offset for m in first.messages] == [0, 1] and first.revive_qid == POP_ORDER_REVIVE_QUEUE
        assert all(m.topic == TOPIC and not m.retry for m in first.messages)
        # not acked: after the invisible time the same offsets come again, from the topic's own queue
        deadline = trio.current_time() + 15
        again: list = []
        while not again and trio.current_time() < deadline:
            r = await svc.pop(group=GROUP, topic=TOPIC, invisible_time_ms=30_000, max_count=2, fifo=True,
                              attempt_id="a2", poll_time_ms=1000)
            again = r.messages
        assert [m.queue_offset for m in again] == [0, 1]
        assert all(m.topic == TOPIC and not m.retry and m.reconsume_times == 1 for m in again)
        assert [decode_record(m.record, 0).body for m in again] == [b"m0", b"m1"]
        for m in again:
            await svc.ack(group=GROUP, topic=m.topic, queue_id=0, offset=m.queue_offset, extra_info=m.extra_info)
        assert h.role.consumer_offset_manager.query_offset(GROUP, TOPIC, 0) == 2
        # the retry topic was never needed
        assert h.role.topic_config_manager.select_topic_config(pop_retry_topic(TOPIC, GROUP)) is None

    run_with_broker(tmp_path, scenario, timeout=90)


def test_fifo_remoting_pop_and_ack_with_long_names(tmp_path: Path) -> None:
    """POP_MESSAGE order=true and ACK_MESSAGE as the 5.x Remoting client sends them (the names
    pass the request guard: each is a valid topic / group)."""

    async def scenario(h: Harness) -> None:
        await _setup(h, 1)
        ext = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "-1", "maxMsgNums": "32",
               "invisibleTime": "60000", "pollTime": "0", "bornTime": str(int(time.time() * 1000)), "initMode": "0",
               "expType": "TAG", "exp": "*", "order": "true", "attemptId": "att-1", "bname": BROKER_NAME}
        r = await h.invoke(RequestCode.POP_MESSAGE, ext)
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, "FOUND")
        (msg,) = decode_messages(bytes(r.body))
        assert msg.body == b"m0" and r.ext_fields["reviveQid"] == str(POP_ORDER_REVIVE_QUEUE)
        extra = (f"0 {r.ext_fields['popTime']} 60000 {POP_ORDER_REVIVE_QUEUE} 0 {BROKER_NAME} 0 "
                 f"{msg.queue_offset}")
        a = await h.invoke(RequestCode.ACK_MESSAGE, {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0",
                                                     "extraInfo": extra, "offset": str(msg.queue_offset)})
        assert a.code == ResponseCode.SUCCESS, a.remark
        assert h.role.consumer_offset_manager.query_offset(GROUP, TOPIC, 0) == 1

    run_with_broker(tmp_path, scenario, timeout=60)


def test_non_fifo_pop_needs_a_retry_topic_the_store_can_keep(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await _setup(h, 1)
        svc = h.role.pop_service
        before = h.role.store.get_max_phy_offset()
        with pytest.raises(PopError) as e:
            await svc.pop(group=GROUP, topic=TOPIC, invisible_time_ms=1000, init_mode=0)
        assert e.value.code == ResponseCode.SYSTEM_ERROR
        assert e.value.remark == (f"the POP retry topic of group {GROUP} and topic {TOPIC} is not a valid topic: "
                                  "The specified topic is longer than topic max length. (unacknowledged messages "
                                  "could never come back; FIFO consumption needs no retry topic)")
        assert h.role.store.get_max_phy_offset() == before  # no checkpoint, nothing handed out
        assert h.role.consumer_offset_manager.query_offset(GROUP, TOPIC, 0) == -1
        # a retry topic of exactly 127 chars is fine: %RETRY% + 55 + _ + 64
        ok = "G" * 55
        assert len(pop_retry_topic(TOPIC, ok)) == 127
        r = await svc.pop(group=ok, topic=TOPIC, invisible_time_ms=60_000, init_mode=0)
        assert [decode_record(m.record, 0).body for m in r.messages] == [b"m0"]

    run_with_broker(tmp_path, scenario, timeout=60)


def test_grpc_fifo_receive_with_long_names(tmp_path: Path) -> None:
    """The SimpleConsumer's path (issue 44: refused with 50001 before): a FIFO group
    (consumeMessageOrderly) receives, the message is made visible again by a change of its
    invisible duration, and the next receive gets it again from its queue (delivery attempt 2)."""
    import json
    import queue as queue_mod
    from typing import Any

    from grpc_support import V2Client, resource
    from rmqd.wire.rocketmq_v2 import Code, pb
    from test_grpc_consumer import _consumer_settings  # the SimpleConsumer's settings command

    async def scenario(h: Harness) -> None:
        await _setup(h, 1)
        body = json.dumps({"groupName": GROUP, "consumeMessageOrderly": True}).encode()
        assert (await h.invoke(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body)).code == ResponseCode.SUCCESS
        port = h.role.bound["grpc"][1]

        def client_side() -> dict[str, Any]:
            c = V2Client(port, client_id="long-names-1")
            out: dict[str, Any] = {}
            commands: queue_mod.Queue[Any] = queue_mod.Queue()
            commands.put(_consumer_settings(GROUP, TOPIC))
            stream = c.telemetry(iter(commands.get, None))
            out["settings"] = next(stream)
            req = pb.ReceiveMessageRequest(group=resource(GROUP), batch_size=16)
            req.message_queue.topic.name = TOPIC
            req.filter_expression.type = 1
            req.filter_expression.expression = "*"
            req.invisible_duration.FromSeconds(10)
            req.long_polling_timeout.FromSeconds(5)
            out["first"] = list(c.call("ReceiveMessage", req, timeout=30))
            msgs = [r.message for r in out["first"] if r.WhichOneof("content") == "message"]
            if msgs:
                change = pb.ChangeInvisibleDurationRequest(
                    group=resource(GROUP), topic=resource(TOPIC), receipt_handle=msgs[0].system_properties.receipt_handle,
                    message_id=msgs[0].system_properties.message_id)
                change.invisible_duration.FromSeconds(1)
                out["change"] = c.call("ChangeInvisibleDuration", change)
                deadline = time.monotonic() + 20
                again: list = []
                while not again and time.monotonic() < deadline:
                    got = list(c.call("ReceiveMessage", req, timeout=30))
                    again = [r.message for r in got if r.WhichOneof("content") == "message"]
                out["again"] = again
                if again:
                    ack = pb.AckMessageRequest(group=resource(GROUP), topic=resource(TOPIC))
                    ack.entries.add(message_id=again[0].system_properties.message_id,
                                    receipt_handle=again[0].system_properties.receipt_handle)
                    out["ack"] = c.call("AckMessage", ack)
            out["msgs"] = msgs
            commands.put(None)
            c.close()
            return out

        out = await trio.to_thread.run_sync(client_side)
        assert out["settings"].settings.subscription.fifo
        assert out["first"][0].status.code == Code.OK, out["first"][0].status
        assert [m.body for m in out["msgs"]] == [b"m0"]
        assert out["change"].status.code == Code.OK
        again = out["again"]
        assert [m.body for m in again] == [b"m0"] and again[0].system_properties.delivery_attempt == 2
        assert again[0].system_properties.queue_offset == 0 and again[0].topic.name == TOPIC
        assert out["ack"].status.code == Code.OK
        assert h.role.consumer_offset_manager.query_offset(GROUP, TOPIC, 0) == 1
        assert h.role.topic_config_manager.select_topic_config(pop_retry_topic(TOPIC, GROUP)) is None

    run_with_broker(tmp_path, scenario, timeout=90)
