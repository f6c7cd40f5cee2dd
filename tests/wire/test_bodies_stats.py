"""The bodies of the stats admin codes (VIEW_BROKER_STATS_DATA, GET_BROKER_CONSUME_STATS,
GET_ALL_PRODUCER_INFO, QUERY_CONSUME_QUEUE): fastjson's shape, and round trips (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqd.wire import fastjson
from rmqd.wire.bodies import (
    BrokerStatsData, BrokerStatsItem, ConsumeQueueData, ConsumeStats, ConsumeStatsList, MessageQueue, OffsetWrapper,
    ProducerInfo, ProducerTableInfo, QueryConsumeQueueResponseBody, SubscriptionData,
)
from rmqd.wire.codes import LanguageCode

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABC0123456789_-%", min_size=1, max_size=20)
longs = st.integers(min_value=0, max_value=2**62)
doubles = st.floats(min_value=0, max_value=1e9, allow_nan=False)


def test_shapes_are_fastjsons() -> None:
    data = BrokerStatsData(BrokerStatsItem(8, 0.8, 1.0), BrokerStatsItem(), BrokerStatsItem())
    assert data.encode() == (b'{"statsDay":{"avgpt":0.0,"sum":0,"tps":0.0},"statsHour":{"avgpt":0.0,"sum":0,"tps":0.0},'
                             b'"statsMinute":{"avgpt":1.0,"sum":8,"tps":0.8}}')
    info = ProducerTableInfo({"g": [ProducerInfo("c", "/1.2.3.4:5", LanguageCode.JAVA, 409, 123)]})
    assert info.encode() == (b'{"data":{"g":[{"clientId":"c","language":"JAVA","lastUpdateTimestamp":123,'
                             b'"remoteIP":"/1.2.3.4:5","version":409}]}}')
    stats = ConsumeStats({MessageQueue("T", "b", 0): OffsetWrapper(3, 2, 1)}, 0.5)
    listed = ConsumeStatsList([{"G": [stats]}, {"H": []}], "1.2.3.4:10911", 1)
    assert listed.encode() == (b'{"brokerAddr":"1.2.3.4:10911","consumeStatsList":[{"G":[{"consumeTps":0.5,'
                               b'"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":3,'
                               b'"consumerOffset":2,"lastTimestamp":1}}}]},{"H":[]}],"totalDiff":1}')
    body = QueryConsumeQueueResponseBody(None, "null", [ConsumeQueueData(1, 2, 3)], 5, 0)
    assert fastjson.loads(body.encode().decode()) == {
        "filterData": "null", "maxQueueIndex": 5, "minQueueIndex": 0,
        "queueData": [{"eval": False, "physicOffset": 1, "physicSize": 2, "tagsCode": 3}]}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(longs, doubles, doubles), min_size=3, max_size=3))
def test_broker_stats_data_round_trip_property(windows):
    data = BrokerStatsData(*(BrokerStatsItem(s, t, a) for s, t, a in windows))
    again = BrokerStatsData.decode(data.encode())
    for mine, theirs in zip((data.statsMinute, data.statsHour, data.statsDay),
                            (again.statsMinute, again.statsHour, again.statsDay)):
        assert theirs.sum == mine.sum
        assert (theirs.tps, theirs.avgpt) == (pytest.approx(mine.tps), pytest.approx(mine.avgpt))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.dictionaries(names, st.lists(st.dictionaries(st.tuples(names, names, st.integers(0, 64)),
                                                                 st.tuples(longs, longs, longs), max_size=3),
                                                 max_size=2), min_size=1, max_size=1), max_size=4),
       st.one_of(st.none(), names), st.integers(-2**40, 2**40))
def test_consume_stats_list_round_trip_property(entries, addr, diff):
    body = ConsumeStatsList([{g: [ConsumeStats({MessageQueue(*k): OffsetWrapper(*v) for k, v in t.items()}, 0.0)
                                  for t in tables] for g, tables in e.items()} for e in entries], addr, diff)
    assert ConsumeStatsList.decode(body.encode()) == body


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(names, st.lists(st.tuples(names, names, st.sampled_from(list(LanguageCode)),
                                                 st.integers(0, 500), longs), max_size=3), max_size=4))
def test_producer_table_round_trip_property(table):
    body = ProducerTableInfo({g: [ProducerInfo(*p) for p in ps] for g, ps in table.items()})
    assert ProducerTableInfo.decode(body.encode()) == body


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.none(), st.builds(lambda t, s: SubscriptionData(topic=t, subString=s), names, names)),
       st.one_of(st.none(), names),
       st.one_of(st.none(), st.lists(st.tuples(longs, st.integers(0, 2**31 - 1), st.integers(-2**63, 2**63 - 1),
                                               st.booleans(), st.one_of(st.none(), names)), max_size=5)),
       longs, longs)
def test_query_consume_queue_round_trip_property(sub, filter_data, units, hi, lo):
    data = None if units is None else [ConsumeQueueData(o, s, t, eval=e, msg=m) for o, s, t, e, m in units]
    body = QueryConsumeQueueResponseBody(sub, filter_data, data, hi, lo)
    assert QueryConsumeQueueResponseBody.decode(body.encode()) == body
