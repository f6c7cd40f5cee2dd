"""LOCK_BATCH_MQ / UNLOCK_BATCH_MQ: RebalanceLockManager semantics incl. the 60 s expiry."""

from __future__ import annotations

import threading

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqd.processors.lock import REBALANCE_LOCK_MAX_LIVE_TIME, LockProcessor, RebalanceLockManager
from rmqd.wire import fastjson
from rmqd.wire.bodies import LockBatchRequestBody, LockBatchResponseBody, MessageQueue, UnlockBatchRequestBody
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand

pytestmark = pytest.mark.timeout(30)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def mq(i: int, topic: str = "T") -> MessageQueue:
    return MessageQueue(topic=topic, brokerName="b", queueId=i)


def test_first_come_owns_until_expiry() -> None:
    clock = Clock()
    m = RebalanceLockManager(clock=clock)
    assert REBALANCE_LOCK_MAX_LIVE_TIME == 60_000
    assert m.try_lock_batch("g", [mq(0), mq(1)], "c1") == [mq(0), mq(1)]
    assert m.try_lock_batch("g", [mq(0), mq(1), mq(2)], "c2") == [mq(2)]
    assert m.owner("g", mq(0)) == "c1" and m.is_locked("g", mq(2), "c2")
    clock.now += 60_000  # exactly the max live time: still held
    assert m.try_lock_batch("g", [mq(0)], "c2") == []
    clock.now += 1  # c1 stopped renewing: its locks expire
    assert m.try_lock_batch("g", [mq(0)], "c2") == [mq(0)]
    assert m.owner("g", mq(0)) == "c2"
    # another group is independent
    assert m.try_lock_batch("other", [mq(0)], "c1") == [mq(0)]


def test_renewal_keeps_the_lock() -> None:
    clock = Clock()
    m = RebalanceLockManager(clock=clock)
    m.try_lock_batch("g", [mq(0)], "c1")
    for _ in range(5):
        clock.now += 20_000  # orderly consumers renew every 20 s
        assert m.try_lock_batch("g", [mq(0)], "c1") == [mq(0)]
        assert m.try_lock_batch("g", [mq(0)], "c2") == []
    assert m.try_lock("g", mq(0), "c1") and not m.try_lock("g", mq(0), "c2")


def test_unlock_only_releases_own_locks() -> None:
    m = RebalanceLockManager(clock=Clock())
    m.try_lock_batch("g", [mq(0), mq(1)], "c1")
    m.unlock_batch("g", [mq(0), mq(1)], "c2")
    assert m.owner("g", mq(0)) == "c1"
    m.unlock_batch("g", [mq(0)], "c1")
    assert m.owner("g", mq(0)) is None
    assert m.try_lock_batch("g", [mq(0), mq(1)], "c2") == [mq(0)]
    m.unlock_batch("nogroup", [mq(0)], "c1")  # unknown group: nothing happens


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["lock", "unlock", "tick"]), st.sampled_from(["a", "b", "c"]),
                          st.lists(st.integers(0, 3), max_size=4), st.integers(0, 70_000)), max_size=30))
def test_a_queue_never_has_two_live_owners(ops) -> None:
    clock = Clock()
    m = RebalanceLockManager(clock=clock)
    for op, client, queues, dt in ops:
        if op == "tick":
            clock.now += dt
        elif op == "lock":
            got = m.try_lock_batch("g", [mq(q) for q in queues], client)
            for q in got:
                assert m.owner("g", q) == client
        else:
            m.unlock_batch("g", [mq(q) for q in queues], client)
        for q in range(4):
            owners = [c for c in "abc" if m.is_locked("g", mq(q), c)]
            assert len(owners) <= 1


def test_concurrent_lockers_get_disjoint_queues() -> None:
    m = RebalanceLockManager()
    results: dict[str, list] = {}

    def run(cid: str) -> None:
        results[cid] = m.try_lock_batch("g", [mq(i) for i in range(64)], cid)

    threads = [threading.Thread(target=run, args=(f"c{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    won = [q.queueId for got in results.values() for q in got]
    assert sorted(won) == list(range(64))


def test_wire_handlers_with_java_client_bodies() -> None:
    proc = LockProcessor(RebalanceLockManager(clock=Clock()))
    handlers = proc.handlers()
    body = ('{"clientId":"127.0.0.1@1","consumerGroup":"og","mqSet":[{"brokerName":"b","queueId":0,"topic":"T"},'
            '{"brokerName":"b","queueId":1,"topic":"T"}],"onlyThisBroker":false}').encode()

    async def main() -> None:
        resp = await handlers[RequestCode.LOCK_BATCH_MQ](None, RemotingCommand(code=41, opaque=5, body=body))
        assert resp.code == ResponseCode.SUCCESS and resp.opaque == 5
        got = LockBatchResponseBody.decode(resp.body)
        assert sorted(q.queueId for q in got.lockOKMQSet) == [0, 1]
        assert "lockOKMQSet" in fastjson.loads(bytes(resp.body).decode())
        other = LockBatchRequestBody(consumerGroup="og", clientId="x", mqSet=[mq(0)]).encode()
        resp = await handlers[RequestCode.LOCK_BATCH_MQ](None, RemotingCommand(code=41, body=other))
        assert LockBatchResponseBody.decode(resp.body).lockOKMQSet == []
        unlock = UnlockBatchRequestBody(consumerGroup="og", clientId="127.0.0.1@1", mqSet=[mq(0)]).encode()
        resp = await handlers[RequestCode.UNLOCK_BATCH_MQ](None, RemotingCommand(code=42, body=unlock))
        assert resp.code == ResponseCode.SUCCESS and resp.body is None
        resp = await handlers[RequestCode.LOCK_BATCH_MQ](None, RemotingCommand(code=41, body=other))
        assert [q.queueId for q in LockBatchResponseBody.decode(resp.body).lockOKMQSet] == [0]

    trio.run(main)
