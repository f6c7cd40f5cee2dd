"""broker/ha_flow.ByteRate: FlowMonitor's one-second windows, on a fake clock."""

from __future__ import annotations

from rmqd.broker.ha_flow import ByteRate


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_windows_of_one_second() -> None:
    clock = Clock()
    rate = ByteRate(clock)
    rate.add(10)
    rate.add(5)
    assert rate.per_second() == 0  # the first window has not ended
    clock.t = 101.2
    assert rate.per_second() == 15  # the window [100, 101) ended with 15 bytes
    rate.add(7)  # counted in [101, 102)
    clock.t = 101.9
    assert rate.per_second() == 15
    clock.t = 102.0
    assert rate.per_second() == 7
    clock.t = 104.5  # two windows without bytes: the latest counted nothing
    assert rate.per_second() == 0
    rate.add(3)
    clock.t = 105.0
    assert rate.per_second() == 3
