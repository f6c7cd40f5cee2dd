"""BrokerStatsManager: the per-topic and per-group counters of RocketMQ 4.9's broker statistics,
and the few extra counts RocketMQ 5's metrics need, kept in one place for every reader.

Who reads them: VIEW_BROKER_STATS_DATA (mqadmin ``statsAll``, ``exportMetrics``) asks for one
4.9 stat by name and key (``TOPIC_PUT_NUMS`` / ``MqaT``, ``GROUP_GET_NUMS`` / ``MqaT@MqaCG``,
...) and gets its minute, hour and day windows; GET_CONSUME_STATS takes a group's consume TPS
from the minute window; the Prometheus exporter (broker/metrics.py) reads the running totals
and the histograms at scrape time.

Why it is shaped like this (the hot path): the send and pull paths call ``on_put`` and
``on_get`` once per request. Each call is one or two dict look-ups and a few integer
additions on a record made the first time a topic (or group and topic) is seen: no key
string is built and nothing is allocated per message. The 4.9 stats keys (``topic@group``,
``queueId@topic@group``) and the sampled windows exist only on the sampling side, which
runs every 10 s (``sample``), as 4.9's StatsItemSet samples its items.

Windows (StatsItem 4.9.7): every 10 s a snapshot (time, times, value) joins the minute list
(7 kept: 60 s), every 10 minutes the hour list (7 kept), every hour the day list (25 kept);
an item's first snapshot in a list is preceded by a zero one a period earlier, so counts made
before the first tick are not lost. A window's sum is last - first value, its tps that sum
per second between them, its avgpt the sum per call (times). The ticks count from start-up,
as Java's scheduler counts from the StatsItemSet's creation.

Not thread-safe on purpose: every counting call runs on the broker's event loop (the
schedule service's thread hops to it, see broker/broker.py).
"""
from __future__ import annotations

from bisect import bisect_left as _bisect_left
import collections
import time
from dataclasses import dataclass
from typing import Callable, Iterator

from rmqd.store.consumequeue import SCHEDULE_TOPIC

# 4.9's org.apache.rocketmq.common.stats.Stats names
QUEUE_PUT_NUMS = "QUEUE_PUT_NUMS"
QUEUE_PUT_SIZE = "QUEUE_PUT_SIZE"
QUEUE_GET_NUMS = "QUEUE_GET_NUMS"
QUEUE_GET_SIZE = "QUEUE_GET_SIZE"
TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"
GROUP_GET_LATENCY = "GROUP_GET_LATENCY"

#: MixAll.SCHEDULE_CONSUMER_GROUP: the group 4.9 counts delayed deliveries under.
SCHEDULE_CONSUMER_GROUP = "SCHEDULE_CONSUMER"

SAMPLE_INTERVAL_S = 10.0
_MINUTE_TICKS = 60  # 10 minutes of 10-s ticks: one hour-window snapshot
_HOUR_TICKS = 360  # one hour: one day-window snapshot
_WINDOWS = ((7, 10_000), (7, 600_000), (25, 3_600_000))  # (snapshots kept, period ms): minute, hour, day

#: RocketMQ 5 BrokerMetricsManager's message size buckets (bytes; +Inf after them).
MESSAGE_SIZE_BUCKETS = (1024, 4 * 1024, 512 * 1024, 1024 * 1024, 2 * 1024 * 1024, 4 * 1024 * 1024)
#: RocketMQ 5 RemotingMetricsManager's RPC latency buckets (ms; +Inf after them).
RPC_LATENCY_BUCKETS = (1, 3, 5, 7, 10, 100, 1000, 2000, 3000)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class StatsSnapshot:
    """StatsSnapshot: one window of one item."""
    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0
    times: int = 0


class StatsWindows:
    """The three sampled lists of one 4.9 StatsItem."""

    __slots__ = ("lists",)

    def __init__(self) -> None:
        self.lists: tuple[collections.deque[tuple[int, int, int]], ...] = tuple(
            collections.deque(maxlen=keep) for keep, _ in _WINDOWS)

    def add(self, which: int, ts: int, times: int, value: int) -> None:
        snaps = self.lists[which]
        if not snaps:
            snaps.append((ts - _WINDOWS[which][1], 0, 0))
        snaps.append((ts, times, value))

    def snapshot(self, which: int) -> StatsSnapshot:
        """StatsItem.computeStatsData."""
        snaps = self.lists[which]
        if not snaps:
            return StatsSnapshot()
        (t0, n0, v0), (t1, n1, v1) = snaps[0], snaps[-1]
        total = v1 - v0
        elapsed = t1 - t0
        tps = total * 1000.0 / elapsed if elapsed else 0.0
        times = n1 - n0
        return StatsSnapshot(total, tps, total / times if times > 0 else 0.0, times)


