"""Body shapes: fastjson output as RocketMQ writes it, lenient decoding of what real clients
send (C++ ordinals and "0"/"1", ali-ons booleans), round trips (hypothesis), golden bodies
from the 4.9.8 capture."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures import CAPTURE as CAPTURE_DIR, require
from rmqd.wire.bodies import (BrokerData, CheckClientRequestBody, ClusterInfo, ConsumeFromWhere, ConsumerConnection,
                         ConsumerData, ConsumerListByGroupResponseBody, ConsumeStats, ConsumeType, Connection,
                         DataVersion, HeartbeatData, KVTable, LockBatchRequestBody,
                         LockBatchResponseBody, MessageModel, MessageQueue, OffsetWrapper, QueueData,
                         RegisterBrokerBody, SubscriptionData, TopicConfig, TopicConfigSerializeWrapper, TopicList,
                         TopicFilterType, TopicOffset, TopicRouteData, TopicStatsTable, as_bool, format_properties, parse_properties)
from rmqd.wire.codes import LanguageCode
from rmqd.wire.errors import WireError

CAPTURE = CAPTURE_DIR / "remoting-frames.jsonl"

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABC0123456789_-%", min_size=1, max_size=20)
ints = st.integers(min_value=0, max_value=2**31 - 1)
addrs = st.builds(lambda a, p: f"10.0.0.{a}:{p}", st.integers(0, 255), st.integers(1, 65535))


def capture_bodies(code: int) -> list[bytes]:
    out = []
    for line in require(CAPTURE).read_text().splitlines():
        row = json.loads(line)
        header = row["header"]
        if isinstance(header, dict) and header.get("code") == code and not header.get("flag", 0) & 1 and row["bodyHex"]:
            out.append(bytes.fromhex(row["bodyHex"]))
    return out


def test_golden_heartbeats_round_trip():
    bodies = capture_bodies(34)
    assert bodies
    for body in bodies:
        hb = HeartbeatData.decode(body)
        assert hb.clientID
        again = HeartbeatData.decode(hb.encode())
        assert again == hb
        for cd in hb.consumerDataSet:
            assert cd.consumeType is ConsumeType.CONSUME_PASSIVELY


def test_cpp_heartbeat_with_ordinals_and_string_numbers():
    text = ('{"clientID":"7747-127.0.0.1@DEFAULT","consumerDataSet":[{"consumeFromWhere":0,"consumeType":1,'
            '"groupName":"cg_x","messageModel":1,"subscriptionDataSet":[{"subString":"*","subVersion":"1795317555988",'
            '"topic":"%RETRY%cg_x"}]}],"producerDataSet":[{"groupName":"pg_x"}]}')
    hb = HeartbeatData.decode(text.encode())
    cd = hb.consumerDataSet[0]
    assert cd.consumeType is ConsumeType.CONSUME_PASSIVELY and cd.messageModel is MessageModel.CLUSTERING
    assert cd.consumeFromWhere is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    sub = cd.subscriptionDataSet[0]
    assert sub.subVersion == 1795317555988 and sub.tagsSet == [] and sub.expressionType == "TAG"
    assert hb.producerDataSet[0].groupName == "pg_x"


def test_enum_names_ordinals_and_booleans():
    cd = ConsumerData.from_json_obj({"consumeType": "CONSUME_ACTIVELY", "messageModel": "0",
                                     "consumeFromWhere": "CONSUME_FROM_TIMESTAMP", "unitMode": "1"})
    assert cd.consumeType is ConsumeType.CONSUME_ACTIVELY and cd.messageModel is MessageModel.BROADCASTING
    assert cd.consumeFromWhere is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP and cd.unitMode is True
    assert [as_bool(v) for v in (True, "true", "1", 1, False, "false", "0", 0, None)] == [True] * 4 + [False] * 5
    with pytest.raises(WireError):
        ConsumerData.from_json_obj({"consumeType": "SOMETIMES"})
    with pytest.raises(WireError):
        ConsumerData.from_json_obj({"messageModel": 7})
    with pytest.raises(WireError):
        HeartbeatData.decode(b"{not json")


def test_route_data_in_both_dialects():
    route = TopicRouteData(queueDatas=[QueueData("b", 4, 4, 6, 0)],
                           brokerDatas=[BrokerData("C", "b", {1: "h:2", 0: "h:1"})])
    old = route.encode_for_version(317).decode()
    new = route.encode_for_version(401).decode()
    assert '"brokerAddrs":{0:"h:1",1:"h:2"}' in old  # Java HashMap<Long,..> order: ascending ids
    assert '"brokerAddrs":{"0":"h:1","1":"h:2"}' in new  # MapSortField + quoted keys
    assert "orderTopicConf" not in new  # null fields are left out
    assert TopicRouteData.decode(old) == TopicRouteData.decode(new) == route


def test_consume_stats_object_keys_like_fastjson():
    stats = ConsumeStats({MessageQueue("t", "b", 0): OffsetWrapper(5, 3, 7)}, 0.0)
    text = stats.encode().decode()
    assert text == ('{"consumeTps":0.0,"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:'
                    '{"brokerOffset":5,"consumerOffset":3,"lastTimestamp":7}}}')
    assert ConsumeStats.decode(text) == stats
    table = TopicStatsTable({MessageQueue("t", "b", 1): TopicOffset(0, 9, 1)})
    assert TopicStatsTable.decode(table.encode()) == table


def test_connection_language_by_name_or_ordinal():
    assert Connection.decode(b'{"language":"GO"}').language is LanguageCode.GO
    assert Connection.decode(b'{"language":1}').language is LanguageCode.CPP
    assert Connection.decode(b'{"clientId":"c"}').language is LanguageCode.JAVA
    assert '"language":"NODE_JS"' in Connection(language=LanguageCode.NODE_JS).to_json()


def test_small_bodies():
    assert ConsumerListByGroupResponseBody(["a", "b"]).encode() == b'{"consumerIdList":["a","b"]}'
    lock = LockBatchRequestBody("g", "c", [MessageQueue("t", "b", 1)])
    assert LockBatchRequestBody.decode(lock.encode()) == lock
    assert LockBatchResponseBody.decode(b'{"lockOKMQSet":[{"topic":"t","brokerName":"b","queueId":2}]}') \
        .lockOKMQSet == [MessageQueue("t", "b", 2)]
    check = CheckClientRequestBody.decode(b'{"clientId":"c","group":"g","subscriptionData":{"topic":"t",'
                                          b'"subString":"a > 1","expressionType":"SQL92"}}')
    assert check.subscriptionData.expressionType == "SQL92"
    conn = ConsumerConnection([Connection("id", "1.2.3.4:5", LanguageCode.CPP, 63)],
                              {"t": SubscriptionData(topic="t")}, ConsumeType.CONSUME_PASSIVELY,
                              MessageModel.CLUSTERING, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    assert '"language":"CPP"' in conn.to_json()
    assert ConsumerConnection.decode(conn.encode()) == conn
    assert KVTable.decode(KVTable({"a": "b"}).encode()).table == {"a": "b"}
    assert TopicList.decode(b'{"topicList":["x"],"brokerAddr":"a:1"}') == TopicList(["x"], "a:1")
    assert TopicList.decode(b"") == TopicList()


def test_compressed_register_body_round_trip():
    body = RegisterBrokerBody(TopicConfigSerializeWrapper({"t": TopicConfig("t", 2, 2, 6)}, DataVersion(9, 3)),
                              ["fs:1"])
    again = RegisterBrokerBody.decode_register(body.encode_compressed(), True)
    assert again == body
    with pytest.raises(WireError):
        RegisterBrokerBody.decode_register(b"not deflate", True)


# RegisterBrokerBody.encode(true) of Apache RocketMQ 4.9.7 (rocketmq-common) for the body of
# the test below, printed in hex by a few lines of Java against the jar
APACHE_497_COMPRESSED = bytes.fromhex(
    "78da636060d0a8564ace2fcd2b492d52b23231d2512ac9cc4d2d2e49cc2d50b232343780024323e35a06060626201674523004427305df"
    "509f10cff8104777a0a078487e4166b2a382858289829942b0a79fbb8f2b548a2f5ac9d0400f040dad0c956201140f199c")


def test_compressed_register_body_is_apaches_byte_for_byte():
    """compressedRegister=true: TopicConfig.encode() text per topic ("name read write perm
    filterType"; sysFlag and order left out), in the order of the ConcurrentHashMap 4.9
    copies the table into, deflated at BEST_COMPRESSION."""
    from rmqd.wire.bodies import TopicFilterType

    table = {"TopicA": TopicConfig("TopicA", 8, 4, 6, topicSysFlag=1, order=True),
             "B": TopicConfig("B", 1, 1, 7, topicFilterType=TopicFilterType.MULTI_TAG)}
    body = RegisterBrokerBody(TopicConfigSerializeWrapper(table, DataVersion(1700000000123, 42)), ["10.0.0.1:1"])
    assert body.encode_compressed() == APACHE_497_COMPRESSED
    decoded = RegisterBrokerBody.decode_register(APACHE_497_COMPRESSED, True)
    assert decoded.filterServerList == ["10.0.0.1:1"]
    assert decoded.topicConfigSerializeWrapper.dataVersion == DataVersion(1700000000123, 42)
    assert decoded.topicConfigSerializeWrapper.topicConfigTable == {
        "B": TopicConfig("B", 1, 1, 7, topicFilterType=TopicFilterType.MULTI_TAG),
        "TopicA": TopicConfig("TopicA", 8, 4, 6)}


@pytest.mark.parametrize("text", ["t 1 1 6", "t 1 1 6 SINGLE_TAG x", "t a 1 6 SINGLE_TAG", "t 1 1 6 NO_TAG",
                                  "t 1 1 99999999999 SINGLE_TAG", ""])
def test_compact_topic_config_refuses_what_java_cannot_decode(text):
    with pytest.raises(WireError):
        TopicConfig.decode_compact(text)


def test_compact_topic_config_reads_java_ints():
    assert TopicConfig.decode_compact("t +3 -1 6 SINGLE_TAG ") == TopicConfig("t", 3, -1, 6)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(max_size=12), st.builds(
    TopicConfig, st.one_of(st.none(), st.text(max_size=12)), st.integers(-2**31, 2**31 - 1),
    st.integers(-2**31, 2**31 - 1), st.integers(0, 15), st.sampled_from(list(TopicFilterType)),
    st.integers(-2**31, 2**31 - 1), st.booleans()), max_size=4),
    st.booleans(), st.booleans())
def test_topic_config_fast_writer_writes_what_the_bean_writer_writes(table, pretty, browser):
    """The TopicConfig writer registered with fastjson (thousands per registration or
    topics.json save) against the generic bean path, in every format."""
    from rmqd.wire import fastjson

    wrapper = TopicConfigSerializeWrapper(table, DataVersion(5, 6))
    fast = fastjson.dumps(wrapper, pretty=pretty, browser_compatible=browser)
    writer = fastjson._BEAN_WRITERS.pop(TopicConfig)
    try:
        slow = fastjson.dumps(wrapper, pretty=pretty, browser_compatible=browser)
        generic = _generic_json(wrapper, browser)
    finally:
        fastjson.register_bean_writer(TopicConfig, writer)
    assert fast == slow
    if not pretty:
        assert fast == generic


def _generic_json(body, browser: bool) -> str:
    from rmqd.wire.bodies import Body

    return Body.to_json(body, browser_compatible=browser)


def test_properties_text_round_trip():
    props = {"a": "1", "b": "x y", "c": "true"}
    assert parse_properties(format_properties(props)) == props
    assert format_properties({"t": True, "n": None, "i": 3}) == "t=true\ni=3\n"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(names, ints, ints, st.integers(0, 7)), max_size=4),
       st.dictionaries(names, st.dictionaries(st.integers(0, 8), addrs, min_size=1, max_size=3), max_size=3),
       st.booleans())
def test_route_data_round_trip_property(queues, brokers, standard):
    route = TopicRouteData(queueDatas=[QueueData(n, r, w, p, 0) for n, r, w, p in queues],
                           brokerDatas=[BrokerData("C", n, a) for n, a in brokers.items()])
    body = route.encode_for_version(409 if standard else 63)
    assert TopicRouteData.decode(body) == route


@settings(max_examples=60, deadline=None)
@given(names, st.lists(st.tuples(names, names, st.lists(names, max_size=3), st.integers(0, 2**62)), max_size=3),
       st.sampled_from(list(ConsumeType)), st.sampled_from(list(MessageModel)),
       st.sampled_from(list(ConsumeFromWhere)), st.booleans())
def test_heartbeat_round_trip_property(client, subs, ctype, model, where, unit):
    hb = HeartbeatData(client, [], [ConsumerData("g", ctype, model, where, [
        SubscriptionData(topic=t, subString=s, tagsSet=tags, codeSet=[len(x) for x in tags], subVersion=v)
        for t, s, tags, v in subs], unit)])
    assert HeartbeatData.decode(hb.encode()) == hb


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.tuples(names, names, st.integers(0, 64)), st.tuples(ints, ints, ints), max_size=5),
       st.floats(min_value=0, max_value=1e6, allow_nan=False))
def test_consume_stats_round_trip_property(table, tps):
    stats = ConsumeStats({MessageQueue(*k): OffsetWrapper(*v) for k, v in table.items()}, tps)
    again = ConsumeStats.decode(stats.encode())
    assert again.offsetTable == stats.offsetTable
    assert again.consumeTps == pytest.approx(tps)


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(names, st.tuples(ints, ints, st.integers(0, 15), st.booleans()), max_size=5),
       st.integers(0, 2**62), st.integers(0, 2**40))
def test_cluster_and_topic_config_round_trip_property(topics, ts, counter):
    wrapper = TopicConfigSerializeWrapper({n: TopicConfig(n, r, w, p, order=o) for n, (r, w, p, o) in topics.items()},
                                          DataVersion(ts, counter))
    body = RegisterBrokerBody(wrapper)
    assert RegisterBrokerBody.decode(body.encode()) == body
    compact = RegisterBrokerBody(TopicConfigSerializeWrapper(
        {n: TopicConfig(n, r, w, p) for n, (r, w, p, o) in topics.items()}, DataVersion(ts, counter)))
    assert RegisterBrokerBody.decode_register(body.encode_compressed(), True) == compact  # no sysFlag/order in it
    info = ClusterInfo({n: BrokerData("C", n, {0: "a:1"}) for n in topics}, {"C": sorted(topics)})
    assert ClusterInfo.decode(info.encode()) == info
