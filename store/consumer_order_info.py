"""``config/consumerOrderInfo.json``: what an orderly (FIFO) pop handed out and not yet got back
(RocketMQ 5.x ConsumerOrderInfoManager).

Shape, as Apache RocketMQ 5.3.3 writes it (fastjson pretty, like every config file)::

    {"table":{"<topic>@<group>":{<queueId>:{"a":attemptId,"cm":commitOffsetBit,"i":invisibleTime,
      "l":lastConsumeTimestamp,"o":[firstOffset, diff1, diff2...],"oc":{offset:consumedCount},
      "ot":{offset:nextVisibleTime},"popTime":popTime}}}}

An orderly pop of a queue records the offsets it handed out (``o``: the first, then each
one's distance from it); while one of them is neither acknowledged (bit ``i`` of ``cm``) nor
visible again (``popTime + i``, or its own ``ot`` entry after a change of invisible time), the
queue gives nothing to another pop: that is what keeps a message group in order. An ack sets
the bit and moves the group's offset to the first unacknowledged message; a pop of the same
messages again counts their deliveries in ``oc`` (the reconsume times an orderly consumer sees).

Source: apache/rocketmq 5.3.3 broker/.../offset/ConsumerOrderInfoManager.java.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from rmqd.store.config_files import ConfigManager, config_path, java_map_order

CONSUMER_ORDER_INFO_JSON = "consumerOrderInfo.json"
TOPIC_GROUP_SEPARATOR = "@"
#: ConsumerOrderInfoManager.CLEAN_SPAN_FROM_LAST: an entry not consumed for a day is dropped.
CLEAN_SPAN_FROM_LAST_MS = 24 * 3600 * 1000

__all__ = ["CONSUMER_ORDER_INFO_JSON", "ConsumerOrderInfoManager", "OrderInfo"]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class OrderInfo:
    """ConsumerOrderInfoManager.OrderInfo (field names are the JSON names' meanings)."""

    pop_time: int
    invisible_time: int | None
    offset_list: list[int]
    last_consume_timestamp: int
    commit_offset_bit: int = 0
    attempt_id: str | None = None
    offset_next_visible_time: dict[int, int] | None = None
    offset_consumed_count: dict[int, int] | None = None

    @staticmethod
    def build_offset_list(queue_offsets: list[int]) -> list[int]:
        if len(queue_offsets) == 1:
            return list(queue_offsets)
        first = queue_offsets[0]
        return [first] + [o - first for o in queue_offsets[1:]]

    @staticmethod
    def queue_offset_in(offset_list: list[int], index: int) -> int:
        return offset_list[0] if index == 0 else offset_list[0] + offset_list[index]

    def queue_offset(self, index: int) -> int:
        return self.queue_offset_in(self.offset_list, index)

    def is_not_ack(self, index: int) -> bool:
        return not self.commit_offset_bit & (1 << index)

    def need_block(self, attempt_id: str | None, current_invisible_time: int, now: int) -> bool:
        """OrderInfo.needBlock: some handed-out message is unacknowledged and still invisible
        (a retried receive with the same attempt id is never blocked)."""
        if not self.offset_list:
            return False
        if self.attempt_id is not None and self.attempt_id == attempt_id:
            return False
        if self.invisible_time is None or self.invisible_time <= 0:
            self.invisible_time = current_invisible_time
        for i in range(len(self.offset_list)):
            if self.is_not_ack(i):
                next_visible = self.pop_time + self.invisible_time
                if self.offset_next_visible_time is not None:
                    t = self.offset_next_visible_time.get(self.queue_offset(i))
                    if t is not None:
                        next_visible = t
                if now < next_visible:
                    return True
        return False

    def next_offset(self) -> int:
        """OrderInfo.getNextOffset: the first unacknowledged offset, or after the last."""
        if not self.offset_list:
            return -2
        for i in range(len(self.offset_list)):
            if self.is_not_ack(i):
                return self.queue_offset(i)
        return self.queue_offset(len(self.offset_list) - 1) + 1

    def merge_offset_consumed_count(self, pre_attempt_id: str | None, pre_offset_list: list[int],
                                    prev_count: dict[int, int] | None) -> None:
        """OrderInfo.mergeOffsetConsumedCount: offsets handed out again count one more."""
        prev = prev_count if prev_count is not None else {}
        if pre_attempt_id is not None and pre_attempt_id == self.attempt_id:
            self.offset_consumed_count = prev
            return
        before = {self.queue_offset_in(pre_offset_list, i) for i in range(len(pre_offset_list))}
        counts: dict[int, int] = {}
        for i in range(len(self.offset_list)):
            qo = self.queue_offset(i)
            if qo in before:
                counts[qo] = prev.get(qo, 0) + 1
        self.offset_consumed_count = counts

    def to_json_obj(self) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        if self.attempt_id is not None:
            obj["a"] = self.attempt_id
        obj["cm"] = self.commit_offset_bit
        if self.invisible_time is not None:
            obj["i"] = self.invisible_time
        obj["l"] = self.last_consume_timestamp
        obj["o"] = list(self.offset_list)
        if self.offset_consumed_count is not None:
            obj["oc"] = java_map_order(self.offset_consumed_count, None)
        if self.offset_next_visible_time is not None:
            obj["ot"] = java_map_order(self.offset_next_visible_time, None)
        obj["popTime"] = self.pop_time
        return obj

    @classmethod
    def from_json_obj(cls, obj: Any) -> "OrderInfo":
        if not isinstance(obj, dict):
            raise ValueError("an order info is not an object")
        o = obj.get("o") or []
        if not isinstance(o, list) or not all(isinstance(x, int) for x in o):
            raise ValueError("o is not a list of numbers")

        def int_map(key: str) -> dict[int, int] | None:
            m = obj.get(key)
            if m is None:
                return None
            if not isinstance(m, dict):
                raise ValueError(f"{key} is not an object")
            return {int(k): int(v) for k, v in m.items()}

        inv = obj.get("i")
        attempt = obj.get("a")
        return cls(pop_time=int(obj.get("popTime", 0)), invisible_time=None if inv is None else int(inv),
                   offset_list=list(o), last_consume_timestamp=int(obj.get("l", 0)),
                   commit_offset_bit=int(obj.get("cm", 0)), attempt_id=None if attempt is None else str(attempt),
                   offset_next_visible_time=int_map("ot"), offset_consumed_count=int_map("oc"))


class ConsumerOrderInfoManager(ConfigManager):
    """The table and its file. ``exists`` (topic, group, queue_id) -> bool is asked when the
    table is written, to drop entries of deleted topics, groups and queues (autoClean)."""

    def __init__(self, store_path_root_dir: str | os.PathLike,
                 exists: Callable[[str, str, int], bool] | None = None, clock: Callable[[], int] = _now_ms) -> None:
        super().__init__(config_path(store_path_root_dir, CONSUMER_ORDER_INFO_JSON))
        self.table: dict[str, dict[int, OrderInfo]] = {}
        self.exists = exists
        self.clock = clock
        self._lock = threading.RLock()
        # ConcurrentHashMap(128) of ConcurrentHashMap(16) when built here; fastjson's maps after a load
        self._outer_capacity: int | None = 128
        self._inner_capacity: int | None = 16

    @staticmethod
    def key(topic: str, group: str) -> str:
        return topic + TOPIC_GROUP_SEPARATOR + group

    def get(self, topic: str, group: str, queue_id: int) -> OrderInfo | None:
        qs = self.table.get(self.key(topic, group))
        return None if qs is None else qs.get(queue_id)

    # ---- the operations of 5.3 ------------------------------------------------------------------
    def update(self, attempt_id: str | None, topic: str, group: str, queue_id: int, pop_time: int,
               invisible_time: int, msg_queue_offsets: list[int]) -> list[tuple[int | None, int]]:
        """Record an orderly pop; returns the order-count entries 5.3 puts into orderCountInfo:
        (queue offset, times consumed) per message counted before, then (None, the minimum) for
        the queue (what old clients read)."""
        with self._lock:
            qs = self.table.setdefault(self.key(topic, group), {})
            old = qs.get(queue_id)
            info = OrderInfo(pop_time=pop_time, invisible_time=invisible_time,
                             offset_list=OrderInfo.build_offset_list(msg_queue_offsets),
                             last_consume_timestamp=self.clock(), attempt_id=attempt_id)
            if old is not None:
                info.merge_offset_consumed_count(old.attempt_id, old.offset_list, old.offset_consumed_count)
            qs[queue_id] = info
            entries: list[tuple[int | None, int]] = []
            counts = info.offset_consumed_count
            minimum = 0
            if counts is not None:
                minimum = min(counts.values(), default=2**31 - 1)
                for offset, times in java_map_order(counts, None).items():
                    entries.append((offset, times))
                if len(counts) != len(info.offset_list):
                    minimum = 0
            entries.append((None, minimum))
            return entries

    def check_block(self, attempt_id: str | None, topic: str, group: str, queue_id: int, invisible_time: int) -> bool:
        with self._lock:
            info = self.table.setdefault(self.key(topic, group), {}).get(queue_id)
            return info is not None and info.need_block(attempt_id, invisible_time, self.clock())

    def clear_block(self, topic: str, group: str, queue_id: int) -> None:
        with self._lock:
            qs = self.table.get(self.key(topic, group))
            if qs is not None:
                qs.pop(queue_id, None)

    def commit_and_next(self, topic: str, group: str, queue_id: int, queue_offset: int, pop_time: int) -> int:
        """Mark ``queue_offset`` consumed; the group's next offset, -1 illegal, -2 nothing to commit
        (another pop's receipt)."""
        with self._lock:
            qs = self.table.get(self.key(topic, group))
            if qs is None:
                return queue_offset + 1
            info = qs.get(queue_id)
            if info is None:
                return queue_offset + 1
            if not info.offset_list:
                return -1
            if pop_time != info.pop_time:
                return -2
            for i in range(len(info.offset_list)):
                if info.queue_offset(i) == queue_offset:
                    break
            else:
                return -1
            info.commit_offset_bit |= 1 << i
            return info.next_offset()

    def update_next_visible_time(self, topic: str, group: str, queue_id: int, queue_offset: int, pop_time: int,
                                 next_visible_time: int) -> None:
        with self._lock:
            info = self.get(topic, group, queue_id)
            if info is None or pop_time != info.pop_time:
                return
            if info.offset_next_visible_time is None:
                info.offset_next_visible_time = {}
            info.offset_next_visible_time[queue_offset] = next_visible_time

    # ---- the file --------------------------------------------------------------------------------
    def auto_clean(self) -> None:
        now = self.clock()
        with self._lock:
            for key in list(self.table):
                topic, sep, group = key.partition(TOPIC_GROUP_SEPARATOR)
                qs = self.table[key]
                if not sep or "@" in group:
                    continue
                if not qs:
                    del self.table[key]
                    continue
                for qid in list(qs):
                    if self.exists is not None and not self.exists(topic, group, qid):
                        del qs[qid]
                    elif now - qs[qid].last_consume_timestamp > CLEAN_SPAN_FROM_LAST_MS:
                        del qs[qid]

    def persist(self) -> None:
        """Only once an orderly pop used it (or the file is there already): a store no POP
        consumer touched keeps 4.9's config/ file set, which Apache 4.9 and `spark verify
        --against` compare."""
        with self._lock:
            unused = not self.table
        if unused and not self.path.exists():
            return
        super().persist()

    def encode_obj(self) -> Any:
        self.auto_clean()
        with self._lock:
            table = java_map_order(self.table, self._outer_capacity)
            return {"table": {k: java_map_order({q: i.to_json_obj() for q, i in v.items()}, self._inner_capacity)
                              for k, v in table.items()}}

    def decode_obj(self, obj: Any) -> None:
        table = obj.get("table")
        if table is None:
            return
        if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
            raise ValueError("table is not an object of objects")
        new = {str(k): {int(q): OrderInfo.from_json_obj(i) for q, i in v.items()} for k, v in table.items()}
        with self._lock:
            self.table = new
            self._outer_capacity = self._inner_capacity = None
