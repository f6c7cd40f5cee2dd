"""SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE against a real broker on loopback,
checked against what a 4.9.8 broker answered and stored in the frame capture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_harness import decode_pull_body, run_with_broker
from fixtures import CAPTURE as CAPTURE_DIR, facts, require
from rmqd.processors.common import hashmap_capacity, java_hashmap_order
from rmqd.processors.send import java_parse_boolean, put_status_to_response
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.message import decode_properties, encode_batch, encode_properties

CAPTURE = CAPTURE_DIR / "remoting-frames.jsonl"


def capture_frames() -> list[dict]:
    return [json.loads(line) for line in require(CAPTURE).read_text().splitlines()]


def capture_exchange(request_code: int, nth: int = 0) -> tuple[dict, dict]:
    """(request header, response header) of the nth request with that code in the capture."""
    frames = capture_frames()
    seen = 0
    for i, f in enumerate(frames):
        h = f["header"]
        if isinstance(h, dict) and h.get("code") == request_code and not h.get("flag", 0) & 1:
            if seen == nth:
                for g in frames[i + 1:]:
                    gh = g["header"]
                    if isinstance(gh, dict) and gh.get("flag", 0) & 1 and gh.get("opaque") == h["opaque"]:
                        return f, g
            seen += 1
    raise LookupError(request_code)


def stored_bodies_from_capture() -> list[bytes]:
    return [bytes.fromhex(f["bodyHex"]) for f in capture_frames()
            if isinstance(f["header"], dict) and f["header"].get("remark") == "FOUND"]


def stored_body_of(kind: str) -> bytes:
    """The pulled (stored) bytes holding the capture session's `kind` send ("single", "batch"):
    the FOUND answer that carries its first msgId (the consumer pulls the queues in no set order)."""
    uniq = next(s["msgId"] for s in facts(CAPTURE_DIR)["session"]["sends"] if s["kind"] == kind).split(",")[0]
    (body,) = [b for b in stored_bodies_from_capture() if uniq.encode() in b]
    return body


# --- pure helpers ------------------------------------------------------------------------------

def test_hashmap_order_matches_capture_ext_orders() -> None:
    _, resp = capture_exchange(RequestCode.SEND_MESSAGE_V2)
    keys = list(resp["header"]["extFields"])
    assert list(java_hashmap_order({k: "" for k in ["MSG_REGION", "TRACE_ON", "msgId", "queueId",
                                                     "queueOffset"]})) == keys
    pull_keys = ["suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset"]
    assert list(java_hashmap_order(dict.fromkeys(pull_keys, ""))) == ["suggestWhichBrokerId", "nextBeginOffset",
                                                                      "maxOffset", "minOffset"]


def test_hashmap_order_of_stored_properties_matches_capture() -> None:
    req, _ = capture_exchange(RequestCode.SEND_MESSAGE_V2)
    props = decode_properties(req["header"]["extFields"]["i"])
    props["CLUSTER"] = "DefaultCluster"
    held = len(props)
    props.pop("WAIT")
    expected = stored_body_of("single")
    assert encode_properties(java_hashmap_order(props, max_size=held)).encode() in expected


@given(st.lists(st.text(alphabet="abcdefghijKLMNOP_", min_size=1, max_size=8), unique=True, max_size=40))
@settings(max_examples=200, deadline=None)
def test_hashmap_order_is_a_permutation(keys: list[str]) -> None:
    ordered = java_hashmap_order({k: i for i, k in enumerate(keys)})
    assert sorted(ordered) == sorted(keys)
    assert all(ordered[k] == i for i, k in enumerate(keys))
    assert hashmap_capacity(len(keys)) >= 16


def test_parse_boolean_is_javas() -> None:
    assert java_parse_boolean("true") and java_parse_boolean("TRUE") and java_parse_boolean(True)
    assert not any(java_parse_boolean(v) for v in ("1", "0", "yes", "", None, False))


@pytest.mark.parametrize("status,code,stored", [
    ("PUT_OK", ResponseCode.SUCCESS, True), ("FLUSH_DISK_TIMEOUT", ResponseCode.FLUSH_DISK_TIMEOUT, True),
    ("FLUSH_SLAVE_TIMEOUT", ResponseCode.FLUSH_SLAVE_TIMEOUT, True),
    ("SLAVE_NOT_AVAILABLE", ResponseCode.SLAVE_NOT_AVAILABLE, True),
    ("CREATE_MAPEDFILE_FAILED", ResponseCode.SYSTEM_ERROR, False),
    ("MESSAGE_ILLEGAL", ResponseCode.MESSAGE_ILLEGAL, False),
    ("PROPERTIES_SIZE_EXCEEDED", ResponseCode.MESSAGE_ILLEGAL, False),
    ("SERVICE_NOT_AVAILABLE", ResponseCode.SERVICE_NOT_AVAILABLE, False),
    ("OS_PAGECACHE_BUSY", ResponseCode.SYSTEM_ERROR, False), ("UNKNOWN_ERROR", ResponseCode.SYSTEM_ERROR, False),
])
def test_put_status_codes(status: str, code: int, stored: bool) -> None:
    got_code, remark, ok = put_status_to_response(status, 4194304)
    assert (got_code, ok) == (code, stored)
    if not stored:
        assert remark
    if status == "MESSAGE_ILLEGAL":
        assert "4194304B" in remark


# --- against the broker ------------------------------------------------------------------------

def test_capture_send_v2_answer_and_stored_bytes(tmp_path: Path) -> None:
    """Replay the Java client's SEND_MESSAGE_V2 from the capture: same answer fields in the same
    order, and the stored record's properties byte-identical to what 4.9.8 stored."""
    req, resp = capture_exchange(RequestCode.SEND_MESSAGE_V2)

    async def fn(h) -> None:
        ext = dict(req["header"]["extFields"])
        r = await h.invoke(RequestCode.SEND_MESSAGE_V2, ext, bytes.fromhex(req["bodyHex"]))
        assert r.code == ResponseCode.SUCCESS and r.remark is None
        assert list(r.ext_fields) == list(resp["header"]["extFields"])
        assert r.ext_fields["MSG_REGION"] == "DefaultRegion" and r.ext_fields["TRACE_ON"] == "true"
        assert r.ext_fields["queueId"] == "1" and r.ext_fields["queueOffset"] == "0"
        port = int(h.broker_addr.rsplit(":", 1)[1])
        assert r.ext_fields["msgId"] == f"7F000001{port:08X}{0:016X}"
        h.wait_dispatched()
        p = await h.pull("WireTopic", "g", 1, 0, sys_flag=6, subscription="*")
        (msg,) = decode_pull_body(p)
        golden = decode_pull_body_bytes(stored_body_of("single"))
        assert msg.properties_raw == golden.properties_raw
        assert msg.body == golden.body == b"hello wire"
        assert msg.store_port == port and msg.topic == "WireTopic"

    run_with_broker(tmp_path, fn, brokerClusterName="DefaultCluster")


