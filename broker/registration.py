"""Coalesced background work for a broker's topic table: REGISTER_BROKER and topics.json.

A 4.9 broker registers with the name servers and rewrites topics.json on the thread that
changed a topic (``BrokerController.registerBrokerAll`` is synchronized: one registration at
a time, the sending thread waiting for its turn), each time with the whole table. Creating
topics one after another then costs time proportional to the number of topics already there.
Here each job runs in a worker of its own (:class:`Coalescer`): one run in flight; whatever
is asked while it runs is served by the one next run, which takes the state as it is then;
a caller that needs the result (UPDATE_AND_CREATE_TOPIC answers once the topic is routable
and on disk, as 4.9.7's does) waits for the run that covers its request.

Registrations (:class:`BrokerRegistrar`) are *full* (the whole table: at start, every
registerNameServerPeriod, after a failure) or *incremental*: the topics changed since the
last snapshot with the current DataVersion, as 4.9.7's ``registerIncrementBrokerData``
sends for UPDATE_AND_CREATE_TOPIC. A name server applies a table whenever the DataVersion
differs from the one it holds for the broker (``RouteInfoManager.registerBroker``), so a
run of increments leaves it with every topic, and a failed increment is followed by a full
registration (the name server may hold the new DataVersion without the topics).
"""

from __future__ import annotations

import logging
from typing import Awaitable, Callable

import trio

from rmqd.store.topic_config import TopicConfigManager
from rmqd.wire.bodies import TopicConfigSerializeWrapper

log = logging.getLogger("rmqd.broker.registration")


class Coalescer:
    """Runs ``work`` whenever asked, never two at once; asks made during a run share the
    next run. ``request()`` returns a ticket; ``await wait(ticket)`` returns once a run that
    started after the request has finished (whether it succeeded is ``work``'s business).
    Call ``request`` on the trio thread (from other threads through the trio token).

    ``pace``: while nobody waits, the next run starts no sooner than ``pace`` times the last
    run's duration after it (at most ``max_pause`` s): a job whose cost grows with the table
    (a topics.json save) then takes a bounded share of the time however often it is asked
    for; a waiter cuts the pause short."""

    def __init__(self, name: str, work: Callable[[], Awaitable[None]], *, pace: float = 0.0,
                 max_pause: float = 1.0) -> None:
        self.name = name
        self._work = work
        self.pace = pace
        self.max_pause = max_pause
        self._waiting = 0
        self._urgent = trio.Event()
        self._asked = 0     # tickets handed out
        self._done = 0      # every ticket up to this one is served
        self._wake = trio.Event()
        self._progress = trio.Event()
        self.runs = 0       # finished runs (tests and stats)
        self.in_flight = 0  # 0 or 1

    def request(self) -> int:
        self._asked += 1
        self._wake.set()
        return self._asked

    @property
    def pending(self) -> bool:
        return self._asked > self._done

    async def wait(self, ticket: int) -> None:
        if self._done >= ticket:
            return
        self._waiting += 1
        self._urgent.set()
        try:
            while self._done < ticket:
                await self._progress.wait()
        finally:
            self._waiting -= 1

    async def request_and_wait(self) -> None:
        await self.wait(self.request())

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            if self._asked == self._done:
                self._wake = trio.Event()
                await self._wake.wait()
            covered = self._asked  # everything asked so far is served by this run
            self.in_flight += 1
            started = trio.current_time()
            try:
                await self._work()
            except Exception:  # noqa: BLE001 - one failed run must not end the worker
                log.exception("%s failed", self.name)
            finally:
                self.in_flight -= 1
            self.runs += 1
            self._done = covered
            self._progress.set()
            self._progress = trio.Event()
            if self.pace and self._asked > self._done and not self._waiting:
                self._urgent = trio.Event()
                with trio.move_on_after(min(self.pace * (trio.current_time() - started), self.max_pause)):
                    await self._urgent.wait()

    async def drain(self) -> None:
        """Until nothing asked is left unserved (the worker must be running)."""
        await self.wait(self._asked)


#: send(wrapper, check_order_config) -> True when every name server took it
SendRegistration = Callable[[TopicConfigSerializeWrapper, bool], Awaitable[bool]]


class BrokerRegistrar:
    """REGISTER_BROKER for one broker: ``request_full()`` / ``request_increment()`` return
    a ticket for ``await wait(ticket)``; ``run`` is the worker (start it in a nursery)."""

    def __init__(self, topics: TopicConfigManager, send: SendRegistration) -> None:
        self.topics = topics
        self._send = send
        self._full = True  # the first registration carries the whole table
        self._check_order = False
        self.worker = Coalescer("registration with the name servers", self._register_once)
        self.sent_full = 0
        self.sent_increments = 0

    def request_full(self, check_order_config: bool = True) -> int:
        self._full = True
        self._check_order |= check_order_config
        return self.worker.request()

    def request_increment(self, check_order_config: bool = False) -> int:
        self._check_order |= check_order_config
        return self.worker.request()

    async def wait(self, ticket: int) -> None:
        await self.worker.wait(ticket)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self.worker.run(task_status=task_status)

    async def _register_once(self) -> None:
        full, check_order = self._full, self._check_order
        self._full = self._check_order = False
        if full:
            wrapper = self.topics.take_registration_snapshot()
        else:
            wrapper = self.topics.take_registration_delta()
            if not wrapper.topicConfigTable:
                return  # nothing new to tell (a deleted topic stays routed, as in 4.9)
        ok = False
        try:
            ok = await self._send(wrapper, check_order)
        finally:
            if full:
                self.sent_full += 1
            else:
                self.sent_increments += 1
            if not ok:
                self._full = True  # the next registration, whenever it comes, carries everything


__all__ = ["BrokerRegistrar", "Coalescer", "SendRegistration"]
