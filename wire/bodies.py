"""Remoting body shapes (RocketMQ's RemotingSerializable classes) as dataclasses.

Encoding follows fastjson 1.2.x as the Java name server and broker write it: bean fields in
alphabetical order, null fields left out, enums by name, Long map keys unquoted unless the
browser-compatible form is asked for (GET_ROUTEINFO_BY_TOPIC for clients >= V4_9_4), maps
keyed by objects (ConsumeStats, TopicStatsTable) with the key object written as JSON.

Decoding is lenient the way fastjson is, because real clients differ (see
shared/reference/client-wire-observations.md): enums as names or ordinals (C++ sends
`consumeType: 1`), booleans as true/false, "true"/"false", "0"/"1", numbers as strings,
missing collections as empty.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any, Iterable, overload

from rmqd.wire import fastjson
from rmqd.wire.codes import LanguageCode
from rmqd.wire.errors import WireError
from rmqd.wire.javamap import java_concurrent_hashmap_order, java_hashmap_order

# --------------------------------------------------------------------------------------------
# lenient scalar coercion (fastjson's TypeUtils.castToXxx behaviour, narrowed to what we meet)


def as_bool(value: Any, default: bool = False) -> bool:
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value != 0
    text = str(value).strip().lower()
    if text in ("true", "1", "y", "t"):
        return True
    if text in ("false", "0", "n", "f", ""):
        return False
    raise WireError(f"cannot read {value!r} as a boolean")


_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
#: What a compressed REGISTER_BROKER body may inflate to (a topic table of ~500k topics).
_MAX_REGISTER_BODY = 128 * 1024 * 1024


def as_int(value: Any, default: int = 0, lo: int = _LONG_MIN, hi: int = _LONG_MAX) -> int:
    """A number field (Java int/long): numbers, numeric strings, finite floats truncated as
    fastjson does; anything else, or a value outside [lo, hi], is a WireError."""
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        v = value
    elif isinstance(value, (dict, list, tuple, set)):
        raise WireError(f"cannot read a JSON {type(value).__name__} as a number")
    else:
        text = str(value).strip()
        try:
            v = int(text)
        except ValueError:
            try:
                f = float(text)
            except ValueError:
                raise WireError(f"cannot read {text[:64]!r} as a number") from None
            if not math.isfinite(f):
                raise WireError(f"cannot read {text[:64]!r} as a number") from None
            v = int(f)
    if v < lo or v > hi:
        raise WireError(f"number {str(v)[:64]} is out of range [{lo}, {hi}]")
    return v


def as_float(value: Any, default: float = 0.0) -> float:
    """A double field: a number or numeric text, else a WireError."""
    if value is None or value == "":
        return default
    if isinstance(value, (dict, list, tuple, set)):
        raise WireError(f"cannot read a JSON {type(value).__name__} as a number")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise WireError(f"cannot read {str(value)[:64]!r} as a number") from None


@overload
def as_str(value: Any, default: str) -> str: ...
@overload
def as_str(value: Any, default: None = None) -> str | None: ...


def as_str(value: Any, default: str | None = None) -> str | None:
    if value is None:
        return default
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list, tuple, set)):
        raise WireError(f"cannot read a JSON {type(value).__name__} as a string")
    return str(value)


def as_enum(value: Any, enum_cls: type[enum.Enum], default: enum.Enum | None = None) -> Any:
    """Enum by name (Java, Go, ali-ons) or by ordinal (C++), as fastjson reads either."""
    if value is None or value == "":
        return default
    if isinstance(value, enum_cls):
        return value
    members = list(enum_cls)
    if isinstance(value, int) and not isinstance(value, bool):
        if 0 <= value < len(members):
            return members[value]
        raise WireError(f"ordinal {value} out of range for {enum_cls.__name__}")
    text = str(value).strip()
    if text.isdigit():
        return as_enum(int(text), enum_cls, default)
    try:
        return enum_cls[text]
    except KeyError:
        raise WireError(f"{text!r} is not a {enum_cls.__name__}") from None


def _obj(value: Any, what: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise WireError(f"{what}: expected a JSON object, got {type(value).__name__}")
    return value


def _list(value: Any, what: str) -> list:
    if value is None:
        return []
    if not isinstance(value, (list, tuple, set)):
        raise WireError(f"{what}: expected a JSON array, got {type(value).__name__}")
    return list(value)


# --------------------------------------------------------------------------------------------
# encoding


def to_json_obj(value: Any) -> Any:
    """Dataclass tree -> plain dict/list tree in fastjson's shape (fields sorted, nulls dropped)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        custom = getattr(type(value), "to_json_obj", None)
        if custom is not None and custom is not Body.to_json_obj:
            return custom(value)
        out = {}
        for f in sorted(dataclasses.fields(value), key=lambda f: f.name):
            if f.metadata.get("transient"):
                continue
            v = getattr(value, f.name)
            if v is None:
                continue
            out[f.name] = to_json_obj(v)
        return out
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, dict):
        return {k: to_json_obj(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_json_obj(v) for v in value]
    return value


def _sort_maps(value: Any) -> Any:
    """fastjson SerializerFeature.MapSortField: map entries in key order."""
    if isinstance(value, dict):
        return {k: _sort_maps(value[k]) for k in sorted(value, key=lambda k: (str(type(k)), k))}
    if isinstance(value, list):
        return [_sort_maps(v) for v in value]
    return value


def _dumps_object_keyed(mapping: dict, value_fn: Any) -> str:
    """fastjson text of a map whose keys are beans: {{"brokerName":..}:{...},...}."""
    items = [fastjson.dumps(to_json_obj(k)) + ":" + fastjson.dumps(value_fn(v)) for k, v in mapping.items()]
    return "{" + ",".join(items) + "}"


class Body:
    """Mixin: encode()/decode() for a RemotingSerializable-like dataclass."""

    _OBJECT_KEYS = False  # maps keyed by objects inside (ConsumeStats, TopicStatsTable)

    def to_json_obj(self) -> Any:
        return to_json_obj(self)

    def to_json(self, *, browser_compatible: bool = False, sort_maps: bool = False) -> str:
        obj = self.to_json_obj()
        if sort_maps:
            obj = _sort_maps(obj)
        return fastjson.dumps(obj, browser_compatible=browser_compatible)

    def encode(self, *, browser_compatible: bool = False, sort_maps: bool = False) -> bytes:
        # "replace": a lone surrogate is written as '?', as Java's String.getBytes(UTF_8) writes it
        return self.to_json(browser_compatible=browser_compatible, sort_maps=sort_maps).encode("utf-8", "replace")

    @classmethod
    def from_json_obj(cls, obj: Any) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview | str | None) -> Any:
        return cls.from_json_obj(cls.decode_json_obj(data))

    @classmethod
    def decode_json_obj(cls, data: bytes | bytearray | memoryview | str | None) -> dict:
        """The body's JSON object, not yet made into the dataclass (WireError if it is none)."""
        if data is None or len(data) == 0:
            return {}
        if isinstance(data, str):
            text = data
        else:
            try:
                text = bytes(data).decode("utf-8", errors="strict")
            except UnicodeDecodeError as exc:
                raise WireError(f"{cls.__name__} body is not UTF-8 (byte {exc.start})") from None
        try:
            obj = fastjson.loads(_quote_object_keys(text) if cls._OBJECT_KEYS else text)
        except WireError as exc:
            raise WireError(f"{cls.__name__} body: {exc}") from exc
        return _obj(obj, cls.__name__)


