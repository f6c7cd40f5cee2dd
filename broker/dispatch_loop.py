"""The store's dispatch (consume-queue units, index entries, long-polling wake-ups) run as a
task on the broker's trio thread instead of the store's own ReputMessageService thread.

Where: right after the answers to a read's requests are written, before the next request is
read (``catch_up``, the server's after-requests hook), so a client that sends and then pulls
finds its message; appends from elsewhere wake a task that runs the same rounds.

Why: on the send path the event loop drops the GIL in every syscall (recv, the commit log's
pwrite, send). A dispatch thread polling every millisecond takes it each time, and the loop
then waits to get it back: GIL hand-overs, futex wake-ups and context switches that cost
~40 us per send in one process, on top of ~100 us of the loop's own work (dispatching the
same records in bulk costs ~13 us each). Run on the loop, a round runs once the requests of a
read have been answered, so it adds nothing to their latency and needs no hand-over. Under
Apache's benchmark producer this raised send TPS by 19-93 % in six interleaved pairs (README,
Benchmarks).

A round writes consume-queue units by pwrite and index entries into their mapping, and creates
derived files without fsync; flushing stays with the store's flush threads, so no round waits
for the disk on the loop. A round is bounded (ROUND_RECORDS, ~1 ms of work): a backlog (a
batch burst, recovery) is dispatched by the task a round at a time, with the connections'
requests in between. Appends from other threads (the delay-level timer) wake the task through
the trio token; appends on the loop wake it directly, except those made inside an inline
request handler: the after-requests hook follows those before the next read, so the task sleeps
on and ``catch_up`` re-arms it (one task switch less per read; py-spy no longer finds the task
on the send path). Woken, the task waits WAKE_DELAY_S (1 ms, ReputMessageService's pause between
rounds) before its round, so that the round takes ~1 ms of appends: gRPC sends and other task
appends are dispatched in rounds of several records, not a round per read. Failures follow the
store's policy
(``ReputMessageService.run_round``): after a failed round only the task retries, after its
back-off.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import trio

from rmqd.store.dispatch import IDLE_SLEEP_S, POLL_INTERVAL_S, ReputMessageService

#: Records per round on the event loop (each costs ~10-20 us of Python): a backlog yields to
#: the connections every ~1 ms.
ROUND_RECORDS = 64
#: After a wake-up the task waits this long before its round, as ReputMessageService waits 1 ms
#: between doReput rounds (POLL_INTERVAL_S): a round then takes what ~1 ms of appends brought
#: instead of what one read's did. A round's fixed costs (a consume-queue pwrite per queue, the
#: task switch) are shared by more records: under grpc-java's synchronous producers, 6,483 / 6,899
#: sends/s without the wait, 7,294 / 7,606 with it (rmqd alone, 2026-11-29). Inline Remoting
#: sends are dispatched by catch_up before the next read, without it.
WAKE_DELAY_S = POLL_INTERVAL_S


class LoopDispatch:
    """``attach()`` on the trio thread before the store starts, then ``nursery.start(run)``."""

    def __init__(self, reput: ReputMessageService, round_records: int = ROUND_RECORDS, *,
                 hook_follows: Callable[[], bool] | None = None, wake_delay: float = WAKE_DELAY_S) -> None:
        """``hook_follows()``, asked on the loop thread by an append's wake-up: True when
        ``catch_up`` is sure to run before the loop reads on (an inline request handler is
        running); the task is then left asleep and ``catch_up`` does the round."""
        self.reput = reput
        self.round_records = round_records
        self.hook_follows = hook_follows
        self.wake_delay = wake_delay
        self.rounds = 0  # rounds that dispatched something (tests, stats)
        self.deferred_wakes = 0  # wake-ups left to catch_up (tests, stats)
        self._event = trio.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._loop_thread = -1
        self._deferred = False  # a wake-up left to catch_up: the task sleeps on, not re-armed
        self._idle = False  # the task sleeps between begin_idle and end_idle

    def attach(self) -> None:
        """Take dispatch over from the store's thread (must run on the trio thread)."""
        self._token = trio.lowlevel.current_trio_token()
        self._loop_thread = threading.get_ident()
        self.reput.drive_externally(self.wake)

    def wake(self) -> None:
        """The store's waker: an append (or resume) while the task is idle. Any thread."""
        if threading.get_ident() == self._loop_thread:
            follows = self.hook_follows
            if follows is not None and self._idle and follows():
                # catch_up runs before the next read: a task switch here would only find
                # the round done. The store no longer thinks the task sleeps (it cleared
                # _sleeping before calling this), so catch_up re-arms it or wakes it.
                self._deferred = True
                self.deferred_wakes += 1
                return
            self._event.set()
            return
        token = self._token
        if token is not None:
            try:
                token.run_sync_soon(self._set)
            except trio.RunFinishedError:
                pass

    def _set(self) -> None:
        self._event.set()

    def catch_up(self) -> None:
        """One bounded round now, if anything is waiting (the server's after-requests hook);
        the rest of a backlog, or a failing record, is left to the task."""
        reput = self.reput
        if reput.error is None and not reput.suspended and reput.behind() > 0:
            count, backoff = reput.run_round(self.round_records)
            if count:
                self.rounds += 1
            if backoff or count >= self.round_records:
                self._deferred = False
                self._event.set()  # the task takes the rest, after its back-off
                return
        if self._deferred:
            self._deferred = False
            # the task still sleeps: let appends wake it again (begin_idle raises _sleeping
            # before it reads the commit log's end), or wake it now if records wait
            if not (self._idle and reput.begin_idle()):
                self._event.set()

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        reput = self.reput
        task_status.started()
        while True:
            if reput.suspended:
                count, backoff = 0, 0.0
            else:
                count, backoff = reput.run_round(self.round_records)
            if backoff:
                await trio.sleep(backoff)
                continue
            if count:
                self.rounds += 1
                if count >= self.round_records:
                    await trio.sleep(0)  # more is waiting: the connections' requests go first
                    continue
            self._event = trio.Event()
            if not reput.begin_idle():
                # written but not readable as a record yet: poll, as the store's thread does
                await trio.sleep(POLL_INTERVAL_S)
                continue
            self._idle = True
            woken = False
            try:
                with trio.move_on_after(IDLE_SLEEP_S):  # safety net, like the thread's
                    await self._event.wait()
                    woken = True
            finally:
                self._idle = False
                self._deferred = False
                reput.end_idle()
            if woken and self.wake_delay > 0:
                await trio.sleep(self.wake_delay)  # WAKE_DELAY_S: more records per round
