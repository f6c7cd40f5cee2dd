"""PULL_MESSAGE: status -> code mapping, long polling (held, woken by arrival, timed out),
tag filtering, subscriptions from the pull or from the heartbeat, offset commits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
import trio.testing

from broker_harness import decode_pull_body, run_with_broker
from rmqd.processors.pull import (
    ExpressionMessageFilter, PullRequestHoldService, SubscriptionData, _status_to_code, adopt_subscription,
    build_subscription_data,
)
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.message import java_string_hash
from support import wait_until


# --- pure logic --------------------------------------------------------------------------------

def test_build_subscription_data_tags() -> None:
    s = build_subscription_data("T", " TagA || TagB ||")
    assert s.tagsSet == {"TagA", "TagB"} and s.codeSet == {java_string_hash("TagA"), java_string_hash("TagB")}
    assert build_subscription_data("T", None).subString == "*"
    assert build_subscription_data("T", "").subString == "*"
    with pytest.raises(ValueError):
        build_subscription_data("T", "", "SQL92")


def test_tag_filter() -> None:
    f = ExpressionMessageFilter(build_subscription_data("T", "TagA"))
    assert f.is_matched_by_consume_queue(java_string_hash("TagA"))
    assert not f.is_matched_by_consume_queue(java_string_hash("TagB"))
    assert f.is_matched_by_consume_queue(None)
    # tag codes are compared as Java ints (Long.intValue)
    neg = java_string_hash("TagZZZZZZZZ")
    g = ExpressionMessageFilter(build_subscription_data("T", "TagZZZZZZZZ"))
    assert g.is_matched_by_consume_queue(neg & 0xFFFFFFFFFFFFFFFF if neg < 0 else neg)
    assert ExpressionMessageFilter(build_subscription_data("T", "*")).is_matched_by_consume_queue(12345)
    assert ExpressionMessageFilter(None).is_matched_by_commit_log(None, {})
    sql = ExpressionMessageFilter(SubscriptionData("T", "a > 1", expressionType="SQL92"),
                                  lambda props: props.get("a") == "2")
    assert sql.is_matched_by_consume_queue(99)
    assert sql.is_matched_by_commit_log(None, {"a": "2"}) and not sql.is_matched_by_commit_log(None, {"a": "1"})


def test_adopt_heartbeat_subscription() -> None:
    from rmqd.wire.bodies import SubscriptionData as WireSub
    s = adopt_subscription(WireSub(topic="T", subString="A", tagsSet=["A"], codeSet=[65], subVersion=7))
    assert (s.topic, s.codeSet, s.subVersion, s.expressionType) == ("T", {65}, 7, "TAG")


@pytest.mark.parametrize("status,offset,code", [
    ("FOUND", 0, ResponseCode.SUCCESS), ("NO_MATCHED_MESSAGE", 0, ResponseCode.PULL_RETRY_IMMEDIATELY),
    ("MESSAGE_WAS_REMOVING", 0, ResponseCode.PULL_RETRY_IMMEDIATELY),
    ("NO_MESSAGE_IN_QUEUE", 0, ResponseCode.PULL_NOT_FOUND), ("NO_MESSAGE_IN_QUEUE", 3, ResponseCode.PULL_OFFSET_MOVED),
    ("NO_MATCHED_LOGIC_QUEUE", 0, ResponseCode.PULL_NOT_FOUND),
    ("OFFSET_FOUND_NULL", 5, ResponseCode.PULL_NOT_FOUND), ("OFFSET_OVERFLOW_ONE", 5, ResponseCode.PULL_NOT_FOUND),
    ("OFFSET_OVERFLOW_BADLY", 5, ResponseCode.PULL_OFFSET_MOVED),
    ("OFFSET_TOO_SMALL", 5, ResponseCode.PULL_OFFSET_MOVED),
])
def test_status_to_code(status: str, offset: int, code: int) -> None:
    assert _status_to_code(status, offset) == code


def test_hold_service_wakes_only_matching_and_newer() -> None:
    max_offsets = {("T", 0): 0}
    svc = PullRequestHoldService(lambda t, q: max_offsets[(t, q)])

    async def main() -> None:
        svc.bind_trio()
        only_b = ExpressionMessageFilter(build_subscription_data("T", "B"))
        results: dict[str, bool] = {}

        async def hold(name: str, offset: int, flt) -> None:
            results[name] = await svc.hold("T", 0, offset, 2000, flt)

        async with trio.open_nursery() as n:
            n.start_soon(hold, "b", 0, only_b)
            n.start_soon(hold, "any", 0, ExpressionMessageFilter(None))
            await trio.testing.wait_all_tasks_blocked()  # both are held
            assert svc.held_count == 2
            max_offsets[("T", 0)] = 1
            svc.notify_message_arriving("T", 0, 1, java_string_hash("A"))
            await trio.testing.wait_all_tasks_blocked()  # the woken one has returned
            assert results == {"any": True} and svc.held_count == 1
            max_offsets[("T", 0)] = 2
            svc.arrival_listener("T", 0, 2, java_string_hash("B"), 0, {"TAGS": "B"})
        assert results == {"any": True, "b": True} and svc.held_count == 0
        assert trio.current_time() == 0  # woken by the arrivals, not by the 2 s timeout

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_hold_service_times_out_and_periodic_check() -> None:
    max_offsets = {("T", 0): 0}
    svc = PullRequestHoldService(lambda t, q: max_offsets[(t, q)])

    async def main() -> None:
        svc.bind_trio()
        t0 = trio.current_time()
        assert await svc.hold("T", 0, 0, 100, ExpressionMessageFilter(None)) is False
        assert trio.current_time() - t0 == pytest.approx(0.1)  # held exactly its timeout (virtual time)
        async with trio.open_nursery() as n:
            async def later() -> None:
                await trio.sleep(0.05)
                max_offsets[("T", 0)] = 1  # a message the listener never reported
                svc.check_hold_requests()
            n.start_soon(later)
            t0 = trio.current_time()
            assert await svc.hold("T", 0, 0, 5000, ExpressionMessageFilter(None)) is True
            assert trio.current_time() - t0 == pytest.approx(0.05)  # at the check, not after 5 s

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


# --- against the broker ------------------------------------------------------------------------

def test_found_not_found_and_offset_moved(tmp_path: Path) -> None:
    async def fn(h) -> None:
        for i in range(3):
            assert (await h.send_v2("PT", f"m{i}".encode(), queue_id=0)).code == ResponseCode.SUCCESS
        h.wait_dispatched()
        r = await h.pull("PT", "g", 0, 0, sys_flag=6, subscription="*", max_msgs=2)
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, "FOUND")
        assert r.ext_fields == {"suggestWhichBrokerId": "0", "nextBeginOffset": "2", "maxOffset": "3",
                                "minOffset": "0"}
        assert [m.body for m in decode_pull_body(r)] == [b"m0", b"m1"]
        # caught up, no suspend flag: answered at once
        r = await h.pull("PT", "g", 0, 3, sys_flag=4, subscription="*")
        assert (r.code, r.remark) == (ResponseCode.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE")
        r = await h.pull("PT", "g", 0, 10, sys_flag=4, subscription="*")
        assert (r.code, r.remark) == (ResponseCode.PULL_OFFSET_MOVED, "OFFSET_OVERFLOW_BADLY")
        assert r.ext_fields["nextBeginOffset"] == "3"
        # the correction is recorded in OFFSET_MOVED_EVENT (generateOffsetMovedEvent)
        h.wait_dispatched()
        r2 = await h.pull("OFFSET_MOVED_EVENT", "tools", 0, 0, sys_flag=4, subscription="*")
        (event,) = decode_pull_body(r2)
        assert event.properties["TAGS"] == "g" and event.properties["KEYS"] == "g"
        assert json.loads(event.body) == {"consumerGroup": "g", "messageQueue": {
            "brokerName": "broker-t", "queueId": 0, "topic": "PT"}, "offsetNew": 3, "offsetRequest": 10}
        # empty queue at offset 0: not found; elsewhere: offset moved
        r = await h.pull("PT", "g", 1, 0, sys_flag=4, subscription="*")
        assert r.code == ResponseCode.PULL_NOT_FOUND
        r = await h.pull("PT", "g", 1, 4, sys_flag=4, subscription="*")
        assert r.code == ResponseCode.PULL_OFFSET_MOVED

    run_with_broker(tmp_path, fn)


def test_long_poll_woken_by_arrival_and_timeout(tmp_path: Path) -> None:
    async def fn(h) -> None:
        assert (await h.send_v2("LP", b"first", queue_id=0)).code == ResponseCode.SUCCESS
        h.wait_dispatched()
        # real time (the store's threads run beside trio): the timeout is a lower bound, with a
        # generous ceiling for a loaded box; the exact durations are test_hold_service_*'s
        t0 = trio.current_time()
        r = await h.pull("LP", "g", 0, 1, sys_flag=6, subscription="*", suspend_ms=400)
        waited = trio.current_time() - t0
        assert r.code == ResponseCode.PULL_NOT_FOUND and 0.38 <= waited < 5.0
        hold = h.role.pull_hold_service
        sent_at: list[float] = []

        async with trio.open_nursery() as n:
            async def later() -> None:
                await wait_until(lambda: hold.held_count == 1, 5, "the pull to be held")
                sent_at.append(trio.current_time())
                await h.send_v2("LP", b"second", queue_id=0)
            n.start_soon(later)
            r = await h.pull("LP", "g", 0, 1, sys_flag=6, subscription="*", suspend_ms=10_000)
            answered = trio.current_time()
        # answered after the arrival it was held for, long before its 10 s
        assert r.code == ResponseCode.SUCCESS and sent_at and 0 <= answered - sent_at[0] < 5.0
        assert [m.body for m in decode_pull_body(r)] == [b"second"]
        assert h.role.pull_hold_service.held_count == 0

    run_with_broker(tmp_path, fn)


def test_slow_pull_does_not_block_send_on_same_connection(tmp_path: Path) -> None:
    async def fn(h) -> None:
        await h.send_v2("LP2", b"x", queue_id=0)
        h.wait_dispatched()
        async with trio.open_nursery() as n:
            got = {}

            async def pull() -> None:
                got["pull"] = await h.pull("LP2", "g", 0, 1, sys_flag=6, subscription="*", suspend_ms=5000)
            n.start_soon(pull)
            await wait_until(lambda: h.role.pull_hold_service.held_count == 1, 5, "the pull to be held")
            t0 = trio.current_time()
            r = await h.send_v2("LP2", b"y", queue_id=0)
            assert r.code == ResponseCode.SUCCESS and trio.current_time() - t0 < 1.0
        assert got["pull"].code == ResponseCode.SUCCESS

    run_with_broker(tmp_path, fn)


def test_tag_filtering_and_held_pull_ignores_other_tags(tmp_path: Path) -> None:
    async def fn(h) -> None:
        await h.send_v2("TF", b"a0", queue_id=0, tags="TagA")
        h.wait_dispatched()
        r = await h.pull("TF", "g", 0, 0, sys_flag=4, subscription="TagB")
        assert (r.code, r.remark) == (ResponseCode.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE")
        assert r.ext_fields["nextBeginOffset"] == "1"
        hold = h.role.pull_hold_service
        first_done = trio.Event()
        b1_sent: list[float] = []

        async with trio.open_nursery() as n:
            async def later() -> None:
                await wait_until(lambda: hold.held_count == 1, 5, "the first pull to be held")
                await h.send_v2("TF", b"a1", queue_id=0, tags="TagA")
                await first_done.wait()
                await wait_until(lambda: hold.held_count == 1, 5, "the TagB pull to be held")
                b1_sent.append(trio.current_time())
                await h.send_v2("TF", b"b1", queue_id=0, tags="TagB")
            n.start_soon(later)
            r = await h.pull("TF", "g", 0, 1, sys_flag=6, subscription="TagA || TagB", suspend_ms=5000)
            assert r.code == ResponseCode.SUCCESS and [m.body for m in decode_pull_body(r)] == [b"a1"]
            first_done.set()
            r = await h.pull("TF", "g", 0, 2, sys_flag=6, subscription="TagB", suspend_ms=5000)
            assert b1_sent and trio.current_time() >= b1_sent[0]  # held until b1 arrived
        assert r.code == ResponseCode.SUCCESS and [m.body for m in decode_pull_body(r)] == [b"b1"]

    run_with_broker(tmp_path, fn)


def test_subscription_from_heartbeat(tmp_path: Path) -> None:
    """Go/Java push consumers: sysFlag 2, no subscription -> the heartbeat-registered one."""
    async def fn(h) -> None:
        await h.send_v2("HB", b"a", queue_id=0, tags="TagA")
        await h.send_v2("HB", b"b", queue_id=0, tags="TagB")
        h.wait_dispatched()
        r = await h.pull("HB", "cg", 0, 0, sys_flag=2, suspend_ms=100)
        assert (r.code, r.remark) == (ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                      "the consumer's group info not exist\nSee http://rocketmq.apache.org/docs/faq/ "
                                      "for further details.")
        assert (await h.heartbeat("c1", "cg", "HB", "TagB", sub_version=100)).code == ResponseCode.SUCCESS
        r = await h.pull("HB", "cg", 0, 0, sys_flag=2, sub_version=200)
        assert (r.code, r.remark) == (ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest")
        assert r.ext_fields == {}
        r = await h.pull("Other", "cg", 0, 0, sys_flag=2, sub_version=100)
        assert r.code in (ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SUBSCRIPTION_NOT_EXIST)
        r = await h.pull("HB", "cg", 0, 0, sys_flag=3, sub_version=100, commit_offset=0)
        assert r.code == ResponseCode.SUCCESS
        assert [m.body for m in decode_pull_body(r)] == [b"b"]

    run_with_broker(tmp_path, fn)


def test_commit_offset_flag(tmp_path: Path) -> None:
    async def fn(h) -> None:
        await h.send_v2("CO", b"a", queue_id=0)
        h.wait_dispatched()
        r = await h.pull("CO", "cog", 0, 1, sys_flag=7, subscription="*", commit_offset=1, suspend_ms=50)
        assert r.code == ResponseCode.PULL_NOT_FOUND
        q = await h.invoke(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "cog", "topic": "CO", "queueId": "0"})
        assert q.ext_fields == {"offset": "1"}

    run_with_broker(tmp_path, fn)


def test_pull_errors(tmp_path: Path) -> None:
    async def fn(h) -> None:
        r = await h.pull("Missing", "g", 0, 0, sys_flag=4, subscription="*")
        assert r.code == ResponseCode.TOPIC_NOT_EXIST
        assert r.remark.startswith("topic[Missing] not exist, apply first please!")
        await h.send_v2("PE", b"a", queue_id=0)
        r = await h.pull("PE", "g", 7, 0, sys_flag=4, subscription="*")
        assert r.code == ResponseCode.SYSTEM_ERROR and r.remark.startswith(
            "queueId[7] is illegal, topic:[PE] topicConfig.readQueueNums:[4] consumer:[127.0.0.1:")
        r = await h.pull("PE", "g", 0, 0, sys_flag=4, subscription="a > 1", expression_type="SQL92")
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR,
                                      "The broker does not support consumer to filter message by SQL92")

    run_with_broker(tmp_path, fn)


def test_sql92_filter_when_enabled(tmp_path: Path) -> None:
    async def fn(h) -> None:
        await h.send_v2("SQ", b"one", queue_id=0, extra={"a": "1"})
        await h.send_v2("SQ", b"five", queue_id=0, extra={"a": "5"})
        h.wait_dispatched()
        r = await h.pull("SQ", "g", 0, 0, sys_flag=4, subscription="a > 2", expression_type="SQL92")
        assert r.code == ResponseCode.SUCCESS
        assert [m.body for m in decode_pull_body(r)] == [b"five"]

    run_with_broker(tmp_path, fn, enablePropertyFilter="true")
