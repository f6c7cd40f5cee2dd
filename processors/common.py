"""Small facts shared by the broker processors: Java HashMap iteration order, FAQ remarks,
permission bits, retry/DLQ topic names, topic validation.

Why HashMap order: a 4.9.8 broker writes response extFields and re-encodes message
properties by iterating a java.util.HashMap, so the order on the wire and in the commit log
is the keys' hash-bucket order, not insertion order (the frame capture shows
`queueId, TRACE_ON, MSG_REGION, msgId, queueOffset`, and a stored message's properties
`color, KEYS, UNIQ_KEY, CLUSTER, TAGS`). Reproducing it keeps our bytes identical to RocketMQ's.
"""

from __future__ import annotations

from typing import Iterable, TypeVar

# TopicValidator's topic names: declared once in store.topic_config (re-exported here)
from rmqd.store.topic_config import (  # noqa: F401
    AUTO_CREATE_TOPIC_KEY_TOPIC, RMQ_SYS_BENCHMARK_TOPIC, RMQ_SYS_OFFSET_MOVED_EVENT, RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_SELF_TEST_TOPIC, RMQ_SYS_TRACE_TOPIC, RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
)
# Java HashMap order lives in wire.javamap (one implementation; permutations cached there)
from rmqd.wire.javamap import hashmap_capacity, java_hashmap_key_order, java_hashmap_order  # noqa: F401 (re-exported)
from rmqd.wire import names as _names

V = TypeVar("V")

# PermName
PERM_PRIORITY, PERM_READ, PERM_WRITE, PERM_INHERIT = 0x8, 0x4, 0x2, 0x1

MASTER_ID = 0
RETRY_GROUP_TOPIC_PREFIX = _names.RETRY_GROUP_TOPIC_PREFIX
DLQ_GROUP_TOPIC_PREFIX = _names.DLQ_GROUP_TOPIC_PREFIX
FAQ_URL = "http://rocketmq.apache.org/docs/faq/"  # every FAQUrl constant in 4.9.8


def suggest_todo(url: str = FAQ_URL) -> str:
    """FAQUrl.suggestTodo."""
    return f"\nSee {url} for further details."


def perm_readable(perm: int) -> bool:
    return bool(int(perm) & PERM_READ)


def perm_writeable(perm: int) -> bool:
    return bool(int(perm) & PERM_WRITE)


def perm_to_string(perm: int) -> str:
    """PermName.perm2String: R, W, X flags or '-'."""
    return (("R" if perm & PERM_READ else "-") + ("W" if perm & PERM_WRITE else "-")
            + ("X" if perm & PERM_INHERIT else "-"))


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def build_topic_sys_flag(unit: bool, has_unit_sub: bool) -> int:
    """TopicSysFlag.buildSysFlag: bit0 unit, bit1 unit subscription."""
    return (1 if unit else 0) | (2 if has_unit_sub else 0)


# TopicValidator (4.9.8)
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
SYSTEM_TOPIC_SET = frozenset({
    AUTO_CREATE_TOPIC_KEY_TOPIC, RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_BENCHMARK_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRACE_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC, RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_SELF_TEST_TOPIC, RMQ_SYS_OFFSET_MOVED_EVENT,
})
NOT_ALLOWED_SEND_TOPIC_SET = frozenset({
    RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, RMQ_SYS_SELF_TEST_TOPIC, RMQ_SYS_OFFSET_MOVED_EVENT,
})
# TopicValidator / Validators.checkGroup: declared once in wire.names (the store uses them too)
TOPIC_MAX_LENGTH = _names.TOPIC_MAX_LENGTH
validate_topic = _names.topic_remark  # None if valid, else TopicValidator's remark (code SYSTEM_ERROR)
validate_group = _names.group_remark  # None if valid, else Validators.checkGroup's message
validate_consumer_group = _names.consumer_group_remark  # checkGroup + its %RETRY%/%DLQ% topics


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPIC_SET or topic.startswith(SYSTEM_TOPIC_PREFIX)


def system_topic_remark(topic: str) -> str:
    return f"The topic[{topic}] is conflict with system topic."


def not_allowed_send_remark(topic: str) -> str:
    return f"Sending message to topic[{topic}] is forbidden."


def first(values: Iterable[V]) -> V | None:
    for v in values:
        return v
    return None