def decode_pull_body_bytes(body: bytes):
    from rmqd.wire.message import decode_messages
    return decode_messages(body)[0]


def test_capture_batch_send(tmp_path: Path) -> None:
    req, resp = capture_exchange(RequestCode.SEND_BATCH_MESSAGE)

    async def fn(h) -> None:
        r = await h.invoke(RequestCode.SEND_BATCH_MESSAGE, dict(req["header"]["extFields"]),
                           bytes.fromhex(req["bodyHex"]))
        assert r.code == ResponseCode.SUCCESS
        assert list(r.ext_fields) == list(resp["header"]["extFields"])
        ids = r.ext_fields["msgId"].split(",")
        assert len(ids) == 2 and r.ext_fields["queueOffset"] == "0" and r.ext_fields["queueId"] == "3"
        h.wait_dispatched()
        p = await h.pull("WireTopic", "g", 3, 0, sys_flag=6, subscription="*")
        got = decode_pull_body(p)
        from rmqd.wire.message import decode_messages
        golden = decode_messages(stored_body_of("batch"))
        assert [m.properties_raw for m in got] == [m.properties_raw for m in golden]
        assert [m.queue_offset for m in got] == [0, 1]
        assert [m.offset_msg_id for m in got] == ids

    run_with_broker(tmp_path, fn, brokerClusterName="DefaultCluster")


def test_cpp_batch_flag_one_is_a_single_message(tmp_path: Path) -> None:
    """C++ marks batches with batch "1" on code 10; Boolean.parseBoolean says false, so the whole
    encoded batch is stored as one message, as a Java broker does."""
    batch_body = encode_batch([(0, b"m1", {"TAGS": "A"}), (0, b"m2", {"TAGS": "A"})])

    async def fn(h) -> None:
        ext = {"producerGroup": "pg", "topic": "CppTopic", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
               "queueId": "0", "sysFlag": "0", "bornTimestamp": "1", "flag": "0", "properties": "",
               "reconsumeTimes": "0", "unitMode": "0", "batch": "1", "AccessKey": "", "OnsChannel": "ALIYUN"}
        r = await h.invoke(RequestCode.SEND_MESSAGE, ext, batch_body)
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert "," not in r.ext_fields["msgId"]
        h.wait_dispatched()
        p = await h.pull("CppTopic", "g", 0, 0, sys_flag=6, subscription="*")
        (msg,) = decode_pull_body(p)
        assert msg.body == batch_body

    run_with_broker(tmp_path, fn)


def test_auto_create_topic_registers_route(tmp_path: Path) -> None:
    async def fn(h) -> None:
        r = await h.send_v2("AutoTopic", b"x", queue_id=2, default_topic_queue_nums=4)
        assert r.code == ResponseCode.SUCCESS
        tc = h.role.topic_config_manager.select_topic_config("AutoTopic")
        assert (tc.readQueueNums, tc.writeQueueNums, tc.perm) == (4, 4, 6)
        import trio
        from rmqd.wire.bodies import TopicRouteData
        for _ in range(50):
            route = await h.invoke(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "AutoTopic"}, addr=h.namesrv_addr)
            if route.code == ResponseCode.SUCCESS:
                break
            await trio.sleep(0.05)
        assert route.code == ResponseCode.SUCCESS
        data = TopicRouteData.decode(route.body)
        assert data.queueDatas[0].writeQueueNums == 4 and data.queueDatas[0].perm == 6

    run_with_broker(tmp_path, fn)


