"""Issue 11 item 6: no Python exception reaches a client, whatever the request.

Every request code the broker and the name server serve gets non-UTF-8 bodies, broken and
wrongly-typed JSON bodies, and headers whose every field is missing, empty, non-numeric,
out of range or NUL. Each must be answered with a well-formed response whose remark is not
a Python exception repr, the server must log no traceback and no error, and both must still
serve a normal send, pull and route lookup afterwards."""

from __future__ import annotations

import dataclasses
import logging
import re
from pathlib import Path

import pytest
import trio

from broker_harness import Harness, decode_pull_body, raw_invoke, run_with_broker
from rmqd.broker.server import RemotingTimeoutError
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand
from rmqd.wire.headers import REQUEST_HEADERS

pytestmark = pytest.mark.timeout(180)

BODIES = [b"\xff\xfe\xfd", b'{"groupName":"\xc3\x28"}', b"{", b"null", b"[1,2]", b"{}", b'"text"',
          b'{"groupName":{},"consumerDataSet":7,"producerDataSet":[1],"mqSet":{"a":1},"topic":[]}',
          b'{"consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":"t","subVersion":1e999}]}]}',
          b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"t":{"readQueueNums":"x"}}}}',
          b"[" * 5000]
FIELD_VALUES = ["", "x", "-1", "0", "1", "true", "99999999999999999999", "NaN", "\x00", "1e999", "ok_name"]
#: A Python exception as a remark: "KeyError: 'x'", "builtins.ValueError: ...", "... (broker.py:12)".
PYTHON_REPR = re.compile(r"(^|\b)\w*(Error|Exception)\b|Traceback|\.py:\d+")
#: A remark that is Apache RocketMQ's own, a Java exception's text, word for word: 5.x answers
#: rocksDBConfigToJson (355) with an unknown type so (compat_tests/test_admin5_mqadmin.py compares it).
JAVA_REMARK = re.compile(r"^java\.lang\.IllegalArgumentException: Unknown config type: ")
#: Codes where RocketMQ itself answers nothing to some requests (a bad END_TRANSACTION type).
MAY_NOT_ANSWER = {RequestCode.END_TRANSACTION}


def _requests(code: int) -> list[RemotingCommand]:
    out = [RemotingCommand(code=code, body=body) for body in BODIES]
    out.append(RemotingCommand(code=code, ext_fields={}))
    header = REQUEST_HEADERS.get(code)
    if header is not None:
        names = [f.name for f in dataclasses.fields(header)]
        for value in FIELD_VALUES:
            for body in (BODIES[0], BODIES[5], BODIES[7], None):
                out.append(RemotingCommand(code=code, ext_fields={n: value for n in names}, body=body))
    return out


def _check(response: RemotingCommand | None, what: str) -> None:
    assert response is not None, what
    assert isinstance(response.code, int), what
    if response.code == ResponseCode.SYSTEM_ERROR:
        assert response.remark, what
    if response.remark and not JAVA_REMARK.match(response.remark):
        assert not PYTHON_REPR.search(response.remark), (what, response.remark)


def test_malformed_requests_to_every_code_get_clean_answers(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)

    async def scenario(h: Harness) -> None:
        assert (await h.send_v2("MalT", b"before")).code == ResponseCode.SUCCESS
        assert h.namesrv is not None and h.namesrv_addr is not None
        targets = [(h.broker_addr, h.role.server), (h.namesrv_addr, h.namesrv.server)]
        sent = 0
        for addr, server in targets:
            codes = sorted(set(server._handlers) | set(server._inline))
            assert len(codes) >= 10
            for code in codes:
                if code in (RequestCode.UNREGISTER_BROKER, RequestCode.WIPE_WRITE_PERM_OF_BROKER):
                    continue  # would take our own broker out of the name server, not a parsing matter
                for request in _requests(code):
                    what = f"{addr} {RequestCode(code).name} ext={request.ext_fields!r:.60} body={request.body!r:.40}"
                    try:
                        response = await h.client.invoke(addr, request, 0.5 if code in MAY_NOT_ANSWER else 3.0)
                    except RemotingTimeoutError:
                        assert code in MAY_NOT_ANSWER, what
                        continue
                    _check(response, what)
                    sent += 1
        assert sent > 2000

        # still serving: send, pull, route
        assert (await h.send_v2("MalT", b"after")).code == ResponseCode.SUCCESS
        h.wait_dispatched()
        pulled = await h.pull("MalT", "cg_mal", 0, 0, sys_flag=4, subscription="*")
        assert [m.body for m in decode_pull_body(pulled)] == [b"before", b"after"]
        route = await h.invoke(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "MalT"}, addr=h.namesrv_addr)
        assert route.code in (ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST)
        odd = await h.invoke(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "../\x00é"}, addr=h.namesrv_addr)
        assert odd.code == ResponseCode.TOPIC_NOT_EXIST

    run_with_broker(tmp_path, scenario, timeout=150)
    tracebacks = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert tracebacks == [], [f"{r.name}: {r.getMessage()}" for r in tracebacks][:5]
    warnings = [r for r in caplog.records if r.name == "rmqd.server" and r.levelno == logging.WARNING]
    assert warnings and all("\n" not in r.getMessage() for r in warnings)


