"""apache.rocketmq.v2 Message <-> the stored message (properties, sysFlag, record fields).

Why: a 5.x client's message must land in the commit log exactly as Apache RocketMQ 5.3.3's
proxy puts it there (so a 4.x consumer reads the same properties, and a store moved between
rmqd and Apache keeps its meaning), and a stored message must reach a 5.x client with the
system properties the proxy derives from it (GrpcConverter). The rules are 5.3.3's
SendMessageActivity.buildMessageProperty / buildSysFlag and GrpcConverter.buildMessage.
"""

from __future__ import annotations

import hashlib
from typing import Any

from rmqd.processors.grpc_common import (
    MAX_DELAY_TIME_MS, MAX_TRANSACTION_RECOVERY_SECOND, MAX_USER_PROPERTY_SIZE, USER_PROPERTY_MAX_NUM, GrpcContext,
    ProxyError, check_key, check_message_group, check_tag, contains_control, status,
)
from rmqd.wire.names import java_is_blank
from rmqd.wire.message import (
    NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, MessageConst, MessageRecord, MessageSysFlag, decode_properties,
    encode_properties,
)
from rmqd.wire.rocketmq_v2 import Code, DigestType, Encoding, MessageType, pb

# 5.x property names beyond wire.message.MessageConst (MessageConst, 5.3.3)
PROPERTY_SHARDING_KEY = "__SHARDINGKEY"
PROPERTY_TRACE_CONTEXT = "TRACE_CONTEXT"
PROPERTY_BORN_HOST = "__BORNHOST"
PROPERTY_BORN_TIMESTAMP = "BORN_TIMESTAMP"
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
PROPERTY_TIMER_DELAY_MS = "TIMER_DELAY_MS"
PROPERTY_POP_CK = "POP_CK"
PROPERTY_DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
PROPERTY_DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"

# MessageConst's names and the enums' values as module constants: compiled, a module global is
# read in a few instructions, a class attribute through the type's getattr (every send and receive)
_TAGS = MessageConst.PROPERTY_TAGS
_KEYS = MessageConst.PROPERTY_KEYS
_KEY_SEPARATOR = MessageConst.KEY_SEPARATOR
_UNIQ_KEY = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_TRAN_PREPARED = MessageConst.PROPERTY_TRANSACTION_PREPARED
_CHECK_IMMUNITY = MessageConst.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS
_RECONSUME_TIME = MessageConst.PROPERTY_RECONSUME_TIME
_PRODUCER_GROUP = MessageConst.PROPERTY_PRODUCER_GROUP
_DELAY_LEVEL = MessageConst.PROPERTY_DELAY_TIME_LEVEL
_TRANSACTION = int(MessageType.TRANSACTION)
_GZIP = int(Encoding.GZIP)
_COMPRESSED_FLAG = int(MessageSysFlag.COMPRESSED_FLAG)
_TRANSACTION_PREPARED_TYPE = int(MessageSysFlag.TRANSACTION_PREPARED_TYPE)

#: MessageConst.STRING_HASH_SET (5.3.3): names a user property may not take, and which a
#: received message does not show among its user properties
SYSTEM_PROPERTY_NAMES = frozenset({
    "TRACE_ON", "MSG_REGION", "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID", "TRAN_MSG",
    "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG", "CORRECTION_FLAG",
    "MQ2_FLAG", "RECONSUME_TIME", "UNIQ_KEY", "MAX_RECONSUME_TIMES", "CONSUME_START_TIME", "POP_CK",
    "POP_CK_OFFSET", "1ST_POP_TIME", "TRAN_PREPARED_QUEUE_OFFSET", "DUP_INFO", "EXTEND_UNIQ_INFO", "INSTANCE_ID",
    "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER", "MSG_TYPE",
    "INNER_MULTI_QUEUE_OFFSET", "TIMER_DELAY_MS", "TIMER_DELAY_SEC", "TIMER_DELIVER_MS", "TIMER_ENQUEUE_MS",
    "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES", "TIMER_OUT_MS", "TIMER_DEL_UNIQKEY", "TIMER_DELAY_LEVEL", "__BORNHOST",
    "BORN_TIMESTAMP", "DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID", "__CRC32#",
})


def _timestamp_ms(ts: Any) -> int:
    return int(ts.seconds) * 1000 + int(ts.nanos) // 1_000_000