# --------------------------------------------------------------------------------------------
# enums as RocketMQ names them (declaration order = Java ordinal)


class ConsumeType(enum.Enum):
    CONSUME_ACTIVELY = "PULL"
    CONSUME_PASSIVELY = "PUSH"


class MessageModel(enum.Enum):
    BROADCASTING = "BROADCASTING"
    CLUSTERING = "CLUSTERING"


class ConsumeFromWhere(enum.Enum):
    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1
    CONSUME_FROM_MIN_OFFSET = 2
    CONSUME_FROM_MAX_OFFSET = 3
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5


class TopicFilterType(enum.Enum):
    SINGLE_TAG = 0
    MULTI_TAG = 1


# --------------------------------------------------------------------------------------------
# name-server bodies


@dataclass(slots=True)
class DataVersion(Body):
    timestamp: int = 0
    counter: int = 0

    @classmethod
    def from_json_obj(cls, obj: Any) -> "DataVersion":
        obj = _obj(obj, "DataVersion")
        return cls(timestamp=as_int(obj.get("timestamp")), counter=as_int(obj.get("counter")))


PERM_PRIORITY, PERM_READ, PERM_WRITE, PERM_INHERIT = 0x8, 0x4, 0x2, 0x1


@dataclass(slots=True)
class TopicConfig(Body):
    topicName: str | None = None
    readQueueNums: int = 16
    writeQueueNums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topicFilterType: TopicFilterType = TopicFilterType.SINGLE_TAG
    topicSysFlag: int = 0
    order: bool = False
    #: 5.x topic attributes ({"message.type": "FIFO"}); None (left out of the JSON, as 4.9.8
    #: writes it) until one is set
    attributes: dict[str, str] | None = None

    @classmethod
    def from_json_obj(cls, obj: Any) -> "TopicConfig":
        obj = _obj(obj, "TopicConfig")
        attributes = obj.get("attributes")
        return cls(topicName=as_str(obj.get("topicName")),
                   readQueueNums=as_int(obj.get("readQueueNums"), 16),
                   writeQueueNums=as_int(obj.get("writeQueueNums"), 16),
                   perm=as_int(obj.get("perm"), PERM_READ | PERM_WRITE),
                   topicFilterType=as_enum(obj.get("topicFilterType"), TopicFilterType, TopicFilterType.SINGLE_TAG),
                   topicSysFlag=as_int(obj.get("topicSysFlag")),
                   order=as_bool(obj.get("order")),
                   attributes={str(k): str(v) for k, v in attributes.items()} or None
                   if isinstance(attributes, dict) else None)

    @property
    def message_type(self) -> str:
        """TopicConfig.getTopicMessageType (5.x): the message.type attribute, NORMAL when unset."""
        return (self.attributes or {}).get(TOPIC_MESSAGE_TYPE_ATTRIBUTE, "NORMAL")

    # 4.9's TopicConfig.encode()/decode(String): the text a compressed registration carries
    # per topic - name, read and write queue numbers, perm and filter type, space-separated
    # (topicSysFlag and order are not in it: a name server fed compressed bodies never sees them)
    def encode_compact(self) -> str:
        return (f"{self.topicName} {int(self.readQueueNums)} {int(self.writeQueueNums)} {int(self.perm)} "
                f"{self.topicFilterType.name}")

    @classmethod
    def decode_compact(cls, text: str) -> "TopicConfig":
        parts = text.split(" ")
        while parts and parts[-1] == "":  # String.split drops trailing empty strings
            parts.pop()
        if len(parts) != 5 or not all(_JAVA_INT.fullmatch(p) for p in parts[1:4]):
            raise WireError(f"TopicConfig: {text[:200]!r} is not 'name read write perm filterType'")
        try:
            filter_type = TopicFilterType[parts[4]]
        except KeyError:
            raise WireError(f"TopicConfig: unknown topicFilterType {parts[4][:50]!r}") from None
        name, read, write, perm = parts[0], *(as_int(p) for p in parts[1:4])
        return cls(topicName=name, readQueueNums=read, writeQueueNums=write, perm=perm, topicFilterType=filter_type)


#: the 5.x topic attribute naming the kind of messages a topic takes, and its values
TOPIC_MESSAGE_TYPE_ATTRIBUTE = "message.type"
TOPIC_MESSAGE_TYPES = frozenset({"UNSPECIFIED", "NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED"})


