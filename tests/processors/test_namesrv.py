"""Name-server processing against the 4.9.8 capture (golden frames) and RocketMQ's rules:
registration, routes per client version, expiry, unregistration, master/slave, KV config,
topic lists, write permissions, config refusal."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest
import trio

from fixtures import CAPTURE as CAPTURE_DIR, facts, require
from rmqd.processors.kvconfig import KVConfigManager
from rmqd.processors.namesrv import NamesrvConfig, NamesrvProcessor
from rmqd.processors.route_info import RouteInfoManager
from rmqd.wire.bodies import (ClusterInfo, DataVersion, KVTable, RegisterBrokerBody, TopicConfig,
                         TopicConfigSerializeWrapper, TopicList, TopicRouteData)
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import decode_frame, encode_frame, make_request

pytestmark = pytest.mark.timeout(60)

CAPTURE = CAPTURE_DIR / "remoting-frames.jsonl"


class FakeChannel:
    def __init__(self, addr: str) -> None:
        self.remote_addr = addr
        self.closed_reason = None

    def close(self, reason: str = "") -> None:
        self.closed_reason = reason


class Ctx:
    def __init__(self, addr: str = "127.0.0.1:50000") -> None:
        self.channel = FakeChannel(addr)
        self.remote_addr = addr


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def processor(clock: Clock | None = None, **config) -> NamesrvProcessor:
    cfg = NamesrvConfig(kvConfigPath="", **config)
    return NamesrvProcessor(cfg, RouteInfoManager(now_ms=clock or Clock()), KVConfigManager(None))


def call(p: NamesrvProcessor, request, ctx=None):
    handler = p.handlers()[request.code]
    return trio.run(handler, ctx or Ctx(), request)


def topic_wrapper(*topics: tuple[str, int, int], counter: int = 1) -> TopicConfigSerializeWrapper:
    return TopicConfigSerializeWrapper(
        {name: TopicConfig(topicName=name, readQueueNums=q, writeQueueNums=q, perm=perm) for name, q, perm in topics},
        DataVersion(timestamp=1, counter=counter))


def register(p, *, broker="broker-a", addr="127.0.0.1:10911", broker_id=0, cluster="DefaultCluster",
             wrapper=None, ctx=None, version=409, compressed=False, crc=None):
    body_obj = RegisterBrokerBody(wrapper or topic_wrapper(("TopicA", 4, 6)))
    body = body_obj.encode_compressed() if compressed else body_obj.encode()
    ext = {"brokerName": broker, "brokerAddr": addr, "clusterName": cluster, "haServerAddr": addr + "2",
           "brokerId": str(broker_id), "compressed": str(compressed).lower(),
           "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF if crc is None else crc)}
    req = make_request(RequestCode.REGISTER_BROKER, ext, body)
    req.version = version
    return call(p, req, ctx)


def route(p, topic, version=409, **ext):
    req = make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic, **ext})
    req.version = version
    return call(p, req)


# ------------------------------------------------------------------------------------ golden


def capture_rows():
    return [json.loads(line) for line in require(CAPTURE).read_text().splitlines() if line.strip()]


def test_golden_name_server_conversation_is_byte_exact():
    """Replay every request the 4.9.8 name server got in the capture, in order: each of
    our responses must be the captured response frame byte for byte."""
    rows = capture_rows()
    namesrv = facts(CAPTURE_DIR)["namesrvAddr"]
    p = processor()
    compared = 0
    for i, row in enumerate(rows):
        if row["dst"] != namesrv:
            continue
        request = decode_frame(bytes.fromhex(row["rawFrameHex"]))
        response = call(p, request, Ctx(row["src"]))
        if request.is_oneway:
            continue
        expected = next(r for r in rows[i + 1:] if r["src"] == row["dst"] and r["dst"] == row["src"]
                        and r["header"]["opaque"] == request.opaque)
        assert encode_frame(response).hex() == expected["rawFrameHex"], (i, response)
        compared += 1
    # every REGISTER_BROKER (but the oneway one) and GET_ROUTEINFO_BY_TOPIC, counted off the JSON headers
    asked = [r["header"] for r in rows if r["dst"] == namesrv and not r["header"]["flag"] & 3]
    assert {h["code"] for h in asked} == {RequestCode.REGISTER_BROKER, RequestCode.GET_ROUTEINFO_BY_TOPIC}
    assert compared == len(asked) >= 4


def test_golden_register_body_decodes_and_reencodes_exactly():
    row = capture_rows()[0]
    request = decode_frame(bytes.fromhex(row["rawFrameHex"]))
    body = RegisterBrokerBody.decode(request.body)
    first = facts(CAPTURE_DIR)["firstRegistration"]  # read off the same body with Python's json
    assert body.topicConfigSerializeWrapper.dataVersion.counter == first["dataVersionCounter"]
    assert {t: c.perm for t, c in body.topicConfigSerializeWrapper.topicConfigTable.items()} == first["topics"]
    assert body.topicConfigSerializeWrapper.topicConfigTable["TBW102"].perm == 7
    assert body.encode() == bytes(request.body)
    assert int(request.ext("bodyCrc32")) == zlib.crc32(bytes(request.body)) & 0x7FFFFFFF


# ------------------------------------------------------------------------------------ routes


def test_route_body_shape_depends_on_client_version():
    p = processor()
    assert register(p).code == ResponseCode.SUCCESS
    new = route(p, "TopicA", version=409)
    assert new.code == 0
    assert b'"brokerAddrs":{"0":"127.0.0.1:10911"}' in new.body
    json.loads(new.body)  # standard JSON
    old = route(p, "TopicA", version=317)  # Go client (V4_5_2)
    assert b'"brokerAddrs":{0:"127.0.0.1:10911"}' in old.body
    with pytest.raises(ValueError):
        json.loads(old.body)
    assert TopicRouteData.decode(old.body) == TopicRouteData.decode(new.body)
    asked = route(p, "TopicA", version=63, acceptStandardJsonOnly="true")
    assert asked.body == new.body
    boundary = route(p, "TopicA", version=401)
    assert boundary.body == new.body


def test_unknown_topic_is_topic_not_exist_with_rocketmq_remark():
    p = processor()
    resp = route(p, "nope")
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST == 17
    assert resp.remark == ("No topic route info in name server for the topic: nope\n"
                           "See http://rocketmq.apache.org/docs/faq/ for further details.")
    assert resp.body is None


def test_missing_topic_header_fails_cleanly():
    p = processor()
    with pytest.raises(ValueError, match="topic"):
        call(p, make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {}))


def test_two_brokers_and_a_slave_appear_in_routes():
    p = processor()
    register(p, broker="broker-a", addr="10.0.0.1:10911", wrapper=topic_wrapper(("T", 4, 6)))
    register(p, broker="broker-b", addr="10.0.0.2:10911", wrapper=topic_wrapper(("T", 2, 6)))
    slave = register(p, broker="broker-a", addr="10.0.0.3:10911", broker_id=1, wrapper=topic_wrapper(("T", 4, 6)))
    assert slave.ext("masterAddr") == "10.0.0.1:10911"
    assert slave.ext("haServerAddr") == "10.0.0.1:109112"
    data = TopicRouteData.decode(route(p, "T").body)
    addrs = {b.brokerName: b.brokerAddrs for b in data.brokerDatas}
    assert addrs == {"broker-a": {0: "10.0.0.1:10911", 1: "10.0.0.3:10911"}, "broker-b": {0: "10.0.0.2:10911"}}
    assert sorted((q.brokerName, q.writeQueueNums) for q in data.queueDatas) == [("broker-a", 4), ("broker-b", 2)]
    info = ClusterInfo.decode(call(p, make_request(RequestCode.GET_BROKER_CLUSTER_INFO)).body)
    assert sorted(info.clusterAddrTable["DefaultCluster"]) == ["broker-a", "broker-b"]
    assert info.brokerAddrTable["broker-a"].brokerAddrs[1] == "10.0.0.3:10911"


def test_master_register_response_has_empty_ext_and_order_kv_body():
    p = processor()
    call(p, make_request(RequestCode.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T", "value": "a:4"}))
    resp = register(p)
    assert resp.ext_fields == {}
    assert KVTable.decode(resp.body).table == {"T": "a:4"}


def test_compressed_registration_and_crc_check():
    p = processor()
    assert register(p, compressed=True, wrapper=topic_wrapper(("Z", 3, 6))).code == 0
    assert TopicRouteData.decode(route(p, "Z").body).queueDatas[0].readQueueNums == 3
    bad = register(p, broker="b2", addr="10.1.1.1:1", crc=12345)
    assert bad.code == ResponseCode.SYSTEM_ERROR and bad.remark == "crc32 not match"
    assert register(p, broker="b3", addr="10.1.1.2:1", crc=0).code == 0  # crc 0 = not checked


def test_topic_config_only_refreshed_when_data_version_changes():
    p = processor()
    register(p, wrapper=topic_wrapper(("T", 4, 6), counter=1))
    register(p, wrapper=topic_wrapper(("T", 8, 6), counter=1))  # same version: ignored
    assert TopicRouteData.decode(route(p, "T").body).queueDatas[0].writeQueueNums == 4
    register(p, wrapper=topic_wrapper(("T", 8, 6), counter=2))
    assert TopicRouteData.decode(route(p, "T").body).queueDatas[0].writeQueueNums == 8


def test_silent_broker_expires_after_120_seconds_and_reregistration_keeps_it():
    clock = Clock()
    p = processor(clock)
    register(p)
    clock.now += 100_000
    register(p)  # the periodic 30 s re-registration refreshes the timestamp
    clock.now += 119_000
    assert p.routes.scan_not_active_broker() == 0
    assert route(p, "TopicA").code == 0
    clock.now += 2_000
    assert p.routes.scan_not_active_broker() == 1
    assert route(p, "TopicA").code == ResponseCode.TOPIC_NOT_EXIST
    info = ClusterInfo.decode(call(p, make_request(RequestCode.GET_BROKER_CLUSTER_INFO)).body)
    assert info.brokerAddrTable == {} and info.clusterAddrTable == {}


def test_expired_broker_channel_is_closed():
    clock = Clock()
    p = processor(clock)
    ctx = Ctx("127.0.0.1:40000")
    register(p, ctx=ctx)
    clock.now += 121_000
    p.routes.scan_not_active_broker()
    assert ctx.channel.closed_reason == "broker expired"


def test_query_data_version_refreshes_liveness():
    clock = Clock()
    p = processor(clock)
    register(p, wrapper=topic_wrapper(("T", 4, 6), counter=5))
    clock.now += 100_000
    ext = {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911", "clusterName": "DefaultCluster", "brokerId": "0"}
    same = call(p, make_request(RequestCode.QUERY_DATA_VERSION, ext, DataVersion(1, 5).encode()))
    assert same.ext("changed") == "false" and DataVersion.decode(same.body) == DataVersion(1, 5)
    clock.now += 100_000
    assert p.routes.scan_not_active_broker() == 0  # refreshed by the query
    changed = call(p, make_request(RequestCode.QUERY_DATA_VERSION, ext, DataVersion(1, 6).encode()))
    assert changed.ext("changed") == "true"


def test_unregister_and_connection_loss_remove_the_broker():
    p = processor()
    ctx = Ctx("127.0.0.1:41000")
    register(p, broker="a", addr="10.0.0.1:1", ctx=ctx, wrapper=topic_wrapper(("T", 1, 6)))
    register(p, broker="b", addr="10.0.0.2:1", wrapper=topic_wrapper(("T", 1, 6)))
    call(p, make_request(RequestCode.UNREGISTER_BROKER, {"brokerName": "b", "brokerAddr": "10.0.0.2:1",
                                                        "clusterName": "DefaultCluster", "brokerId": "0"}))
    assert [b.brokerName for b in TopicRouteData.decode(route(p, "T").body).brokerDatas] == ["a"]
    p.on_channel_close(ctx.channel)
    assert route(p, "T").code == ResponseCode.TOPIC_NOT_EXIST


def test_topic_lists_and_write_permissions():
    p = processor()
    register(p, broker="a", addr="10.0.0.1:1", cluster="C1", wrapper=topic_wrapper(("T1", 1, 6), ("T2", 1, 6)))
    register(p, broker="b", addr="10.0.0.2:1", cluster="C2", wrapper=topic_wrapper(("T3", 1, 6)))
    all_topics = TopicList.decode(call(p, make_request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).body)
    assert sorted(all_topics.topicList) == ["T1", "T2", "T3"]
    c1 = TopicList.decode(call(p, make_request(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "C1"})).body)
    assert sorted(c1.topicList) == ["T1", "T2"]
    system = TopicList.decode(call(p, make_request(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)).body)
    assert {"C1", "a", "C2", "b"} <= set(system.topicList) and system.brokerAddr in ("10.0.0.1:1", "10.0.0.2:1")
    wiped = call(p, make_request(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "a"}))
    assert wiped.ext("wipeTopicCount") == "2"
    assert TopicRouteData.decode(route(p, "T1").body).queueDatas[0].perm == 4
    added = call(p, make_request(RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "a"}))
    assert added.ext("addTopicCount") == "2"
    assert TopicRouteData.decode(route(p, "T1").body).queueDatas[0].perm == 6
    call(p, make_request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T1"}))
    assert route(p, "T1").code == ResponseCode.TOPIC_NOT_EXIST
    call(p, make_request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T3", "clusterName": "C1"}))
    assert route(p, "T3").code == 0  # T3 lives in C2 only
    for code in (RequestCode.GET_UNIT_TOPIC_LIST, RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST,
                 RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST):
        assert TopicList.decode(call(p, make_request(code)).body).topicList == []


def test_unit_topic_lists_follow_topic_sys_flag():
    p = processor()
    wrapper = topic_wrapper(("U", 1, 6), ("S", 1, 6), ("N", 1, 6))
    wrapper.topicConfigTable["U"].topicSysFlag = 1
    wrapper.topicConfigTable["S"].topicSysFlag = 2
    register(p, wrapper=wrapper)
    unit = TopicList.decode(call(p, make_request(RequestCode.GET_UNIT_TOPIC_LIST)).body).topicList
    sub = TopicList.decode(call(p, make_request(RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST)).body).topicList
    assert unit == ["U"] and sub == ["S"]


# ------------------------------------------------------------------------------------ KV + config


def test_kv_config_codes_and_persistence(tmp_path):
    path = tmp_path / "namesrv" / "kvConfig.json"
    p = NamesrvProcessor(NamesrvConfig(kvConfigPath=str(path)))
    put = make_request(RequestCode.PUT_KV_CONFIG, {"namespace": "NS", "key": "k", "value": "v"})
    assert call(p, put).code == 0
    got = call(p, make_request(RequestCode.GET_KV_CONFIG, {"namespace": "NS", "key": "k"}))
    assert got.code == 0 and got.ext("value") == "v"
    missing = call(p, make_request(RequestCode.GET_KV_CONFIG, {"namespace": "NS", "key": "x"}))
    assert missing.code == ResponseCode.QUERY_NOT_FOUND and missing.remark == "No config item, Namespace: NS Key: x"
    listed = call(p, make_request(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "NS"}))
    assert KVTable.decode(listed.body).table == {"k": "v"}
    nons = call(p, make_request(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "ZZ"}))
    assert nons.code == ResponseCode.QUERY_NOT_FOUND and nons.remark == "No config item, Namespace: ZZ"
    assert json.loads(path.read_text()) == {"configTable": {"NS": {"k": "v"}}}
    reloaded = KVConfigManager(path)
    reloaded.load()
    assert reloaded.get("NS", "k") == "v"
    call(p, make_request(RequestCode.DELETE_KV_CONFIG, {"namespace": "NS", "key": "k"}))
    assert call(p, make_request(RequestCode.GET_KV_CONFIG, {"namespace": "NS", "key": "k"})).code == 22
    assert (tmp_path / "namesrv" / "kvConfig.json.bak").exists()


def test_update_namesrv_config_refused_unless_enabled():
    p = processor()
    body = b"orderMessageEnable=true\n"
    refused = call(p, make_request(RequestCode.UPDATE_NAMESRV_CONFIG, body=body))
    assert refused.code == ResponseCode.NO_PERMISSION
    assert p.config.orderMessageEnable is False
    enabled = processor(enableUpdateConfig=True)
    assert call(enabled, make_request(RequestCode.UPDATE_NAMESRV_CONFIG, body=body)).code == 0
    assert enabled.config.orderMessageEnable is True
    for evil in (b"configStorePath=/etc/cron.d/x\n", b"kvConfigPath=/tmp/x\n", b"enableUpdateConfig=false\n"):
        black = call(enabled, make_request(RequestCode.UPDATE_NAMESRV_CONFIG, body=evil))
        assert black.code == ResponseCode.NO_PERMISSION and black.remark == "Can not update config in black list."


def test_get_namesrv_config_and_order_topic_conf():
    p = processor(orderMessageEnable=True)
    text = call(p, make_request(RequestCode.GET_NAMESRV_CONFIG)).body.decode()
    assert "orderMessageEnable=true\n" in text and "listenPort=9876\n" in text
    register(p)
    call(p, make_request(RequestCode.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "TopicA",
                                                    "value": "broker-a:4"}))
    data = TopicRouteData.decode(route(p, "TopicA").body)
    assert data.orderTopicConf == "broker-a:4"


def test_damaged_kv_config_is_a_clear_error_naming_the_file(tmp_path):
    from rmqd.wire.errors import WireError
    path = tmp_path / "kvConfig.json"
    for bad, needle in ((b'{"configTable":\xff}', "not UTF-8"), (b"{broken", str(path)), (b"[1]", "configTable")):
        path.write_bytes(bad)
        with pytest.raises(WireError) as info:
            KVConfigManager(path).load()
        assert str(path) in str(info.value) and needle in str(info.value)
        assert path.read_bytes() == bad


def test_periodic_registration_topic_table_decoded_only_when_taken(monkeypatch):
    """A broker re-registers its whole table every 30 s under the same DataVersion: the name
    server does not build its thousands of TopicConfigs then (it would not use them)."""
    from rmqd.wire.bodies import TopicConfig

    p = processor()
    built = []
    real = TopicConfig.from_json_obj.__func__

    def counting(cls, obj):
        built.append(obj.get("topicName"))
        return real(cls, obj)

    monkeypatch.setattr(TopicConfig, "from_json_obj", classmethod(counting))
    big = topic_wrapper(*[(f"T{i}", 4, 6) for i in range(50)], counter=7)
    assert register(p, wrapper=big).code == 0
    assert len(built) == 50  # the first registration: taken
    built.clear()
    assert register(p, wrapper=big).code == 0
    assert built == []  # same version: skipped
    assert register(p, wrapper=topic_wrapper(("T0", 8, 6), counter=8)).code == 0
    assert built == ["T0"]
    assert TopicRouteData.decode(route(p, "T0").body).queueDatas[0].writeQueueNums == 8
    assert register(p, wrapper=big, broker_id=1, addr="127.0.0.1:10912").code == 0  # a slave: never taken
    assert built == ["T0"]