def _valid_timestamp(seconds: int, nanos: int) -> bool:
    """Timestamps.isValid: 0001-01-01 .. 9999-12-31, nanos in range."""
    return -62135596800 <= seconds <= 253402300799 and 0 <= nanos < 1_000_000_000


def build_sys_flag(message: "pb.Message") -> int:
    flag = 0
    sp = message.system_properties
    if sp.body_encoding == _GZIP:
        flag |= _COMPRESSED_FLAG
    if sp.message_type == _TRANSACTION:
        flag |= _TRANSACTION_PREPARED_TYPE
    return flag


def build_message_properties(ctx: GrpcContext, message: "pb.Message", producer_group: str,
                             now_ms: int) -> dict[str, str]:
    """The stored properties of a sent message (buildMessageProperty); ProxyError when refused.
    Each field of the message is read once: every read of a upb field builds a Python object."""
    sp = message.system_properties
    user_map = message.user_properties
    user = dict(user_map) if len(user_map) else {}
    if len(user) > USER_PROPERTY_MAX_NUM:
        raise ProxyError(Code.MESSAGE_PROPERTIES_TOO_LARGE, f"too many user properties, max is {USER_PROPERTY_MAX_NUM}")
    size = 0
    for key, value in user.items():
        if key in SYSTEM_PROPERTY_NAMES:
            raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {key}")
        if contains_control(key):
            raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "the key of property cannot contain control character")
        if contains_control(value):
            raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "the value of property cannot contain control character")
        size += len(key.encode("utf-8")) + len(value.encode("utf-8"))
    props = user
    tag = sp.tag
    props[_TAGS] = tag
    if tag:
        check_tag(tag)
        size += len(tag.encode("utf-8"))
    keys = sp.keys
    if len(keys):
        for key in keys:
            check_key(key)
            size += len(key.encode("utf-8"))
        props[_KEYS] = _KEY_SEPARATOR.join(keys)
    if size > MAX_USER_PROPERTY_SIZE:
        raise ProxyError(Code.MESSAGE_PROPERTIES_TOO_LARGE,
                         f"the total size of user property is too large, max is {MAX_USER_PROPERTY_SIZE}")
    message_id = sp.message_id
    if java_is_blank(message_id):
        raise ProxyError(Code.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
    props[_UNIQ_KEY] = message_id
    if sp.message_type == _TRANSACTION:
        props[_TRAN_PREPARED] = "true"
        if sp.HasField("orphaned_transaction_recovery_duration"):
            seconds = int(sp.orphaned_transaction_recovery_duration.seconds)
            if seconds > MAX_TRANSACTION_RECOVERY_SECOND:
                raise ProxyError(Code.BAD_REQUEST, "the max transaction recovery time of message is too large, "
                                                   f"max is {MAX_TRANSACTION_RECOVERY_SECOND}")
            props[_CHECK_IMMUNITY] = str(seconds)
    if sp.HasField("delivery_timestamp"):
        deliver_ms = _timestamp_ms(sp.delivery_timestamp)
        if deliver_ms - now_ms > MAX_DELAY_TIME_MS:
            raise ProxyError(Code.ILLEGAL_DELIVERY_TIME,
                             f"the max delay time of message is too large, max is {MAX_DELAY_TIME_MS}")
        props[PROPERTY_TIMER_DELIVER_MS] = str(deliver_ms)
    props[_RECONSUME_TIME] = str(int(sp.delivery_attempt))
    props[_PRODUCER_GROUP] = producer_group
    group = sp.message_group
    if group:
        check_message_group(group)
        props[PROPERTY_SHARDING_KEY] = group
    trace = sp.trace_context
    if trace:
        props[PROPERTY_TRACE_CONTEXT] = trace
    born_host = sp.born_host
    if java_is_blank(born_host):
        born_host = ctx.remote_addr
    if not java_is_blank(born_host):
        props[PROPERTY_BORN_HOST] = born_host
    if sp.HasField("born_timestamp"):
        born = sp.born_timestamp
        seconds, nanos = int(born.seconds), int(born.nanos)
        if _valid_timestamp(seconds, nanos):
            props[PROPERTY_BORN_TIMESTAMP] = str(seconds * 1000 + nanos // 1_000_000)
    return props


def as_broker_reads(props: dict[str, str]) -> dict[str, str]:
    """The map the broker reads from these properties once the proxy has written them as text
    (messageProperties2String, then string2messageProperties on the broker): these same ones,
    unless a name or a value is empty or holds a separator, which the text would lose or split."""
    clean = True
    for name, value in props.items():
        if NAME_VALUE_SEPARATOR in name or PROPERTY_SEPARATOR in name or PROPERTY_SEPARATOR in value:
            return decode_properties(encode_properties(props))
        if not name or not value:
            clean = False
    if clean:
        return props
    # the text leaves out an entry without a name or a value (a send without a tag has TAGS "")
    return {name: value for name, value in props.items() if name and value}


def topic_message_type(props: dict[str, str]) -> str:
    """TopicMessageType.parseFromMessageProperty: what kind of message these properties make."""
    if props.get(_TRAN_PREPARED) == "true":
        return "TRANSACTION"
    if any(k in props for k in (_DELAY_LEVEL, PROPERTY_TIMER_DELIVER_MS,
                                PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELAY_MS)):
        return "DELAY"
    if PROPERTY_SHARDING_KEY in props:
        return "FIFO"
    return "NORMAL"


def _resource(name: str) -> "pb.Resource":
    return pb.Resource(name=name)


def build_message(record: MessageRecord, *, topic: str | None = None, receipt_handle: str | None = None,
                  now_ms: int = 0) -> "pb.Message":
    """GrpcConverter.buildMessage: a stored message as a 5.x client receives it."""
    props = record.properties
    msg = pb.Message()
    msg.topic.name = topic if topic is not None else record.topic
    for key, value in props.items():
        if key not in SYSTEM_PROPERTY_NAMES:
            msg.user_properties[key] = value
    sp = msg.system_properties
    tag = props.get(_TAGS)
    if tag is not None:
        sp.tag = tag
    keys = props.get(_KEYS)
    if keys is not None:
        sp.keys.extend(keys.split(_KEY_SEPARATOR))
    uniq = props.get(_UNIQ_KEY) or record.offset_msg_id
    sp.message_id = uniq
    body = bytes(record.body)
    sp.body_digest.type = DigestType.MD5
    sp.body_digest.checksum = hashlib.md5(body).hexdigest().upper()
    sp.body_encoding = Encoding.GZIP if record.sys_flag & MessageSysFlag.COMPRESSED_FLAG else Encoding.IDENTITY
    if props.get(_TRAN_PREPARED) == "true":
        sp.message_type = MessageType.TRANSACTION
    elif any(k in props for k in (_DELAY_LEVEL, PROPERTY_TIMER_DELIVER_MS,
                                  PROPERTY_TIMER_DELAY_SEC)):
        sp.message_type = MessageType.DELAY
    elif PROPERTY_SHARDING_KEY in props:
        sp.message_type = MessageType.FIFO
    else:
        sp.message_type = MessageType.NORMAL
    sp.born_timestamp.FromMilliseconds(record.born_timestamp)
    born = props.get(PROPERTY_BORN_HOST)
    if born is None or java_is_blank(born):
        born = record.born_host.rpartition(":")[0].strip("[]")  # getBornHostString: the address only
    if born and not java_is_blank(born):
        sp.born_host = born
    sp.store_timestamp.FromMilliseconds(record.store_timestamp)
    sp.store_host = record.store_host
    delay_sec = props.get(PROPERTY_TIMER_DELAY_SEC)
    deliver = props.get(PROPERTY_TIMER_DELIVER_MS)
    try:
        if delay_sec is not None:
            sp.delivery_timestamp.FromMilliseconds(now_ms + int(delay_sec) * 1000)
        elif deliver is not None:
            sp.delivery_timestamp.FromMilliseconds(int(deliver))
    except (ValueError, OverflowError):
        pass  # a property no client of ours wrote: left out rather than failing the delivery
    group = props.get(PROPERTY_SHARDING_KEY)
    if group is not None:
        sp.message_group = group
    handle = receipt_handle if receipt_handle is not None else props.get(PROPERTY_POP_CK)
    if handle is not None:
        sp.receipt_handle = handle
    sp.queue_id = record.queue_id
    sp.queue_offset = record.queue_offset
    sp.delivery_attempt = record.reconsume_times + 1
    trace = props.get(PROPERTY_TRACE_CONTEXT)
    if trace is not None:
        sp.trace_context = trace
    dlq_topic, dlq_id = props.get(PROPERTY_DLQ_ORIGIN_TOPIC), props.get(PROPERTY_DLQ_ORIGIN_MESSAGE_ID)
    if dlq_topic is not None and dlq_id is not None:
        sp.dead_letter_queue.topic = dlq_topic
        sp.dead_letter_queue.message_id = dlq_id
    msg.body = body
    return msg


# -- the common SendMessage answer, written without upb objects ------------------------------------

def _varint(value: int) -> bytes:
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    value &= 0xFFFFFFFFFFFFFFFF  # an int64 below zero takes ten bytes, as protobuf writes it
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_ONE_BYTE = [bytes([i]) for i in range(0x80)]


def _key(message: Any, field: str, wire_type: int = 2) -> bytes:
    """A field's key (length-delimited unless told), its number from the protocol's descriptors."""
    return _varint(message.DESCRIPTOR.fields_by_name[field].number << 3 | wire_type)


_OK = status(Code.OK).SerializeToString()
_OK_STATUS_FIELD = _key(pb.SendResultEntry, "status") + _varint(len(_OK)) + _OK
_RESPONSE_STATUS_FIELD = _key(pb.SendMessageResponse, "status") + _varint(len(_OK)) + _OK
_ENTRIES_KEY = _key(pb.SendMessageResponse, "entries")
_MESSAGE_ID_KEY = _key(pb.SendResultEntry, "message_id")
_TRANSACTION_ID_KEY = _key(pb.SendResultEntry, "transaction_id")
_OFFSET_KEY = _key(pb.SendResultEntry, "offset", 0)


def send_ok_response(message_id: str, offset: int) -> bytes:
    """The serialized SendMessageResponse of one message stored (status OK, its entry OK with the
    message id as message and transaction id, the queue offset): the bytes upb writes for it
    (the tests compare them), at a fraction of building and serializing three upb messages on
    every send."""
    mid = message_id.encode("utf-8")
    entry = _OK_STATUS_FIELD
    if mid:  # (never empty from a send; proto3 leaves an empty string out)
        mid_field = _varint(len(mid)) + mid
        entry += _MESSAGE_ID_KEY + mid_field + _TRANSACTION_ID_KEY + mid_field
    if offset:
        entry += _OFFSET_KEY + _varint(offset)
    return _RESPONSE_STATUS_FIELD + _ENTRIES_KEY + _varint(len(entry)) + entry


_ACK_STATUS_FIELD = _key(pb.AckMessageResponse, "status") + _varint(len(_OK)) + _OK
_ACK_ENTRIES_KEY = _key(pb.AckMessageResponse, "entries")
_ACK_MESSAGE_ID_KEY = _key(pb.AckMessageResultEntry, "message_id")
_ACK_HANDLE_KEY = _key(pb.AckMessageResultEntry, "receipt_handle")
_ACK_ENTRY_STATUS_FIELD = _key(pb.AckMessageResultEntry, "status") + _varint(len(_OK)) + _OK


def _string_field(key: bytes, text: str) -> bytes:
    """A string field, or nothing for an empty string (proto3 leaves it out)."""
    if not text:
        return b""
    data = text.encode("utf-8")
    return key + _varint(len(data)) + data


def ack_ok_response(entries: list[tuple[str, str]]) -> bytes:
    """The serialized AckMessageResponse of entries (message id, receipt handle) all acked: status
    OK and each entry with status OK, the bytes upb writes for it (the tests compare them),
    without building upb messages on every ack."""
    out = [_ACK_STATUS_FIELD]
    for message_id, handle in entries:
        entry = _string_field(_ACK_MESSAGE_ID_KEY, message_id) + _string_field(_ACK_HANDLE_KEY, handle) \
            + _ACK_ENTRY_STATUS_FIELD
        out.append(_ACK_ENTRIES_KEY + _varint(len(entry)) + entry)
    return b"".join(out)


__all__ = [
    "PROPERTY_BORN_HOST", "PROPERTY_BORN_TIMESTAMP", "PROPERTY_SHARDING_KEY", "PROPERTY_TIMER_DELIVER_MS",
    "SYSTEM_PROPERTY_NAMES", "ack_ok_response", "as_broker_reads", "build_message", "build_message_properties",
    "build_sys_flag", "send_ok_response", "topic_message_type",
]