def alter_topic_attributes(current: dict[str, str] | None, modification: str | None,
                           create: bool) -> dict[str, str] | None:
    """AttributeParser.parseToMap + AttributeUtil.alterCurrentAttributes (5.3.3) for the one
    attribute rmqd knows, message.type: "+message.type=FIFO" sets it, "-message.type" drops it.
    ValueError with the broker's words when the modification cannot be applied."""
    if not modification:
        return current
    changes: dict[str, str] = {}
    for kv in modification.split(","):
        if "=" in kv:
            key, _, value = kv.partition("=")
            if "+" not in key:
                raise ValueError(f"add/alter attribute format is wrong: {key}")
        else:
            key, value = kv, ""
            if "-" not in key:
                raise ValueError(f"delete attribute format is wrong: {key}")
        if key in changes:
            raise ValueError(f"key duplication: {key}")
        changes[key] = value
    result = dict(current or {})
    for key, value in changes.items():
        name = key[1:]
        if name != TOPIC_MESSAGE_TYPE_ATTRIBUTE:
            raise ValueError(f"unsupported key: {name}")
        if key.startswith("+"):
            if value not in TOPIC_MESSAGE_TYPES:
                raise ValueError(f"value is not in set: {sorted(TOPIC_MESSAGE_TYPES)}")
            result[name] = value
        else:
            if create:
                raise ValueError(f"only add attribute is supported while creating topic. key: {name}")
            result.pop(name, None)
    return result or None


_JAVA_INT = re.compile(r"[+-]?[0-9]{1,10}")


def topic_config_json(tc: TopicConfig, pretty: bool, browser: bool, indent: int) -> str:
    """fastjson text of a TopicConfig bean, as the generic bean writer makes it, in one
    join: a broker's table holds thousands, written on every registration and save. A topic
    with 5.x attributes (rare) takes the generic writer, which writes the map too."""
    if tc.attributes:
        return fastjson.generic_bean_text(tc, pretty, browser, indent)
    q = fastjson.quote
    fields = ['"order":true' if tc.order else '"order":false', f'"perm":{int(tc.perm)}',
              f'"readQueueNums":{int(tc.readQueueNums)}', f'"topicFilterType":{q(tc.topicFilterType.name, browser)}',
              f'"topicSysFlag":{int(tc.topicSysFlag)}', f'"writeQueueNums":{int(tc.writeQueueNums)}']
    if tc.topicName is not None:
        fields.insert(4, f'"topicName":{q(tc.topicName, browser)}')
    if not pretty:
        return "{" + ",".join(fields) + "}"
    inner = "\n" + "\t" * (indent + 1)
    return "{" + inner + ("," + inner).join(fields) + "\n" + "\t" * indent + "}"


fastjson.register_bean_writer(TopicConfig, topic_config_json)


def encode_topic_config_and_queue_mapping(tc: TopicConfig) -> bytes:
    """GET_TOPIC_CONFIG's body: 5.x's TopicConfigAndQueueMapping (a TopicConfig plus
    ``mappingDetail``) as ``JSONObject.toJSONString`` writes it (fastjson 1.2.83, rocketmq
    5.x AdminBrokerProcessor.getTopicConfig).

    Why not the TopicConfig bean writer: a 5.x TopicConfig always has ``attributes`` (it
    starts as an empty HashMap), so 5.x writes ``"attributes":{}`` where 4.9.8's bean has no
    such field. Order: fastjson's alphabetical getter order over both classes - attributes,
    mappingDetail, order, perm, readQueueNums, topicFilterType, topicName, topicSysFlag,
    writeQueueNums (the getters of remoting/.../statictopic/TopicConfigAndQueueMapping.java
    and common/.../TopicConfig.java, getTopicMessageType being @JSONField(serialize=false)).
    ``mappingDetail`` is the static-topic mapping, which rmqd never has: null, so left out,
    as 5.x leaves it out for every topic that is not static. The attribute map is written in
    Java HashMap order."""
    obj: dict[str, Any] = {
        "attributes": java_hashmap_order(tc.attributes or {}),
        "order": bool(tc.order),
        "perm": int(tc.perm),
        "readQueueNums": int(tc.readQueueNums),
        "topicFilterType": tc.topicFilterType.name,
        "topicName": tc.topicName,
        "topicSysFlag": int(tc.topicSysFlag),
        "writeQueueNums": int(tc.writeQueueNums),
    }
    return fastjson.dumps(obj).encode("utf-8", "replace")


class _BeanBody(Body):
    """A body written straight from its dataclasses by fastjson's bean writer (no tree of
    dicts first): the topic table bodies, thousands of TopicConfigs with a writer of their own."""

    def to_json(self, *, browser_compatible: bool = False, sort_maps: bool = False) -> str:
        if sort_maps:
            return Body.to_json(self, browser_compatible=browser_compatible, sort_maps=True)
        return fastjson.dumps(self, browser_compatible=browser_compatible)


@dataclass(slots=True)
class TopicConfigSerializeWrapper(_BeanBody):
    topicConfigTable: dict[str, TopicConfig] = field(default_factory=dict)
    dataVersion: DataVersion = field(default_factory=DataVersion)

    @classmethod
    def from_json_obj(cls, obj: Any) -> "TopicConfigSerializeWrapper":
        obj = _obj(obj, "TopicConfigSerializeWrapper")
        table = {str(k): TopicConfig.from_json_obj(v)
                 for k, v in _obj(obj.get("topicConfigTable"), "topicConfigTable").items()}
        return cls(topicConfigTable=table, dataVersion=DataVersion.from_json_obj(obj.get("dataVersion")))


_INT32 = struct.Struct(">i")


