"""POP consumption against a real broker (processors/pop.py, pop_revive.py, pop_remoting.py):
the PopService API the gRPC layer calls and the Remoting codes the 5.x client sends, over one
broker per test (tests/broker_harness.py). Revive waits are bounded generously: a message comes
back after its invisible time + the timer's second + 5.3's 2 s margin; they end when the revive
service has dealt with the checkpoint (its offset in consumerOffset.json), not after a fixed time."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_harness import BROKER_NAME, CLUSTER, Harness, run_with_broker
from support import wait_until
from rmqd.processors.pop import AckEntry, PopError, PopStatus, popped_head
from rmqd.wire import fastjson
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.message import decode_messages, decode_record, encode_record
from rmqd.wire.pop import (
    POP_ORDER_REVIVE_QUEUE, PROPERTY_FIRST_POP_TIME, PROPERTY_POP_CK, BatchAck, encode_batch_ack_body,
    parse_extra_info, pop_retry_topic,
)

pytestmark = pytest.mark.timeout(180)

REVIVE_BOUND_S = 30.0
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"
#: revive rounds 10 times a second (RocketMQ: every 1 s), so a due checkpoint is dealt with
#: within 0.1 s of being due: the tests that wait for one wait for the due time itself
REVIVE_INTERVAL_MS = 100


async def _send(h: Harness, topic: str, n: int, *, queue_id: int = 0, tags: str = "TagA") -> None:
    for i in range(n):
        r = await h.send_v2(topic, f"m{i}".encode(), queue_id=queue_id, tags=tags)
        assert r.code == ResponseCode.SUCCESS, r.remark
    h.wait_dispatched()


def _revive_offset(h: Harness, qid: int) -> int:
    """The revive service's progress on revive queue ``qid``: the queue offset of the last
    checkpoint it dealt with (-1 before the first), as consumerOffset.json keeps it."""
    return h.role.consumer_offset_manager.query_offset(REVIVE_GROUP, h.role.pop_service.revive_topic, qid)


async def _revived(h: Harness, qid: int, before: int, what: str) -> None:
    """Wait until the revive service dealt with a checkpoint of queue ``qid`` after offset
    ``before`` (a checkpoint is revived once: what it brings back is in the retry topic then),
    and until the retry topic's consume queue has it."""
    await wait_until(lambda: _revive_offset(h, qid) > before, REVIVE_BOUND_S, what, interval=0.1)
    h.wait_dispatched()


async def _pop_until(h: Harness, topic: str, group: str, want: int, bound_s: float = REVIVE_BOUND_S,
                     **kw: object) -> list:
    got: list = []
    deadline = trio.current_time() + bound_s
    while len(got) < want and trio.current_time() < deadline:
        r = await h.role.pop_service.pop(group=group, topic=topic, poll_time_ms=1000, **kw)  # type: ignore[arg-type]
        got += r.messages
    return got


