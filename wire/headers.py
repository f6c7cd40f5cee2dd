"""Typed custom headers: the ``extFields`` of a request or response, as RocketMQ's Java beans.

Each class mirrors a 4.9.8 ``CommandCustomHeader``: attribute names are the Java field names
(they are the extFields keys), field order is the Java declaration order (superclass first).
``from_ext`` converts the strings the way ``RemotingCommand#decodeCommandCustomHeader`` does
(``Integer.parseInt``, ``Long.parseLong``, ``Boolean.parseBoolean`` - so ``"1"`` is *false*,
exactly as a Java broker reads a C++ client's ``batch: "1"``). Where Java only logs and leaves a
``@CFNotNull`` field null (and later fails somewhere deeper), rmqd raises
:class:`~wire.errors.HeaderFieldError` naming the field, so the processor can answer with a
clear remark; a malformed *optional* field is left at its default, as Java does.

``to_ext`` is ``makeCustomHeaderToNet``: ``toString()`` of every non-null field, numbers in
decimal, booleans ``true``/``false``, entries in the iteration order of the Java ``HashMap``
that a 4.9.8 broker would serialize (so rmqd's JSON headers are byte-identical to Java's).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Any, Callable, ClassVar, Mapping, TypeVar, dataclass_transform

from rmqd.wire.codes import RequestCode, SerializeType
from rmqd.wire.errors import HeaderFieldError
from rmqd.wire.fastjson import java_double
from rmqd.wire.javamap import hashmap_capacity, java_hashmap_order, java_string_hash

STRING = "String"
INT = "Integer"
LONG = "Long"
BOOL = "Boolean"
DOUBLE = "Double"

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_JAVA_INTEGER = re.compile(r"[+-]?\d+")  # Character.digit takes any Unicode decimal digit
_JAVA_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)[fFdD]?)")


def required(kind: str, default: Any = None) -> Any:
    """A ``@CFNotNull`` field: ``from_ext`` fails when it is absent or malformed."""
    return field(default=default, metadata={"kind": kind, "required": True})


def optional(kind: str, default: Any = None) -> Any:
    """A nullable field; a non-``None`` default is a Java primitive or initializer (always sent)."""
    return field(default=default, metadata={"kind": kind, "required": False})


# ---- Java conversions ------------------------------------------------------------------------


def parse_java_int(text: str, lo: int = _INT_MIN, hi: int = _INT_MAX) -> int:
    """``Integer.parseInt``/``Long.parseLong``: optional sign, decimal digits only, range checked."""
    if text.isascii() and text.isdigit():
        v = int(text)
    elif _JAVA_INTEGER.fullmatch(text):
        v = int(text)
    else:
        raise ValueError(f"not a decimal integer: {text[:64]!r}")
    if v < lo or v > hi:
        raise ValueError(f"{text[:64]} is out of range [{lo}, {hi}]")
    return v


def parse_java_bool(text: str) -> bool:
    """``Boolean.parseBoolean``: only a case-insensitive ``true`` is true."""
    return text.lower() == "true"


def parse_java_double(text: str) -> float:
    """``Double.parseDouble`` for the decimal forms Java accepts (surrounding blanks, d/f suffix)."""
    t = text.strip()
    if not _JAVA_DOUBLE.fullmatch(t):
        raise ValueError(f"not a number: {text[:64]!r}")
    if t[-1] in "fFdD" and not t.endswith("Infinity"):
        t = t[:-1]
    return float(t.replace("Infinity", "inf"))


def java_to_string(kind: str, value: Any) -> str:
    """``value.toString()`` of a header field as the Java broker writes it."""
    if kind == STRING:
        return value if type(value) is str else str(value)
    if kind == BOOL:
        return "true" if value else "false"
    if kind == DOUBLE:
        return java_double(float(value))
    return str(int(value))


def _conv_int(text: str, name: str, header: str) -> int:
    try:
        return parse_java_int(text)
    except ValueError as e:
        raise HeaderFieldError(name, f"is not an Integer ({e})", header) from None


def _conv_long(text: str, name: str, header: str) -> int:
    try:
        return parse_java_int(text, _LONG_MIN, _LONG_MAX)
    except ValueError as e:
        raise HeaderFieldError(name, f"is not a Long ({e})", header) from None


def _conv_double(text: str, name: str, header: str) -> float:
    try:
        return parse_java_double(text)
    except ValueError as e:
        raise HeaderFieldError(name, f"is not a Double ({e})", header) from None


# java.util.HashMap iteration order: wire.javamap (java_hashmap_order, java_string_hash)


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


def _values(obj: Any) -> tuple[Any, ...]:
    names = _FIELD_NAMES.get(type(obj)) or _field_names(type(obj))
    return tuple([getattr(obj, n) for n in names])


_H = TypeVar("_H")


@dataclass_transform()  # type checkers see each header's fields and its keyword __init__
def _header(cls: type[_H]) -> type[_H]:
    """``@dataclass(slots=True)`` for a header class, its __eq__/__repr__ shared from
    CommandHeader (and a short docstring, which spares dataclass an inspect.signature)."""
    if cls.__doc__ is None:
        cls.__doc__ = f"RocketMQ's {cls.__name__}."
    return dataclass(slots=True, eq=False, repr=False)(cls)


# ---- the header base class --------------------------------------------------------------------

_EMPTY: Mapping[str, str] = {}
_DECODERS: dict[type, Callable[[Mapping[str, str]], Any]] = {}
_v1_from_v2_ext: Callable[[Mapping[str, str]], Any] | None = None
_ENCODERS: dict[type, Callable[[Any], dict[str, str]]] = {}


def _build_decoder(cls: type, target: type | None = None,
                   rename: Mapping[str, str] | None = None) -> Callable[[Mapping[str, str]], Any]:
    """Generate ``from_ext`` for one class (the hot path of every request: no per-field dispatch).

    With ``target``/``rename``: read and check the fields exactly as ``cls`` does (same keys,
    same errors), but build ``target`` from them, field ``f`` going to ``rename[f]`` (fields
    not in ``rename`` are dropped) - one object instead of decoding and then converting."""
    name = cls.__name__
    lines = ["def _decode(ext):", "    get = ext.get"]
    args = []
    for i, f in enumerate(fields(cls)):
        kind = f.metadata["kind"]
        v = f"v{i}"
        args.append(v)
        lines.append(f"    {v} = get({f.name!r})")
        if kind == STRING:
            conv = None
        elif kind == BOOL:
            conv = f"{v}.lower() == 'true'"
        elif kind == DOUBLE:
            conv = f"_conv_double({v}, {f.name!r}, {name!r})"
        else:
            # Fast path for plain digits that cannot overflow; the Java rules otherwise.
            digits, slow = (9, "_conv_int") if kind == INT else (18, "_conv_long")
            conv = (f"int({v}) if ({v}.isascii() and {v}.isdigit() and len({v}) <= {digits}) "
                    f"else {slow}({v}, {f.name!r}, {name!r})")
        if f.metadata["required"]:
            lines += [f"    if {v} is None:", f"        raise HeaderFieldError({f.name!r}, 'is missing', {name!r})"]
            if conv:
                lines.append(f"    {v} = {conv}")
        else:
            lines += [f"    if {v} is None:", f"        {v} = _defaults[{i}]"]
            if conv and kind == BOOL:
                lines += ["    else:", f"        {v} = {conv}"]
            elif conv:  # Java logs a malformed optional field and leaves it at its default
                lines += ["    else:", "        try:", f"            {v} = {conv}",
                          "        except HeaderFieldError:", f"            {v} = _defaults[{i}]"]
    if target is None:
        lines.append(f"    return _cls({', '.join(args)})")
    else:
        assert rename is not None
        kw = [f"{rename[f.name]}={v}" for f, v in zip(fields(cls), args) if f.name in rename]
        lines.append(f"    return _target({', '.join(kw)})")
    ns: dict[str, Any] = {
        "_target": target,
        "HeaderFieldError": HeaderFieldError,
        "_conv_int": _conv_int,
        "_conv_long": _conv_long,
        "_conv_double": _conv_double,
        "_defaults": tuple(f.default for f in fields(cls)),
        "_cls": cls,
    }
    exec("\n".join(lines), ns)  # noqa: S102 - source generated from the dataclass fields only
    return ns["_decode"]


_JAVA_PACKAGE = "org.apache.rocketmq.common.protocol.header"
_NAMESRV_HEADERS = frozenset({"AddWritePermOfBrokerRequestHeader", "AddWritePermOfBrokerResponseHeader", "DeleteKVConfigRequestHeader", "DeleteTopicFromNamesrvRequestHeader", "GetKVConfigRequestHeader", "GetKVConfigResponseHeader", "GetKVListByNamespaceRequestHeader", "GetRouteInfoRequestHeader", "PutKVConfigRequestHeader", "QueryDataVersionRequestHeader", "QueryDataVersionResponseHeader", "RegisterBrokerRequestHeader", "RegisterBrokerResponseHeader", "RegisterOrderTopicRequestHeader", "UnRegisterBrokerRequestHeader", "WipeWritePermOfBrokerRequestHeader", "WipeWritePermOfBrokerResponseHeader"})
_FILTERSRV_HEADERS = frozenset({"RegisterFilterServerRequestHeader", "RegisterFilterServerResponseHeader", "RegisterMessageFilterClassRequestHeader"})


def _java_class_name(cls: type) -> str:
    own = cls.__dict__.get("JAVA_CLASS")  # 5.x headers live in another package
    if own:
        return own
    if cls is RpcRequestHeader:
        return "org.apache.rocketmq.common.rpc.RpcRequestHeader"
    name = cls.__name__
    if name in _NAMESRV_HEADERS:
        return f"{_JAVA_PACKAGE}.namesrv.{name}"
    if name in _FILTERSRV_HEADERS:
        return f"{_JAVA_PACKAGE}.filtersrv.{name}"
    return f"{_JAVA_PACKAGE}.{name}"


def java_field_order(cls: type) -> list[str]:
    """The order ``makeCustomHeaderToNet`` puts a header's fields into extFields.

    ``getClazzFields`` collects ``getDeclaredFields()`` of the class, then of each superclass,
    into a ``HashSet<Field>``; ``Field.hashCode`` is the declaring class name's hash XOR the
    field name's. Keys colliding in the extFields HashMap keep this insertion order, so it
    decides, e.g., whether ``commitOffset`` or ``bname`` comes first in a pull request.
    """
    declared: list[tuple[str, str]] = []  # (declaring class, field) in addAll order
    for klass in cls.__mro__:
        if not (isinstance(klass, type) and issubclass(klass, CommandHeader)) or klass is CommandHeader:
            continue
        header_class: type = klass
        real = {f.name for f in fields(header_class)}  # __dataclass_fields__ also lists ClassVars
        own = [f for f in klass.__dict__.get("__annotations__", {}) if f in real]
        declared += [(_java_class_name(klass), f) for f in own]
    mask = hashmap_capacity(len(declared)) - 1

    def bucket(item: tuple[str, str]) -> int:
        h = (java_string_hash(item[0]) ^ java_string_hash(item[1])) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & mask

    return [f for _, f in sorted(declared, key=bucket)]


def _build_encoder(cls: type) -> Callable[[Any], dict[str, str]]:
    lines = ["def _encode(self):", "    d = {}"]
    by_name = {f.name: f for f in fields(cls)}
    for f in (by_name[n] for n in java_field_order(cls)):
        kind = f.metadata["kind"]
        lines.append(f"    v = self.{f.name}")
        lines.append("    if v is not None:")
        if kind == STRING:
            expr = "v if type(v) is str else str(v)"
        elif kind == BOOL:
            expr = "'true' if v else 'false'"
        elif kind == DOUBLE:
            expr = "java_double(float(v))"
        else:
            expr = "str(int(v))"
        lines.append(f"        d[{f.name!r}] = {expr}")
    lines.append("    return d")
    ns: dict[str, Any] = {"java_double": java_double}
    exec("\n".join(lines), ns)  # noqa: S102 - generated from the dataclass fields above only
    return ns["_encode"]


class CommandHeader:
    """Base of every custom header.

    ``FAST_CODES`` lists, for Java's ``FastCodesHeader`` classes, the fields their ``encode``
    writes (in that order) into a ROCKETMQ binary header; empty for all other classes.
    """

    __slots__ = ()
    FAST_CODES: ClassVar[tuple[str, ...]] = ()

    # __eq__ and __repr__ exactly as @dataclass writes them, shared instead of generated per
    # class (generating them was most of this module's import time, i.e. of rmqd's start).
    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return _values(self) == _values(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # like a dataclass with eq=True

    def __repr__(self) -> str:
        names = _FIELD_NAMES.get(type(self)) or _field_names(type(self))
        return f"{type(self).__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in names)})"

    @classmethod
    def from_ext(cls, ext: Mapping[str, str] | None) -> Any:
        """Decode from a command's ``ext_fields`` (``None`` = no extFields at all)."""
        dec = _DECODERS.get(cls)
        if dec is None:
            dec = _DECODERS[cls] = _build_decoder(cls)
        return dec(_EMPTY if ext is None else ext)

    def to_ext(
        self,
        extra: Mapping[str, str] | None = None,
        *,
        serialize_type: int = SerializeType.JSON,
    ) -> dict[str, str]:
        """The extFields a 4.9.8 broker would send for this header, plus ``extra`` entries
        (the ``addExtField`` ones such as ``MSG_REGION``/``TRACE_ON``).

        JSON (and non-fast binary): one HashMap with the extras put first, in HashMap order.
        ROCKETMQ binary of a ``FastCodesHeader``: its fields in declaration order, then the
        extras in HashMap order - what ``fastEncodeHeader`` writes.
        """
        enc = _ENCODERS.get(type(self))
        if enc is None:
            enc = _ENCODERS[type(self)] = _build_encoder(type(self))
        own = enc(self)
        fast = self.FAST_CODES
        if serialize_type == SerializeType.ROCKETMQ and fast:
            own = {k: own[k] for k in fast if k in own}
            if not extra:
                return own
            return {**own, **java_hashmap_order(dict(extra))}
        if extra:
            merged = dict(extra)
            merged.update(own)
            return java_hashmap_order(merged)
        return java_hashmap_order(own)


