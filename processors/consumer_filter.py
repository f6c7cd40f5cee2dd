"""The broker's consumer filter bookkeeping for SQL92 subscriptions (4.9.8 ConsumerFilterManager),
without the bloom filter.

RocketMQ keeps one compiled filter per (topic, consumer group), registered on every heartbeat
(ConsumerIdsChangeListener REGISTER event) and marked dead when the group's last consumer
leaves. The bloom filter only pre-screens consume-queue *ext* units, which rmqd does not write,
so every message is decided by the compiled expression over its properties — the same result
RocketMQ reaches when a unit carries no bit map.

Three entry points the broker uses:
* ``check_expression(type, text)`` -> remark or None: CHECK_CLIENT_CONFIG
  (SUBSCRIPTION_PARSE_FAILED with that remark).
* ``ConsumerFilterManager.register(group, subscriptions)`` / ``unregister(group)``: the
  REGISTER / UNREGISTER consumer-group events.
* ``registered_filter(manager, topic, group, sub_version)``: a pull without a subscription in
  its header uses the heartbeat-registered filter, or gets FILTER_DATA_NOT_EXIST /
  FILTER_DATA_NOT_LATEST exactly as PullMessageProcessor answers.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rmqd.processors.sql92 import SQL92, CompiledFilter, SQL92ParseError, compile_sql92, is_tag_type

__all__ = [
    "ConsumerFilterData",
    "ConsumerFilterManager",
    "compile_expression",
    "check_expression",
    "build_filter_data",
    "registered_filter",
    "FILTER_DATA_NOT_EXIST",
    "FILTER_DATA_NOT_LATEST",
    "NOT_SUPPORTED_REMARK",
]

FILTER_DATA_NOT_EXIST = 27
FILTER_DATA_NOT_LATEST = 28
MS_24_HOUR = 24 * 3600 * 1000
# Java 17's helpful NullPointerException text for FilterFactory.get(type) returning null.
_UNKNOWN_TYPE_NPE = (
    'java.lang.NullPointerException: Cannot invoke "org.apache.rocketmq.filter.FilterSpi.compile(String)" '
    'because the return value of "org.apache.rocketmq.filter.FilterFactory.get(String)" is null'
)


def NOT_SUPPORTED_REMARK(expression_type: str | None) -> str:  # noqa: N802 - reads like the Java text
    """Remark of CHECK_CLIENT_CONFIG / PULL_MESSAGE (code SYSTEM_ERROR) without enablePropertyFilter."""
    return f"The broker does not support consumer to filter message by {expression_type}"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def compile_expression(expression_type: str | None, text: str | None) -> CompiledFilter:
    """``FilterFactory.INSTANCE.get(type).compile(text)``: only SQL92 is registered."""
    if expression_type != SQL92:
        raise SQL92ParseError(_UNKNOWN_TYPE_NPE, text)
    if text is None:
        raise SQL92ParseError("java.lang.NullPointerException", None)
    return compile_sql92(text)


def check_expression(expression_type: str | None, text: str | None) -> str | None:
    """CHECK_CLIENT_CONFIG's compile step: None when fine, else the SUBSCRIPTION_PARSE_FAILED remark."""
    try:
        compile_expression(expression_type, text)
    except SQL92ParseError as exc:
        return exc.remark
    return None


@dataclass(eq=False, slots=True)
class ConsumerFilterData:
    consumerGroup: str
    topic: str
    expression: str
    expressionType: str
    compiled: CompiledFilter | None
    bornTime: int
    deadTime: int = 0
    clientVersion: int = 0

    def is_dead(self) -> bool:
        return self.deadTime >= self.bornTime

    def how_long_after_death(self, now_ms: int) -> int:
        return now_ms - self.deadTime if self.is_dead() else -1

    def is_msg_in_live(self, msg_store_time: int) -> bool:
        return msg_store_time > self.bornTime

    def matches(self, properties: Mapping[str, str] | None) -> bool:
        """No compiled expression means "match everything" (ExpressionMessageFilter)."""
        if self.compiled is None:
            return True
        return self.compiled.matches(properties)

    def to_json(self) -> dict[str, Any]:
        # fastjson getter names, alphabetical; bloomFilterData is null without a bloom filter.
        return {
            "bornTime": self.bornTime,
            "clientVersion": self.clientVersion,
            "consumerGroup": self.consumerGroup,
            "dead": self.is_dead(),
            "deadTime": self.deadTime,
            "expression": self.expression,
            "expressionType": self.expressionType,
            "topic": self.topic,
        }


def build_filter_data(topic: str, group: str, expression: str | None, expression_type: str | None,
                      client_version: int, now_ms: int | None = None) -> ConsumerFilterData | None:
    """ConsumerFilterManager.build: None for tag subscriptions and for expressions that do not compile."""
    if is_tag_type(expression_type):
        return None
    try:
        compiled = compile_expression(expression_type, expression)
    except SQL92ParseError:
        return None
    return ConsumerFilterData(group, topic, expression or "", expression_type or "", compiled,
                              _now_ms() if now_ms is None else now_ms, 0, int(client_version))


def _field(sub: Any, name: str, default: Any = None) -> Any:
    if isinstance(sub, Mapping):
        return sub.get(name, default)
    return getattr(sub, name, default)


