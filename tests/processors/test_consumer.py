"""Offsets and consumer queries: QUERY/UPDATE_CONSUMER_OFFSET (persisted in consumerOffset.json),
GET_CONSUMER_LIST_BY_GROUP, GET_MAX/MIN_OFFSET, GET_EARLIEST_MSG_STORETIME, SEARCH_OFFSET_BY_TIMESTAMP."""

from __future__ import annotations

import json
import time
from pathlib import Path

from broker_harness import run_with_broker
from test_send import capture_exchange
from rmqd.wire import fastjson
from rmqd.wire.codes import RequestCode, ResponseCode


def test_query_offset_of_new_group_is_zero_like_capture(tmp_path: Path) -> None:
    req, resp = capture_exchange(RequestCode.QUERY_CONSUMER_OFFSET)

    async def fn(h) -> None:
        await h.send_v2("WireTopic", b"x", queue_id=3)
        r = await h.invoke(RequestCode.QUERY_CONSUMER_OFFSET, dict(req["header"]["extFields"]))
        assert r.code == resp["header"]["code"] == ResponseCode.SUCCESS
        assert r.ext_fields == resp["header"]["extFields"] == {"offset": "0"}
        assert r.remark is None

    run_with_broker(tmp_path, fn)


def test_update_query_and_persist_across_restart(tmp_path: Path) -> None:
    async def first(h) -> None:
        await h.send_v2("OT", b"x", queue_id=1)
        ext = {"queueId": "1", "bname": "broker-t", "commitOffset": "7", "topic": "OT", "consumerGroup": "og"}
        r = await h.invoke(RequestCode.UPDATE_CONSUMER_OFFSET, ext)
        assert (r.code, r.ext_fields) == (ResponseCode.SUCCESS, {})
        # Java sends it oneway (flag 2): no answer, still applied
        ext2 = dict(ext, queueId="2", commitOffset="3")
        await h.invoke(RequestCode.UPDATE_CONSUMER_OFFSET, ext2, oneway=True)
        import trio
        await trio.sleep(0.2)
        q = await h.invoke(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "og", "topic": "OT", "queueId": "2"})
        assert q.ext_fields == {"offset": "3"}

    run_with_broker(tmp_path, first)
    saved = fastjson.loads((tmp_path / "config" / "consumerOffset.json").read_text())
    assert saved["offsetTable"]["OT@og"] == {1: 7, 2: 3}

    async def second(h) -> None:
        q = await h.invoke(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "og", "topic": "OT", "queueId": "1"})
        assert (q.code, q.ext_fields) == (ResponseCode.SUCCESS, {"offset": "7"})

    run_with_broker(tmp_path, second)


def test_consumer_list_by_group(tmp_path: Path) -> None:
    req, resp = capture_exchange(RequestCode.GET_CONSUMER_LIST_BY_GROUP)
    group = req["header"]["extFields"]["consumerGroup"]
    # the one consumer of the captured session: its client id as the 4.9.8 client built it
    (client_id,) = json.loads(bytes.fromhex(resp["bodyHex"]))["consumerIdList"]

    async def fn(h) -> None:
        r = await h.invoke(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
        await h.heartbeat(client_id, group, "WireTopic")
        r = await h.invoke(RequestCode.GET_CONSUMER_LIST_BY_GROUP, dict(req["header"]["extFields"]))
        assert r.code == ResponseCode.SUCCESS and r.ext_fields == {}
        assert bytes(r.body) == bytes.fromhex(resp["bodyHex"])

    run_with_broker(tmp_path, fn)


def test_queue_bounds_and_time_lookups(tmp_path: Path) -> None:
    async def fn(h) -> None:
        before = int(time.time() * 1000)
        for i in range(3):
            await h.send_v2("QB", f"{i}".encode(), queue_id=0)
        h.wait_dispatched()
        base = {"topic": "QB", "queueId": "0", "bname": "broker-t"}
        r = await h.invoke(RequestCode.GET_MAX_OFFSET, base)
        assert r.ext_fields == {"offset": "3"}
        r = await h.invoke(RequestCode.GET_MIN_OFFSET, base)
        assert r.ext_fields == {"offset": "0"}
        r = await h.invoke(RequestCode.GET_EARLIEST_MSG_STORETIME, base)
        ts = int(r.ext_fields["timestamp"])
        assert before - 1000 <= ts <= int(time.time() * 1000)
        r = await h.invoke(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, dict(base, timestamp=str(before - 60_000)))
        assert r.ext_fields == {"offset": "0"}
        # past the last message: ConsumeQueue.getOffsetInQueueByTime answers the last unit's index
        r = await h.invoke(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, dict(base, timestamp=str(before + 3_600_000)))
        assert r.ext_fields == {"offset": "2"}
        r = await h.invoke(RequestCode.GET_MAX_OFFSET, {"topic": "Nope", "queueId": "0"})
        assert r.ext_fields == {"offset": "0"}
        r = await h.invoke(RequestCode.GET_MAX_OFFSET, {"topic": "QB"})
        assert r.code == ResponseCode.SYSTEM_ERROR and "queueId" in r.remark

    run_with_broker(tmp_path, fn)


def test_offset_file_shape(tmp_path: Path) -> None:
    async def fn(h) -> None:
        ext = {"queueId": "0", "commitOffset": "5", "topic": "FT", "consumerGroup": "fg"}
        assert (await h.invoke(RequestCode.UPDATE_CONSUMER_OFFSET, ext)).code == ResponseCode.SUCCESS

    run_with_broker(tmp_path, fn)
    text = (tmp_path / "config" / "consumerOffset.json").read_text()
    assert "0:5" in text.replace(" ", "").replace("\t", "")  # fastjson's unquoted int key
    try:
        json.loads(text)
        raise AssertionError("consumerOffset.json should be fastjson, not strict JSON")
    except json.JSONDecodeError:
        pass
    assert fastjson.loads(text)["offsetTable"]["FT@fg"] == {0: 5}