@_header
class RpcRequestHeader(CommandHeader):
    """4.9.8's ``RpcRequestHeader``: the ``bname`` (broker name) Java and Go clients add."""

    bname: str | None = optional(STRING)


@_header
class CheckTransactionStateRequestHeader(RpcRequestHeader):
    tranStateTableOffset: int | None = required(LONG)
    commitLogOffset: int | None = required(LONG)
    msgId: str | None = optional(STRING)
    transactionId: str | None = optional(STRING)
    offsetMsgId: str | None = optional(STRING)


@_header
class CheckTransactionStateResponseHeader(CommandHeader):
    producerGroup: str | None = required(STRING)
    tranStateTableOffset: int | None = required(LONG)
    commitLogOffset: int | None = required(LONG)
    commitOrRollback: int | None = required(INT)


@_header
class CloneGroupOffsetRequestHeader(CommandHeader):
    srcGroup: str | None = required(STRING)
    destGroup: str | None = required(STRING)
    topic: str | None = optional(STRING)
    offline: bool = optional(BOOL, False)


@_header
class ConsumeMessageDirectlyResultRequestHeader(CommandHeader):
    consumerGroup: str | None = required(STRING)
    clientId: str | None = optional(STRING)
    msgId: str | None = optional(STRING)
    brokerName: str | None = optional(STRING)