class ConsumerFilterManager:
    """filterDataByTopic: topic -> {group: ConsumerFilterData}."""

    def __init__(self, clean_time_span_ms: int = MS_24_HOUR, clock: Any = _now_ms) -> None:
        self.clean_time_span_ms = clean_time_span_ms
        self.clock = clock
        self.by_topic: dict[str, dict[str, ConsumerFilterData]] = {}

    def register(self, group: str, subscriptions: Iterable[Any]) -> None:
        """The REGISTER consumer-group event (every heartbeat): register each subscription, then
        mark the group's filters for topics it no longer subscribes as dead."""
        subs = list(subscriptions)
        topics = set()
        for sub in subs:
            topic = _field(sub, "topic")
            topics.add(topic)
            self.register_one(topic, group, _field(sub, "subString"), _field(sub, "expressionType"),
                              int(_field(sub, "subVersion", 0) or 0))
        now = self.clock()
        for data in self.get_by_group(group):
            if data.topic not in topics and not data.is_dead():
                data.deadTime = now

    def register_one(self, topic: str, group: str, expression: str | None, expression_type: str | None,
                     client_version: int) -> bool:
        if is_tag_type(expression_type) or not expression:
            return False
        groups = self.by_topic.setdefault(topic, {})
        old = groups.get(group)
        if old is None:
            data = build_filter_data(topic, group, expression, expression_type, client_version, self.clock())
            if data is None:
                return False
            groups[group] = data
            return True
        if client_version <= old.clientVersion:
            if client_version == old.clientVersion and old.is_dead():
                old.deadTime = 0
                return True
            return False
        if old.expression != expression or old.expressionType != expression_type:
            data = build_filter_data(topic, group, expression, expression_type, client_version, self.clock())
            if data is None:
                # new expression does not compile: drop the old one, the client's pulls report it
                del groups[group]
                return False
            groups[group] = data
            return True
        old.clientVersion = client_version
        if old.is_dead():
            old.deadTime = 0
        return True

    def unregister(self, group: str) -> None:
        """The UNREGISTER event (the group's last consumer left)."""
        now = self.clock()
        for groups in self.by_topic.values():
            data = groups.get(group)
            if data is not None and not data.is_dead():
                data.deadTime = now

    def get(self, topic: str, group: str) -> ConsumerFilterData | None:
        groups = self.by_topic.get(topic)
        return groups.get(group) if groups else None

    def get_by_group(self, group: str) -> list[ConsumerFilterData]:
        return [g[group] for g in self.by_topic.values() if group in g]

    def clean(self) -> None:
        """Forget filters dead for longer than filterDataCleanTimeSpan, and empty topics."""
        now = self.clock()
        for topic in list(self.by_topic):
            groups = self.by_topic[topic]
            for group in list(groups):
                if groups[group].how_long_after_death(now) >= self.clean_time_span_ms:
                    del groups[group]
            if not groups:
                del self.by_topic[topic]

    def to_json(self) -> dict[str, Any]:
        """consumerFilter.json's shape (``{"filterDataByTopic":{...}}``), after ``clean()`` as encode() does."""
        self.clean()
        return {
            "filterDataByTopic": {
                topic: {"groupFilterData": {g: d.to_json() for g, d in groups.items()}, "topic": topic}
                for topic, groups in self.by_topic.items()
            }
        }

    def load_json(self, obj: Mapping[str, Any] | None) -> None:
        """Decode a consumerFilter.json object. RocketMQ drops persisted filters when their bloom
        parameters differ from its own; ours have none, so entries are kept, recompiled and, as
        RocketMQ does, treated as dead since 30 s before the load until a heartbeat revives them."""
        if not obj:
            return
        now = self.clock()
        loaded: dict[str, dict[str, ConsumerFilterData]] = {}
        for topic, by_topic in (obj.get("filterDataByTopic") or {}).items():
            groups: dict[str, ConsumerFilterData] = {}
            for group, raw in ((by_topic or {}).get("groupFilterData") or {}).items():
                if not raw:
                    continue
                try:
                    compiled: CompiledFilter | None = compile_expression(raw.get("expressionType"),
                                                                         raw.get("expression"))
                except SQL92ParseError:
                    compiled = None
                data = ConsumerFilterData(raw.get("consumerGroup", group), raw.get("topic", topic),
                                          raw.get("expression") or "", raw.get("expressionType") or "",
                                          compiled, int(raw.get("bornTime", 0)), int(raw.get("deadTime", 0)),
                                          int(raw.get("clientVersion", 0)))
                if data.deadTime == 0:
                    dead = now - 30_000
                    data.deadTime = data.bornTime if dead <= data.bornTime else dead
                groups[group] = data
            loaded[topic] = groups
        self.by_topic = loaded


def registered_filter(manager: ConsumerFilterManager, topic: str, group: str,
                      sub_version: int) -> ConsumerFilterData | tuple[int, str]:
    """PullMessageProcessor's lookup for a non-tag subscription known only from the heartbeat:
    the filter data, or (response code, remark) to answer with."""
    data = manager.get(topic, group)
    if data is None:
        return FILTER_DATA_NOT_EXIST, "The broker's consumer filter data is not exist!Your expression may be wrong!"
    if data.clientVersion < sub_version:
        return FILTER_DATA_NOT_LATEST, "the consumer's consumer filter data not latest"
    return data