def test_heartbeat_and_code_200_with_non_utf8_bodies(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The two cases named in the issue: SYSTEM_ERROR with a plain remark, one warning line."""
    caplog.set_level(logging.WARNING)

    async def scenario(h: Harness) -> None:
        r = await h.invoke(RequestCode.HEART_BEAT, None, b"\xff\xfe{}")
        assert r.code == ResponseCode.SYSTEM_ERROR
        assert r.remark == "HeartbeatData body is not UTF-8 (byte 0)"
        r = await h.invoke(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, b'{"groupName":"\xc3\x28"}')
        assert r.code == ResponseCode.SYSTEM_ERROR
        assert r.remark == "the subscription group config body is not UTF-8 (byte 14)"

    run_with_broker(tmp_path, scenario)
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert any("HeartbeatData body is not UTF-8" in r.getMessage() for r in caplog.records)


def _raw_frame(header: str, body: bytes = b"") -> bytes:
    hb = header.encode("ascii")
    return (4 + len(hb) + len(body)).to_bytes(4, "big") + len(hb).to_bytes(4, "big") + hb + body


def test_lone_surrogate_escapes_from_a_client(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """JSON headers and bodies with "\\ud800" escapes (a Python str nothing can encode):
    stored and answered as Java writes them ('?'), never an exception."""
    caplog.set_level(logging.WARNING)
    sur = "\\ud800"

    async def scenario(h: Harness) -> None:
        port = int(h.broker_addr.rsplit(":", 1)[1])
        nport = int(str(h.namesrv_addr).rsplit(":", 1)[1])
        props = "KEYS\\u0001k" + sur + "\\u0002WAIT\\u0001true"
        send = ('{"code":310,"extFields":{"a":"pg","b":"SurT","c":"TBW102","d":"4","e":"0","f":"0","g":"1",'
                '"h":"0","i":"' + props + '","j":"0","k":"false","m":"false"},"flag":0,"language":"JAVA",'
                '"opaque":1,"serializeTypeCurrentRPC":"JSON","version":395}')
        r = await raw_invoke(port, _raw_frame(send, b"body"))
        assert r.code == ResponseCode.SUCCESS
        h.wait_dispatched()
        pulled = await h.pull("SurT", "cg_sur", 0, 0, sys_flag=4, subscription="*")
        assert decode_pull_body(pulled)[0].properties["KEYS"] == "k?"
        group = '{"code":200,"flag":0,"language":"JAVA","opaque":2,"version":395}'
        r = await raw_invoke(port, _raw_frame(group, b'{"groupName":"g\\ud800"}'))
        assert r.code == ResponseCode.SYSTEM_ERROR and r.remark is not None and "[g?]" in r.remark
        hb = '{"code":34,"flag":0,"language":"JAVA","opaque":3,"version":395}'
        r = await raw_invoke(port, _raw_frame(hb, b'{"clientID":"c\\ud800","producerDataSet":[{"groupName":"pg"}]}'))
        assert r.code == ResponseCode.SUCCESS
        route = '{"code":105,"extFields":{"topic":"T' + sur + '"},"flag":0,"language":"JAVA","opaque":4,"version":395}'
        r = await raw_invoke(nport, _raw_frame(route))
        assert r.code == ResponseCode.TOPIC_NOT_EXIST and r.remark is not None and "T?" in r.remark

    run_with_broker(tmp_path, scenario)
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
