"""processors/grpc_consumer.py: the receive stream, receipt handles, acks, changes of invisible
time, DLQ and auto-renewal, on a live broker whose POP service is a recording stand-in (the gRPC
layer's contract with processors/pop.py; the real POP machinery has its own tests)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_harness import Harness, run_with_broker
from grpc_support import V2Client, resource
from rmqd.processors.grpc_consumer import RENEW_AHEAD_MS, ReceiptHandle
from rmqd.processors.pop import ChangeInvisibleResult, PopError, PoppedMessage, PopResult, PopStatus
from rmqd.wire.bodies import TopicConfig
from rmqd.wire.message import encode_record, ip_to_bytes
from rmqd.wire.pop import ExtraInfoError, build_extra_info, checked_extra_info, parse_extra_info
from rmqd.wire.rocketmq_v2 import ClientType, Code, pb


class FakePop:
    """Hands out the messages it is given, remembers what the gRPC layer asked."""

    def __init__(self) -> None:
        self.queue: list[tuple[bytes, int]] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.fail_ack = False

    async def pop(self, **kw: Any) -> PopResult:
        self.calls.append(("pop", kw))
        if not self.queue:
            return PopResult(PopStatus.POLLING_TIMEOUT)
        now = int(time.time() * 1000)
        out = []
        for i, (body, reconsume) in enumerate(self.queue):
            record = encode_record(queue_id=0, flag=0, queue_offset=i, physical_offset=1000 + i, sys_flag=0,
                                   born_timestamp=now, born_ip=ip_to_bytes("127.0.0.1"), born_port=1,
                                   store_timestamp=now, store_ip=ip_to_bytes("127.0.0.1"), store_port=2,
                                   reconsume_times=reconsume, prepared_transaction_offset=0, body=body,
                                   topic=kw["topic"], properties=f"UNIQ_KEY\x01ID{i}\x02TAGS\x01TagA")
            extra = build_extra_info(0, now, kw["invisible_time_ms"], 1, kw["topic"], "broker-t", 0, i)
            out.append(PoppedMessage(record, kw["topic"], 0, i, 1000 + i, reconsume, extra))
        self.queue.clear()
        return PopResult(PopStatus.FOUND, out, pop_time=now, invisible_time=kw["invisible_time_ms"], revive_qid=1)

    def ack_now(self, **kw: Any) -> None:
        self.calls.append(("ack", kw))
        if self.fail_ack:
            raise PopError(24, "no message")

    async def change_invisible_time(self, **kw: Any) -> ChangeInvisibleResult:
        self.calls.append(("change", kw))
        now = int(time.time() * 1000)
        return ChangeInvisibleResult(now, kw["invisible_time_ms"], 1, "")

    async def forward_to_dlq(self, **kw: Any) -> None:
        self.calls.append(("dlq", kw))


def _consumer_settings(group: str, topic: str) -> Any:
    s = pb.Settings(client_type=ClientType.SIMPLE_CONSUMER)
    s.subscription.group.name = group
    entry = s.subscription.subscriptions.add()
    entry.topic.name = topic
    entry.expression.type = 1
    entry.expression.expression = "*"
    s.request_timeout.FromMilliseconds(3000)
    return pb.TelemetryCommand(settings=s)


def test_receive_ack_change_dlq_and_renewal(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        fake = FakePop()
        h.role.grpc_service.consumer._pop = lambda: fake  # the gRPC layer only; the broker keeps its own
        h.role.topic_config_manager.update_topic_config(TopicConfig(topicName="TopicC", readQueueNums=1,
                                                                    writeQueueNums=1))
        port = h.role.bound["grpc"][1]
        fake.queue = [(b"m0", 0), (b"m1", 2)]

        def client_side() -> dict[str, Any]:
            import queue
            c = V2Client(port)
            out: dict[str, Any] = {}
            commands: queue.Queue[Any] = queue.Queue()
            commands.put(_consumer_settings("GroupC", "TopicC"))
            stream = c.telemetry(iter(commands.get, None))
            out["settings"] = next(stream)
            req = pb.ReceiveMessageRequest(group=resource("GroupC"), batch_size=16)
            req.message_queue.topic.name = "TopicC"
            req.filter_expression.type = 1
            req.filter_expression.expression = "*"
            req.invisible_duration.FromSeconds(30)
            out["received"] = list(c.call("ReceiveMessage", req, timeout=30))
            out["empty"] = list(c.call("ReceiveMessage", req, timeout=30))
            small = pb.ReceiveMessageRequest()
            small.CopyFrom(req)
            small.invisible_duration.FromSeconds(1)
            out["too_small"] = list(c.call("ReceiveMessage", small, timeout=30))
            msgs = [r.message for r in out["received"] if r.WhichOneof("content") == "message"]
            handle0 = msgs[0].system_properties.receipt_handle
            ack = pb.AckMessageRequest(group=resource("GroupC"), topic=resource("TopicC"))
            ack.entries.add(message_id=msgs[0].system_properties.message_id, receipt_handle=handle0)
            ack.entries.add(message_id="bad", receipt_handle="not a handle")
            out["ack"] = c.call("AckMessage", ack)
            change = pb.ChangeInvisibleDurationRequest(group=resource("GroupC"), topic=resource("TopicC"),
                                                       receipt_handle=msgs[1].system_properties.receipt_handle,
                                                       message_id=msgs[1].system_properties.message_id)
            change.invisible_duration.FromSeconds(5)
            out["change"] = c.call("ChangeInvisibleDuration", change)
            dlq = pb.ForwardMessageToDeadLetterQueueRequest(
                group=resource("GroupC"), topic=resource("TopicC"), receipt_handle=out["change"].receipt_handle,
                message_id=msgs[1].system_properties.message_id, delivery_attempt=3, max_delivery_attempts=3)
            out["dlq"] = c.call("ForwardMessageToDeadLetterQueue", dlq)
            out["msgs"] = msgs
            commands.put(None)
            c.close()
            return out

        out = await trio.to_thread.run_sync(client_side)
        assert out["settings"].settings.subscription.receive_batch_size == 32
        assert out["settings"].settings.backoff_policy.max_attempts == 17
        kinds = [r.WhichOneof("content") for r in out["received"]]
        assert kinds == ["status", "message", "message", "delivery_timestamp"]
        assert out["received"][0].status.code == Code.OK
        msgs = out["msgs"]
        assert [m.body for m in msgs] == [b"m0", b"m1"]
        assert msgs[1].system_properties.delivery_attempt == 3
        handle = ReceiptHandle.decode(msgs[0].system_properties.receipt_handle)
        assert handle.commit_log_offset == 1000 and handle.offset == 0
        assert [r.WhichOneof("content") for r in out["empty"]] == ["status", "delivery_timestamp"]
        assert out["empty"][0].status.code == Code.MESSAGE_NOT_FOUND
        assert out["too_small"][0].status.code == Code.ILLEGAL_INVISIBLE_TIME
        ack = out["ack"]
        assert ack.status.code == Code.MULTIPLE_RESULTS
        assert [e.status.code for e in ack.entries] == [Code.OK, Code.INTERNAL_SERVER_ERROR]
        assert out["change"].status.code == Code.OK
        new = ReceiptHandle.decode(out["change"].receipt_handle)
        assert new.invisible_time == 5000 and new.commit_log_offset == 1001
        assert out["dlq"].status.code == Code.OK
        pop_call = next(kw for name, kw in fake.calls if name == "pop")
        assert pop_call["group"] == "GroupC" and pop_call["max_attempts"] == 17 and pop_call["queue_id"] == -1
        assert 5000 <= pop_call["poll_time_ms"] <= 20000
        (ack_call,) = [kw for name, kw in fake.calls if name == "ack"]
        assert ack_call["offset"] == 0 and ack_call["extra_info"] == handle.extra()

    run_with_broker(tmp_path, body, timeout=60)


def test_auto_renewal_extends_and_clears(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        fake = FakePop()
        h.role.grpc_service.consumer._pop = lambda: fake  # the gRPC layer only; the broker keeps its own
        h.role.topic_config_manager.update_topic_config(TopicConfig(topicName="TopicR", readQueueNums=1,
                                                                    writeQueueNums=1))
        port = h.role.bound["grpc"][1]
        fake.queue = [(b"r0", 0)]
        service = h.role.grpc_service

        def client_side() -> Any:
            import queue
            c = V2Client(port, client_id="renew-client")
            commands: queue.Queue[Any] = queue.Queue()
            commands.put(_consumer_settings("GroupR", "TopicR"))
            stream = c.telemetry(iter(commands.get, None))
            next(stream)
            req = pb.ReceiveMessageRequest(group=resource("GroupR"), batch_size=1, auto_renew=True)
            req.message_queue.topic.name = "TopicR"
            req.filter_expression.type = 1
            req.filter_expression.expression = "*"
            got = list(c.call("ReceiveMessage", req, timeout=30))
            commands.put(None)
            c.close()
            return got

        got = await trio.to_thread.run_sync(client_side)
        assert got[1].message.body == b"r0"
        assert next(kw for n, kw in fake.calls if n == "pop")["invisible_time_ms"] == 60_000
        (group_key,) = service.consumer.receipts.groups
        # not yet near its deadline: nothing happens; near it: renewed for a minute
        await service.consumer.renew_once()
        assert not [c for c in fake.calls if c[0] == "change"]
        await service.consumer.renew_once(now_ms=int(time.time() * 1000) + 60_000 - RENEW_AHEAD_MS + 1)
        changes = [kw for n, kw in fake.calls if n == "change"]
        assert changes and changes[-1]["invisible_time_ms"] == 60_000
        # the client leaves: what it held comes back within a second
        channel = group_key[0]
        h.role.consumer_manager.do_channel_close_event(channel)
        await service.consumer.renew_once()
        changes = [kw for n, kw in fake.calls if n == "change"]
        assert changes[-1]["invisible_time_ms"] == 1000
        assert not service.consumer.receipts.groups

    run_with_broker(tmp_path, body, timeout=60)


_longs = st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**70), 2**70), st.integers(-(2**31) - 2, 2**31 + 1))


@settings(deadline=None, max_examples=400)
@given(st.builds(ReceiptHandle, start_offset=_longs, retrieve_time=_longs, invisible_time=_longs, revive_qid=_longs,
                 topic_type=st.sampled_from(["0", "1", "2", "3", "", "01"]),
                 broker_name=st.text(alphabet=st.characters(blacklist_characters=" "), max_size=12),
                 queue_id=_longs, offset=_longs))
def test_an_ack_checks_the_parsed_handle_as_its_text(handle: ReceiptHandle) -> None:
    """An ack hands the pop service the handle's fields parsed (``extra()``); it must accept and
    refuse exactly what the written-out text (``extra_info``, which decode never lets hold a
    space inside a field) would give."""
    try:
        want = parse_extra_info(handle.extra_info)
    except ExtraInfoError:
        want = None
    try:
        got = checked_extra_info(handle.extra())
    except ExtraInfoError:
        got = None
    assert got == want
