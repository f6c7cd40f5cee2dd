"""wire/headers.py: typed custom headers converted as Java's CommandCustomHeader does."""
from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings, strategies as st

import rmqd.wire.headers as H
from rmqd.wire.codes import RequestCode, SerializeType
from rmqd.wire.errors import HeaderFieldError, WireError

HEADER_CLASSES = sorted(
    (c for c in vars(H).values()
     if isinstance(c, type) and issubclass(c, H.CommandHeader) and dataclasses.is_dataclass(c)
     and c is not H.RpcRequestHeader),
    key=lambda c: c.__name__,
)


def _kind(f: dataclasses.Field) -> str:
    return f.metadata["kind"]


_VALUES = {
    H.STRING: st.text(max_size=20),
    H.INT: st.integers(-(2**31), 2**31 - 1),
    H.LONG: st.integers(-(2**63), 2**63 - 1),
    H.BOOL: st.booleans(),
    H.DOUBLE: st.floats(allow_nan=False, allow_infinity=False),
}


def _instances(cls: type) -> st.SearchStrategy:
    kwargs = {}
    for f in dataclasses.fields(cls):
        value = _VALUES[_kind(f)]
        if f.default is None and not f.metadata["required"]:
            value = st.none() | value
        kwargs[f.name] = value
    return st.builds(cls, **kwargs)


def test_every_header_of_4_9_8_is_there() -> None:
    of_4_9_8 = [c for c in HEADER_CLASSES if "JAVA_CLASS" not in c.__dict__]  # 5.x ones name their package
    assert len(of_4_9_8) == 79  # 78 classes under protocol/header (+namesrv, filtersrv) + V2
    names = {c.__name__ for c in HEADER_CLASSES}
    assert {"PopMessageRequestHeader", "PopMessageResponseHeader", "AckMessageRequestHeader",
            "ChangeInvisibleTimeRequestHeader", "ChangeInvisibleTimeResponseHeader"} <= names
    for expected in [
        "SendMessageRequestHeader", "SendMessageRequestHeaderV2", "SendMessageResponseHeader",
        "PullMessageRequestHeader", "PullMessageResponseHeader", "QueryConsumerOffsetRequestHeader",
        "QueryConsumerOffsetResponseHeader", "UpdateConsumerOffsetRequestHeader", "GetMaxOffsetRequestHeader",
        "GetMaxOffsetResponseHeader", "GetMinOffsetRequestHeader", "GetMinOffsetResponseHeader",
        "GetEarliestMsgStoretimeRequestHeader", "GetEarliestMsgStoretimeResponseHeader",
        "SearchOffsetRequestHeader", "SearchOffsetResponseHeader", "ViewMessageRequestHeader",
        "QueryMessageRequestHeader", "QueryMessageResponseHeader", "ConsumerSendMsgBackRequestHeader",
        "EndTransactionRequestHeader", "CheckTransactionStateRequestHeader", "GetConsumerListByGroupRequestHeader",
        "NotifyConsumerIdsChangedRequestHeader", "UnregisterClientRequestHeader", "RegisterBrokerRequestHeader",
        "RegisterBrokerResponseHeader", "UnRegisterBrokerRequestHeader", "GetRouteInfoRequestHeader",
        "PutKVConfigRequestHeader", "GetKVConfigRequestHeader", "GetKVConfigResponseHeader",
        "DeleteKVConfigRequestHeader", "CreateTopicRequestHeader", "DeleteTopicRequestHeader",
        "GetTopicStatsInfoRequestHeader", "GetConsumeStatsRequestHeader", "GetConsumerConnectionListRequestHeader",
        "QueryDataVersionRequestHeader", "QueryDataVersionResponseHeader",
    ]:
        assert expected in names


@pytest.mark.parametrize(
    "cls,java_fields",
    [
        (H.PullMessageRequestHeader, "bname consumerGroup topic queueId queueOffset maxMsgNums sysFlag commitOffset "
                                     "suspendTimeoutMillis subscription subVersion expressionType"),
        (H.SendMessageRequestHeader, "bname producerGroup topic defaultTopic defaultTopicQueueNums queueId sysFlag "
                                     "bornTimestamp flag properties reconsumeTimes unitMode batch maxReconsumeTimes"),
        (H.SendMessageRequestHeaderV2, "bname a b c d e f g h i j k l m n"),
        (H.SendMessageResponseHeader, "msgId queueId queueOffset transactionId"),
        (H.PullMessageResponseHeader, "suggestWhichBrokerId nextBeginOffset minOffset maxOffset"),
        (H.EndTransactionRequestHeader, "bname producerGroup tranStateTableOffset commitLogOffset commitOrRollback "
                                        "fromTransactionCheck msgId transactionId"),
        (H.RegisterBrokerRequestHeader, "brokerName brokerAddr clusterName haServerAddr brokerId compressed bodyCrc32"),
        (H.GetRouteInfoRequestHeader, "topic acceptStandardJsonOnly"),
        (H.UnregisterClientRequestHeader, "clientID producerGroup consumerGroup"),
    ],
)
def test_field_names_are_the_java_ones(cls: type, java_fields: str) -> None:
    assert [f.name for f in dataclasses.fields(cls)] == java_fields.split()


