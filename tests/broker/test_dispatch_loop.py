"""broker/dispatch_loop.py: the store's dispatch run on the trio thread."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Awaitable, Callable

import pytest
import trio
import trio.testing

import rmqd.broker.dispatch_loop as dispatch_loop_module
from rmqd.broker.dispatch_loop import LoopDispatch
from rmqd.store.commitlog import MessageExtBrokerInner
from rmqd.store.config import MessageStoreConfig
from rmqd.store.message_store import DefaultMessageStore
from support import wait_until


def _store(root: Path) -> DefaultMessageStore:
    return DefaultMessageStore(MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=1 << 20,
                                                  mappedFileSizeConsumeQueue=6000))


def _put(s: DefaultMessageStore, topic: str = "T", queue_id: int = 0) -> None:
    assert s.put_message(MessageExtBrokerInner(topic, queue_id, b"x" * 64, {})).is_ok()


def _with_loop(s: DefaultMessageStore, body: Callable[[LoopDispatch], Awaitable[None]],
               round_records: int = 64, hook_follows: Callable[[], bool] | None = None,
               **options: float) -> None:
    """The store started the broker's way: dispatch taken over by a LoopDispatch, no thread."""
    async def main() -> None:
        loop = LoopDispatch(s.reput_service, round_records=round_records, hook_follows=hook_follows, **options)
        loop.attach()
        s.load()
        s.start()
        assert s.reput_service._thread is None
        await body(loop)

    try:
        trio.run(main)
    finally:
        s.shutdown()


async def _until(cond: Callable[[], bool], seconds: float = 5.0) -> None:
    """support.wait_until every 1 ms: the short bounds are what some cases assert (dispatched
    within 40 ms of an append, so woken, not by the 50 ms safety net)."""
    await wait_until(cond, seconds, f"the dispatch condition within {seconds} s", interval=0.001)


def test_loop_dispatches_appends_from_the_loop_and_from_threads(tmp_path: Path) -> None:
    s = _store(tmp_path / "s")
    arrivals: list[tuple[str, int]] = []
    s.add_arrival_listener(lambda topic, qid, max_offset, *_: arrivals.append((topic, max_offset)))

    async def body(loop: LoopDispatch) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(loop.run)
            await trio.sleep(0.01)  # idle: asleep until woken
            assert s.reput_service._sleeping
            _put(s)  # on the loop's thread: wakes it directly
            await _until(lambda: s.get_max_offset_in_queue("T", 0) == 1, 0.04)  # not the 50 ms safety net
            await trio.to_thread.run_sync(_put, s, "U")  # the delay timer's way: another thread
            await _until(lambda: s.get_max_offset_in_queue("U", 0) == 1, 0.04)
            assert arrivals == [("T", 1), ("U", 1)]
            nursery.cancel_scope.cancel()

    _with_loop(s, body)


def test_a_backlog_is_dispatched_in_bounded_rounds_between_other_tasks(tmp_path: Path) -> None:
    s = _store(tmp_path / "s")

    async def body(loop: LoopDispatch) -> None:
        for i in range(1000):  # written before the task runs: a backlog, as after a burst
            _put(s, queue_id=i % 4)
        assert s.reput_service.reput_from_offset == 0
        progress: list[int] = []

        async def other_task() -> None:  # a connection's read loop, in effect
            while True:
                progress.append(s.reput_service.reput_from_offset)
                await trio.sleep(0)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(other_task)
            await nursery.start(loop.run)
            await _until(lambda: s.reput_service.behind() == 0)
            nursery.cancel_scope.cancel()
        assert loop.rounds >= 1000 // 64
        # the other task ran between rounds (trio may run the two in either order within a
        # scheduling batch, so it sees at least every other step of the backlog shrinking; the
        # body may cancel it in the batch of the last round, before it looks once more)
        assert len(progress) >= loop.rounds - 1 and len(set(progress)) >= 1000 // 64 // 2

    _with_loop(s, body)
    s2 = _store(tmp_path / "s")
    s2.load()
    try:
        assert [s2.get_max_offset_in_queue("T", q) for q in range(4)] == [250] * 4
    finally:
        s2.shutdown()