@dataclass(slots=True)
class RegisterBrokerBody(_BeanBody):
    topicConfigSerializeWrapper: TopicConfigSerializeWrapper = field(default_factory=TopicConfigSerializeWrapper)
    filterServerList: list[str] = field(default_factory=list)

    @classmethod
    def from_json_obj(cls, obj: Any) -> "RegisterBrokerBody":
        obj = _obj(obj, "RegisterBrokerBody")
        return cls(topicConfigSerializeWrapper=TopicConfigSerializeWrapper.from_json_obj(
                       obj.get("topicConfigSerializeWrapper")),
                   filterServerList=[str(s) for s in _list(obj.get("filterServerList"), "filterServerList")])

    # The compressed form (REGISTER_BROKER with compressed=true; a 4.9 broker sends it when
    # broker.conf says compressedRegister=true, 4.9.7 RegisterBrokerBody.encode(true)): a zlib
    # stream (Deflater BEST_COMPRESSION) of int32 length + DataVersion JSON, int32 count, count
    # x (int32 length + TopicConfig.encode() text, see TopicConfig.encode_compact), int32
    # length + filter server list JSON; all int32 big-endian, all text UTF-8.
    def encode_compressed(self) -> bytes:
        wrapper = self.topicConfigSerializeWrapper
        parts = []

        def put(chunk: bytes) -> None:
            parts.append(_INT32.pack(len(chunk)))
            parts.append(chunk)

        put(wrapper.dataVersion.encode())
        parts.append(_INT32.pack(len(wrapper.topicConfigTable)))
        # in the order of the ConcurrentHashMap 4.9 copies the table into (cloneTopicConfigTable)
        for cfg in java_concurrent_hashmap_order(wrapper.topicConfigTable, None).values():
            put(cfg.encode_compact().encode("utf-8", "replace"))
        put(fastjson.dumps(list(self.filterServerList)).encode("utf-8", "replace"))
        return zlib.compress(b"".join(parts), 9)

    @classmethod
    def decode_register(cls, data: bytes | memoryview | None, compressed: bool) -> "RegisterBrokerBody":
        if not compressed:
            return cls.decode(data)
        try:
            inflater = zlib.decompressobj()
            raw = inflater.decompress(bytes(data or b""), _MAX_REGISTER_BODY)
            if inflater.unconsumed_tail:  # a deflate bomb, not a broker's topic table
                raise WireError(f"RegisterBrokerBody: inflates to more than {_MAX_REGISTER_BODY} bytes")
            if not inflater.eof:
                raise zlib.error("Error -5 while decompressing data: incomplete or truncated stream")
        except zlib.error as exc:
            why = str(exc).rpartition(": ")[2]  # zlib's "Error -3 while decompressing data: <why>"
            raise WireError(f"RegisterBrokerBody: bad deflate stream ({why})") from None
        pos = 0

        def int32() -> int:
            nonlocal pos
            if pos + 4 > len(raw):
                raise WireError(f"RegisterBrokerBody: truncated at byte {pos}")
            (n,) = _INT32.unpack_from(raw, pos)
            pos += 4
            return n

        def take() -> bytes:
            nonlocal pos
            n = int32()
            if n < 0 or pos + n > len(raw):
                raise WireError(f"RegisterBrokerBody: bad length {n} at byte {pos - 4}")
            pos += n
            return raw[pos - n:pos]

        def text(chunk: bytes) -> str:
            try:
                return chunk.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise WireError(f"RegisterBrokerBody: text is not UTF-8 (byte {exc.start})") from None

        body = cls()
        body.topicConfigSerializeWrapper.dataVersion = DataVersion.decode(take())
        count = int32()
        if count < 0 or count > (len(raw) - pos) // 4:
            raise WireError(f"RegisterBrokerBody: bad topic count {count}")
        table = body.topicConfigSerializeWrapper.topicConfigTable
        for _ in range(count):
            cfg = TopicConfig.decode_compact(text(take()))
            table[cfg.topicName or ""] = cfg
        servers = text(take())
        try:
            body.filterServerList = [str(s) for s in _list(fastjson.loads(servers), "filterServerList")]
        except WireError:  # 4.9 logs the text and goes on with no filter servers
            body.filterServerList = []
        return body


@dataclass(slots=True)
class QueueData(Body):
    brokerName: str = ""
    readQueueNums: int = 0
    writeQueueNums: int = 0
    perm: int = 0
    topicSysFlag: int = 0

    @classmethod
    def from_json_obj(cls, obj: Any) -> "QueueData":
        obj = _obj(obj, "QueueData")
        return cls(brokerName=as_str(obj.get("brokerName"), ""), readQueueNums=as_int(obj.get("readQueueNums")),
                   writeQueueNums=as_int(obj.get("writeQueueNums")), perm=as_int(obj.get("perm")),
                   topicSysFlag=as_int(obj.get("topicSysFlag")))


@dataclass(slots=True)
class BrokerData(Body):
    cluster: str = ""
    brokerName: str = ""
    brokerAddrs: dict[int, str] = field(default_factory=dict)

    @classmethod
    def from_json_obj(cls, obj: Any) -> "BrokerData":
        obj = _obj(obj, "BrokerData")
        addrs = {as_int(k): str(v) for k, v in _obj(obj.get("brokerAddrs"), "brokerAddrs").items()}
        return cls(cluster=as_str(obj.get("cluster"), ""), brokerName=as_str(obj.get("brokerName"), ""),
                   brokerAddrs=addrs)

    def to_json_obj(self) -> Any:
        # HashMap<Long, String> iterates small non-negative ids in ascending order
        return {"brokerAddrs": dict(sorted(self.brokerAddrs.items())), "brokerName": self.brokerName,
                "cluster": self.cluster}

    def clone(self) -> "BrokerData":
        return BrokerData(self.cluster, self.brokerName, dict(self.brokerAddrs))


