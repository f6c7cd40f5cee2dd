"""Issue 11 items 1-3: every topic and group name is checked before anything is looked up,
created or written; the exact frame of the issue; UPDATE_AND_CREATE_SUBSCRIPTIONGROUP bodies.

The walk test asks the running broker which request codes it serves and sends each code
that takes a topic or group every bad name of the issue (NUL, path traversal, 128/256
chars, non-ASCII, empty, a trailing newline): the answer must be SYSTEM_ERROR with
RocketMQ's remark, no file or directory may appear inside the store or next to it, no
config file may mention the name, and the broker must still send and pull afterwards."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
import trio

from broker_harness import Harness, broker_running, decode_pull_body, raw_invoke, run_with_broker
from rmqd.processors.names import GROUP_FIELDS, NAME_CHECKS, NOT_CHECKED, SELF_CHECKED, TOPIC_FIELDS, is_guarded
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand
from rmqd.wire.headers import BOOL, DOUBLE, INT, LONG, REQUEST_HEADERS
from rmqd.wire.names import consumer_group_remark, group_remark, topic_remark

pytestmark = pytest.mark.timeout(120)

#: The frame of issue 11 (CONSUMER_SEND_MSG_BACK, group "\u0000"), byte for byte.
ISSUE_FRAME = bytes.fromhex(
    "00000116000001127b22636f6465223a33362c226578744669656c6473223a7b226f6666736574223a2230222c2267726f7570223a"
    "225c7530303030222c2264656c61794c6576656c223a222d31222c226f726967696e4d73674964223a22374630303030303130303030"
    "3535393730303030303030303030303030303030222c226f726967696e546f706963223a22526570726f54222c22756e69744d6f6465"
    "223a2266616c7365222c226d61785265636f6e73756d6554696d6573223a223136227d2c22666c6167223a302c226c616e6775616765"
    "223a224a415641222c226f7061717565223a322c2273657269616c697a6554797065437"
    "57272656e74525043223a224a534f4e222c2276657273696f6e223a3339357d")

TRAVERSAL = "../../../../tmp/x"
BAD_TOPICS = ["\x00", TRAVERSAL, "t" * 128, "tópico", "", "TopicA\n", "a\x00b"]
BAD_GROUPS = ["\x00", TRAVERSAL, "g" * 256, "grüppe", "", "cg\n", "%RETRY%/x"]
SYSTEM_ERROR = ResponseCode.SYSTEM_ERROR


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _base_ext(code: int) -> dict[str, str]:
    """A well-formed header for the code (names valid), to put one bad name into."""
    ext = {}
    for f in dataclasses.fields(REQUEST_HEADERS[code]):
        kind = f.metadata["kind"]
        ext[f.name] = {INT: "0", LONG: "0", BOOL: "false", DOUBLE: "0"}.get(kind, "ok_name")
    return ext


def _requests_with(code: int, bad: str, kind: str) -> list[tuple[RemotingCommand, str]]:
    """(request, the field's validator remark) for each name of `kind` the code carries."""
    out = []
    if code in REQUEST_HEADERS:
        for f in dataclasses.fields(REQUEST_HEADERS[code]):
            fields = TOPIC_FIELDS if kind == "topic" else GROUP_FIELDS
            if f.name not in fields or (not f.metadata["required"] and bad.strip() == ""):
                continue
            ext = _base_ext(code)
            ext[f.name] = bad
            out.append(RemotingCommand(code=code, ext_fields=ext))
    elif code == RequestCode.HEART_BEAT:
        if kind == "group":
            out.append(RemotingCommand(code=code, body=json.dumps(
                {"clientID": "c1", "producerDataSet": [{"groupName": bad}]}).encode()))
            out.append(RemotingCommand(code=code, body=json.dumps(
                {"clientID": "c1", "consumerDataSet": [{"groupName": bad, "subscriptionDataSet": []}]}).encode()))
        else:
            out.append(RemotingCommand(code=code, body=json.dumps(
                {"clientID": "c1", "consumerDataSet": [{"groupName": "cg_ok", "subscriptionDataSet": [
                    {"topic": bad, "subString": "*"}]}]}).encode()))
    elif code in (RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ):
        if kind == "group":
            body = {"consumerGroup": bad, "clientId": "c1", "mqSet": []}
        else:
            body = {"consumerGroup": "cg_ok", "clientId": "c1",
                    "mqSet": [{"topic": bad, "brokerName": "b", "queueId": 0}]}
        out.append(RemotingCommand(code=code, body=json.dumps(body).encode()))
    elif code == RequestCode.CHECK_CLIENT_CONFIG:
        body = ({"clientId": "c1", "group": bad} if kind == "group" else
                {"clientId": "c1", "group": "cg_ok", "subscriptionData": {"topic": bad, "expressionType": "SQL92"}})
        out.append(RemotingCommand(code=code, body=json.dumps(body).encode()))
    elif code == RequestCode.BATCH_ACK_MESSAGE:  # 5.x POP: names in each BatchAck
        ack = {"c": bad if kind == "group" else "cg_ok", "t": bad if kind == "topic" else "ok_topic", "r": "0",
               "so": 0, "q": 0, "rq": 0, "pt": 0, "it": 0, "b": "AQ=="}
        out.append(RemotingCommand(code=code, body=json.dumps({"acks": [ack]}).encode()))
    elif code in (RequestCode.QUERY_ASSIGNMENT, RequestCode.SET_MESSAGE_REQUEST_MODE):
        body = {"topic": bad if kind == "topic" else "ok_topic",
                "consumerGroup": bad if kind == "group" else "cg_ok", "clientId": "c1", "mode": "POP"}
        out.append(RemotingCommand(code=code, body=json.dumps(body).encode()))
    return [(r, _expected(r, bad, kind)) for r in out]


def _expected(request: RemotingCommand, bad: str, kind: str) -> str:
    if kind == "topic":
        return topic_remark(bad)
    consumer = (request.code == RequestCode.CONSUMER_SEND_MSG_BACK
                or (request.code == RequestCode.HEART_BEAT and b"consumerDataSet" in (request.body or b"")))
    return (consumer_group_remark if consumer else group_remark)(bad)


def test_every_guarded_code_has_a_check_and_no_broker_handler_forgets_it(tmp_path: Path) -> None:
    """A handler registered for a code that takes a name must be wrapped by guard_names."""
    from rmqd.broker.broker import BrokerRole
    from broker_harness import make_settings

    role = BrokerRole(make_settings(tmp_path, None))
    registered = set(role.server._handlers) | set(role.server._inline)
    for code in registered:
        header = REQUEST_HEADERS.get(code)
        takes_name = header is not None and any(f.name in TOPIC_FIELDS | GROUP_FIELDS
                                                for f in dataclasses.fields(header))
        if takes_name or code in NAME_CHECKS:
            assert code in NAME_CHECKS or code in SELF_CHECKED, RequestCode(code).name
        if code in NAME_CHECKS:
            assert is_guarded(role.server._handlers.get(code) or role.server._inline.get(code)), RequestCode(code).name
            if code in role.server._inline and code in role.server._handlers:
                assert is_guarded(role.server._handlers[code]) and is_guarded(role.server._inline[code])
    # body-carried names are checked too
    for code in (RequestCode.HEART_BEAT, RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ,
                 RequestCode.CHECK_CLIENT_CONFIG):
        assert code in NAME_CHECKS
    assert set(NOT_CHECKED).isdisjoint(registered)


def test_bad_names_are_refused_by_every_code_and_nothing_is_written(tmp_path: Path) -> None:
    root = tmp_path / "a" / "b" / "store"
    root.mkdir(parents=True)
    outside = Path("/tmp/x")
    outside_existed = outside.exists()

    async def scenario(h: Harness) -> None:
        r = await h.send_v2("ReproT", b"first")
        assert r.code == ResponseCode.SUCCESS
        h.wait_dispatched()
        await trio.sleep(0.2)
        before = _tree(tmp_path)
        max_phy = h.role.store.get_max_phy_offset()
        registered = sorted(set(h.role.server._handlers) | set(h.role.server._inline))
        checked = [c for c in registered if c in NAME_CHECKS]
        assert len(checked) >= 25
        sent = 0
        for code in checked:
            for kind, bads in (("topic", BAD_TOPICS), ("group", BAD_GROUPS)):
                for bad in bads:
                    for request, remark in _requests_with(code, bad, kind):
                        response = await h.client.invoke(h.broker_addr, request, 5.0)
                        what = f"{RequestCode(code).name} {kind} {bad[:20]!r}"
                        assert response.code == SYSTEM_ERROR, what
                        assert remark is not None and response.remark == remark, what
                        sent += 1
        # the send codes check their topic themselves (answers carry MSG_REGION/TRACE_ON)
        for code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            for bad in BAD_TOPICS:
                response = await h.send_v2(bad, b"x", code=code)
                assert response.code == SYSTEM_ERROR and response.remark == topic_remark(bad), bad
                assert response.ext_fields and "MSG_REGION" in response.ext_fields
                sent += 1
        for bad in BAD_GROUPS:  # "%RETRY%" + a bad group
            if bad and "\x00" not in bad:
                response = await h.send_v2("%RETRY%" + bad, b"x")
                assert response.code == SYSTEM_ERROR, bad
        response = await h.send_v2("%RETRY%", b"x")  # names no group: nothing auto-created for ""
        assert response.code == SYSTEM_ERROR and response.remark == group_remark("")
        assert sent > 250

        # nothing written: no record, no file or directory anywhere, no config entry
        assert h.role.store.get_max_phy_offset() == max_phy
        h.role.topic_config_manager.persist()
        h.role.subscription_group_manager.persist()
        h.role.consumer_offset_manager.persist()
        after = _tree(tmp_path)
        new = {p for p in after - before if not p.endswith((".json", ".bak"))}
        assert new == set()
        for name in ("topics.json", "subscriptionGroup.json", "consumerOffset.json"):
            path = root / "config" / name
            if path.exists():
                text = path.read_text("utf-8")
                for bad in BAD_TOPICS + BAD_GROUPS:
                    if bad:
                        assert json.dumps(bad)[1:-1] not in text or bad in ("",), (name, bad)
        assert outside.exists() == outside_existed
        assert not any(p.startswith(("%RETRY%.", "%DLQ%.")) for p in os.listdir(root / "consumequeue"))

        # and the broker keeps serving
        r = await h.send_v2("ReproT", b"second")
        assert r.code == ResponseCode.SUCCESS
        h.wait_dispatched()
        pulled = await h.pull("ReproT", "cg_after", 0, 0, sys_flag=4, subscription="*")
        assert pulled.code == ResponseCode.SUCCESS
        assert [m.body for m in decode_pull_body(pulled)] == [b"first", b"second"]

    run_with_broker(root, scenario, timeout=90)


def test_consumer_group_whose_retry_topic_would_be_too_long(tmp_path: Path) -> None:
    """A 121-char group is a valid group, but %RETRY%<group> would be 128 chars: 4.9.8 creates
    that topic's config and then fails every message with MESSAGE_ILLEGAL; rmqd refuses first."""
    group = "g" * 121

    async def scenario(h: Harness) -> None:
        assert (await h.send_v2("LongGroupT", b"m")).code == ResponseCode.SUCCESS
        h.wait_dispatched()
        offset = h.role.store.get_max_phy_offset()
        r = await h.invoke(RequestCode.CONSUMER_SEND_MSG_BACK, {
            "offset": "0", "group": group, "delayLevel": "0", "originMsgId": "x", "originTopic": "LongGroupT",
            "unitMode": "false", "maxReconsumeTimes": "16"})
        assert r.code == SYSTEM_ERROR and r.remark == consumer_group_remark(group)
        r = await h.heartbeat("c1", group, "LongGroupT")
        assert r.code == SYSTEM_ERROR and r.remark == consumer_group_remark(group)
        assert h.role.topic_config_manager.select_topic_config("%RETRY%" + group) is None
        assert h.role.store.get_max_phy_offset() == offset
        # a 120-char group works (its %RETRY% topic is exactly 127)
        ok = "g" * 120
        assert (await h.heartbeat("c1", ok, "LongGroupT")).code == ResponseCode.SUCCESS
        assert h.role.topic_config_manager.select_topic_config("%RETRY%" + ok) is not None

    run_with_broker(tmp_path, scenario)


def test_issue_11_frame_gets_a_clean_error_and_writes_nothing(tmp_path: Path) -> None:
    """CONSUMER_SEND_MSG_BACK with group "\\u0000", sent byte for byte after one message in
    ReproT: SYSTEM_ERROR with checkGroup's remark; no record, no %DLQ%/%RETRY% topic."""

    async def scenario(h: Harness) -> None:
        assert (await h.send_v2("ReproT", b"one")).code == ResponseCode.SUCCESS
        h.wait_dispatched()
        offset = h.role.store.get_max_phy_offset()
        port = int(h.broker_addr.rsplit(":", 1)[1])
        r = await raw_invoke(port, ISSUE_FRAME)
        assert r.opaque == 2 and r.code == SYSTEM_ERROR
        assert r.remark == "the specified group[\x00] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
        assert h.role.store.get_max_phy_offset() == offset
        topics = h.role.topic_config_manager.topic_config_table
        assert "%DLQ%\x00" not in topics and "%RETRY%\x00" not in topics
        assert "\x00" not in h.role.subscription_group_manager.subscription_group_table
        # dispatch goes on: a new message is pulled
        assert (await h.send_v2("ReproT", b"two")).code == ResponseCode.SUCCESS
        h.wait_dispatched()
        pulled = await h.pull("ReproT", "cg1", 0, 0, sys_flag=4, subscription="*")
        assert [m.body for m in decode_pull_body(pulled)] == [b"one", b"two"]

    run_with_broker(tmp_path, scenario)


BAD_GROUP_BODIES = [b"{}", b"null", b"", b"[]", b'{"groupName":null}', b'{"groupName":5}', b'{"groupName":["g"]}',
                    b'{"groupName":"\\u0000"}', b'{"groupName":"../../x"}', b'{"groupName":"' + b"g" * 256 + b'"}',
                    b'{"groupName":"g1","retryQueueNums":"many"}', b'{"groupName":"g1","consumeEnable":[1]}',
                    b'{"groupName":"g1","retryMaxTimes":99999999999}', b"\xff\xfe", b'{"groupName":"g1"']


def test_subscription_group_bodies_are_checked_whole_and_the_table_keeps_saving(tmp_path: Path) -> None:
    """Bad bodies are refused and change nothing; a good group created afterwards survives a restart."""
    code = RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP

    async def main() -> None:
        with trio.fail_after(60):
            async with broker_running(tmp_path) as h:
                table = h.role.subscription_group_manager.subscription_group_table
                before = dict(table)
                for body in BAD_GROUP_BODIES:
                    r = await h.invoke(code, None, body)
                    assert r.code == SYSTEM_ERROR, body
                    assert r.remark and "Error" not in r.remark and "Traceback" not in r.remark, (body, r.remark)
                    assert table == before, body
                r = await h.invoke(code, None, b'{"groupName":"GoodGroup","retryMaxTimes":3}')
                assert r.code == ResponseCode.SUCCESS
            async with broker_running(tmp_path) as h:
                cfg = h.role.subscription_group_manager.subscription_group_table.get("GoodGroup")
                assert cfg is not None and cfg.retryMaxTimes == 3
                assert None not in h.role.subscription_group_manager.subscription_group_table

    trio.run(main)


def test_subscription_group_table_refuses_invalid_keys(tmp_path: Path) -> None:
    from rmqd.store.subscription_group import SubscriptionGroupConfig, SubscriptionGroupManager

    manager = SubscriptionGroupManager(tmp_path)
    for name in (None, "", "\x00", "../x", "g" * 256):
        with pytest.raises(ValueError):
            manager.update_subscription_group_config(SubscriptionGroupConfig(groupName=name))
        if name is not None:
            assert manager.find_subscription_group_config(name) is None  # not auto-created either
    assert manager.find_subscription_group_config("fine_group") is not None
    assert not (tmp_path / "config" / "subscriptionGroup.json").exists() or \
        "\\u0000" not in (tmp_path / "config" / "subscriptionGroup.json").read_text()