def test_wait_dispatched_from_the_loop_thread_does_not_stall(tmp_path: Path) -> None:
    """A caller on the loop's own thread blocks the task that would dispatch: it dispatches
    itself (tests and admin reads call store.wait_dispatched from handlers)."""
    s = _store(tmp_path / "s")

    async def body(loop: LoopDispatch) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(loop.run)
            for _ in range(10):
                _put(s)
            with trio.fail_after(2):
                assert s.wait_dispatched(timeout_s=1)  # synchronous, on the loop thread
            assert s.get_max_offset_in_queue("T", 0) == 10
            nursery.cancel_scope.cancel()

    _with_loop(s, body)


def test_catch_up_dispatches_before_the_next_request_and_leaves_backlogs_to_the_task(tmp_path: Path) -> None:
    """The server's after-requests hook: what the answered requests appended is dispatched at
    once (a pull read next finds it), at most one round of it; a failing record is not retried
    there (the task retries it after its back-off)."""
    s = _store(tmp_path / "s")

    async def body(loop: LoopDispatch) -> None:
        _put(s)
        loop.catch_up()  # no task running: the hook alone
        assert s.get_max_offset_in_queue("T", 0) == 1
        for _ in range(100):
            _put(s)
        loop.catch_up()
        assert s.get_max_offset_in_queue("T", 0) == 65  # one bounded round
        assert loop._event.is_set()  # and the task is told to go on with the rest
        loop.catch_up()
        assert s.get_max_offset_in_queue("T", 0) == 101
        s.reput_service.suspend()
        _put(s)
        loop.catch_up()
        assert s.get_max_offset_in_queue("T", 0) == 101  # suspended means suspended
        s.reput_service.resume()
        s.reput_service.error = RuntimeError("the last round failed")
        loop.catch_up()
        assert s.get_max_offset_in_queue("T", 0) == 101  # left to the task's back-off
        s.reput_service.error = None
        loop.catch_up()
        assert s.get_max_offset_in_queue("T", 0) == 102

    _with_loop(s, body)


def test_wake_after_the_run_finished_is_harmless(tmp_path: Path) -> None:
    s = _store(tmp_path / "s")
    loops: list[LoopDispatch] = []

    async def body(loop: LoopDispatch) -> None:
        loops.append(loop)

    try:
        _with_loop(s, body)  # the trio run is over; the store is shut down and opened again
    finally:
        s = _store(tmp_path / "s")
    s.reput_service.drive_externally(loops[0].wake)
    s.load()
    s.start()
    try:
        errors: list[BaseException] = []

        def put() -> None:
            try:
                _put(s)
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        t = threading.Thread(target=put)
        assert s.reput_service.begin_idle()
        t.start()
        t.join(5)
        assert errors == []  # it woke a loop that is gone: nothing raised
    finally:
        s.shutdown()  # the final round dispatches it
    s2 = _store(tmp_path / "s")
    s2.load()
    try:
        assert s2.get_max_offset_in_queue("T", 0) == 1
    finally:
        s2.shutdown()