@dataclass(slots=True)
class TopicRouteData(Body):
    orderTopicConf: str | None = None
    queueDatas: list[QueueData] = field(default_factory=list)
    brokerDatas: list[BrokerData] = field(default_factory=list)
    filterServerTable: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def from_json_obj(cls, obj: Any) -> "TopicRouteData":
        obj = _obj(obj, "TopicRouteData")
        return cls(orderTopicConf=as_str(obj.get("orderTopicConf")),
                   queueDatas=[QueueData.from_json_obj(q) for q in _list(obj.get("queueDatas"), "queueDatas")],
                   brokerDatas=[BrokerData.from_json_obj(b) for b in _list(obj.get("brokerDatas"), "brokerDatas")],
                   filterServerTable={str(k): [str(x) for x in _list(v, "filterServerTable")]
                                      for k, v in _obj(obj.get("filterServerTable"), "filterServerTable").items()})

    def encode_for_version(self, version: int, accept_standard_json_only: bool = False) -> bytes:
        """The body GET_ROUTEINFO_BY_TOPIC sends: standard JSON (quoted keys, sorted maps)
        for clients >= V4_9_4 or those asking for it, fastjson's default otherwise."""
        if version >= V4_9_4 or accept_standard_json_only:
            return self.encode(browser_compatible=True, sort_maps=True)
        return self.encode()


V4_9_4 = 401  # MQVersion.Version.V4_9_4.ordinal()


@dataclass(slots=True)
class ClusterInfo(Body):
    brokerAddrTable: dict[str, BrokerData] = field(default_factory=dict)
    clusterAddrTable: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def from_json_obj(cls, obj: Any) -> "ClusterInfo":
        obj = _obj(obj, "ClusterInfo")
        return cls(brokerAddrTable={str(k): BrokerData.from_json_obj(v)
                                    for k, v in _obj(obj.get("brokerAddrTable"), "brokerAddrTable").items()},
                   clusterAddrTable={str(k): [str(x) for x in _list(v, "clusterAddrTable")]
                                     for k, v in _obj(obj.get("clusterAddrTable"), "clusterAddrTable").items()})


@dataclass(slots=True)
class TopicList(Body):
    topicList: list[str] = field(default_factory=list)
    brokerAddr: str | None = None

    @classmethod
    def from_json_obj(cls, obj: Any) -> "TopicList":
        obj = _obj(obj, "TopicList")
        return cls(topicList=[str(t) for t in _list(obj.get("topicList"), "topicList")],
                   brokerAddr=as_str(obj.get("brokerAddr")))


@dataclass(slots=True)
class KVTable(Body):
    table: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_json_obj(cls, obj: Any) -> "KVTable":
        obj = _obj(obj, "KVTable")
        return cls(table={str(k): as_str(v, "") for k, v in _obj(obj.get("table"), "table").items()})


@dataclass(slots=True)
class RegisterBrokerResult:
    """Not a body: what registration returns (the ha/master addresses for a slave + KV table)."""
    haServerAddr: str | None = None
    masterAddr: str | None = None
    kvTable: KVTable | None = None


# --------------------------------------------------------------------------------------------
# client bodies (heartbeat, rebalance, admin)


@dataclass(slots=True, eq=False)
class SubscriptionData(Body):
    classFilterMode: bool = False
    topic: str = ""
    subString: str = "*"
    tagsSet: list[str] = field(default_factory=list)
    codeSet: list[int] = field(default_factory=list)
    subVersion: int = 0
    expressionType: str = "TAG"
    filterClassSource: str | None = field(default=None, metadata={"transient": True})

    @classmethod
    def from_json_obj(cls, obj: Any) -> "SubscriptionData":
        obj = _obj(obj, "SubscriptionData")
        return cls(classFilterMode=as_bool(obj.get("classFilterMode")),
                   topic=as_str(obj.get("topic"), ""),
                   subString=as_str(obj.get("subString"), "*"),
                   tagsSet=[str(t) for t in _list(obj.get("tagsSet"), "tagsSet")],
                   codeSet=[as_int(c) for c in _list(obj.get("codeSet"), "codeSet")],
                   subVersion=as_int(obj.get("subVersion")),
                   expressionType=as_str(obj.get("expressionType"), "TAG") or "TAG")

    def _key(self) -> tuple:
        # Java's SubscriptionData.equals ignores nothing but filterClassSource; subVersion counts
        return (self.classFilterMode, self.topic, self.subString, frozenset(self.tagsSet),
                frozenset(self.codeSet), self.subVersion, self.expressionType)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SubscriptionData) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


@dataclass(slots=True)
class ProducerData(Body):
    groupName: str = ""

    @classmethod
    def from_json_obj(cls, obj: Any) -> "ProducerData":
        return cls(groupName=as_str(_obj(obj, "ProducerData").get("groupName"), ""))


@dataclass(slots=True)
class ConsumerData(Body):
    groupName: str = ""
    consumeType: ConsumeType | None = None
    messageModel: MessageModel | None = None
    consumeFromWhere: ConsumeFromWhere | None = None
    subscriptionDataSet: list[SubscriptionData] = field(default_factory=list)
    unitMode: bool = False

    @classmethod
    def from_json_obj(cls, obj: Any) -> "ConsumerData":
        obj = _obj(obj, "ConsumerData")
        return cls(groupName=as_str(obj.get("groupName"), ""),
                   consumeType=as_enum(obj.get("consumeType"), ConsumeType),
                   messageModel=as_enum(obj.get("messageModel"), MessageModel),
                   consumeFromWhere=as_enum(obj.get("consumeFromWhere"), ConsumeFromWhere),
                   subscriptionDataSet=[SubscriptionData.from_json_obj(s) for s in
                                        _list(obj.get("subscriptionDataSet"), "subscriptionDataSet")],
                   unitMode=as_bool(obj.get("unitMode")))


@dataclass(slots=True)
class HeartbeatData(Body):
    clientID: str = ""
    producerDataSet: list[ProducerData] = field(default_factory=list)
    consumerDataSet: list[ConsumerData] = field(default_factory=list)

    @classmethod
    def from_json_obj(cls, obj: Any) -> "HeartbeatData":
        obj = _obj(obj, "HeartbeatData")
        return cls(clientID=as_str(obj.get("clientID"), ""),
                   producerDataSet=[ProducerData.from_json_obj(p) for p in
                                    _list(obj.get("producerDataSet"), "producerDataSet")],
                   consumerDataSet=[ConsumerData.from_json_obj(c) for c in
                                    _list(obj.get("consumerDataSet"), "consumerDataSet")])


