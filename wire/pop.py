"""POP consumption facts that cross the network (RocketMQ 5.3.x): the extra-info string a popped
message carries back in its ack / change-invisible-time request (``ExtraInfoUtil``), the offset
info strings of a POP_MESSAGE answer, the POP retry topic names (``KeyBuilder``) and the
constants of ``PopAckConstants``.

Why in wire/: the extra-info string is the client's receipt (it travels in the ``POP_CK``
property and in the ``extraInfo`` header field, and the gRPC proxy builds its receipt handle on
it), the retry topic name becomes a commit-log field and a consume-queue directory, and the
broker, the gRPC service and the tests all need the same parser.

Source: apache/rocketmq 5.3.3, remoting/.../protocol/header/ExtraInfoUtil.java,
common/.../KeyBuilder.java, common/.../PopAckConstants.java, common/.../MessageConst.java.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from rmqd.wire import fastjson
from rmqd.wire.errors import WireError
from rmqd.wire.names import RETRY_GROUP_TOPIC_PREFIX

#: MessageConst.PROPERTY_POP_CK: the extra info of a popped message (set by the client, or by
#: the broker on a message re-encoded from a POP retry topic).
PROPERTY_POP_CK = "POP_CK"
PROPERTY_POP_CK_OFFSET = "POP_CK_OFFSET"
#: MessageConst.PROPERTY_FIRST_POP_TIME: pop time of the first delivery, set on revive.
PROPERTY_FIRST_POP_TIME = "1ST_POP_TIME"
#: MessageConst.PROPERTY_TIMER_DELIVER_MS (what ``setDeliverTimeMs`` writes).
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"

KEY_SEPARATOR = " "  # MessageConst.KEY_SEPARATOR
SPLIT = "@"  # PopAckConstants.SPLIT
#: PopAckConstants: the revive topic is REVIVE_TOPIC + brokerClusterName, consumed by REVIVE_GROUP.
REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"
CK_TAG = "ck"
ACK_TAG = "ack"
BATCH_ACK_TAG = "bAck"
#: PopAckConstants.ackTimeInterval: a checkpoint is delivered to the revive queue this long
#: before its revive time (its acks exactly at it).
ACK_TIME_INTERVAL_MS = 1000
SECOND_MS = 1000
#: PopAckConstants.retryQueueNum: queues of a POP retry topic.
RETRY_QUEUE_NUM = 1
#: KeyBuilder.POP_ORDER_REVIVE_QUEUE: the revive queue id that marks an orderly (FIFO) pop.
POP_ORDER_REVIVE_QUEUE = 999
#: The 32-message limit of one pop (PopMessageProcessor: "pop message's num is greater than 32").
MAX_POP_NUMS = 32

#: ConsumeInitMode: where a group without an offset starts.
CONSUME_INIT_MODE_MIN = 0
CONSUME_INIT_MODE_MAX = 1

#: ExtraInfoUtil's topic kinds ("0" normal, "1" POP retry v1 ``%RETRY%g_t``, "2" v2 ``%RETRY%g+t``).
NORMAL_TOPIC = "0"
RETRY_TOPIC_V1 = "1"
RETRY_TOPIC_V2 = "2"
_QUEUE_OFFSET = "qo"


def revive_topic(cluster_name: str) -> str:
    """PopAckConstants.buildClusterReviveTopic."""
    return REVIVE_TOPIC_PREFIX + cluster_name


def pop_retry_topic_v1(topic: str, group: str) -> str:
    """KeyBuilder.buildPopRetryTopicV1: ``%RETRY%<group>_<topic>``."""
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}_{topic}"


def pop_retry_topic_v2(topic: str, group: str) -> str:
    """KeyBuilder.buildPopRetryTopicV2: ``%RETRY%<group>+<topic>``."""
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}+{topic}"


def pop_retry_topic(topic: str, group: str, retry_v2: bool = False) -> str:
    """KeyBuilder.buildPopRetryTopic (enableRetryTopicV2 chooses the separator)."""
    return pop_retry_topic_v2(topic, group) if retry_v2 else pop_retry_topic_v1(topic, group)


def is_pop_retry_topic_v2(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and "+" in topic


def parse_normal_topic(topic: str, group: str) -> str:
    """KeyBuilder.parseNormalTopic(topic, cid): the topic a POP retry topic retries."""
    if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return topic
    v2 = f"{RETRY_GROUP_TOPIC_PREFIX}{group}+"
    if topic.startswith(v2):
        return topic[len(v2):]
    return topic[len(f"{RETRY_GROUP_TOPIC_PREFIX}{group}_"):]


def topic_kind(topic: str) -> str:
    """ExtraInfoUtil.getRetry(topic): "0", "1" or "2"."""
    if is_pop_retry_topic_v2(topic):
        return RETRY_TOPIC_V2
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return RETRY_TOPIC_V1
    return NORMAL_TOPIC


def real_topic_of_kind(topic: str, group: str, kind: str) -> str:
    """ExtraInfoUtil.getRealTopic(topic, cid, retry); ValueError on an unknown kind."""
    if kind == NORMAL_TOPIC:
        return topic
    if kind == RETRY_TOPIC_V1:
        return pop_retry_topic_v1(topic, group)
    if kind == RETRY_TOPIC_V2:
        return pop_retry_topic_v2(topic, group)
    raise ValueError("getRetry fail, format is wrong")


class ExtraInfoError(ValueError):
    """An extra-info string that does not parse (the broker answers it as a bad request)."""


@dataclass(frozen=True, slots=True)
class ExtraInfo:
    """One popped message's receipt, ``ExtraInfoUtil.buildExtraInfo``'s eight fields:
    ``ckQueueOffset popTime invisibleTime reviveQid retry brokerName queueId queueOffset``.

    ``ck_queue_offset`` is the start offset of the pop's checkpoint (the first offset the pop
    read in that queue), ``queue_offset`` the message's own offset; ``kind`` says which topic
    the message was popped from ("0" the topic itself, "1"/"2" its POP retry topic)."""

    ck_queue_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    kind: str
    broker_name: str
    queue_id: int
    queue_offset: int = -1

    @property
    def order(self) -> bool:
        """ExtraInfoUtil.isOrder: popped by an orderly (FIFO) pop."""
        return self.revive_qid == POP_ORDER_REVIVE_QUEUE

    def real_topic(self, topic: str, group: str) -> str:
        """ExtraInfoUtil.getRealTopic(extraInfo, topic, cid): the topic the message was popped
        from, given the topic the client subscribed to."""
        return real_topic_of_kind(topic, group, self.kind)

    def encode(self) -> str:
        parts = [self.ck_queue_offset, self.pop_time, self.invisible_time, self.revive_qid, self.kind,
                 self.broker_name, self.queue_id]
        if self.queue_offset >= 0:
            parts.append(self.queue_offset)
        return KEY_SEPARATOR.join(str(p) for p in parts)


def build_extra_info(ck_queue_offset: int, pop_time: int, invisible_time: int, revive_qid: int, topic: str,
                     broker_name: str, queue_id: int, queue_offset: int | None = None) -> str:
    """ExtraInfoUtil.buildExtraInfo (seven fields, or eight with the message's queue offset)."""
    return ExtraInfo(ck_queue_offset, pop_time, invisible_time, revive_qid, topic_kind(topic), broker_name,
                     queue_id, -1 if queue_offset is None else queue_offset).encode()


#: Java's long and int ranges: what Long.parseLong / an int field accept
_LONG_MIN, _LONG_MAX, _INT_MIN, _INT_MAX = -(2**63), 2**63 - 1, -(2**31), 2**31 - 1
#: the extra info's topic kinds (ExtraInfoUtil.getRetry)
_KINDS = (NORMAL_TOPIC, RETRY_TOPIC_V1, RETRY_TOPIC_V2)


def _java_long(text: str, what: str) -> int:
    body = text[1:] if text[:1] in "+-" else text
    if not body or not body.isascii() or not body.isdigit():
        raise ExtraInfoError(f"extraInfo {what} is not a number: {text[:40]!r}")
    value = int(text)
    if not _LONG_MIN <= value <= _LONG_MAX:
        raise ExtraInfoError(f"extraInfo {what} is out of range: {text[:40]!r}")
    return value


def checked_extra_info(x: ExtraInfo) -> ExtraInfo:
    """``x`` when ``parse_extra_info`` would accept its text, else ExtraInfoError: the same checks
    on fields already numbers (the proxy's receipt handle holds them parsed, so an ack need not
    write them out and read them back)."""
    if x.kind not in _KINDS:
        raise ExtraInfoError("getRetry fail, format is wrong")
    if not (_INT_MIN <= x.revive_qid <= _INT_MAX and _INT_MIN <= x.queue_id <= _INT_MAX):
        raise ExtraInfoError("extraInfo reviveQid/queueId is not an int")
    if not (_LONG_MIN <= x.ck_queue_offset <= _LONG_MAX and _LONG_MIN <= x.pop_time <= _LONG_MAX
            and _LONG_MIN <= x.invisible_time <= _LONG_MAX and _LONG_MIN <= x.queue_offset <= _LONG_MAX):
        raise ExtraInfoError("extraInfo field is out of range")
    if KEY_SEPARATOR in x.broker_name:
        raise ExtraInfoError("extraInfo brokerName holds a separator")
    return x


def parse_extra_info(text: str | None) -> ExtraInfo:
    """``ExtraInfoUtil.split`` and its getters; at least the first seven fields must be there
    (what an ack or change-invisible-time reads), the eighth is optional."""
    if text is None:
        raise ExtraInfoError("split extraInfo is null")
    parts = text.split(KEY_SEPARATOR)
    if len(parts) < 7:
        raise ExtraInfoError(f"extraInfo has {len(parts)} fields, at least 7 are needed")
    kind = parts[4]
    if kind not in _KINDS:
        raise ExtraInfoError("getRetry fail, format is wrong")
    revive_qid = _java_long(parts[3], "reviveQid")
    queue_id = _java_long(parts[6], "queueId")
    if not _INT_MIN <= revive_qid <= _INT_MAX or not _INT_MIN <= queue_id <= _INT_MAX:
        raise ExtraInfoError("extraInfo reviveQid/queueId is not an int")
    return ExtraInfo(
        ck_queue_offset=_java_long(parts[0], "ckQueueOffset"), pop_time=_java_long(parts[1], "popTime"),
        invisible_time=_java_long(parts[2], "invisibleTime"), revive_qid=revive_qid, kind=kind,
        broker_name=parts[5], queue_id=queue_id,
        queue_offset=_java_long(parts[7], "queueOffset") if len(parts) > 7 else -1)


# ---- the offset info strings of a POP_MESSAGE answer ------------------------------------------

def start_offset_info_item(topic: str, queue_id: int, start_offset: int) -> str:
    """One ``ExtraInfoUtil.buildStartOffsetInfo`` entry: ``<kind> <queueId> <startOffset>``."""
    return f"{topic_kind(topic)}{KEY_SEPARATOR}{queue_id}{KEY_SEPARATOR}{start_offset}"


def msg_offset_info_item(topic: str, queue_id: int, offsets: list[int]) -> str:
    """One ``ExtraInfoUtil.buildMsgOffsetInfo`` entry: ``<kind> <queueId> <o1>,<o2>,...``."""
    return f"{topic_kind(topic)}{KEY_SEPARATOR}{queue_id}{KEY_SEPARATOR}{','.join(map(str, offsets))}"


def queue_offset_order_count_item(topic: str, queue_id: int, queue_offset: int, count: int) -> str:
    """``ExtraInfoUtil.buildQueueOffsetOrderCountInfo``: ``<kind> qo<queueId>%<offset> <count>``."""
    return f"{topic_kind(topic)}{KEY_SEPARATOR}{_QUEUE_OFFSET}{queue_id}%{queue_offset}{KEY_SEPARATOR}{count}"


def queue_id_order_count_item(topic: str, queue_id: int, count: int) -> str:
    """``ExtraInfoUtil.buildQueueIdOrderCountInfo``: ``<kind> <queueId> <count>``."""
    return f"{topic_kind(topic)}{KEY_SEPARATOR}{queue_id}{KEY_SEPARATOR}{count}"


def parse_offset_info(text: str | None) -> dict[str, str]:
    """``parseStartOffsetInfo`` / ``parseMsgOffsetInfo`` / ``parseOrderCountInfo`` without the
    value conversion: ``"<kind>@<queue key>" -> value text``; ValueError on a bad entry."""
    out: dict[str, str] = {}
    if not text:
        return out
    for one in text.split(";"):
        split = one.split(KEY_SEPARATOR)
        if len(split) != 3:
            raise ValueError(f"parse offset info error, {text[:200]}")
        key = f"{split[0]}@{split[1]}"
        if key in out:
            raise ValueError(f"parse offset info error, duplicate, {text[:200]}")
        out[key] = split[2]
    return out


# ---- BATCH_ACK_MESSAGE's body -----------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class BatchAck:
    """One ``BatchAck`` of a ``BatchAckMessageRequestBody``: the messages ``start_offset + i``
    (i in ``bits``) of one pop's checkpoint. ``topic`` is the subscribed topic, ``retry`` its
    kind ("0"/"1"/"2": the messages came from the topic or its POP retry topic)."""

    consumer_group: str
    topic: str
    retry: str
    start_offset: int
    queue_id: int
    revive_queue_id: int
    pop_time: int
    invisible_time: int
    bits: tuple[int, ...]


#: bit i of a BatchAck is the offset ckQueueOffset + i; one pop reads at most 16000 consume-queue
#: units past its start (the store's filter scan), so no honest bit set is longer than this
MAX_BITSET_BYTES = 8192

_BATCH_ACK_ALT = {"consumerGroup": "c", "topic": "t", "retry": "r", "startOffset": "so", "queueId": "q",
                  "reviveQueueId": "rq", "popTime": "pt", "invisibleTime": "it", "bitSet": "b"}


def bitset_bits(data: bytes) -> tuple[int, ...]:
    """java.util.BitSet.valueOf(bytes): the set bits, little-endian within and across bytes."""
    return tuple(i * 8 + j for i, byte in enumerate(data) for j in range(8) if byte >> j & 1)


def bitset_bytes(bits: tuple[int, ...] | list[int]) -> bytes:
    """BitSet.toByteArray."""
    if not bits:
        return b""
    out = bytearray(max(bits) // 8 + 1)
    for b in bits:
        out[b // 8] |= 1 << (b % 8)
    return bytes(out)


def _field(obj: dict[str, Any], key: str, kind: type) -> Any:
    v = obj.get(key)
    if kind is int:
        if isinstance(v, bool) or not isinstance(v, int):
            if isinstance(v, str) and v.lstrip("-").isdigit():
                return int(v)
            if v is None:
                return 0
            raise WireError(f"BatchAck.{key} is not a number")
        return v
    return None if v is None else str(v)


def decode_batch_ack_body(body: bytes | memoryview | None) -> tuple[str | None, list[BatchAck]]:
    """BatchAckMessageRequestBody (fastjson; the bit set as base64 text or a byte array):
    (brokerName, acks); WireError when it is not that."""
    if not body:
        return None, []
    try:
        obj = fastjson.loads(bytes(body).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise WireError(f"BatchAckMessageRequestBody is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise WireError("BatchAckMessageRequestBody is not a JSON object")
    acks = obj.get("acks") or []
    if not isinstance(acks, list):
        raise WireError("BatchAckMessageRequestBody.acks is not a list")
    out = []
    for raw in acks:
        if not isinstance(raw, dict):
            raise WireError("a BatchAck is not a JSON object")
        a: dict[str, Any] = {_BATCH_ACK_ALT.get(str(k), str(k)): v for k, v in raw.items()}
        b = a.get("b")
        if b is None:
            data = b""
        elif isinstance(b, str):
            try:
                data = base64.b64decode(b, validate=True)
            except (binascii.Error, ValueError):
                raise WireError("BatchAck.b is not base64") from None
        elif isinstance(b, list) and all(isinstance(x, int) and -128 <= x <= 255 for x in b):
            data = bytes(x & 0xFF for x in b)
        else:
            raise WireError("BatchAck.b is not a bit set")
        if len(data) > MAX_BITSET_BYTES:
            raise WireError(f"BatchAck.b has {len(data)} bytes, more than the {MAX_BITSET_BYTES} one pop can need")
        retry = _field(a, "r", str) or NORMAL_TOPIC
        out.append(BatchAck(consumer_group=_field(a, "c", str) or "", topic=_field(a, "t", str) or "", retry=retry,
                            start_offset=_field(a, "so", int), queue_id=_field(a, "q", int),
                            revive_queue_id=_field(a, "rq", int), pop_time=_field(a, "pt", int),
                            invisible_time=_field(a, "it", int), bits=bitset_bits(data)))
    broker_name = obj.get("brokerName")
    return (None if broker_name is None else str(broker_name)), out


def encode_batch_ack_body(broker_name: str | None, acks: list[BatchAck]) -> bytes:
    """What the 5.x client sends (JSON.toJSONBytes: fields sorted, the bit set as base64)."""
    items = [{"b": base64.b64encode(bitset_bytes(a.bits)).decode("ascii"), "c": a.consumer_group,
              "it": a.invisible_time, "pt": a.pop_time, "q": a.queue_id, "r": a.retry, "rq": a.revive_queue_id,
              "so": a.start_offset, "t": a.topic} for a in acks]
    obj: dict[str, Any] = {"acks": items}
    if broker_name is not None:
        obj["brokerName"] = broker_name
    return fastjson.dumps(obj).encode("utf-8")


__all__ = [
    "ACK_TAG", "ACK_TIME_INTERVAL_MS", "BatchAck", "bitset_bits", "bitset_bytes", "decode_batch_ack_body",
    "encode_batch_ack_body", "BATCH_ACK_TAG", "CK_TAG", "CONSUME_INIT_MODE_MAX", "CONSUME_INIT_MODE_MIN",
    "ExtraInfo", "ExtraInfoError", "KEY_SEPARATOR", "MAX_POP_NUMS", "NORMAL_TOPIC", "POP_ORDER_REVIVE_QUEUE",
    "PROPERTY_FIRST_POP_TIME", "PROPERTY_POP_CK", "PROPERTY_POP_CK_OFFSET", "PROPERTY_TIMER_DELIVER_MS",
    "RETRY_QUEUE_NUM", "RETRY_TOPIC_V1", "RETRY_TOPIC_V2", "REVIVE_GROUP", "REVIVE_TOPIC_PREFIX", "SECOND_MS", "SPLIT",
    "build_extra_info", "checked_extra_info", "is_pop_retry_topic_v2", "msg_offset_info_item", "parse_extra_info",
    "parse_normal_topic",
    "parse_offset_info", "pop_retry_topic", "pop_retry_topic_v1", "pop_retry_topic_v2", "queue_id_order_count_item",
    "queue_offset_order_count_item", "real_topic_of_kind", "revive_topic", "start_offset_info_item", "topic_kind",
]