@_header
class ConsumerSendMsgBackRequestHeader(RpcRequestHeader):
    offset: int | None = required(LONG)
    group: str | None = required(STRING)
    delayLevel: int | None = required(INT)
    originMsgId: str | None = optional(STRING)
    originTopic: str | None = optional(STRING)
    unitMode: bool = optional(BOOL, False)
    maxReconsumeTimes: int | None = optional(INT)


@_header
class CreateAccessConfigRequestHeader(CommandHeader):
    accessKey: str | None = required(STRING)
    secretKey: str | None = optional(STRING)
    whiteRemoteAddress: str | None = optional(STRING)
    admin: bool = optional(BOOL, False)
    defaultTopicPerm: str | None = optional(STRING)
    defaultGroupPerm: str | None = optional(STRING)
    topicPerms: str | None = optional(STRING)
    groupPerms: str | None = optional(STRING)


@_header
class CreateTopicRequestHeader(CommandHeader):
    topic: str | None = required(STRING)
    defaultTopic: str | None = required(STRING)
    readQueueNums: int | None = required(INT)
    writeQueueNums: int | None = required(INT)
    perm: int | None = required(INT)
    topicFilterType: str | None = required(STRING)
    topicSysFlag: int | None = optional(INT)
    order: bool = required(BOOL, False)
    attributes: str | None = optional(STRING)  # 5.x: "+message.type=FIFO"


@_header
class DeleteAccessConfigRequestHeader(CommandHeader):
    accessKey: str | None = required(STRING)


@_header
class DeleteSubscriptionGroupRequestHeader(CommandHeader):
    groupName: str | None = required(STRING)
    removeOffset: bool = optional(BOOL, False)


@_header
class DeleteTopicRequestHeader(CommandHeader):
    topic: str | None = required(STRING)


@_header
class EndTransactionRequestHeader(RpcRequestHeader):
    # (required: from_ext never leaves them None, so typed without it)
    producerGroup: str = required(STRING)
    tranStateTableOffset: int = required(LONG)
    commitLogOffset: int = required(LONG)
    commitOrRollback: int = required(INT)
    fromTransactionCheck: bool = optional(BOOL, False)
    msgId: str | None = required(STRING)
    transactionId: str | None = optional(STRING)


@_header
class EndTransactionResponseHeader(CommandHeader):
    pass


@_header
class GetAllProducerInfoRequestHeader(CommandHeader):
    pass


@_header
class GetAllTopicConfigResponseHeader(CommandHeader):
    pass


@_header
class GetBrokerAclConfigResponseHeader(CommandHeader):
    version: str | None = required(STRING)
    allAclFileVersion: str | None = optional(STRING)
    brokerName: str | None = required(STRING)
    brokerAddr: str | None = required(STRING)
    clusterName: str | None = required(STRING)


@_header
class GetBrokerConfigResponseHeader(CommandHeader):
    version: str | None = required(STRING)


@_header
class GetConsumeStatsInBrokerHeader(CommandHeader):
    isOrder: bool = required(BOOL, False)


@_header
class GetConsumeStatsRequestHeader(CommandHeader):
    consumerGroup: str | None = required(STRING)
    topic: str | None = optional(STRING)


@_header
class GetConsumerConnectionListRequestHeader(CommandHeader):
    consumerGroup: str | None = required(STRING)


@_header
class GetConsumerListByGroupRequestHeader(CommandHeader):
    consumerGroup: str | None = required(STRING)


@_header
class GetConsumerListByGroupResponseHeader(CommandHeader):
    pass


@_header
class GetConsumerRunningInfoRequestHeader(CommandHeader):
    consumerGroup: str | None = required(STRING)
    clientId: str | None = required(STRING)
    jstackEnable: bool = optional(BOOL, False)


@_header
class GetConsumerStatusRequestHeader(CommandHeader):
    topic: str | None = required(STRING)
    group: str | None = required(STRING)
    clientAddr: str | None = optional(STRING)