@dataclass(slots=True, frozen=True)
class MessageQueue(Body):
    topic: str = ""
    brokerName: str = ""
    queueId: int = 0

    @classmethod
    def from_json_obj(cls, obj: Any) -> "MessageQueue":
        obj = _obj(obj, "MessageQueue")
        return cls(topic=as_str(obj.get("topic"), ""), brokerName=as_str(obj.get("brokerName"), ""),
                   queueId=as_int(obj.get("queueId")))


def _mq_set(value: Any, what: str) -> list[MessageQueue]:
    return [MessageQueue.from_json_obj(m) for m in _list(value, what)]


@dataclass(slots=True)
class ConsumerListByGroupResponseBody(Body):
    consumerIdList: list[str] = field(default_factory=list)

    @classmethod
    def from_json_obj(cls, obj: Any) -> "ConsumerListByGroupResponseBody":
        return cls(consumerIdList=[str(c) for c in _list(_obj(obj, "body").get("consumerIdList"), "consumerIdList")])


@dataclass(slots=True)
class LockBatchRequestBody(Body):
    consumerGroup: str = ""
    clientId: str = ""
    mqSet: list[MessageQueue] = field(default_factory=list)

    @classmethod
    def from_json_obj(cls, obj: Any) -> "LockBatchRequestBody":
        obj = _obj(obj, cls.__name__)
        return cls(consumerGroup=as_str(obj.get("consumerGroup"), ""), clientId=as_str(obj.get("clientId"), ""),
                   mqSet=_mq_set(obj.get("mqSet"), "mqSet"))


@dataclass(slots=True)
class UnlockBatchRequestBody(LockBatchRequestBody):
    """Java's UnlockBatchRequestBody has LockBatchRequestBody's fields (no onlyThisBroker in 4.9)."""


@dataclass(slots=True)
class LockBatchResponseBody(Body):
    lockOKMQSet: list[MessageQueue] = field(default_factory=list)

    @classmethod
    def from_json_obj(cls, obj: Any) -> "LockBatchResponseBody":
        return cls(lockOKMQSet=_mq_set(_obj(obj, "LockBatchResponseBody").get("lockOKMQSet"), "lockOKMQSet"))


@dataclass(slots=True)
class CheckClientRequestBody(Body):
    clientId: str = ""
    group: str = ""
    subscriptionData: SubscriptionData | None = None

    @classmethod
    def from_json_obj(cls, obj: Any) -> "CheckClientRequestBody":
        obj = _obj(obj, "CheckClientRequestBody")
        sub = obj.get("subscriptionData")
        return cls(clientId=as_str(obj.get("clientId"), ""), group=as_str(obj.get("group"), ""),
                   subscriptionData=SubscriptionData.from_json_obj(sub) if sub is not None else None)


@dataclass(slots=True)
class Connection(Body):
    clientId: str = ""
    clientAddr: str = ""
    language: LanguageCode = LanguageCode.JAVA
    version: int = 0

    @classmethod
    def from_json_obj(cls, obj: Any) -> "Connection":
        obj = _obj(obj, "Connection")
        return cls(clientId=as_str(obj.get("clientId"), ""), clientAddr=as_str(obj.get("clientAddr"), ""),
                   language=as_enum(obj.get("language"), LanguageCode, LanguageCode.JAVA),
                   version=as_int(obj.get("version")))


@dataclass(slots=True)
class ConsumerConnection(Body):
    connectionSet: list[Connection] = field(default_factory=list)
    subscriptionTable: dict[str, SubscriptionData] = field(default_factory=dict)
    consumeType: ConsumeType | None = None
    messageModel: MessageModel | None = None
    consumeFromWhere: ConsumeFromWhere | None = None

    @classmethod
    def from_json_obj(cls, obj: Any) -> "ConsumerConnection":
        obj = _obj(obj, "ConsumerConnection")
        return cls(connectionSet=[Connection.from_json_obj(c) for c in _list(obj.get("connectionSet"), "connectionSet")],
                   subscriptionTable={str(k): SubscriptionData.from_json_obj(v) for k, v in
                                      _obj(obj.get("subscriptionTable"), "subscriptionTable").items()},
                   consumeType=as_enum(obj.get("consumeType"), ConsumeType),
                   messageModel=as_enum(obj.get("messageModel"), MessageModel),
                   consumeFromWhere=as_enum(obj.get("consumeFromWhere"), ConsumeFromWhere))


@dataclass(slots=True)
class OffsetWrapper(Body):
    brokerOffset: int = 0
    consumerOffset: int = 0
    lastTimestamp: int = 0


@dataclass(slots=True)
class TopicOffset(Body):
    minOffset: int = 0
    maxOffset: int = 0
    lastUpdateTimestamp: int = 0


@dataclass(slots=True)
class ConsumeStats(Body):
    """offsetTable is keyed by MessageQueue objects, which fastjson writes as JSON objects."""
    _OBJECT_KEYS = True
    offsetTable: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consumeTps: float = 0.0

    def to_json(self, *, browser_compatible: bool = False, sort_maps: bool = False) -> str:
        return ('{"consumeTps":' + fastjson.dumps(float(self.consumeTps)) + ',"offsetTable":'
                + _dumps_object_keyed(self.offsetTable, to_json_obj) + "}")

    @classmethod
    def from_json_obj(cls, obj: Any) -> "ConsumeStats":
        obj = _obj(obj, "ConsumeStats")
        table = {}
        for k, v in _object_keyed_items(obj.get("offsetTable")):
            v = _obj(v, "OffsetWrapper")
            table[MessageQueue.from_json_obj(k)] = OffsetWrapper(
                as_int(v.get("brokerOffset")), as_int(v.get("consumerOffset")), as_int(v.get("lastTimestamp")))
        return cls(offsetTable=table, consumeTps=as_float(obj.get("consumeTps")))