@pytest.mark.parametrize("cls", HEADER_CLASSES, ids=lambda c: c.__name__)
def test_round_trip_through_extfields(cls: type) -> None:
    @settings(max_examples=25, deadline=None)
    @given(_instances(cls))
    def check(header: object) -> None:
        ext = header.to_ext()
        assert all(type(k) is str and type(v) is str for k, v in ext.items())
        assert cls.from_ext(ext) == header
        binary = header.to_ext(serialize_type=SerializeType.ROCKETMQ)
        if cls.FAST_CODES:
            assert list(binary) == [k for k in cls.FAST_CODES if k in ext]
        else:
            assert binary == ext

    check()


@pytest.mark.parametrize("cls", HEADER_CLASSES, ids=lambda c: c.__name__)
def test_missing_required_field_names_it(cls: type) -> None:
    full = {f.name: {"String": "x", "Boolean": "true"}.get(_kind(f), "1") for f in dataclasses.fields(cls)}
    cls.from_ext(full)
    for f in dataclasses.fields(cls):
        if not f.metadata["required"]:
            continue
        partial = {k: v for k, v in full.items() if k != f.name}
        with pytest.raises(HeaderFieldError) as info:
            cls.from_ext(partial)
        assert info.value.field == f.name and f.name in str(info.value) and cls.__name__ in str(info.value)
        if _kind(f) in (H.INT, H.LONG):
            with pytest.raises(HeaderFieldError, match=f"{f.name}.*not an? (Integer|Long)"):
                cls.from_ext({**full, f.name: "12x"})


def test_no_extfields_at_all() -> None:
    assert H.GetConsumerListByGroupResponseHeader.from_ext(None) == H.GetConsumerListByGroupResponseHeader()
    with pytest.raises(HeaderFieldError, match="topic"):
        H.GetRouteInfoRequestHeader.from_ext(None)
    with pytest.raises(WireError):
        H.decode_request_header(RequestCode.PULL_MESSAGE, {})
    assert H.decode_request_header(RequestCode.HEART_BEAT, {"x": "1"}) is None