class Histogram:
    """Cumulative explicit-bucket histogram as OpenTelemetry keeps one (counts per bucket, sum)."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[int, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0

    def record(self, value: int) -> None:
        self.counts[_bisect_left(self.bounds, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)


class TopicPut:
    """What was stored in one topic through the processors (4.9 TOPIC_PUT_NUMS/SIZE, 5.x
    rocketmq_messages_in_total / throughput_in / message_size). The number of puts is the
    size histogram's count (one record per put, as 5.x records it)."""

    __slots__ = ("topic", "msgs", "bytes", "size", "queues")

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.msgs = 0
        self.bytes = 0
        self.size = Histogram(MESSAGE_SIZE_BUCKETS)
        #: QUEUE_PUT_NUMS/SIZE: 4.9 keeps them for SCHEDULE_TOPIC_XXXX only, by queue (delay level - 1)
        self.queues: dict[int, list[int]] | None = {} if topic == SCHEDULE_TOPIC else None

    @property
    def times(self) -> int:
        return self.size.count


def _count_put(stats: "BrokerStatsManager", table: dict[str, TopicPut], topic: str, queue_id: int, msg_num: int,
               wrote_bytes: int) -> None:
    """BrokerStatsManager.on_put (a module function: compiled, the records are typed in
    broker_stats.pxd and their counters are struct fields; this runs once per send)."""
    rec = table.get(topic)
    if rec is None:
        rec = table[topic] = TopicPut(topic)
    rec.msgs += msg_num
    rec.bytes += wrote_bytes
    size = rec.size  # Histogram.record inlined
    average = wrote_bytes if msg_num == 1 else wrote_bytes // max(msg_num, 1)
    size.counts[_bisect_left(MESSAGE_SIZE_BUCKETS, average)] += 1
    size.sum += average
    if rec.queues is not None and stats.enable_queue_stat:
        q = rec.queues.get(queue_id)
        if q is None:
            q = rec.queues[queue_id] = [0, 0, 0]
        q[0] += msg_num
        q[1] += wrote_bytes
        q[2] += 1


class GroupGet:
    """What one group got from one topic (4.9 GROUP_GET_*, SNDBCK_PUT_NUMS; 5.x
    rocketmq_messages_out_total / throughput_out, rocketmq_send_to_dlq_messages_total), and
    the next offset its pulls asked for, by queue (5.x's pull offset: in-flight = pulled but
    not committed)."""

    __slots__ = ("group", "topic", "msgs", "bytes", "times", "latency", "send_back", "dlq", "pull_offsets")

    def __init__(self, group: str, topic: str) -> None:
        self.group = group
        self.topic = topic
        self.msgs = 0
        self.bytes = 0
        self.times = 0
        #: GROUP_GET_LATENCY by queue id: [ms total, pulls]
        self.latency: dict[int, list[int]] = {}
        self.send_back = 0
        self.dlq = 0
        self.pull_offsets: dict[int, int] = {}


class RpcLatency:
    """rocketmq_rpc_latency: one histogram per (request code, response code, long polling,
    oneway). Nested dicts by request code, then a small int, so recording allocates nothing
    once a combination was seen."""

    __slots__ = ("table",)

    def __init__(self) -> None:
        self.table: dict[int, dict[int, Histogram]] = {}

    def record(self, request_code: int, response_code: int, elapsed_ms: int, long_polling: bool,
               oneway: bool) -> None:
        by_code = self.table.get(request_code)
        if by_code is None:
            by_code = self.table[request_code] = {}
        key = (response_code << 2) | (long_polling << 1) | oneway
        hist = by_code.get(key)
        if hist is None:
            hist = by_code[key] = Histogram(RPC_LATENCY_BUCKETS)
        hist.record(elapsed_ms)

    def items(self) -> Iterator[tuple[int, int, bool, bool, Histogram]]:
        """(request code, response code or -1 for oneway, long polling, oneway, histogram)."""
        for request_code, by_code in list(self.table.items()):
            for key, hist in list(by_code.items()):
                yield request_code, key >> 2, bool(key & 2), bool(key & 1), hist