def test_an_append_inside_an_inline_request_is_left_to_catch_up(tmp_path: Path, monkeypatch) -> None:
    """An append on the loop while an inline handler runs does not wake the task (the
    after-requests hook follows before the next read); catch_up dispatches it and re-arms the
    sleeping task, so a later append from another thread still wakes it at once."""
    monkeypatch.setattr(dispatch_loop_module, "IDLE_SLEEP_S", 30.0)  # no safety-net round in between
    s = _store(tmp_path / "s")
    inside = [False]

    def in_request(n: int = 1, queue_id: int = 0) -> None:
        inside[0] = True
        try:
            for _ in range(n):
                _put(s, queue_id=queue_id)
        finally:
            inside[0] = False

    async def body(loop: LoopDispatch) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(loop.run)
            await trio.sleep(0.01)
            assert s.reput_service._sleeping and loop._idle
            in_request()
            assert loop.deferred_wakes == 1 and not loop._event.is_set()
            await trio.testing.wait_all_tasks_blocked()  # the task had its chance: it slept on
            assert s.get_max_offset_in_queue("T", 0) == 0
            loop.catch_up()
            assert s.get_max_offset_in_queue("T", 0) == 1
            assert s.reput_service._sleeping and not loop._event.is_set()  # re-armed, not woken
            await trio.to_thread.run_sync(_put, s, "U")  # the delay timer's way
            await _until(lambda: s.get_max_offset_in_queue("U", 0) == 1, 0.04)
            await trio.sleep(0.01)
            # a burst inside one request: catch_up takes one round, the task the rest
            in_request(100, queue_id=1)
            loop.catch_up()
            assert s.get_max_offset_in_queue("T", 1) == 64 and loop._event.is_set()
            await _until(lambda: s.get_max_offset_in_queue("T", 1) == 100, 0.04)
            # outside a request (another loop task appending) the task is woken as before
            await trio.sleep(0.01)
            deferred = loop.deferred_wakes
            _put(s, queue_id=2)
            assert loop._event.is_set() and loop.deferred_wakes == deferred
            await _until(lambda: s.get_max_offset_in_queue("T", 2) == 1, 0.04)
            nursery.cancel_scope.cancel()

    _with_loop(s, body, hook_follows=lambda: inside[0])


def test_a_deferred_wake_with_a_thread_append_before_catch_up_loses_nothing(tmp_path: Path, monkeypatch) -> None:
    """Between a deferred wake and catch_up the store does not think the task sleeps, so an
    append from another thread does not wake it; catch_up's round takes that record too."""
    monkeypatch.setattr(dispatch_loop_module, "IDLE_SLEEP_S", 30.0)
    s = _store(tmp_path / "s")
    inside = [False]

    async def body(loop: LoopDispatch) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(loop.run)
            await trio.sleep(0.01)
            inside[0] = True
            _put(s)
            inside[0] = False
            await trio.to_thread.run_sync(_put, s, "U")
            assert not loop._event.is_set()
            loop.catch_up()
            assert s.get_max_offset_in_queue("T", 0) == 1 and s.get_max_offset_in_queue("U", 0) == 1
            assert s.reput_service._sleeping
            nursery.cancel_scope.cancel()

    _with_loop(s, body, hook_follows=lambda: inside[0])


@pytest.mark.parametrize("wake_delay", [0.0, 0.2])
def test_a_woken_task_waits_the_wake_delay_and_takes_what_came_meanwhile_in_one_round(
        tmp_path: Path, wake_delay: float) -> None:
    """As ReputMessageService waits 1 ms between rounds, the woken task waits WAKE_DELAY_S before
    its round: appends made meanwhile (each giving the task its chance to run) are dispatched
    together, in one round, once the wait is over; without the wait each gets its own round."""
    s = _store(tmp_path / "s")

    async def body(loop: LoopDispatch) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(loop.run)
            await trio.sleep(0.01)
            assert loop._idle
            rounds = loop.rounds
            start = trio.current_time()
            for _ in range(5):
                _put(s)
                await trio.sleep(0.01)
            if wake_delay:
                assert s.get_max_offset_in_queue("T", 0) == 0  # still waiting
            await _until(lambda: s.get_max_offset_in_queue("T", 0) == 5, 2.0)
            if wake_delay:
                assert trio.current_time() - start >= wake_delay
                assert loop.rounds == rounds + 1
            else:
                assert loop.rounds == rounds + 5
            nursery.cancel_scope.cancel()

    _with_loop(s, body, wake_delay=wake_delay)