def test_java_number_and_boolean_parsing() -> None:
    ext = {"topic": "T", "queueId": "+7"}
    assert H.GetMaxOffsetRequestHeader.from_ext(ext).queueId == 7
    assert H.GetMaxOffsetRequestHeader.from_ext({"topic": "T", "queueId": "-0"}).queueId == 0
    assert H.GetMaxOffsetRequestHeader.from_ext({"topic": "T", "queueId": "007"}).queueId == 7
    for bad in [" 7", "7 ", "", "1_000", "2147483648", "-2147483649", "0x10", "1.0", "²"]:
        with pytest.raises(HeaderFieldError, match="queueId"):
            H.GetMaxOffsetRequestHeader.from_ext({"topic": "T", "queueId": bad})
    assert H.GetMaxOffsetResponseHeader.from_ext({"offset": "9223372036854775807"}).offset == 2**63 - 1
    with pytest.raises(HeaderFieldError, match="Long"):
        H.GetMaxOffsetResponseHeader.from_ext({"offset": "9223372036854775808"})
    base = {"a": "g", "b": "t", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1", "h": "0"}
    # Boolean.parseBoolean: a C++ client's "1" is false, any case of "true" is true
    assert H.SendMessageRequestHeaderV2.from_ext({**base, "m": "1"}).m is False
    assert H.SendMessageRequestHeaderV2.from_ext({**base, "m": "TRUE"}).m is True
    assert H.SendMessageRequestHeaderV2.from_ext({**base, "k": "yes"}).k is False
    # a malformed optional field is left at its default (Java logs it and carries on)
    v2 = H.SendMessageRequestHeaderV2.from_ext({**base, "j": "x", "l": "99999999999"})
    assert v2.j is None and v2.l is None
    assert H.parse_java_double(" 1.5d ") == 1.5 and H.parse_java_double("-Infinity") == float("-inf")
    with pytest.raises(ValueError):
        H.parse_java_double("1,5")
    assert H.parse_java_bool("True") and not H.parse_java_bool("1")
    assert H.java_to_string(H.DOUBLE, 1e7) == "1.0E7" and H.java_to_string(H.BOOL, 0) == "false"


def test_to_ext_omits_none_and_writes_primitives() -> None:
    header = H.SendMessageRequestHeader(producerGroup="g", topic="t", defaultTopic="TBW102", defaultTopicQueueNums=4,
                                        queueId=0, sysFlag=0, bornTimestamp=1, flag=0)
    ext = header.to_ext()
    assert ext["unitMode"] == "false" and ext["batch"] == "false"
    assert "properties" not in ext and "bname" not in ext and "maxReconsumeTimes" not in ext
    assert H.RegisterBrokerRequestHeader().to_ext() == {"compressed": "false", "bodyCrc32": "0"}


@settings(max_examples=100, deadline=None)
@given(_instances(H.SendMessageRequestHeaderV2))
def test_v2_to_v1_and_back(v2: H.SendMessageRequestHeaderV2) -> None:
    v1 = v2.to_v1()
    assert (v1.producerGroup, v1.topic, v1.defaultTopic, v1.defaultTopicQueueNums, v1.queueId, v1.sysFlag,
            v1.bornTimestamp, v1.flag, v1.properties, v1.reconsumeTimes, v1.unitMode, v1.maxReconsumeTimes,
            v1.batch, v1.bname) == (v2.a, v2.b, v2.c, v2.d, v2.e, v2.f, v2.g, v2.h, v2.i, v2.j, v2.k, v2.l, v2.m, v2.n)
    back = H.SendMessageRequestHeaderV2.from_v1(v1)
    assert back == dataclasses.replace(v2, bname=None)  # V2's own bname is not carried, as in Java


def test_send_response_extfields_match_a_java_broker() -> None:
    # frame 9 of the capture: the broker's answer to the first SEND_MESSAGE_V2
    header = H.SendMessageResponseHeader(msgId="7F00000100002A9F0000000017169766", queueId=1, queueOffset=0)
    ext = header.to_ext({"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"})
    assert list(ext.items()) == [("queueId", "1"), ("TRACE_ON", "true"), ("MSG_REGION", "DefaultRegion"),
                                 ("msgId", "7F00000100002A9F0000000017169766"), ("queueOffset", "0")]
    binary = header.to_ext({"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}, serialize_type=SerializeType.ROCKETMQ)
    assert list(binary) == ["msgId", "queueId", "queueOffset", "TRACE_ON", "MSG_REGION"]


def test_pull_response_extfields_match_a_java_broker() -> None:
    header = H.PullMessageResponseHeader(suggestWhichBrokerId=0, nextBeginOffset=1, minOffset=0, maxOffset=1)
    assert list(header.to_ext().items()) == [("suggestWhichBrokerId", "0"), ("nextBeginOffset", "1"),
                                             ("maxOffset", "1"), ("minOffset", "0")]


def test_java_hashmap_order_and_string_hash() -> None:
    assert H.java_string_hash("") == 0
    assert H.java_string_hash("a") == 97
    assert H.java_string_hash("hello") == 99162322
    assert H.java_string_hash("Aa") == H.java_string_hash("BB") == 2112
    keys = {f"k{i}": str(i) for i in range(40)}  # forces two resizes
    ordered = H.java_hashmap_order(keys)
    assert ordered == keys and set(ordered) == set(keys)
    assert H.java_hashmap_order({}) == {}


def test_request_header_table_covers_the_answered_codes() -> None:
    for name in ["SEND_MESSAGE", "SEND_MESSAGE_V2", "SEND_BATCH_MESSAGE", "PULL_MESSAGE", "QUERY_MESSAGE",
                 "VIEW_MESSAGE_BY_ID", "QUERY_CONSUMER_OFFSET", "UPDATE_CONSUMER_OFFSET", "GET_MAX_OFFSET",
                 "GET_MIN_OFFSET", "GET_EARLIEST_MSG_STORETIME", "SEARCH_OFFSET_BY_TIMESTAMP", "UNREGISTER_CLIENT",
                 "CONSUMER_SEND_MSG_BACK", "END_TRANSACTION", "GET_CONSUMER_LIST_BY_GROUP", "UPDATE_AND_CREATE_TOPIC",
                 "DELETE_TOPIC_IN_BROKER", "GET_TOPIC_STATS_INFO", "GET_CONSUME_STATS", "GET_CONSUMER_CONNECTION_LIST",
                 "PUT_KV_CONFIG", "GET_KV_CONFIG", "DELETE_KV_CONFIG", "REGISTER_BROKER", "UNREGISTER_BROKER",
                 "GET_ROUTEINFO_BY_TOPIC", "QUERY_DATA_VERSION", "GET_KVLIST_BY_NAMESPACE", "GET_TOPICS_BY_CLUSTER"]:
        assert RequestCode[name] in H.REQUEST_HEADERS, name
    for code in ("LOCK_BATCH_MQ", "UNLOCK_BATCH_MQ", "HEART_BEAT"):
        assert RequestCode[code] not in H.REQUEST_HEADERS  # body-only requests
