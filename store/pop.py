"""The POP records RocketMQ 5.x writes into the commit log, declared once.

A pop writes a *checkpoint* (``PopCheckPoint``, tag ``ck``) naming the messages it handed out;
an ack writes an *ack* (``AckMsg``, tag ``ack``; a batch ack ``BatchAckMsg``, tag ``bAck``). Both
are messages of the revive topic ``rmq_sys_REVIVE_LOG_<cluster>`` (queue = the pop's revive
queue) whose body is fastjson text, and both carry a delivery time (``TIMER_DELIVER_MS``): the
checkpoint ``ackTimeInterval`` (1 s) before its revive time, the ack at it, so the 5.x timer
(rmq_sys_wheel_timer, store/schedule.py) holds them back until the revive service needs them.

Bytes as Apache RocketMQ 5.3.3 writes them (checked against its stores, tests/store/test_pop_records.py):
the body is ``JSON.toJSONString`` of the bean - fields sorted by their JSON name, nulls left out,
and for a checkpoint the getter-only ``reviveTime`` included; the properties are written in Java
HashMap order. Sources: store/.../pop/PopCheckPoint.java, AckMsg.java, BatchAckMsg.java;
broker/.../processor/PopMessageProcessor.java (buildCkMsg, gen*UniqueId),
AckMessageProcessor.java (appendAck), PopReviveService.java (the merge key).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmqd.store.commitlog import MessageExtBrokerInner
from rmqd.wire import fastjson
from rmqd.wire.message import PROPERTY_SEPARATOR, MessageConst, encode_properties_java
from rmqd.wire.pop import ACK_TAG, ACK_TIME_INTERVAL_MS, BATCH_ACK_TAG, CK_TAG, PROPERTY_TIMER_DELIVER_MS, SPLIT

__all__ = [
    "java5_properties", "AckMsg", "BatchAckMsg", "PopCheckPoint", "PopRecordError", "build_ack_message", "build_ck_message",
    "decode_revive_body", "merge_key",
]


def java5_properties(props_string: str) -> str:
    """5.x's MessageDecoder.messageProperties2String ends *every* entry with the property
    separator (4.9.8's leaves it off the last): records 5.x writes keep the trailing one."""
    if props_string and not props_string.endswith(PROPERTY_SEPARATOR):
        return props_string + PROPERTY_SEPARATOR
    return props_string


class PopRecordError(ValueError):
    """A revive-topic body that is not a checkpoint or ack RocketMQ could have written."""


def _int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x8000_0000 else v


def _int8(v: int) -> int:
    v &= 0xFF
    return v - 256 if v & 0x80 else v


def _req_int(obj: dict[str, Any], key: str, default: int | None = None) -> int:
    v = obj.get(key, default)
    if v is None:
        raise PopRecordError(f"{key} missing")
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise PopRecordError(f"{key} is not a number: {v!r}")
    try:
        return int(v)
    except ValueError:
        raise PopRecordError(f"{key} is not a number: {v!r}") from None


def _opt_str(obj: dict[str, Any], key: str) -> str | None:
    v = obj.get(key)
    return None if v is None else str(v)


@dataclass(slots=True)
class PopCheckPoint:
    """PopCheckPoint: ``num`` messages popped from (topic, queue_id) at ``pop_time``, invisible
    for ``invisible_time`` ms; message i is at ``start_offset + queue_offset_diff[i]`` (old
    checkpoints without a diff list: ``start_offset + i``); bit i of ``bit_map`` = acked."""

    start_offset: int
    pop_time: int
    invisible_time: int
    bit_map: int
    num: int
    queue_id: int
    topic: str
    cid: str
    revive_offset: int = 0
    queue_offset_diff: list[int] | None = None
    broker_name: str | None = None
    re_put_times: str | None = None

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    def add_diff(self, diff: int) -> None:
        if self.queue_offset_diff is None:
            self.queue_offset_diff = []
        self.queue_offset_diff.append(diff)

    def index_of_ack(self, ack_offset: int) -> int:
        """PopCheckPoint.indexOfAck: the message index of a queue offset, -1 if not in here."""
        if ack_offset < self.start_offset:
            return -1
        if not self.queue_offset_diff:
            return ack_offset - self.start_offset if ack_offset - self.start_offset < self.num else -1
        try:
            return self.queue_offset_diff.index(ack_offset - self.start_offset)
        except ValueError:
            return -1

    def ack_offset_by_index(self, index: int) -> int:
        if not self.queue_offset_diff:
            return self.start_offset + index
        return self.start_offset + self.queue_offset_diff[index]

    def message_offsets(self) -> list[tuple[int, int]]:
        """(index, queue offset) of each message named; a damaged record whose diff list is
        shorter than its count names only what the list has."""
        n = self.num if not self.queue_offset_diff else min(self.num, len(self.queue_offset_diff))
        return [(i, self.ack_offset_by_index(i)) for i in range(max(n, 0))]

    def is_acked(self, index: int) -> bool:
        return bool(self.bit_map & (1 << index))

    def set_acked(self, index: int) -> None:
        """DataConverter.setBit on Java's int."""
        self.bit_map = _int32(self.bit_map | (1 << index))

    def parse_re_put_times(self) -> int:
        """PopCheckPoint.parseRePutTimes: 0 when absent, Byte.MAX_VALUE when not a number."""
        if self.re_put_times is None:
            return 0
        try:
            return int(self.re_put_times)
        except ValueError:
            return 127

    def to_json_obj(self) -> dict[str, Any]:
        """fastjson's field order (sorted JSON names), nulls left out, ``reviveTime`` included."""
        obj: dict[str, Any] = {"bm": _int32(self.bit_map)}
        if self.broker_name is not None:
            obj["bn"] = self.broker_name
        obj["c"] = self.cid
        if self.queue_offset_diff is not None:
            obj["d"] = list(self.queue_offset_diff)
        obj["it"] = self.invisible_time
        obj["n"] = _int8(self.num)
        obj["pt"] = self.pop_time
        obj["q"] = self.queue_id
        obj["reviveTime"] = self.revive_time
        obj["ro"] = self.revive_offset
        if self.re_put_times is not None:
            obj["rp"] = self.re_put_times
        obj["so"] = self.start_offset
        obj["t"] = self.topic
        return obj

    def encode(self) -> bytes:
        return fastjson.dumps(self.to_json_obj()).encode("utf-8")

    @classmethod
    def from_json_obj(cls, obj: dict[str, Any]) -> "PopCheckPoint":
        diff = obj.get("d")
        if diff is not None and (not isinstance(diff, list) or not all(isinstance(x, int) for x in diff)):
            raise PopRecordError(f"d is not a list of numbers: {diff!r}")
        topic, cid = obj.get("t"), obj.get("c")
        return cls(
            start_offset=_req_int(obj, "so", 0), pop_time=_req_int(obj, "pt", 0),
            invisible_time=_req_int(obj, "it", 0), bit_map=_int32(_req_int(obj, "bm", 0)),
            num=_int8(_req_int(obj, "n", 0)), queue_id=_req_int(obj, "q", 0),
            topic="" if topic is None else str(topic), cid="" if cid is None else str(cid),
            revive_offset=_req_int(obj, "ro", 0), queue_offset_diff=None if diff is None else list(diff),
            broker_name=_opt_str(obj, "bn"), re_put_times=_opt_str(obj, "rp"))

    def unique_id(self) -> str:
        """PopMessageProcessor.genCkUniqueId (the UNIQ_KEY of the checkpoint message)."""
        return SPLIT.join((self.topic, str(self.queue_id), str(self.start_offset), self.cid, str(self.pop_time),
                           str(self.broker_name), CK_TAG))

    def merge_key(self) -> str:
        return merge_key(self.topic, self.cid, self.queue_id, self.start_offset, self.pop_time, self.broker_name)


def merge_key(topic: str, group: str, queue_id: int, start_offset: int, pop_time: int, broker_name: str | None) -> str:
    """PopReviveService's key pairing an ack with its checkpoint (plain concatenation, as 5.3)."""
    return f"{topic}{group}{queue_id}{start_offset}{pop_time}{broker_name}"


# AckMsg's JSON names also accept the long names (@JSONField alternateNames)
_ACK_ALT = {"ackOffset": "ao", "startOffset": "so", "consumerGroup": "c", "topic": "t", "queueId": "q",
            "popTime": "pt", "brokerName": "bn", "ackOffsetList": "aol"}


@dataclass(slots=True)
class AckMsg:
    """AckMsg: the message at ``ack_offset`` of the checkpoint (topic, queue_id, start_offset,
    pop_time, broker_name) of ``consumer_group`` is acknowledged."""

    ack_offset: int
    start_offset: int
    consumer_group: str
    topic: str
    queue_id: int
    pop_time: int
    broker_name: str | None = None

    def _base_obj(self) -> dict[str, Any]:
        return {"ao": self.ack_offset}

    def to_json_obj(self) -> dict[str, Any]:
        obj = self._base_obj()
        if self.broker_name is not None:
            obj["bn"] = self.broker_name
        obj["c"] = self.consumer_group
        obj["pt"] = self.pop_time
        obj["q"] = self.queue_id
        obj["so"] = self.start_offset
        obj["t"] = self.topic
        return obj

    def encode(self) -> bytes:
        """fastjson's text of ``to_json_obj``; a single ack (one per acknowledged message) by
        one format instead of the generic writer (the tests hold both to the same bytes)."""
        if type(self) is not AckMsg:
            return fastjson.dumps(self.to_json_obj()).encode("utf-8")
        quote = fastjson.quote
        bn = "" if self.broker_name is None else f'"bn":{quote(self.broker_name)},'
        return (f'{{"ao":{int(self.ack_offset)},{bn}"c":{quote(self.consumer_group)},"pt":{int(self.pop_time)},'
                f'"q":{int(self.queue_id)},"so":{int(self.start_offset)},"t":{quote(self.topic)}}}').encode("utf-8")

    def unique_id(self) -> str:
        """PopMessageProcessor.genAckUniqueId."""
        return SPLIT.join((self.topic, str(self.queue_id), str(self.ack_offset), self.consumer_group,
                           str(self.pop_time), str(self.broker_name), ACK_TAG))

    def merge_key(self, default_broker_name: str) -> str:
        """The checkpoint this ack belongs to (an ack without a broker name is this broker's)."""
        return merge_key(self.topic, self.consumer_group, self.queue_id, self.start_offset, self.pop_time,
                         self.broker_name or default_broker_name)

    def ack_offsets(self) -> list[int]:
        return [self.ack_offset]

    @classmethod
    def from_json_obj(cls, obj: dict[str, Any]) -> "AckMsg":
        obj = {_ACK_ALT.get(k, k): v for k, v in obj.items()}
        group, topic = obj.get("c"), obj.get("t")
        return cls(ack_offset=_req_int(obj, "ao", 0), start_offset=_req_int(obj, "so", 0),
                   consumer_group="" if group is None else str(group), topic="" if topic is None else str(topic),
                   queue_id=_req_int(obj, "q", 0), pop_time=_req_int(obj, "pt", 0), broker_name=_opt_str(obj, "bn"))


@dataclass(slots=True)
class BatchAckMsg(AckMsg):
    """BatchAckMsg: several offsets of one checkpoint (``ack_offset`` is -1)."""

    ack_offset_list: list[int] = field(default_factory=list)

    def _base_obj(self) -> dict[str, Any]:
        return {"ao": self.ack_offset, "aol": list(self.ack_offset_list)}

    def batch_unique_id(self) -> str:
        """PopMessageProcessor.genBatchAckUniqueId (Java List.toString of the offsets)."""
        offsets = "[" + ", ".join(str(o) for o in self.ack_offset_list) + "]"
        return SPLIT.join((self.topic, str(self.queue_id), offsets, self.consumer_group, str(self.pop_time),
                           BATCH_ACK_TAG))

    def ack_offsets(self) -> list[int]:
        return list(self.ack_offset_list)

    @classmethod
    def from_json_obj(cls, obj: dict[str, Any]) -> "BatchAckMsg":
        base = AckMsg.from_json_obj(obj)
        aol = {_ACK_ALT.get(k, k): v for k, v in obj.items()}.get("aol") or []
        if not isinstance(aol, list) or not all(isinstance(x, int) for x in aol):
            raise PopRecordError(f"aol is not a list of numbers: {aol!r}")
        return cls(ack_offset=base.ack_offset, start_offset=base.start_offset, consumer_group=base.consumer_group,
                   topic=base.topic, queue_id=base.queue_id, pop_time=base.pop_time, broker_name=base.broker_name,
                   ack_offset_list=list(aol))


def decode_revive_body(tag: str | None, body: bytes | memoryview) -> PopCheckPoint | AckMsg | None:
    """A revive-topic message by its tag: checkpoint, ack, batch ack; None for another tag.
    PopRecordError when the body is not the JSON the tag promises."""
    if tag not in (CK_TAG, ACK_TAG, BATCH_ACK_TAG):
        return None
    try:
        obj = fastjson.loads(bytes(body).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise PopRecordError(f"{tag} body is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise PopRecordError(f"{tag} body is not a JSON object")
    if tag == CK_TAG:
        return PopCheckPoint.from_json_obj(obj)
    if tag == ACK_TAG:
        return AckMsg.from_json_obj(obj)
    return BatchAckMsg.from_json_obj(obj)


def _revive_message(*, revive_topic: str, revive_qid: int, body: bytes, tag: str, uniq_key: str, deliver_ms: int,
                    now_ms: int, store_host: bytes, store_port: int) -> MessageExtBrokerInner:
    # the insertion order of buildCkMsg / appendAck (it decides HashMap collisions)
    props = {MessageConst.PROPERTY_TAGS: tag, PROPERTY_TIMER_DELIVER_MS: str(deliver_ms),
             MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq_key}
    return MessageExtBrokerInner(
        topic=revive_topic, queue_id=revive_qid, body=body, properties=props, born_timestamp=now_ms,
        born_host=store_host, born_port=store_port, store_host=store_host, store_port=store_port,
        properties_string=java5_properties(encode_properties_java(props)))


def build_ck_message(ck: PopCheckPoint, *, revive_topic: str, revive_qid: int, now_ms: int, store_host: bytes,
                     store_port: int) -> MessageExtBrokerInner:
    """PopMessageProcessor.buildCkMsg: due ackTimeInterval before the revive time. Put it
    through store.schedule.apply_timer (the 5.x timer hook) before the store."""
    return _revive_message(revive_topic=revive_topic, revive_qid=revive_qid, body=ck.encode(), tag=CK_TAG,
                           uniq_key=ck.unique_id(), deliver_ms=ck.revive_time - ACK_TIME_INTERVAL_MS, now_ms=now_ms,
                           store_host=store_host, store_port=store_port)


def build_ack_message(ack: AckMsg, *, invisible_time: int, revive_topic: str, revive_qid: int, now_ms: int,
                      store_host: bytes, store_port: int) -> MessageExtBrokerInner:
    """AckMessageProcessor.appendAck's message: due at popTime + invisibleTime. A batch ack is
    tagged ``bAck`` and keeps the single ack's UNIQ_KEY (5.3 overwrites the batch one)."""
    tag = BATCH_ACK_TAG if isinstance(ack, BatchAckMsg) else ACK_TAG
    return _revive_message(revive_topic=revive_topic, revive_qid=revive_qid, body=ack.encode(), tag=tag,
                           uniq_key=ack.unique_id(), deliver_ms=ack.pop_time + invisible_time, now_ms=now_ms,
                           store_host=store_host, store_port=store_port)