def test_auto_create_disabled(tmp_path: Path) -> None:
    async def fn(h) -> None:
        r = await h.send_v2("NoSuchTopic", b"x")
        assert r.code == ResponseCode.TOPIC_NOT_EXIST
        assert r.remark.startswith("topic[NoSuchTopic] not exist, apply first please!")
        assert set(r.ext_fields) == {"MSG_REGION", "TRACE_ON"}

    run_with_broker(tmp_path, fn, autoCreateTopicEnable="false")


def test_send_checks(tmp_path: Path) -> None:
    async def fn(h) -> None:
        r = await h.send_v2("T", b"x", queue_id=0)
        assert r.code == ResponseCode.SUCCESS
        r = await h.send_v2("T", b"x", queue_id=9)
        assert r.code == ResponseCode.SYSTEM_ERROR
        assert r.remark.startswith("request queueId[9] is illegal, TopicConfig [topicName=T, readQueueNums=4, "
                                   "writeQueueNums=4, perm=RW-, topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false]")
        r = await h.send_v2("bad topic!", b"x")
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "The specified topic contains illegal characters, "
                                      "allowing only ^[%|a-zA-Z0-9_-]+$")
        r = await h.send_v2("SCHEDULE_TOPIC_XXXX", b"x")
        assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION,
                                      "Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden.")
        r = await h.send_v2("T", b"x", queue_id=-1)
        assert r.code == ResponseCode.SUCCESS and 0 <= int(r.ext_fields["queueId"]) < 4
        big = b"x" * (4 * 1024 * 1024 + 1)
        r = await h.send_v2("T", big)
        assert r.code == ResponseCode.MESSAGE_ILLEGAL

    run_with_broker(tmp_path, fn)


def test_retry_topic_goes_to_dlq_after_max_reconsume(tmp_path: Path) -> None:
    async def fn(h) -> None:
        ext = {"producerGroup": "g1", "topic": "%RETRY%g1", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
               "queueId": "0", "sysFlag": "0", "bornTimestamp": "1", "flag": "0", "properties": "TAGS\x01A",
               "reconsumeTimes": "3", "unitMode": "false", "maxReconsumeTimes": "3"}
        r = await h.invoke(RequestCode.SEND_MESSAGE, ext, b"dead")
        assert r.code == ResponseCode.SUCCESS, r.remark
        dlq = h.role.topic_config_manager.select_topic_config("%DLQ%g1")
        assert dlq is not None and dlq.readQueueNums == 1
        h.wait_dispatched()
        assert h.role.store.get_max_offset_in_queue("%DLQ%g1", 0) == 1
        assert h.role.store.get_max_offset_in_queue("%RETRY%g1", 0) == 0

    run_with_broker(tmp_path, fn)


def test_sync_flush_send(tmp_path: Path) -> None:
    async def fn(h) -> None:
        for i in range(5):
            r = await h.send_v2("SyncT", f"m{i}".encode(), queue_id=0)
            assert r.code == ResponseCode.SUCCESS
            assert r.ext_fields["queueOffset"] == str(i)

    run_with_broker(tmp_path, fn, flushDiskType="SYNC_FLUSH")


def test_transaction_half_message_is_hidden(tmp_path: Path) -> None:
    async def fn(h) -> None:
        r = await h.send_v2("TxT", b"half", queue_id=0, extra={"TRAN_MSG": "true", "PGROUP": "pg"}, sys_flag=4)
        assert r.code == ResponseCode.SUCCESS
        h.wait_dispatched()
        assert h.role.store.get_max_offset_in_queue("TxT", 0) == 0
        assert h.role.store.get_max_offset_in_queue("RMQ_SYS_TRANS_HALF_TOPIC", 0) == 1

    run_with_broker(tmp_path, fn)


def test_wait_flushed_success_and_timeout() -> None:
    """SYNC_FLUSH: the answer waits for the flush thread's callback; no callback in time ->
    False, which the send path turns into FLUSH_DISK_TIMEOUT (message kept)."""
    import threading

    import trio

    from rmqd.processors.send import wait_flushed

    class FakeStore:
        def __init__(self, ok: bool | None) -> None:
            self.ok = ok
            self.asked: list[int] = []

        def add_flush_listener(self, offset_end: int, cb) -> None:
            self.asked.append(offset_end)
            if self.ok is not None:  # called back from another thread, like the flush service
                threading.Timer(0.05, cb, args=(self.ok,)).start()

    async def main() -> None:
        good = FakeStore(True)
        assert await wait_flushed(good, 123, 2000) is True and good.asked == [123]
        assert await wait_flushed(FakeStore(False), 1, 2000) is False
        t0 = trio.current_time()
        assert await wait_flushed(FakeStore(None), 1, 150) is False
        assert trio.current_time() - t0 >= 0.15

    trio.run(main)