class BrokerStats:
    """4.9 BrokerStats: the put/get totals at this morning's and yesterday's midnight
    (GET_BROKER_RUNTIME_INFO msgPutTotal*/msgGetTotal*), read from running totals."""

    def __init__(self, put_total: Callable[[], int], get_total: Callable[[], int]) -> None:
        self._put_total = put_total
        self._get_total = get_total
        self.put_today_morning = 0
        self.put_yesterday_morning = 0
        self.get_today_morning = 0
        self.get_yesterday_morning = 0
        self._day = time.localtime().tm_yday

    @property
    def put_total(self) -> int:
        return self._put_total()

    @property
    def get_total(self) -> int:
        return self._get_total()

    def roll_day(self, now: float | None = None) -> None:
        """BrokerStats.record, run at the first check after local midnight."""
        day = time.localtime(now).tm_yday
        if day != self._day:
            self._day = day
            self.put_yesterday_morning, self.put_today_morning = self.put_today_morning, self.put_total
            self.get_yesterday_morning, self.get_today_morning = self.get_today_morning, self.get_total


class BrokerStatsManager:
    """The broker's counters; ``cluster_name`` keys BROKER_PUT_NUMS / BROKER_GET_NUMS as in 4.9."""

    def __init__(self, cluster_name: str, enable_queue_stat: bool = True,
                 clock: Callable[[], int] = now_ms) -> None:
        self.cluster_name = cluster_name
        self.enable_queue_stat = enable_queue_stat
        self._clock = clock
        self.topic_put: dict[str, TopicPut] = {}
        self.group_get: dict[str, dict[str, GroupGet]] = {}  # group -> topic -> record
        self._deleted_puts = self._deleted_gets = 0
        #: QUEUE_GET_NUMS/SIZE of SCHEDULE_TOPIC_XXXX by SCHEDULE_CONSUMER, by queue: [msgs, bytes, times]
        self.schedule_queue_get: dict[int, list[int]] = {}
        self.rpc_latency = RpcLatency()
        #: msgPutTotal*/msgGetTotal* (the broker points it at the store's own totals, as 4.9)
        self.broker_stats: BrokerStats | None = None
        #: (stat name, stats key) -> windows, made at the first sample of an item
        self._windows: dict[tuple[str, str], StatsWindows] = {}
        self._ticks = 0

    # -- counting (hot paths) -----------------------------------------------------------------
    def on_put(self, topic: str, queue_id: int, msg_num: int, wrote_bytes: int) -> None:
        """A send stored ``msg_num`` messages (``wrote_bytes`` record bytes) in ``topic``:
        the topic the store kept them under (SCHEDULE_TOPIC_XXXX for a delayed one)."""
        _count_put(self, self.topic_put, topic, queue_id, msg_num, wrote_bytes)

    def _group_get(self, group: str, topic: str) -> GroupGet:
        by_topic = self.group_get.get(group)
        if by_topic is None:
            by_topic = self.group_get[group] = {}
        rec = by_topic.get(topic)
        if rec is None:
            rec = by_topic[topic] = GroupGet(group, topic)
        return rec

    def on_get(self, group: str, topic: str, queue_id: int, msg_count: int, total_size: int,
               next_begin_offset: int, latency_ms: int) -> None:
        """A pull found ``msg_count`` messages (``total_size`` bytes) for ``group``."""
        by_topic = self.group_get.get(group)
        rec = by_topic.get(topic) if by_topic is not None else None
        if rec is None:
            rec = self._group_get(group, topic)
        rec.msgs += msg_count
        rec.bytes += total_size
        rec.times += 1
        rec.pull_offsets[queue_id] = next_begin_offset
        lat = rec.latency.get(queue_id)
        if lat is None:
            lat = rec.latency[queue_id] = [0, 0]
        lat[0] += latency_ms
        lat[1] += 1

    def on_send_back(self, group: str, topic: str) -> None:
        """CONSUMER_SEND_MSG_BACK stored the message again (SNDBCK_PUT_NUMS, key topic@group)."""
        self._group_get(group, topic).send_back += 1

    def on_dlq(self, group: str, topic: str) -> None:
        """A message of ``topic`` consumed by ``group`` went to the group's DLQ."""
        self._group_get(group, topic).dlq += 1

    def on_schedule_delivered(self, level: int, topic: str, msg_num: int, wrote_bytes: int) -> None:
        """ScheduleMessageService delivered a delayed message to its real topic (4.9 counts it
        as a put into that topic and as a get of SCHEDULE_TOPIC_XXXX by SCHEDULE_CONSUMER)."""
        self.on_put(topic, -1, msg_num, wrote_bytes)
        rec = self._group_get(SCHEDULE_CONSUMER_GROUP, SCHEDULE_TOPIC)
        rec.msgs += msg_num
        rec.bytes += wrote_bytes
        rec.times += 1
        if self.enable_queue_stat:
            q = self.schedule_queue_get.get(level - 1)
            if q is None:
                q = self.schedule_queue_get[level - 1] = [0, 0, 0]
            q[0] += msg_num
            q[1] += wrote_bytes
            q[2] += 1

    @property
    def broker_put(self) -> int:
        """BROKER_PUT_NUMS: every message counted by on_put (summed here, not on the send path)."""
        return sum(rec.msgs for rec in list(self.topic_put.values())) + self._deleted_puts

    @property
    def broker_get(self) -> int:
        """BROKER_GET_NUMS: every message pulled (4.9 leaves the schedule service's gets out)."""
        return self._deleted_gets + sum(rec.msgs for group, by_topic in list(self.group_get.items())
                                        if group != SCHEDULE_CONSUMER_GROUP for rec in list(by_topic.values()))

    # -- deletions (mqadmin deleteTopic / deleteSubGroup) ----------------------------------------
    def on_topic_deleted(self, topic: str) -> None:
        gone = self.topic_put.pop(topic, None)
        if gone is not None:  # the broker totals keep them
            self._deleted_puts += gone.msgs
        for group, by_topic in self.group_get.items():
            self._forget_gets(group, by_topic.pop(topic, None))
        self._forget(lambda name, key: key == topic or key.startswith(topic + "@") or f"@{topic}@" in key)

    def on_group_deleted(self, group: str) -> None:
        for rec in list(self.group_get.pop(group, {}).values()):
            self._forget_gets(group, rec)
        self._forget(lambda name, key: name != TOPIC_PUT_NUMS and name != TOPIC_PUT_SIZE
                     and key.endswith("@" + group))

    def _forget_gets(self, group: str, rec: GroupGet | None) -> None:
        if rec is not None and group != SCHEDULE_CONSUMER_GROUP:
            self._deleted_gets += rec.msgs

    def _forget(self, match: Callable[[str, str], bool]) -> None:
        for name_key in [k for k in self._windows if match(*k)]:
            del self._windows[name_key]

    # -- 4.9 items ------------------------------------------------------------------------------
    def _items(self) -> Iterator[tuple[str, str, int, int]]:
        """Every live 4.9 item: (stat name, stats key, times, value)."""
        for topic, rec in list(self.topic_put.items()):
            yield TOPIC_PUT_NUMS, topic, rec.times, rec.msgs
            yield TOPIC_PUT_SIZE, topic, rec.times, rec.bytes
            if rec.queues:
                for qid, (n, size, times) in list(rec.queues.items()):
                    yield QUEUE_PUT_NUMS, f"{topic}@{qid}", times, n
                    yield QUEUE_PUT_SIZE, f"{topic}@{qid}", times, size
        for group, by_topic in list(self.group_get.items()):
            for topic, got in list(by_topic.items()):
                key = f"{topic}@{group}"
                if got.times:
                    yield GROUP_GET_NUMS, key, got.times, got.msgs
                    yield GROUP_GET_SIZE, key, got.times, got.bytes
                    for qid, (ms, pulls) in list(got.latency.items()):
                        lat_key = f"{qid}@{topic}@{group}" if self.enable_queue_stat else key
                        yield GROUP_GET_LATENCY, lat_key, pulls, ms
                if got.send_back:
                    yield SNDBCK_PUT_NUMS, key, got.send_back, got.send_back
        for qid, (n, size, times) in list(self.schedule_queue_get.items()):
            key = f"{SCHEDULE_TOPIC}@{qid}@{SCHEDULE_CONSUMER_GROUP}"
            yield QUEUE_GET_NUMS, key, times, n
            yield QUEUE_GET_SIZE, key, times, size
        broker_put = self.broker_put
        if broker_put:  # incBrokerPutNums adds to the value only: times stays 0
            yield BROKER_PUT_NUMS, self.cluster_name, 0, broker_put
        if self.broker_get:
            yield BROKER_GET_NUMS, self.cluster_name, 0, self.broker_get

    def sample(self) -> None:
        """One 10-s tick: the minute lists, and the hour / day lists when theirs is due
        (all three on the first tick, as Java's fixed-rate tasks with no initial delay)."""
        ts = self._clock()
        which = [0]
        if self._ticks % _MINUTE_TICKS == 0:
            which.append(1)
        if self._ticks % _HOUR_TICKS == 0:
            which.append(2)
        self._ticks += 1
        windows = self._windows
        merged: dict[tuple[str, str], tuple[int, int]] = {}
        for name, key, times, value in self._items():
            if name == GROUP_GET_LATENCY and not self.enable_queue_stat:
                t0, v0 = merged.get((name, key), (0, 0))
                times, value = times + t0, value + v0
            merged[(name, key)] = (times, value)
        for name_key, (times, value) in merged.items():
            w = windows.get(name_key)
            if w is None:
                w = windows[name_key] = StatsWindows()
            for i in which:
                w.add(i, ts, times, value)
        if self.broker_stats is not None:
            self.broker_stats.roll_day()

    def view(self, stats_name: str, stats_key: str) -> tuple[StatsSnapshot, StatsSnapshot, StatsSnapshot] | None:
        """VIEW_BROKER_STATS_DATA: (minute, hour, day), or None when 4.9 has no such item."""
        w = self._windows.get((stats_name, stats_key))
        if w is None:
            if not self._exists(stats_name, stats_key):
                return None
            return StatsSnapshot(), StatsSnapshot(), StatsSnapshot()  # made, not sampled yet
        return w.snapshot(0), w.snapshot(1), w.snapshot(2)

    def _exists(self, stats_name: str, stats_key: str) -> bool:
        return any(name == stats_name and key == stats_key for name, key, _, _ in self._items())

    def group_get_tps(self, group: str, topic: str) -> float:
        """BrokerStatsManager.tpsGroupGetNums: the minute window's tps (0 before a sample)."""
        w = self._windows.get((GROUP_GET_NUMS, f"{topic}@{group}"))
        tps = w.snapshot(0).tps if w is not None else 0.0
        return tps if tps == tps else 0.0  # NaN (no time between snapshots) as 0

    # -- BrokerStats passthrough (GET_BROKER_RUNTIME_INFO reads these names) ----------------------
    def _daily(self) -> BrokerStats:
        if self.broker_stats is None:
            self.broker_stats = BrokerStats(lambda: self.broker_put, lambda: self.broker_get)
        return self.broker_stats

    @property
    def put_total(self) -> int:
        return self._daily().put_total

    @property
    def get_total(self) -> int:
        return self._daily().get_total

    @property
    def put_today_morning(self) -> int:
        return self._daily().put_today_morning

    @property
    def put_yesterday_morning(self) -> int:
        return self._daily().put_yesterday_morning

    @property
    def get_today_morning(self) -> int:
        return self._daily().get_today_morning

    @property
    def get_yesterday_morning(self) -> int:
        return self._daily().get_yesterday_morning


__all__ = [
    "BROKER_GET_NUMS", "BROKER_PUT_NUMS", "BrokerStats", "BrokerStatsManager", "GROUP_GET_LATENCY", "GROUP_GET_NUMS",
    "GROUP_GET_SIZE", "GroupGet", "Histogram", "MESSAGE_SIZE_BUCKETS", "QUEUE_GET_NUMS", "QUEUE_GET_SIZE",
    "QUEUE_PUT_NUMS", "QUEUE_PUT_SIZE", "RPC_LATENCY_BUCKETS", "RpcLatency", "SAMPLE_INTERVAL_S",
    "SCHEDULE_CONSUMER_GROUP", "SNDBCK_PUT_NUMS", "StatsSnapshot", "StatsWindows", "TOPIC_PUT_NUMS",
    "TOPIC_PUT_SIZE", "TopicPut",
]
