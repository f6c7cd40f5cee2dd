"""Bytes per second of one HA stream, as RocketMQ 5.x's FlowMonitor reports them.

Why: GET_BROKER_HA_STATUS (mqadmin haStatus, the dashboard) shows each replication stream's
``transferredByteInSecond``. 5.x's FlowMonitor is a thread that, once a second, moves the bytes
counted since its last turn into that figure and starts counting again. Here the same windows
are kept without a thread: the count rolls over on the next ``add`` or ``per_second`` after a
second has passed, and a second in which nothing was counted reads 0.
"""

from __future__ import annotations

import time
from typing import Callable


class ByteRate:
    """The bytes counted in the last whole one-second window (FlowMonitor.getTransferredByteInSecond)."""

    __slots__ = ("_clock", "_start", "_count", "_last")

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._start = clock()
        self._count = 0
        self._last = 0

    def _roll(self) -> None:
        now = self._clock()
        elapsed = now - self._start
        if elapsed < 1.0:
            return
        # the window that just ended; if more than one went by, the latest of them counted nothing
        self._last = self._count if elapsed < 2.0 else 0
        self._count = 0
        self._start += int(elapsed)

    def add(self, n: int) -> None:
        """FlowMonitor.addByteCountTransferred."""
        self._roll()
        self._count += n

    def per_second(self) -> int:
        self._roll()
        return self._last


__all__ = ["ByteRate"]