@_header
class GetEarliestMsgStoretimeRequestHeader(RpcRequestHeader):
    topic: str | None = required(STRING)
    queueId: int | None = required(INT)


@_header
class GetEarliestMsgStoretimeResponseHeader(CommandHeader):
    timestamp: int | None = required(LONG)


@_header
class GetMaxOffsetRequestHeader(RpcRequestHeader):
    topic: str | None = required(STRING)
    queueId: int | None = required(INT)


@_header
class GetMaxOffsetResponseHeader(CommandHeader):
    offset: int | None = required(LONG)


@_header
class GetMinOffsetRequestHeader(RpcRequestHeader):
    topic: str | None = required(STRING)
    queueId: int | None = required(INT)


@_header
class GetMinOffsetResponseHeader(CommandHeader):
    offset: int | None = required(LONG)


@_header
class GetProducerConnectionListRequestHeader(CommandHeader):
    producerGroup: str | None = required(STRING)


@_header
class GetTopicStatsInfoRequestHeader(CommandHeader):
    topic: str | None = required(STRING)


@_header
class GetTopicsByClusterRequestHeader(CommandHeader):
    cluster: str | None = required(STRING)


@_header
class NotifyConsumerIdsChangedRequestHeader(CommandHeader):
    consumerGroup: str | None = required(STRING)


@_header
class PullMessageRequestHeader(RpcRequestHeader):
    FAST_CODES: ClassVar[tuple[str, ...]] = (
        "consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag", "commitOffset",
        "suspendTimeoutMillis", "subscription", "subVersion", "expressionType", "bname",
    )
    consumerGroup: str | None = required(STRING)
    topic: str | None = required(STRING)
    queueId: int | None = required(INT)
    queueOffset: int | None = required(LONG)
    maxMsgNums: int | None = required(INT)
    sysFlag: int | None = required(INT)
    commitOffset: int | None = required(LONG)
    suspendTimeoutMillis: int | None = required(LONG)
    subscription: str | None = optional(STRING)
    subVersion: int | None = required(LONG)
    expressionType: str | None = optional(STRING)


@_header
class PullMessageResponseHeader(CommandHeader):
    FAST_CODES: ClassVar[tuple[str, ...]] = ("suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset")
    suggestWhichBrokerId: int | None = required(LONG)
    nextBeginOffset: int | None = required(LONG)
    minOffset: int | None = required(LONG)
    maxOffset: int | None = required(LONG)


_JAVA5_PACKAGE = "org.apache.rocketmq.remoting.protocol.header"


@_header
class PopMessageRequestHeader(RpcRequestHeader):
    """5.x POP_MESSAGE (its RpcRequestHeader's ns/nsd/oway/lo are not read)."""

    JAVA_CLASS: ClassVar[str] = f"{_JAVA5_PACKAGE}.PopMessageRequestHeader"
    consumerGroup: str | None = required(STRING)
    topic: str | None = required(STRING)
    queueId: int | None = required(INT)
    maxMsgNums: int | None = required(INT)
    invisibleTime: int | None = required(LONG)
    pollTime: int | None = required(LONG)
    bornTime: int | None = required(LONG)
    initMode: int | None = required(INT)
    expType: str | None = optional(STRING)
    exp: str | None = optional(STRING)
    order: bool = optional(BOOL, False)
    attemptId: str | None = optional(STRING)


@_header
class PopMessageResponseHeader(CommandHeader):
    JAVA_CLASS: ClassVar[str] = f"{_JAVA5_PACKAGE}.PopMessageResponseHeader"
    popTime: int | None = required(LONG)
    invisibleTime: int | None = required(LONG)
    reviveQid: int | None = required(INT)
    restNum: int | None = required(LONG)
    startOffsetInfo: str | None = optional(STRING)
    msgOffsetInfo: str | None = optional(STRING)
    orderCountInfo: str | None = optional(STRING)


@_header
class GetTopicConfigRequestHeader(RpcRequestHeader):
    """5.x GET_TOPIC_CONFIG (351; rocketmq-tools' examineTopicConfig, which examineTopicStats
    calls): the topic (@CFNotNull) and TopicRequestHeader's ``lo`` ("logical": the static-topic
    mapping is wanted too; the 5.x admin client always sends true). RpcRequestHeader's
    ns/nsd/oway are not read."""

    JAVA_CLASS: ClassVar[str] = f"{_JAVA5_PACKAGE}.GetTopicConfigRequestHeader"
    topic: str | None = required(STRING)
    lo: bool | None = optional(BOOL)


@_header
class CheckRocksdbCqWriteProgressRequestHeader(CommandHeader):
    """5.x CHECK_ROCKSDB_CQ_WRITE_PROGRESS (354, mqadmin checkRocksdbCqWriteProgress): the topic
    and ``checkStoreTime`` (a primitive long, 0 when absent). Java's topic is @CFNotNull, but
    mqadmin sends "" for "every topic": declared optional here so the name guard leaves a blank
    one alone (it still refuses a name no topic can have); the handler refuses a missing one
    with the decoder's own remark."""

    JAVA_CLASS: ClassVar[str] = f"{_JAVA5_PACKAGE}.CheckRocksdbCqWriteProgressRequestHeader"
    topic: str | None = optional(STRING)
    checkStoreTime: int | None = optional(LONG, 0)


@_header
class ExportRocksDBConfigToJsonRequestHeader(CommandHeader):
    """5.x EXPORT_ROCKSDB_CONFIG_TO_JSON (355, mqadmin rocksDBConfigToJson): ``configType``
    (@CFNotNull), config type names each followed by ';' (topics, subscriptionGroups,
    consumerOffsets)."""

    JAVA_CLASS: ClassVar[str] = f"{_JAVA5_PACKAGE}.ExportRocksDBConfigToJsonRequestHeader"
    configType: str | None = required(STRING)


@_header
class AckMessageRequestHeader(RpcRequestHeader):
    JAVA_CLASS: ClassVar[str] = f"{_JAVA5_PACKAGE}.AckMessageRequestHeader"
    consumerGroup: str | None = required(STRING)
    topic: str | None = required(STRING)
    queueId: int | None = required(INT)
    extraInfo: str | None = required(STRING)
    offset: int | None = required(LONG)


@_header
class ChangeInvisibleTimeRequestHeader(RpcRequestHeader):
    JAVA_CLASS: ClassVar[str] = f"{_JAVA5_PACKAGE}.ChangeInvisibleTimeRequestHeader"
    consumerGroup: str | None = required(STRING)
    topic: str | None = required(STRING)
    queueId: int | None = required(INT)
    extraInfo: str | None = required(STRING)
    offset: int | None = required(LONG)
    invisibleTime: int | None = required(LONG)


