"""GET_TOPIC_CONFIG (5.x, 351): one topic's config, as rocketmq-tools 5.x's examineTopicStats asks
every broker of a route for it (mqadmin topicStatus, consumerProgress, the dashboard).

Facts (apache/rocketmq develop 8fc57f1 = 5.3.3 for this code): AdminBrokerProcessor.getTopicConfig
answers SUCCESS with ``JSONObject.toJSONString(new TopicConfigAndQueueMapping(topicConfig,
mappingDetail))`` and no extFields, or TOPIC_NOT_EXIST (17) "No topic in this broker. topic: <t>";
GetTopicConfigRequestHeader has @CFNotNull topic and TopicRequestHeader's ``lo``; the ACL is
Action.GET on the topic (SUB in plain ACL's words).
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, strategies as st

from broker_harness import run_with_broker
from rmqd.processors.acl import SUB, parse_request
from rmqd.wire import fastjson
from rmqd.wire.bodies import TopicConfig, TopicFilterType, encode_topic_config_and_queue_mapping
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import make_request
from rmqd.wire.names import TOPIC_ILLEGAL

CREATE = {"topic": "TcT", "defaultTopic": "TBW102", "readQueueNums": "2", "writeQueueNums": "3", "perm": "6",
          "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
#: fastjson's field order for TopicConfigAndQueueMapping: the getters of TopicConfig and of the
#: subclass, alphabetical (mappingDetail, null for a topic that is not static, is left out)
FIELD_ORDER = ["attributes", "order", "perm", "readQueueNums", "topicFilterType", "topicName", "topicSysFlag",
               "writeQueueNums"]


def test_known_unknown_and_malformed(tmp_path: Path) -> None:
    async def fn(h) -> None:
        assert (await h.invoke(RequestCode.UPDATE_AND_CREATE_TOPIC, CREATE)).code == ResponseCode.SUCCESS
        fifo = dict(CREATE, topic="TcFifo", readQueueNums="1", writeQueueNums="1", attributes="+message.type=FIFO")
        assert (await h.invoke(RequestCode.UPDATE_AND_CREATE_TOPIC, fifo)).code == ResponseCode.SUCCESS

        # what the 5.x admin client sends: topic and lo=true
        r = await h.invoke(RequestCode.GET_TOPIC_CONFIG, {"topic": "TcT", "lo": "true"})
        assert (r.code, r.remark, r.ext_fields) == (ResponseCode.SUCCESS, None, None)
        assert bytes(r.body) == (b'{"attributes":{},"order":false,"perm":6,"readQueueNums":2,'
                                 b'"topicFilterType":"SINGLE_TAG","topicName":"TcT","topicSysFlag":0,'
                                 b'"writeQueueNums":3}')
        r = await h.invoke(RequestCode.GET_TOPIC_CONFIG, {"topic": "TcFifo"})
        assert r.code == ResponseCode.SUCCESS
        assert bytes(r.body) == (b'{"attributes":{"message.type":"FIFO"},"order":false,"perm":6,"readQueueNums":1,'
                                 b'"topicFilterType":"SINGLE_TAG","topicName":"TcFifo","topicSysFlag":0,'
                                 b'"writeQueueNums":1}')
        assert TopicConfig.decode(r.body).message_type == "FIFO"
        # a topic the broker made itself (no attributes in rmqd's table: 5.x writes an empty map)
        r = await h.invoke(RequestCode.GET_TOPIC_CONFIG, {"topic": "TBW102", "lo": "false"})
        assert r.code == ResponseCode.SUCCESS
        body = fastjson.loads(bytes(r.body).decode())
        assert list(body) == FIELD_ORDER and body["attributes"] == {} and body["topicName"] == "TBW102"

        # unknown: TOPIC_NOT_EXIST, which examineTopicConfigFromRoute takes as "not on this broker"
        r = await h.invoke(RequestCode.GET_TOPIC_CONFIG, {"topic": "NoSuchTopic", "lo": "true"})
        assert (r.code, r.remark, r.body) == (ResponseCode.TOPIC_NOT_EXIST,
                                              "No topic in this broker. topic: NoSuchTopic", None)
        # deleted: gone from the answer too
        assert (await h.invoke(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "TcT"})).code == ResponseCode.SUCCESS
        r = await h.invoke(RequestCode.GET_TOPIC_CONFIG, {"topic": "TcT"})
        assert r.code == ResponseCode.TOPIC_NOT_EXIST

        # no topic (5.x: the @CFNotNull field's RemotingCommandException): a clear SYSTEM_ERROR
        for ext in ({}, None, {"lo": "true"}):
            r = await h.invoke(RequestCode.GET_TOPIC_CONFIG, ext)
            assert r.code == ResponseCode.SYSTEM_ERROR
            assert r.remark == "header field 'GetTopicConfigRequestHeader.topic': is missing"
        # a name no topic can have: TopicValidator's remark before any lookup (rmqd's name guard;
        # 5.x looks it up and answers TOPIC_NOT_EXIST)
        for bad in ("a b", "../x", "x\x00y"):
            r = await h.invoke(RequestCode.GET_TOPIC_CONFIG, {"topic": bad})
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, TOPIC_ILLEGAL), bad
        r = await h.invoke(RequestCode.GET_TOPIC_CONFIG, {"topic": "T" * 128})
        assert r.code == ResponseCode.SYSTEM_ERROR and "longer than topic max length" in (r.remark or "")
        # a malformed lo is Boolean.parseBoolean's false, as Java reads it
        r = await h.invoke(RequestCode.GET_TOPIC_CONFIG, {"topic": "TcFifo", "lo": "yes"})
        assert r.code == ResponseCode.SUCCESS

    run_with_broker(tmp_path, fn)


def test_body_attributes_in_java_hashmap_order() -> None:
    """A store written by 5.x may hold several attributes: written in java.util.HashMap's order
    (buckets of a 16-slot table: cleanup.policy 2, message.type 4, queue.type 14)."""
    tc = TopicConfig(topicName="T", readQueueNums=8, writeQueueNums=8, perm=7, order=True,
                     topicFilterType=TopicFilterType.MULTI_TAG, topicSysFlag=1,
                     attributes={"queue.type": "BatchCQ", "message.type": "NORMAL", "cleanup.policy": "DELETE"})
    assert encode_topic_config_and_queue_mapping(tc) == (
        b'{"attributes":{"cleanup.policy":"DELETE","message.type":"NORMAL","queue.type":"BatchCQ"},"order":true,'
        b'"perm":7,"readQueueNums":8,"topicFilterType":"MULTI_TAG","topicName":"T","topicSysFlag":1,'
        b'"writeQueueNums":8}')
    # a nameless config (never in a broker's table) leaves topicName out, as fastjson drops nulls
    assert b"topicName" not in encode_topic_config_and_queue_mapping(TopicConfig())


_NAMES = st.text(alphabet="abcXYZ019%|_-", min_size=1, max_size=127)


@given(name=_NAMES, read=st.integers(0, 2**31 - 1), write=st.integers(0, 2**31 - 1), perm=st.integers(0, 15),
       order=st.booleans(), sys_flag=st.integers(-(2**31), 2**31 - 1),
       attrs=st.one_of(st.none(), st.dictionaries(st.sampled_from(["message.type", "queue.type", "x.y"]),
                                                   st.text(max_size=8), max_size=3)))
def test_body_round_trips_and_keeps_fastjson_field_order(name: str, read: int, write: int, perm: int, order: bool,
                                                         sys_flag: int, attrs: dict[str, str] | None) -> None:
    tc = TopicConfig(topicName=name, readQueueNums=read, writeQueueNums=write, perm=perm, order=order,
                     topicSysFlag=sys_flag, attributes=attrs or None)
    body = encode_topic_config_and_queue_mapping(tc)
    obj = fastjson.loads(body.decode())
    assert list(obj) == FIELD_ORDER
    assert obj["attributes"] == (attrs or {})
    assert TopicConfig.decode(body) == tc


def test_acl_needs_sub_on_the_topic() -> None:
    """5.x: GetTopicConfigRequestHeader is @RocketMQAction(GET_TOPIC_CONFIG, Action.GET) with
    @RocketMQResource(TOPIC) on topic: GET on the topic, SUB in plain ACL's words."""
    need = parse_request(make_request(RequestCode.GET_TOPIC_CONFIG, {"topic": "T", "lo": "true"}), "1.2.3.4:5")
    assert need.resources == {"T": SUB}