@dataclass(slots=True)
class ResetOffsetBody(Body):
    """RESET_CONSUMER_CLIENT_OFFSET's body and INVOKE_BROKER_TO_RESET_OFFSET's answer:
    offsetTable keyed by MessageQueue objects (fastjson object keys)."""
    _OBJECT_KEYS = True
    offsetTable: dict[MessageQueue, int] = field(default_factory=dict)

    def to_json(self, *, browser_compatible: bool = False, sort_maps: bool = False) -> str:
        return '{"offsetTable":' + _dumps_object_keyed(self.offsetTable, int) + "}"

    @classmethod
    def from_json_obj(cls, obj: Any) -> "ResetOffsetBody":
        obj = _obj(obj, "ResetOffsetBody")
        return cls(offsetTable={MessageQueue.from_json_obj(k): as_int(v)
                                for k, v in _object_keyed_items(obj.get("offsetTable"))})


@dataclass(slots=True)
class ResetOffsetBodyForC(Body):
    """The same for C++ consumers: a list of {brokerName, offset, queueId, topic}."""
    offsetTable: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class TopicStatsTable(Body):
    _OBJECT_KEYS = True
    offsetTable: dict[MessageQueue, TopicOffset] = field(default_factory=dict)

    def to_json(self, *, browser_compatible: bool = False, sort_maps: bool = False) -> str:
        return '{"offsetTable":' + _dumps_object_keyed(self.offsetTable, to_json_obj) + "}"

    @classmethod
    def from_json_obj(cls, obj: Any) -> "TopicStatsTable":
        obj = _obj(obj, "TopicStatsTable")
        table = {}
        for k, v in _object_keyed_items(obj.get("offsetTable")):
            v = _obj(v, "TopicOffset")
            table[MessageQueue.from_json_obj(k)] = TopicOffset(
                as_int(v.get("minOffset")), as_int(v.get("maxOffset")), as_int(v.get("lastUpdateTimestamp")))
        return cls(offsetTable=table)


@dataclass(slots=True)
class BrokerStatsItem(Body):
    """One window of a VIEW_BROKER_STATS_DATA answer."""
    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0

    @classmethod
    def from_json_obj(cls, obj: Any) -> "BrokerStatsItem":
        obj = _obj(obj, "BrokerStatsItem")
        return cls(sum=as_int(obj.get("sum")), tps=as_float(obj.get("tps")), avgpt=as_float(obj.get("avgpt")))


@dataclass(slots=True)
class BrokerStatsData(Body):
    """VIEW_BROKER_STATS_DATA's body: the minute, hour and day windows of one stats item."""
    statsMinute: BrokerStatsItem | None = None
    statsHour: BrokerStatsItem | None = None
    statsDay: BrokerStatsItem | None = None

    @classmethod
    def from_json_obj(cls, obj: Any) -> "BrokerStatsData":
        obj = _obj(obj, "BrokerStatsData")
        return cls(*(None if obj.get(k) is None else BrokerStatsItem.from_json_obj(obj.get(k))
                     for k in ("statsMinute", "statsHour", "statsDay")))


@dataclass(slots=True)
class ConsumeStatsList(Body):
    """GET_BROKER_CONSUME_STATS's body: per subscription group, the ConsumeStats of each topic
    it has offsets for (a list of one-entry maps, as the Java class keeps them)."""
    _OBJECT_KEYS = True
    consumeStatsList: list[dict[str, list[ConsumeStats]]] = field(default_factory=list)
    brokerAddr: str | None = None
    totalDiff: int = 0

    def to_json(self, *, browser_compatible: bool = False, sort_maps: bool = False) -> str:
        groups = ",".join("{" + ",".join(fastjson.dumps(g) + ":[" + ",".join(cs.to_json() for cs in stats) + "]"
                                         for g, stats in entry.items()) + "}" for entry in self.consumeStatsList)
        head = "" if self.brokerAddr is None else '"brokerAddr":' + fastjson.dumps(self.brokerAddr) + ","
        return "{" + head + '"consumeStatsList":[' + groups + '],"totalDiff":' + str(int(self.totalDiff)) + "}"

    @classmethod
    def from_json_obj(cls, obj: Any) -> "ConsumeStatsList":
        obj = _obj(obj, "ConsumeStatsList")
        entries = []
        for entry in _list(obj.get("consumeStatsList"), "consumeStatsList"):
            entries.append({str(g): [ConsumeStats.from_json_obj(cs) for cs in _list(stats, "consumeStats")]
                            for g, stats in _obj(entry, "consumeStatsList entry").items()})
        return cls(consumeStatsList=entries, brokerAddr=as_str(obj.get("brokerAddr")),
                   totalDiff=as_int(obj.get("totalDiff")))


@dataclass(slots=True)
class ProducerInfo(Body):
    clientId: str = ""
    remoteIP: str = ""
    language: LanguageCode = LanguageCode.JAVA
    version: int = 0
    lastUpdateTimestamp: int = 0

    @classmethod
    def from_json_obj(cls, obj: Any) -> "ProducerInfo":
        obj = _obj(obj, "ProducerInfo")
        return cls(clientId=as_str(obj.get("clientId"), ""), remoteIP=as_str(obj.get("remoteIP"), ""),
                   language=as_enum(obj.get("language"), LanguageCode, LanguageCode.OTHER),
                   version=as_int(obj.get("version")), lastUpdateTimestamp=as_int(obj.get("lastUpdateTimestamp")))


@dataclass(slots=True)
class ProducerTableInfo(Body):
    """GET_ALL_PRODUCER_INFO's body: the producer connections of every group."""
    data: dict[str, list[ProducerInfo]] = field(default_factory=dict)

    @classmethod
    def from_json_obj(cls, obj: Any) -> "ProducerTableInfo":
        obj = _obj(obj, "ProducerTableInfo")
        return cls(data={str(g): [ProducerInfo.from_json_obj(p) for p in _list(v, "producers")]
                         for g, v in _obj(obj.get("data"), "data").items()})