@_header
class ChangeInvisibleTimeResponseHeader(CommandHeader):
    JAVA_CLASS: ClassVar[str] = f"{_JAVA5_PACKAGE}.ChangeInvisibleTimeResponseHeader"
    popTime: int | None = required(LONG)
    invisibleTime: int | None = required(LONG)
    reviveQid: int | None = required(INT)


@_header
class QueryConsumeQueueRequestHeader(CommandHeader):
    topic: str | None = optional(STRING)
    queueId: int = optional(INT, 0)
    index: int = optional(LONG, 0)
    count: int = optional(INT, 0)
    consumerGroup: str | None = optional(STRING)


@_header
class QueryConsumeTimeSpanRequestHeader(CommandHeader):
    topic: str | None = required(STRING)
    group: str | None = required(STRING)


@_header
class QueryConsumerOffsetRequestHeader(RpcRequestHeader):
    consumerGroup: str | None = required(STRING)
    topic: str | None = required(STRING)
    queueId: int | None = required(INT)


@_header
class QueryConsumerOffsetResponseHeader(CommandHeader):
    offset: int | None = required(LONG)


@_header
class QueryCorrectionOffsetHeader(CommandHeader):
    filterGroups: str | None = optional(STRING)
    compareGroup: str | None = required(STRING)
    topic: str | None = required(STRING)


@_header
class QueryMessageRequestHeader(CommandHeader):
    topic: str | None = required(STRING)
    key: str | None = required(STRING)
    maxNum: int | None = required(INT)
    beginTimestamp: int | None = required(LONG)
    endTimestamp: int | None = required(LONG)


@_header
class QueryMessageResponseHeader(CommandHeader):
    indexLastUpdateTimestamp: int | None = required(LONG)
    indexLastUpdatePhyoffset: int | None = required(LONG)


@_header
class QueryTopicConsumeByWhoRequestHeader(CommandHeader):
    topic: str | None = required(STRING)


@_header
class RegisterFilterServerRequestHeader(CommandHeader):
    filterServerAddr: str | None = required(STRING)


@_header
class RegisterFilterServerResponseHeader(CommandHeader):
    brokerName: str | None = required(STRING)
    brokerId: int = required(LONG, 0)


@_header
class RegisterMessageFilterClassRequestHeader(CommandHeader):
    consumerGroup: str | None = required(STRING)
    topic: str | None = required(STRING)
    className: str | None = required(STRING)
    classCRC: int | None = required(INT)


@_header
class ReplyMessageRequestHeader(CommandHeader):
    producerGroup: str | None = required(STRING)
    topic: str | None = required(STRING)
    defaultTopic: str | None = required(STRING)
    defaultTopicQueueNums: int | None = required(INT)
    queueId: int | None = required(INT)
    sysFlag: int | None = required(INT)
    bornTimestamp: int | None = required(LONG)
    flag: int | None = required(INT)
    properties: str | None = optional(STRING)
    reconsumeTimes: int | None = optional(INT)
    unitMode: bool = optional(BOOL, False)
    bornHost: str | None = required(STRING)
    storeHost: str | None = required(STRING)
    storeTimestamp: int = required(LONG, 0)


@_header
class ResetOffsetRequestHeader(CommandHeader):
    topic: str | None = required(STRING)
    group: str | None = required(STRING)
    timestamp: int = required(LONG, 0)
    isForce: bool = required(BOOL, False)


@_header
class ResumeCheckHalfMessageRequestHeader(CommandHeader):
    msgId: str | None = optional(STRING)


@_header
class SearchOffsetRequestHeader(RpcRequestHeader):
    topic: str | None = required(STRING)
    queueId: int | None = required(INT)
    timestamp: int | None = required(LONG)


@_header
class SearchOffsetResponseHeader(CommandHeader):
    offset: int | None = required(LONG)


@_header
class SendMessageRequestHeader(RpcRequestHeader):
    producerGroup: str | None = required(STRING)
    topic: str | None = required(STRING)
    defaultTopic: str | None = required(STRING)
    defaultTopicQueueNums: int | None = required(INT)
    queueId: int | None = required(INT)
    sysFlag: int | None = required(INT)
    bornTimestamp: int | None = required(LONG)
    flag: int | None = required(INT)
    properties: str | None = optional(STRING)
    reconsumeTimes: int | None = optional(INT)
    unitMode: bool = optional(BOOL, False)
    batch: bool = optional(BOOL, False)
    maxReconsumeTimes: int | None = optional(INT)


@_header
class SendMessageResponseHeader(CommandHeader):
    FAST_CODES: ClassVar[tuple[str, ...]] = ("msgId", "queueId", "queueOffset", "transactionId")
    msgId: str | None = required(STRING)
    queueId: int | None = required(INT)
    queueOffset: int | None = required(LONG)
    transactionId: str | None = optional(STRING)


@_header
class UnregisterClientRequestHeader(CommandHeader):
    clientID: str | None = required(STRING)
    producerGroup: str | None = optional(STRING)
    consumerGroup: str | None = optional(STRING)


@_header
class UnregisterClientResponseHeader(CommandHeader):
    pass


@_header
class UpdateConsumerOffsetRequestHeader(RpcRequestHeader):
    consumerGroup: str | None = required(STRING)
    topic: str | None = required(STRING)
    queueId: int | None = required(INT)
    commitOffset: int | None = required(LONG)


@_header
class UpdateConsumerOffsetResponseHeader(CommandHeader):
    pass


@_header
class UpdateGlobalWhiteAddrsConfigRequestHeader(CommandHeader):
    globalWhiteAddrs: str | None = required(STRING)
    aclFileFullPath: str | None = required(STRING)


@_header
class ViewBrokerStatsDataRequestHeader(CommandHeader):
    statsName: str | None = required(STRING)
    statsKey: str | None = required(STRING)


@_header
class ViewMessageRequestHeader(CommandHeader):
    offset: int | None = required(LONG)


@_header
class ViewMessageResponseHeader(CommandHeader):
    pass


@_header
class AddWritePermOfBrokerRequestHeader(CommandHeader):
    brokerName: str | None = required(STRING)


@_header
class AddWritePermOfBrokerResponseHeader(CommandHeader):
    addTopicCount: int | None = required(INT)


@_header
class DeleteKVConfigRequestHeader(CommandHeader):
    namespace: str | None = required(STRING)
    key: str | None = required(STRING)


