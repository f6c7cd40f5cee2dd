"""LOCK_BATCH_MQ (41) / UNLOCK_BATCH_MQ (42): queue locks for orderly consumers
(4.9.8 ``RebalanceLockManager`` + ``AdminBrokerProcessor.lockBatchMQ/unlockBatchMQ``).

A lock belongs to a client id per (group, queue) and lives ``lockMaxLiveTime`` (60 s, Java
system property ``rocketmq.broker.rebalance.lockMaxLiveTime``) after its last renewal; orderly
consumers renew every 20 s, so a consumer that dies loses its queues within a minute and
another member of the group takes them over on its next lock round. Locks are in memory only,
as in RocketMQ (a broker restart frees them all).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from rmqd.processors.names import guard_names
from rmqd.wire.bodies import LockBatchRequestBody, LockBatchResponseBody, MessageQueue, UnlockBatchRequestBody
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand, make_response
from rmqd.processors.seams import Context, RequestHandler

__all__ = ["RebalanceLockManager", "LockProcessor", "REBALANCE_LOCK_MAX_LIVE_TIME"]

REBALANCE_LOCK_MAX_LIVE_TIME = 60_000

MQKey = tuple[str, str, int]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _key(mq: MessageQueue) -> MQKey:
    return (mq.topic, mq.brokerName, int(mq.queueId))


class _LockEntry:
    __slots__ = ("client_id", "last_update")

    def __init__(self, client_id: str, now: int) -> None:
        self.client_id = client_id
        self.last_update = now

    def is_expired(self, now: int, max_live: int) -> bool:
        return now - self.last_update > max_live

    def is_locked(self, client_id: str, now: int, max_live: int) -> bool:
        return self.client_id == client_id and not self.is_expired(now, max_live)


class RebalanceLockManager:
    """group -> {MessageQueue: LockEntry}; every call may run from any thread."""

    def __init__(self, max_live_ms: int = REBALANCE_LOCK_MAX_LIVE_TIME, clock: Callable[[], int] = _now_ms) -> None:
        self.max_live_ms = max_live_ms
        self.clock = clock
        self._table: dict[str, dict[MQKey, _LockEntry]] = {}
        self._lock = threading.Lock()

    def _renew_if_locked(self, group: str, key: MQKey, client_id: str, now: int) -> bool:
        entry = self._table.get(group, {}).get(key)
        if entry is not None and entry.is_locked(client_id, now, self.max_live_ms):
            entry.last_update = now
            return True
        return False

    def _try_take(self, group_table: dict[MQKey, _LockEntry], key: MQKey, client_id: str, now: int) -> bool:
        entry = group_table.get(key)
        if entry is None:
            group_table[key] = _LockEntry(client_id, now)
            return True
        if entry.is_locked(client_id, now, self.max_live_ms):
            entry.last_update = now
            return True
        if entry.is_expired(now, self.max_live_ms):
            entry.client_id = client_id
            entry.last_update = now
            return True
        return False

    def try_lock(self, group: str, mq: MessageQueue, client_id: str) -> bool:
        with self._lock:
            now = self.clock()
            key = _key(mq)
            if self._renew_if_locked(group, key, client_id, now):
                return True
            return self._try_take(self._table.setdefault(group, {}), key, client_id, now)

    def try_lock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> list[MessageQueue]:
        """The queues now locked by ``client_id`` (renewed or newly taken), in request order."""
        with self._lock:
            now = self.clock()
            group_table = self._table.setdefault(group, {})
            locked: list[MessageQueue] = []
            seen: set[MQKey] = set()
            for mq in mqs:
                key = _key(mq)
                if key in seen:
                    continue
                seen.add(key)
                if self._renew_if_locked(group, key, client_id, now) or \
                        self._try_take(group_table, key, client_id, now):
                    locked.append(mq)
            return locked

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> None:
        """Release the queues ``client_id`` holds; others' locks are left alone."""
        with self._lock:
            group_table = self._table.get(group)
            if group_table is None:
                return
            for mq in mqs:
                key = _key(mq)
                entry = group_table.get(key)
                if entry is not None and entry.client_id == client_id:
                    del group_table[key]

    def is_locked(self, group: str, mq: MessageQueue, client_id: str) -> bool:
        with self._lock:
            entry = self._table.get(group, {}).get(_key(mq))
            return entry is not None and entry.is_locked(client_id, self.clock(), self.max_live_ms)

    def owner(self, group: str, mq: MessageQueue) -> str | None:
        """The live holder of a queue's lock, if any (admin/diagnostics)."""
        with self._lock:
            entry = self._table.get(group, {}).get(_key(mq))
            if entry is None or entry.is_expired(self.clock(), self.max_live_ms):
                return None
            return entry.client_id


class LockProcessor:
    """LOCK_BATCH_MQ / UNLOCK_BATCH_MQ handlers over one RebalanceLockManager."""

    def __init__(self, manager: RebalanceLockManager | None = None) -> None:
        self.manager = manager or RebalanceLockManager()

    def handlers(self) -> dict[int, RequestHandler]:
        return guard_names({RequestCode.LOCK_BATCH_MQ: self.lock_batch_mq,
                            RequestCode.UNLOCK_BATCH_MQ: self.unlock_batch_mq})

    async def lock_batch_mq(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        body = LockBatchRequestBody.decode(request.body)
        locked = self.manager.try_lock_batch(body.consumerGroup, body.mqSet, body.clientId)
        return make_response(request, ResponseCode.SUCCESS, body=LockBatchResponseBody(lockOKMQSet=locked).encode())

    async def unlock_batch_mq(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        body = UnlockBatchRequestBody.decode(request.body)
        self.manager.unlock_batch(body.consumerGroup, body.mqSet, body.clientId)
        return make_response(request, ResponseCode.SUCCESS)