def test_pop_ack_and_unacked_come_back_after_the_invisible_time(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        svc = h.role.pop_service
        await _send(h, "PopT", 4)
        t0 = trio.current_time()
        r = await svc.pop(group="PopG", topic="PopT", invisible_time_ms=3000, init_mode=0)
        assert r.status is PopStatus.FOUND and len(r.messages) == 4
        for m in r.messages:
            x = parse_extra_info(m.extra_info)
            assert (x.pop_time, x.invisible_time, x.queue_id, x.queue_offset) == (r.pop_time, 3000, 0, m.queue_offset)
            assert x.broker_name == BROKER_NAME and x.kind == "0" and m.topic == "PopT" and not m.retry
        # invisible now
        again = await svc.pop(group="PopG", topic="PopT", invisible_time_ms=3000)
        assert again.messages == []
        acked = r.messages[:2]
        for m in acked:
            await svc.ack(group="PopG", topic=m.topic, queue_id=m.queue_id, offset=m.queue_offset,
                          extra_info=m.extra_info)
        back = await _pop_until(h, "PopT", "PopG", 2, invisible_time_ms=60000)
        assert trio.current_time() - t0 >= 3.0  # not before the invisible time
        # the first pop's checkpoint is dealt with (its unacknowledged two are back): the two
        # acknowledged ones were not brought back by it, and a checkpoint is revived once
        await _revived(h, r.revive_qid, -1, "the first pop's checkpoint to be revived")
        bodies = sorted(decode_record(m.record, 0).body for m in back)
        assert bodies == sorted(decode_record(m.record, 0).body for m in r.messages[2:])
        retry = pop_retry_topic("PopT", "PopG")
        for m in back:
            rec = decode_record(m.record, 0)
            assert m.retry and m.topic == retry and m.reconsume_times == 1
            assert rec.topic == "PopT"  # answered under the subscribed topic
            assert rec.properties[PROPERTY_POP_CK] == m.extra_info
            assert rec.properties[PROPERTY_FIRST_POP_TIME] == str(r.pop_time)
            assert parse_extra_info(m.extra_info).kind == "1"
        # the acked ones never come back, the others are acked now
        for m in back:
            await svc.ack(group="PopG", topic=m.topic, queue_id=m.queue_id, offset=m.queue_offset,
                          extra_info=m.extra_info)
        # (the 8 s this used to pop for could not see more: the retried two are invisible 60 s)
        extra = await svc.pop(group="PopG", topic="PopT", invisible_time_ms=60000, poll_time_ms=0)
        assert extra.messages == []
        assert h.role.pop_service.revive_topic == f"rmq_sys_REVIVE_LOG_{CLUSTER}"

    run_with_broker(tmp_path, scenario, timeout=120, reviveInterval=REVIVE_INTERVAL_MS)


def test_change_invisible_time_and_batch_ack(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        svc = h.role.pop_service
        await _send(h, "ChgT", 3)
        r = await svc.pop(group="ChgG", topic="ChgT", invisible_time_ms=120_000, init_mode=0)
        assert len(r.messages) == 3
        m0, m1, m2 = r.messages
        changed = await svc.change_invisible_time(group="ChgG", topic=m0.topic, queue_id=m0.queue_id,
                                                  offset=m0.queue_offset, extra_info=m0.extra_info,
                                                  invisible_time_ms=1000)
        x = parse_extra_info(changed.extra_info)
        assert changed.invisible_time == 1000 and x.ck_queue_offset == m0.queue_offset
        errors = await svc.batch_ack(group="ChgG", entries=[
            AckEntry(m.topic, m.queue_id, m.queue_offset, m.extra_info) for m in (m1, m2)])
        assert errors == [None, None]
        t0 = trio.current_time()
        back = await _pop_until(h, "ChgT", "ChgG", 1, invisible_time_ms=60000)
        assert [decode_record(m.record, 0).body for m in back] == [b"m0"]
        assert trio.current_time() - t0 < 20  # long before the first 120 s

    run_with_broker(tmp_path, scenario, timeout=120, reviveInterval=REVIVE_INTERVAL_MS)


def test_fifo_pop_blocks_the_queue_until_acked(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        svc = h.role.pop_service
        await _send(h, "OrdT", 3)
        r = await svc.pop(group="OrdG", topic="OrdT", invisible_time_ms=30_000, queue_id=0, max_count=2, fifo=True,
                          attempt_id="a1", init_mode=0)
        assert [m.queue_offset for m in r.messages] == [0, 1] and r.revive_qid == POP_ORDER_REVIVE_QUEUE
        assert r.order_count_info
        blocked = await svc.pop(group="OrdG", topic="OrdT", invisible_time_ms=30_000, queue_id=0, fifo=True,
                                attempt_id="a2")
        assert blocked.messages == []
        same = await svc.pop(group="OrdG", topic="OrdT", invisible_time_ms=30_000, queue_id=0, max_count=2,
                             fifo=True, attempt_id="a1")
        assert [m.queue_offset for m in same.messages] == [0, 1]
        for m in same.messages:
            await svc.ack(group="OrdG", topic=m.topic, queue_id=0, offset=m.queue_offset, extra_info=m.extra_info)
        assert h.role.consumer_offset_manager.query_offset("OrdG", "OrdT", 0) == 2
        nxt = await svc.pop(group="OrdG", topic="OrdT", invisible_time_ms=1000, queue_id=0, fifo=True,
                            attempt_id="a3")
        assert [m.queue_offset for m in nxt.messages] == [2]
        # not acked: it comes back (same offset, counted) once its invisible time ran out
        again = await _pop_until(h, "OrdT", "OrdG", 1, bound_s=10, invisible_time_ms=1000, queue_id=0, fifo=True,
                                 attempt_id="a4")
        assert [m.queue_offset for m in again] == [2] and again[0].reconsume_times == 1
        info = fastjson.loads((Path(h.role.store.config.storePathRootDir) / "config" / "consumerOrderInfo.json")
                              .read_text())
        assert info["table"]["OrdT@OrdG"][0]["o"] == [2] and info["table"]["OrdT@OrdG"][0]["a"] == "a4"

    run_with_broker(tmp_path, scenario, timeout=120, reviveInterval=REVIVE_INTERVAL_MS)


def test_long_polling_wakes_on_arrival(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        svc = h.role.pop_service
        await _send(h, "LpT", 1)
        first = await svc.pop(group="LpG", topic="LpT", invisible_time_ms=60_000, init_mode=0)
        assert len(first.messages) == 1
        got = []

        async def popper() -> None:
            got.append(await svc.pop(group="LpG", topic="LpT", invisible_time_ms=60_000, poll_time_ms=15_000))

        async with trio.open_nursery() as n:
            n.start_soon(popper)
            await trio.sleep(0.5)
            t0 = trio.current_time()
            await _send(h, "LpT", 1)
            with trio.fail_after(10):
                while not got:
                    await trio.sleep(0.05)
            assert trio.current_time() - t0 < 5
        assert [decode_record(m.record, 0).body for m in got[0].messages] == [b"m0"]

    run_with_broker(tmp_path, scenario, timeout=60)


def test_refusals_carry_rocketmqs_codes(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        svc = h.role.pop_service
        with pytest.raises(PopError) as e:
            await svc.pop(group="G", topic="NoSuchTopic", invisible_time_ms=1000)
        assert e.value.code == ResponseCode.TOPIC_NOT_EXIST
        await _send(h, "RefT", 1)
        with pytest.raises(PopError) as e:
            await svc.pop(group="G", topic="RefT", invisible_time_ms=1000, max_count=33)
        assert e.value.code == ResponseCode.INVALID_PARAMETER
        with pytest.raises(PopError) as e:
            await svc.pop(group="G", topic="RefT", invisible_time_ms=1000, expression_type="SQL92", expression="a >")
        assert e.value.code in (ResponseCode.SUBSCRIPTION_PARSE_FAILED, ResponseCode.SYSTEM_ERROR)
        with pytest.raises(PopError) as e:
            await svc.ack(group="G", topic="RefT", queue_id=0, offset=99, extra_info="0 1 2 0 0 b 0 99")
        assert e.value.code == ResponseCode.NO_MESSAGE
        with pytest.raises(PopError) as e:
            await svc.ack(group="G", topic="RefT", queue_id=0, offset=0, extra_info="garbage")
        assert e.value.code == ResponseCode.INVALID_PARAMETER

    run_with_broker(tmp_path, scenario)


def test_forward_to_dlq_moves_and_acks(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        svc = h.role.pop_service
        await _send(h, "DlqT", 1)
        r = await svc.pop(group="DlqG", topic="DlqT", invisible_time_ms=2000, init_mode=0)
        m = r.messages[0]
        before = _revive_offset(h, r.revive_qid)  # its checkpoint is not due for 2 s and more
        await svc.forward_to_dlq(group="DlqG", topic=m.topic, queue_id=m.queue_id, offset=m.queue_offset,
                                 extra_info=m.extra_info)
        h.wait_dispatched()
        assert h.role.store.get_max_offset_in_queue("%DLQ%DlqG", 0) == 1
        # acknowledged by the move: once the pop's checkpoint is dealt with, nothing came back
        # (instead of popping for 7 s, past the invisible time, the timer's second and the margin)
        await _revived(h, r.revive_qid, before, "the pop's checkpoint to be dealt with")
        assert (await svc.pop(group="DlqG", topic="DlqT", invisible_time_ms=60000, poll_time_ms=0)).messages == []

    run_with_broker(tmp_path, scenario, timeout=60, reviveInterval=REVIVE_INTERVAL_MS)


def test_remoting_codes(tmp_path: Path) -> None:
    """POP_MESSAGE / ACK_MESSAGE / CHANGE_MESSAGE_INVISIBLETIME / BATCH_ACK_MESSAGE as the 5.x
    client sends them (header names and types of 5.3.3)."""

    async def scenario(h: Harness) -> None:
        await _send(h, "RmT", 3)
        now = int(time.time() * 1000)
        ext = {"consumerGroup": "RmG", "topic": "RmT", "queueId": "-1", "maxMsgNums": "32",
               "invisibleTime": "60000", "pollTime": "0", "bornTime": str(now), "initMode": "0", "expType": "TAG",
               "exp": "*", "order": "false", "bname": BROKER_NAME}
        r = await h.invoke(RequestCode.POP_MESSAGE, ext)
        assert r.code == ResponseCode.SUCCESS and r.remark == "FOUND", (r.code, r.remark)
        assert {"popTime", "invisibleTime", "reviveQid", "restNum", "startOffsetInfo", "msgOffsetInfo"} <= set(
            r.ext_fields)
        msgs = decode_messages(bytes(r.body))
        assert sorted(m.body for m in msgs) == [b"m0", b"m1", b"m2"]
        pop_time, rq = r.ext_fields["popTime"], r.ext_fields["reviveQid"]
        extra = [f"0 {pop_time} 60000 {rq} 0 {BROKER_NAME} 0 {m.queue_offset}" for m in msgs]
        a = await h.invoke(RequestCode.ACK_MESSAGE, {"consumerGroup": "RmG", "topic": "RmT", "queueId": "0",
                                                     "extraInfo": extra[0], "offset": str(msgs[0].queue_offset)})
        assert a.code == ResponseCode.SUCCESS
        c = await h.invoke(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, {
            "consumerGroup": "RmG", "topic": "RmT", "queueId": "0", "extraInfo": extra[1],
            "offset": str(msgs[1].queue_offset), "invisibleTime": "5000"})
        assert c.code == ResponseCode.SUCCESS and c.ext_fields["invisibleTime"] == "5000"
        body = encode_batch_ack_body(BROKER_NAME, [BatchAck("RmG", "RmT", "0", 0, 0, int(rq), int(pop_time), 60000,
                                                            (msgs[2].queue_offset,))])
        b = await h.invoke(RequestCode.BATCH_ACK_MESSAGE, None, body)
        assert b.code == ResponseCode.SUCCESS
        empty = await h.invoke(RequestCode.POP_MESSAGE, {**ext, "bornTime": str(int(time.time() * 1000))})
        assert empty.code == ResponseCode.POLLING_TIMEOUT and empty.remark == "NO_MESSAGE_IN_QUEUE"
        late = await h.invoke(RequestCode.POP_MESSAGE, {**ext, "bornTime": str(now - 10_000)})
        assert late.code == ResponseCode.POLLING_TIMEOUT and "timeout too much" in late.remark
        bad = await h.invoke(RequestCode.POP_MESSAGE, {k: v for k, v in ext.items() if k != "invisibleTime"})
        assert bad.code == ResponseCode.SYSTEM_ERROR and "invisibleTime" in bad.remark

    run_with_broker(tmp_path, scenario, timeout=60)


def test_tag_and_sql92_filters(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        svc = h.role.pop_service
        for i, tag in enumerate(["A", "B", "A", "C"]):
            r = await h.send_v2("FltT", f"{tag}{i}".encode(), tags=tag, extra={"n": str(i)})
            assert r.code == ResponseCode.SUCCESS
        h.wait_dispatched()
        a = await svc.pop(group="FltG", topic="FltT", invisible_time_ms=60_000, expression="A || C", init_mode=0)
        assert sorted(decode_record(m.record, 0).body for m in a.messages) == [b"A0", b"A2", b"C3"]
        s = await svc.pop(group="FltS", topic="FltT", invisible_time_ms=60_000, expression_type="SQL92",
                          expression="n > 1", init_mode=0)
        assert sorted(decode_record(m.record, 0).body for m in s.messages) == [b"A2", b"C3"]
        rest = await svc.pop(group="FltG", topic="FltT", invisible_time_ms=60_000, expression="A || C")
        assert rest.messages == [] and h.role.consumer_offset_manager.query_offset("FltG", "FltT", 0) == 4

    run_with_broker(tmp_path, scenario, enablePropertyFilter="true")


def test_max_attempts_dead_letters_instead_of_returning(tmp_path: Path) -> None:
    """pop(max_attempts=2): the second delivery is the last; the third goes to %DLQ% (the proxy's rule)."""

    async def scenario(h: Harness) -> None:
        svc = h.role.pop_service
        await _send(h, "MaT", 1)
        first = await svc.pop(group="MaG", topic="MaT", invisible_time_ms=1000, init_mode=0, max_attempts=2)
        assert len(first.messages) == 1
        second = await _pop_until(h, "MaT", "MaG", 1, invisible_time_ms=1000, max_attempts=2)
        assert len(second) == 1 and second[0].reconsume_times == 1
        # the third delivery is due once the second's checkpoint is revived: the pops that find
        # it forward it to %DLQ% instead of returning it (they used to go on for 15 s)
        third: list = []

        async def dead_lettered() -> bool:
            third.extend(await _pop_until(h, "MaT", "MaG", 1, bound_s=1, invisible_time_ms=1000, max_attempts=2))
            h.wait_dispatched()
            return h.role.store.get_max_offset_in_queue("%DLQ%MaG", 0) == 1
        await wait_until(dead_lettered, 15, "the third delivery in %DLQ%MaG", interval=0)
        assert third == []

    run_with_broker(tmp_path, scenario, timeout=90, reviveInterval=REVIVE_INTERVAL_MS)


def test_recover_offsets_moves_stale_offsets_past_the_checkpoints(tmp_path: Path) -> None:
    """What start-up does after a SIGKILL left consumerOffset.json older than the checkpoints."""

    async def scenario(h: Harness) -> None:
        svc = h.role.pop_service
        await _send(h, "RecT", 5)
        r = await svc.pop(group="RecG", topic="RecT", invisible_time_ms=60_000, init_mode=0)
        assert len(r.messages) == 5
        h.wait_dispatched()
        com = h.role.consumer_offset_manager
        assert com.query_offset("RecG", "RecT", 0) == 5
        com.commit_offset("test", "RecG", "RecT", 0, 1)  # as if the file were from before the pop
        assert svc.revive.recover_offsets() == 1
        assert com.query_offset("RecG", "RecT", 0) == 5
        again = await svc.pop(group="RecG", topic="RecT", invisible_time_ms=60_000)
        assert again.messages == []

    run_with_broker(tmp_path, scenario)


@settings(max_examples=200, deadline=None)
@given(born_v6=st.booleans(), store_v6=st.booleans(), physical_offset=st.integers(0, 2**63 - 1),
       reconsume=st.integers(-2**31, 2**31 - 1), topic=st.sampled_from(["t", "x" * 130]))
def test_popped_head_reads_what_a_decode_reads(born_v6: bool, store_v6: bool, physical_offset: int, reconsume: int,
                                               topic: str) -> None:
    """A pop reads a record's commit-log offset and reconsume times in place: at the offsets
    each host-size combination (and either magic) puts them, the same as a whole decode."""
    rec = encode_record(queue_id=3, flag=0, queue_offset=9, physical_offset=physical_offset, sys_flag=0,
                        born_timestamp=1, born_ip=bytes(16 if born_v6 else 4), born_port=5, store_timestamp=2,
                        store_ip=bytes(range(16)) if store_v6 else b"\x7f\0\0\1", store_port=10911,
                        reconsume_times=reconsume, prepared_transaction_offset=0, body=b"b" * 7, topic=topic,
                        properties={"TAGS": "A"})
    whole = decode_record(rec)
    assert popped_head(memoryview(rec)) == (whole.physical_offset, whole.reconsume_times) == (physical_offset, reconsume)