@_header
class DeleteTopicFromNamesrvRequestHeader(CommandHeader):
    topic: str | None = required(STRING)
    clusterName: str | None = optional(STRING)


@_header
class GetKVConfigRequestHeader(CommandHeader):
    namespace: str | None = required(STRING)
    key: str | None = required(STRING)


@_header
class GetKVConfigResponseHeader(CommandHeader):
    value: str | None = optional(STRING)


@_header
class GetKVListByNamespaceRequestHeader(CommandHeader):
    namespace: str | None = required(STRING)


@_header
class GetRouteInfoRequestHeader(CommandHeader):
    topic: str | None = required(STRING)
    acceptStandardJsonOnly: bool | None = optional(BOOL)


@_header
class PutKVConfigRequestHeader(CommandHeader):
    namespace: str | None = required(STRING)
    key: str | None = required(STRING)
    value: str | None = required(STRING)


@_header
class QueryDataVersionRequestHeader(CommandHeader):
    brokerName: str | None = required(STRING)
    brokerAddr: str | None = required(STRING)
    clusterName: str | None = required(STRING)
    brokerId: int | None = required(LONG)


@_header
class QueryDataVersionResponseHeader(CommandHeader):
    changed: bool | None = required(BOOL)


@_header
class RegisterBrokerRequestHeader(CommandHeader):
    brokerName: str | None = required(STRING)
    brokerAddr: str | None = required(STRING)
    clusterName: str | None = required(STRING)
    haServerAddr: str | None = required(STRING)
    brokerId: int | None = required(LONG)
    compressed: bool = optional(BOOL, False)
    bodyCrc32: int = optional(INT, 0)


@_header
class RegisterBrokerResponseHeader(CommandHeader):
    haServerAddr: str | None = optional(STRING)
    masterAddr: str | None = optional(STRING)


@_header
class RegisterOrderTopicRequestHeader(CommandHeader):
    topic: str | None = required(STRING)
    orderTopicString: str | None = required(STRING)


@_header
class UnRegisterBrokerRequestHeader(CommandHeader):
    brokerName: str | None = required(STRING)
    brokerAddr: str | None = required(STRING)
    clusterName: str | None = required(STRING)
    brokerId: int | None = required(LONG)


@_header
class WipeWritePermOfBrokerRequestHeader(CommandHeader):
    brokerName: str | None = required(STRING)


@_header
class WipeWritePermOfBrokerResponseHeader(CommandHeader):
    wipeTopicCount: int | None = required(INT)


@_header
class SendMessageRequestHeaderV2(RpcRequestHeader):
    """SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE: SendMessageRequestHeader with one-letter names."""

    # its binary encode() writes a..n and drops the inherited bname
    FAST_CODES: ClassVar[tuple[str, ...]] = tuple("abcdefghijklmn")
    a: str | None = required(STRING)  # producerGroup
    b: str | None = required(STRING)  # topic
    c: str | None = required(STRING)  # defaultTopic
    d: int | None = required(INT)  # defaultTopicQueueNums
    e: int | None = required(INT)  # queueId
    f: int | None = required(INT)  # sysFlag
    g: int | None = required(LONG)  # bornTimestamp
    h: int | None = required(INT)  # flag
    i: str | None = optional(STRING)  # properties
    j: int | None = optional(INT)  # reconsumeTimes
    k: bool = optional(BOOL, False)  # unitMode
    l: int | None = optional(INT)  # maxReconsumeTimes (consumeRetryTimes)  # noqa: E741
    m: bool = optional(BOOL, False)  # batch
    n: str | None = optional(STRING)  # brokerName

    @classmethod
    def v1_from_ext(cls, ext: Mapping[str, str] | None) -> SendMessageRequestHeader:
        """``from_ext(ext).to_v1()`` in one step (the send hot path): the same checks and
        errors as ``from_ext``, without building the V2 object."""
        global _v1_from_v2_ext
        dec = _v1_from_v2_ext
        if dec is None:
            dec = _v1_from_v2_ext = _build_decoder(cls, SendMessageRequestHeader, _V2_TO_V1)
        return dec(_EMPTY if ext is None else ext)

    def to_v1(self) -> SendMessageRequestHeader:
        """``createSendMessageRequestHeaderV1``: note V1's ``bname`` comes from V2's ``n``."""
        return SendMessageRequestHeader(
            bname=self.n, producerGroup=self.a, topic=self.b, defaultTopic=self.c,
            defaultTopicQueueNums=self.d, queueId=self.e, sysFlag=self.f, bornTimestamp=self.g,
            flag=self.h, properties=self.i, reconsumeTimes=self.j, unitMode=self.k,
            batch=self.m, maxReconsumeTimes=self.l,
        )

    @classmethod
    def from_v1(cls, v1: SendMessageRequestHeader) -> SendMessageRequestHeaderV2:
        """``createSendMessageRequestHeaderV2`` (V1's ``bname`` becomes ``n``)."""
        return cls(
            a=v1.producerGroup, b=v1.topic, c=v1.defaultTopic, d=v1.defaultTopicQueueNums,
            e=v1.queueId, f=v1.sysFlag, g=v1.bornTimestamp, h=v1.flag, i=v1.properties,
            j=v1.reconsumeTimes, k=v1.unitMode, l=v1.maxReconsumeTimes, m=v1.batch, n=v1.bname,
        )


#: V2 field -> V1 field (``createSendMessageRequestHeaderV1``; V2's inherited bname is dropped).
_V2_TO_V1 = {
    "a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums", "e": "queueId",
    "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties", "j": "reconsumeTimes", "k": "unitMode",
    "l": "maxReconsumeTimes", "m": "batch", "n": "bname",
}

