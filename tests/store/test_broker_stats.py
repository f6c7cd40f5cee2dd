"""store/broker_stats.py: the 4.9 StatsItem windows (minute: 7 snapshots 10 s apart, hour: 7 at
10 min, day: 25 at 1 h), the stats keys, deletions, and the 5.x histograms."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqd.store.broker_stats import (
    BROKER_GET_NUMS, BROKER_PUT_NUMS, GROUP_GET_LATENCY, GROUP_GET_NUMS, MESSAGE_SIZE_BUCKETS, SNDBCK_PUT_NUMS,
    TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, BrokerStats, BrokerStatsManager, Histogram, RpcLatency,
)


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def manager(**kw) -> tuple[BrokerStatsManager, Clock]:
    clock = Clock()
    return BrokerStatsManager("C", clock=clock, **kw), clock


def tick(m: BrokerStatsManager, clock: Clock, n: int = 1) -> None:
    for _ in range(n):
        m.sample()
        clock.ms += 10_000


def test_minute_window_keeps_the_last_minute() -> None:
    m, clock = manager()
    tick(m, clock)  # the start-up tick (hour and day lists too)
    m.on_put("T", 0, 2, 300)
    tick(m, clock)
    minute, hour, day = m.view(TOPIC_PUT_NUMS, "T")
    assert (minute.sum, minute.tps, minute.avgpt, minute.times) == (2, 0.2, 2.0, 1)
    assert (hour.sum, day.sum) == (0, 0)  # items made after start-up wait for those ticks
    assert m.view(TOPIC_PUT_SIZE, "T")[0].sum == 300
    for _ in range(3):
        m.on_put("T", 0, 1, 100)
        tick(m, clock)
    assert m.view(TOPIC_PUT_NUMS, "T")[0].sum == 5
    tick(m, clock, 3)  # seven snapshots kept: the first (zero) one has scrolled out
    assert m.view(TOPIC_PUT_NUMS, "T")[0].sum == 3
    tick(m, clock, 10)
    assert m.view(TOPIC_PUT_NUMS, "T")[0].sum == 0
    tick(m, clock, 61 - 18)  # 18 ticks so far; tick 60 (from 0) takes the hour list's next snapshot
    assert m.view(TOPIC_PUT_NUMS, "T")[1].sum == 5


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=30))
def test_minute_sum_is_the_last_six_ticks_property(per_tick):
    m, clock = manager()
    tick(m, clock)
    for n in per_tick:
        if n:
            m.on_put("T", 0, n, n)
        tick(m, clock)
    if "T" not in m.topic_put:
        assert m.view(TOPIC_PUT_NUMS, "T") is None
        return
    first = next(i for i, n in enumerate(per_tick) if n)
    # snapshots since the item's first: a zero one, then one per tick; seven kept
    snaps = [0] + [sum(per_tick[first:i + 1]) for i in range(first, len(per_tick))]
    snaps = snaps[-7:]
    assert m.view(TOPIC_PUT_NUMS, "T")[0].sum == snaps[-1] - snaps[0]


def test_keys_as_4_9_builds_them() -> None:
    m, clock = manager()
    m.on_get("G", "T", 3, 4, 400, 4, 2)
    m.on_get("G", "T", 3, 1, 100, 5, 0)
    m.on_send_back("G", "T")
    m.on_put("T", 0, 1, 10)
    tick(m, clock)
    assert m.view(GROUP_GET_NUMS, "T@G")[0].sum == 5
    lat = m.view(GROUP_GET_LATENCY, "3@T@G")[0]  # enableDetailStat: queueId@topic@group, an RT item
    assert (lat.sum, lat.times, lat.avgpt) == (2, 2, 1.0)
    assert m.view(SNDBCK_PUT_NUMS, "T@G")[0].sum == 1
    assert m.view(BROKER_PUT_NUMS, "C")[0].sum == 1 and m.view(BROKER_GET_NUMS, "C")[0].sum == 5
    assert m.view(GROUP_GET_NUMS, "G@T") is None and m.view("NOPE", "T") is None
    assert m.group_get["G"]["T"].pull_offsets == {3: 5}
    tick(m, clock)
    assert m.group_get_tps("G", "T") == 5 / 20
    assert m.group_get_tps("G", "Other") == 0.0

    plain, clock2 = manager(enable_queue_stat=False)
    plain.on_get("G", "T", 1, 1, 1, 1, 4)
    plain.on_get("G", "T", 2, 1, 1, 1, 2)
    tick(plain, clock2)
    assert plain.view(GROUP_GET_LATENCY, "T@G")[0].avgpt == 3.0


def test_deletions_forget_the_items() -> None:
    m, clock = manager()
    m.on_put("T", 0, 1, 10)
    m.on_get("G", "T", 0, 1, 10, 1, 0)
    m.on_get("H", "U", 0, 1, 10, 1, 0)
    tick(m, clock)
    m.on_topic_deleted("T")
    assert m.view(TOPIC_PUT_NUMS, "T") is None and m.view(GROUP_GET_NUMS, "T@G") is None
    assert m.view(GROUP_GET_NUMS, "U@H") is not None
    m.on_group_deleted("H")
    assert m.view(GROUP_GET_NUMS, "U@H") is None


def test_histograms() -> None:
    h = Histogram(MESSAGE_SIZE_BUCKETS)
    for v in (1, 1024, 1025, 5 * 1024 * 1024):
        h.record(v)
    assert h.counts == [2, 1, 0, 0, 0, 0, 1] and h.count == 4 and h.sum == 1 + 1024 + 1025 + 5 * 1024 * 1024
    m, _ = manager()
    m.on_put("T", 0, 4, 4 * 2000)  # a batch: one record of the average size, as 5.x does
    assert m.topic_put["T"].size.counts[1] == 1 and m.topic_put["T"].size.sum == 2000
    rpc = RpcLatency()
    rpc.record(10, 0, 2, False, False)
    rpc.record(10, 0, 2000, False, False)
    rpc.record(11, 19, 0, True, False)
    rows = {(c, r, lp, ow): hist for c, r, lp, ow, hist in rpc.items()}
    assert rows[(10, 0, False, False)].counts[1] == 1 and rows[(10, 0, False, False)].counts[7] == 1
    assert rows[(11, 19, True, False)].counts[0] == 1


def test_daily_totals_roll_at_midnight() -> None:
    totals = {"put": 5, "get": 2}
    daily = BrokerStats(lambda: totals["put"], lambda: totals["get"])
    daily.roll_day()
    assert (daily.put_today_morning, daily.put_total) == (0, 5)
    daily._day -= 1  # as if the day had changed since the last check
    totals["put"] = 9
    daily.roll_day()
    assert (daily.put_yesterday_morning, daily.put_today_morning, daily.get_today_morning) == (0, 9, 2)