@dataclass(slots=True)
class ConsumeQueueData(Body):
    physicOffset: int = 0
    physicSize: int = 0
    tagsCode: int = 0
    extendDataJson: str | None = None
    bitMap: str | None = None
    eval: bool = False
    msg: str | None = None

    @classmethod
    def from_json_obj(cls, obj: Any) -> "ConsumeQueueData":
        obj = _obj(obj, "ConsumeQueueData")
        return cls(physicOffset=as_int(obj.get("physicOffset")), physicSize=as_int(obj.get("physicSize")),
                   tagsCode=as_int(obj.get("tagsCode")), extendDataJson=as_str(obj.get("extendDataJson")),
                   bitMap=as_str(obj.get("bitMap")), eval=as_bool(obj.get("eval")), msg=as_str(obj.get("msg")))


@dataclass(slots=True)
class QueryConsumeQueueResponseBody(Body):
    """QUERY_CONSUME_QUEUE's body (mqadmin queryCq)."""
    subscriptionData: SubscriptionData | None = None
    filterData: str | None = None
    queueData: list[ConsumeQueueData] | None = None
    maxQueueIndex: int = 0
    minQueueIndex: int = 0

    @classmethod
    def from_json_obj(cls, obj: Any) -> "QueryConsumeQueueResponseBody":
        obj = _obj(obj, "QueryConsumeQueueResponseBody")
        sub = obj.get("subscriptionData")
        data = obj.get("queueData")
        return cls(subscriptionData=None if sub is None else SubscriptionData.from_json_obj(sub),
                   filterData=as_str(obj.get("filterData")),
                   queueData=None if data is None else [ConsumeQueueData.from_json_obj(d)
                                                        for d in _list(data, "queueData")],
                   maxQueueIndex=as_int(obj.get("maxQueueIndex")), minQueueIndex=as_int(obj.get("minQueueIndex")))


def _object_keyed_items(value: Any) -> Iterable[tuple[Any, Any]]:
    """Entries of a map whose keys were objects (turned into JSON text by _quote_object_keys)."""
    if value is None:
        return []
    if isinstance(value, dict):
        return [(fastjson.loads(k) if isinstance(k, str) and k.startswith("{") else k, v) for k, v in value.items()]
    raise WireError(f"offsetTable: expected an object, got {type(value).__name__}")


def _quote_object_keys(text: str) -> str:
    """fastjson writes HashMap<MessageQueue, X> with object keys (`{{"topic":..}:{..}}`), which
    no JSON parser takes; rewrite each object key as a string holding its JSON text."""
    out: list[str] = []
    stack: list[str] = []  # "{" or "["
    expect_key = False
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
            expect_key = False
            continue
        if ch == "{" and expect_key:
            depth, j = 0, i
            while j < n:
                c = text[j]
                if c == '"':
                    j += 1
                    while j < n and text[j] != '"':
                        j += 2 if text[j] == "\\" else 1
                elif c == "{":
                    depth += 1
                elif c == "}":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            out.append(fastjson.dumps(text[i:j + 1]))
            i = j + 1
            expect_key = False
            continue
        if ch in "{[":
            stack.append(ch)
            expect_key = ch == "{"
        elif ch in "}]":
            if stack:
                stack.pop()
            expect_key = False
        elif ch == ",":
            expect_key = bool(stack) and stack[-1] == "{"
        elif ch == ":":
            expect_key = False
        out.append(ch)
        i += 1
    return "".join(out)


# --------------------------------------------------------------------------------------------
# java.util.Properties text (UPDATE_*_CONFIG / GET_*_CONFIG bodies, broker.conf)


def parse_properties(text: str) -> dict[str, str]:
    """Properties text -> dict: `#`/`!` comments, `=`/`:`/blank separators, `\\` line
    continuations, the usual escapes (\\t \\n \\uXXXX, escaped separators)."""
    props: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            logical += line[:-1]
            continue
        logical += line
        key, value = _split_property(logical)
        props[key] = value
        logical = ""
    if logical:
        key, value = _split_property(logical)
        props[key] = value
    return props


_PROP_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and i + 6 <= len(text):
                try:
                    out.append(chr(int(text[i + 2:i + 6], 16)))
                    i += 6
                    continue
                except ValueError:
                    pass
            out.append(_PROP_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _split_property(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch.isspace():
            break
        i += 1
    key, rest = line[:i], line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(key), _unescape(rest)


def format_properties(props: dict[str, Any]) -> str:
    """key=value lines, as RocketMQ's MixAll.properties2String writes them."""
    lines = []
    for key, value in props.items():
        if value is None:
            continue
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        lines.append(f"{key}={text}\n")
    return "".join(lines)


__all__ = [
    "ResetOffsetBody", "ResetOffsetBodyForC",
    "Body", "BrokerData", "BrokerStatsData", "BrokerStatsItem", "CheckClientRequestBody", "ConsumeQueueData",
    "ConsumeStatsList", "ProducerInfo", "ProducerTableInfo", "QueryConsumeQueueResponseBody", "ClusterInfo",
    "Connection", "ConsumeFromWhere", "ConsumeStats",
    "ConsumeType", "ConsumerConnection", "ConsumerData", "ConsumerListByGroupResponseBody", "DataVersion",
    "HeartbeatData", "KVTable", "LockBatchRequestBody", "LockBatchResponseBody", "MessageModel",
    "MessageQueue", "OffsetWrapper", "PERM_INHERIT", "PERM_PRIORITY", "PERM_READ", "PERM_WRITE", "ProducerData",
    "QueueData", "RegisterBrokerBody", "RegisterBrokerResult", "SubscriptionData", "TopicConfig",
    "TopicConfigSerializeWrapper", "TopicFilterType", "TopicList", "TopicOffset", "TopicRouteData",
    "TopicStatsTable", "UnlockBatchRequestBody", "V4_9_4", "as_bool", "as_enum", "as_int", "as_str",
    "encode_topic_config_and_queue_mapping", "format_properties",
    "parse_properties", "to_json_obj",
]