#: The request header class each request code's handler decodes (4.9.8 broker and name server).
#: Codes whose requests carry only a body, or nothing (HEART_BEAT, LOCK_BATCH_MQ, UNLOCK_BATCH_MQ,
#: CHECK_CLIENT_CONFIG, GET_ALL_TOPIC_CONFIG, GET_BROKER_CLUSTER_INFO, ...), are absent.
REQUEST_HEADERS: dict[int, type[CommandHeader]] = {
    RequestCode.SEND_MESSAGE: SendMessageRequestHeader,
    RequestCode.SEND_MESSAGE_V2: SendMessageRequestHeaderV2,
    RequestCode.SEND_BATCH_MESSAGE: SendMessageRequestHeaderV2,
    RequestCode.SEND_REPLY_MESSAGE: SendMessageRequestHeader,
    RequestCode.SEND_REPLY_MESSAGE_V2: SendMessageRequestHeaderV2,
    RequestCode.PULL_MESSAGE: PullMessageRequestHeader,
    RequestCode.QUERY_MESSAGE: QueryMessageRequestHeader,
    RequestCode.VIEW_MESSAGE_BY_ID: ViewMessageRequestHeader,
    RequestCode.QUERY_CONSUMER_OFFSET: QueryConsumerOffsetRequestHeader,
    RequestCode.UPDATE_CONSUMER_OFFSET: UpdateConsumerOffsetRequestHeader,
    RequestCode.GET_MAX_OFFSET: GetMaxOffsetRequestHeader,
    RequestCode.GET_MIN_OFFSET: GetMinOffsetRequestHeader,
    RequestCode.GET_EARLIEST_MSG_STORETIME: GetEarliestMsgStoretimeRequestHeader,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: SearchOffsetRequestHeader,
    RequestCode.UNREGISTER_CLIENT: UnregisterClientRequestHeader,
    RequestCode.CONSUMER_SEND_MSG_BACK: ConsumerSendMsgBackRequestHeader,
    RequestCode.END_TRANSACTION: EndTransactionRequestHeader,
    RequestCode.CHECK_TRANSACTION_STATE: CheckTransactionStateRequestHeader,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: GetConsumerListByGroupRequestHeader,
    RequestCode.NOTIFY_CONSUMER_IDS_CHANGED: NotifyConsumerIdsChangedRequestHeader,
    RequestCode.UPDATE_AND_CREATE_TOPIC: CreateTopicRequestHeader,
    RequestCode.DELETE_TOPIC_IN_BROKER: DeleteTopicRequestHeader,
    RequestCode.GET_TOPIC_STATS_INFO: GetTopicStatsInfoRequestHeader,
    RequestCode.GET_CONSUME_STATS: GetConsumeStatsRequestHeader,
    RequestCode.GET_BROKER_CONSUME_STATS: GetConsumeStatsInBrokerHeader,
    RequestCode.GET_CONSUMER_CONNECTION_LIST: GetConsumerConnectionListRequestHeader,
    RequestCode.GET_PRODUCER_CONNECTION_LIST: GetProducerConnectionListRequestHeader,
    RequestCode.GET_ALL_PRODUCER_INFO: GetAllProducerInfoRequestHeader,
    RequestCode.DELETE_SUBSCRIPTIONGROUP: DeleteSubscriptionGroupRequestHeader,
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: ResetOffsetRequestHeader,
    RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: GetConsumerStatusRequestHeader,
    RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: QueryTopicConsumeByWhoRequestHeader,
    RequestCode.QUERY_CONSUME_TIME_SPAN: QueryConsumeTimeSpanRequestHeader,
    RequestCode.GET_CONSUMER_RUNNING_INFO: GetConsumerRunningInfoRequestHeader,
    RequestCode.QUERY_CORRECTION_OFFSET: QueryCorrectionOffsetHeader,
    RequestCode.CONSUME_MESSAGE_DIRECTLY: ConsumeMessageDirectlyResultRequestHeader,
    RequestCode.CLONE_GROUP_OFFSET: CloneGroupOffsetRequestHeader,
    RequestCode.VIEW_BROKER_STATS_DATA: ViewBrokerStatsDataRequestHeader,
    RequestCode.QUERY_CONSUME_QUEUE: QueryConsumeQueueRequestHeader,
    RequestCode.RESUME_CHECK_HALF_MESSAGE: ResumeCheckHalfMessageRequestHeader,
    RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: CreateAccessConfigRequestHeader,
    RequestCode.DELETE_ACL_CONFIG: DeleteAccessConfigRequestHeader,
    RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: UpdateGlobalWhiteAddrsConfigRequestHeader,
    RequestCode.REGISTER_FILTER_SERVER: RegisterFilterServerRequestHeader,
    RequestCode.REGISTER_MESSAGE_FILTER_CLASS: RegisterMessageFilterClassRequestHeader,
    RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT: ReplyMessageRequestHeader,
    # 5.x POP
    RequestCode.POP_MESSAGE: PopMessageRequestHeader,
    RequestCode.ACK_MESSAGE: AckMessageRequestHeader,
    RequestCode.CHANGE_MESSAGE_INVISIBLETIME: ChangeInvisibleTimeRequestHeader,
    # 5.x admin
    RequestCode.GET_TOPIC_CONFIG: GetTopicConfigRequestHeader,
    RequestCode.CHECK_ROCKSDB_CQ_WRITE_PROGRESS: CheckRocksdbCqWriteProgressRequestHeader,
    RequestCode.EXPORT_ROCKSDB_CONFIG_TO_JSON: ExportRocksDBConfigToJsonRequestHeader,
    # name server
    RequestCode.PUT_KV_CONFIG: PutKVConfigRequestHeader,
    RequestCode.GET_KV_CONFIG: GetKVConfigRequestHeader,
    RequestCode.DELETE_KV_CONFIG: DeleteKVConfigRequestHeader,
    RequestCode.GET_KVLIST_BY_NAMESPACE: GetKVListByNamespaceRequestHeader,
    RequestCode.REGISTER_BROKER: RegisterBrokerRequestHeader,
    RequestCode.UNREGISTER_BROKER: UnRegisterBrokerRequestHeader,
    RequestCode.QUERY_DATA_VERSION: QueryDataVersionRequestHeader,
    RequestCode.GET_ROUTEINFO_BY_TOPIC: GetRouteInfoRequestHeader,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: WipeWritePermOfBrokerRequestHeader,
    RequestCode.ADD_WRITE_PERM_OF_BROKER: AddWritePermOfBrokerRequestHeader,
    RequestCode.DELETE_TOPIC_IN_NAMESRV: DeleteTopicFromNamesrvRequestHeader,
    RequestCode.GET_TOPICS_BY_CLUSTER: GetTopicsByClusterRequestHeader,
}

#: The response header class of a request code's successful answer, where it has one.
RESPONSE_HEADERS: dict[int, type[CommandHeader]] = {
    RequestCode.SEND_MESSAGE: SendMessageResponseHeader,
    RequestCode.SEND_MESSAGE_V2: SendMessageResponseHeader,
    RequestCode.SEND_BATCH_MESSAGE: SendMessageResponseHeader,
    RequestCode.SEND_REPLY_MESSAGE: SendMessageResponseHeader,
    RequestCode.SEND_REPLY_MESSAGE_V2: SendMessageResponseHeader,
    RequestCode.PULL_MESSAGE: PullMessageResponseHeader,
    RequestCode.QUERY_MESSAGE: QueryMessageResponseHeader,
    RequestCode.QUERY_CONSUMER_OFFSET: QueryConsumerOffsetResponseHeader,
    RequestCode.GET_MAX_OFFSET: GetMaxOffsetResponseHeader,
    RequestCode.GET_MIN_OFFSET: GetMinOffsetResponseHeader,
    RequestCode.GET_EARLIEST_MSG_STORETIME: GetEarliestMsgStoretimeResponseHeader,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: SearchOffsetResponseHeader,
    RequestCode.GET_KV_CONFIG: GetKVConfigResponseHeader,
    RequestCode.REGISTER_BROKER: RegisterBrokerResponseHeader,
    RequestCode.QUERY_DATA_VERSION: QueryDataVersionResponseHeader,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: WipeWritePermOfBrokerResponseHeader,
    RequestCode.ADD_WRITE_PERM_OF_BROKER: AddWritePermOfBrokerResponseHeader,
    RequestCode.GET_BROKER_CONFIG: GetBrokerConfigResponseHeader,
    RequestCode.GET_BROKER_CLUSTER_ACL_INFO: GetBrokerAclConfigResponseHeader,
    RequestCode.REGISTER_FILTER_SERVER: RegisterFilterServerResponseHeader,
    RequestCode.POP_MESSAGE: PopMessageResponseHeader,
    RequestCode.CHANGE_MESSAGE_INVISIBLETIME: ChangeInvisibleTimeResponseHeader,
}


def decode_request_header(code: int, ext: Mapping[str, str] | None) -> CommandHeader | None:
    """The typed header of a request, or ``None`` for codes without one."""
    cls = REQUEST_HEADERS.get(code)
    return None if cls is None else cls.from_ext(ext)


__all__ = [
    "CommandHeader",
    "RpcRequestHeader",
    "CheckRocksdbCqWriteProgressRequestHeader",
    "CheckTransactionStateRequestHeader",
    "CheckTransactionStateResponseHeader",
    "CloneGroupOffsetRequestHeader",
    "ConsumeMessageDirectlyResultRequestHeader",
    "ConsumerSendMsgBackRequestHeader",
    "CreateAccessConfigRequestHeader",
    "CreateTopicRequestHeader",
    "DeleteAccessConfigRequestHeader",
    "DeleteSubscriptionGroupRequestHeader",
    "DeleteTopicRequestHeader",
    "EndTransactionRequestHeader",
    "EndTransactionResponseHeader",
    "ExportRocksDBConfigToJsonRequestHeader",
    "GetAllProducerInfoRequestHeader",
    "GetAllTopicConfigResponseHeader",
    "GetBrokerAclConfigResponseHeader",
    "GetBrokerConfigResponseHeader",
    "GetConsumeStatsInBrokerHeader",
    "GetConsumeStatsRequestHeader",
    "GetConsumerConnectionListRequestHeader",
    "GetConsumerListByGroupRequestHeader",
    "GetConsumerListByGroupResponseHeader",
    "GetConsumerRunningInfoRequestHeader",
    "GetConsumerStatusRequestHeader",
    "GetEarliestMsgStoretimeRequestHeader",
    "GetEarliestMsgStoretimeResponseHeader",
    "GetMaxOffsetRequestHeader",
    "GetMaxOffsetResponseHeader",
    "GetMinOffsetRequestHeader",
    "GetMinOffsetResponseHeader",
    "GetProducerConnectionListRequestHeader",
    "GetTopicConfigRequestHeader",
    "GetTopicStatsInfoRequestHeader",
    "GetTopicsByClusterRequestHeader",
    "NotifyConsumerIdsChangedRequestHeader",
    "PullMessageRequestHeader",
    "PullMessageResponseHeader",
    "PopMessageRequestHeader",
    "PopMessageResponseHeader",
    "AckMessageRequestHeader",
    "ChangeInvisibleTimeRequestHeader",
    "ChangeInvisibleTimeResponseHeader",
    "QueryConsumeQueueRequestHeader",
    "QueryConsumeTimeSpanRequestHeader",
    "QueryConsumerOffsetRequestHeader",
    "QueryConsumerOffsetResponseHeader",
    "QueryCorrectionOffsetHeader",
    "QueryMessageRequestHeader",
    "QueryMessageResponseHeader",
    "QueryTopicConsumeByWhoRequestHeader",
    "RegisterFilterServerRequestHeader",
    "RegisterFilterServerResponseHeader",
    "RegisterMessageFilterClassRequestHeader",
    "ReplyMessageRequestHeader",
    "ResetOffsetRequestHeader",
    "ResumeCheckHalfMessageRequestHeader",
    "SearchOffsetRequestHeader",
    "SearchOffsetResponseHeader",
    "SendMessageRequestHeader",
    "SendMessageResponseHeader",
    "UnregisterClientRequestHeader",
    "UnregisterClientResponseHeader",
    "UpdateConsumerOffsetRequestHeader",
    "UpdateConsumerOffsetResponseHeader",
    "UpdateGlobalWhiteAddrsConfigRequestHeader",
    "ViewBrokerStatsDataRequestHeader",
    "ViewMessageRequestHeader",
    "ViewMessageResponseHeader",
    "AddWritePermOfBrokerRequestHeader",
    "AddWritePermOfBrokerResponseHeader",
    "DeleteKVConfigRequestHeader",
    "DeleteTopicFromNamesrvRequestHeader",
    "GetKVConfigRequestHeader",
    "GetKVConfigResponseHeader",
    "GetKVListByNamespaceRequestHeader",
    "GetRouteInfoRequestHeader",
    "PutKVConfigRequestHeader",
    "QueryDataVersionRequestHeader",
    "QueryDataVersionResponseHeader",
    "RegisterBrokerRequestHeader",
    "RegisterBrokerResponseHeader",
    "RegisterOrderTopicRequestHeader",
    "UnRegisterBrokerRequestHeader",
    "WipeWritePermOfBrokerRequestHeader",
    "WipeWritePermOfBrokerResponseHeader",
    "SendMessageRequestHeaderV2",
    "REQUEST_HEADERS",
    "RESPONSE_HEADERS",
    "decode_request_header",
    "java_hashmap_order",
    "java_field_order",
    "java_string_hash",
    "java_to_string",
    "parse_java_int",
    "parse_java_bool",
    "parse_java_double",
    "required",
    "optional",
    "STRING",
    "INT",
    "LONG",
    "BOOL",
    "DOUBLE",
]
