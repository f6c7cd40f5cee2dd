"""SEND_REPLY_MESSAGE (324) / SEND_REPLY_MESSAGE_V2 (325) over the wire: a requester registered as
a producer on its own connection gets PUSH_REPLY_MESSAGE_TO_CLIENT (326) with the fields
4.9.x's ReplyMessageProcessor.pushReplyMessage sets; the replier's answer and what is stored
follow the same processor (storeReplyMessageEnable, the remarks when the push fails)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

import trio

from broker_harness import BROKER_NAME, CLUSTER, Harness, broker_running, decode_pull_body
from rmqd.broker.remoting_client import RemotingClient
from rmqd.processors.acl import PUB, SUB, parse_request
from rmqd.processors.common import java_hashmap_order
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand, make_request, make_response
from rmqd.wire.message import decode_properties, encode_properties, encode_properties_java

REPLY_TOPIC = f"{CLUSTER}_REPLY_TOPIC"
REQUESTER = "127.0.0.1@requester#1"
PUSH_FIELDS = ["producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
               "bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode", "bornHost", "storeHost",
               "storeTimestamp"]


def reply_properties(reply_to: str | None = REQUESTER) -> dict[str, str]:
    """What MessageUtil.createReplyMessage + the Java producer's send put on a reply."""
    props = {"MSG_TYPE": "reply", "CORRELATION_ID": "corr-1", "TTL": "3000", "WAIT": "true",
             "UNIQ_KEY": "7F0000010001"}
    if reply_to is not None:
        props["REPLY_TO_CLIENT"] = reply_to
    return props


def v2_ext(props: dict[str, str], *, topic: str = REPLY_TOPIC, queue_id: int = 0) -> dict[str, str]:
    return {"a": "replier-pg", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
            "g": str(int(time.time() * 1000)), "h": "0", "i": encode_properties(props), "j": "0",
            "k": "false", "m": "false", "n": BROKER_NAME}


def v1_ext(props: dict[str, str], *, topic: str = REPLY_TOPIC) -> dict[str, str]:
    return {"producerGroup": "replier-pg", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
            "queueId": "0", "sysFlag": "0", "bornTimestamp": str(int(time.time() * 1000)), "flag": "0",
            "properties": encode_properties(props), "reconsumeTimes": "0", "unitMode": "false", "batch": "false"}


Answer = Callable[[RemotingCommand], RemotingCommand | None]


async def with_requester(h: Harness, fn: Callable[[RemotingClient, list[RemotingCommand]], Awaitable[None]],
                         answer: Answer | None = None) -> None:
    """A second connection, registered as producer REQUESTER (as the Java requester's heartbeat
    does), recording the pushes it gets and answering them (SUCCESS unless ``answer`` says)."""
    pushes: list[RemotingCommand] = []
    async with RemotingClient("requester") as requester:
        async def on_push(ctx: Any, request: RemotingCommand) -> RemotingCommand | None:
            pushes.append(request)
            if answer is not None:
                return answer(request)
            return make_response(request, ResponseCode.SUCCESS)

        requester.register(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, on_push)
        body = json.dumps({"clientID": REQUESTER, "consumerDataSet": [],
                           "producerDataSet": [{"groupName": "requester-pg"}, {"groupName": "CLIENT_INNER_PRODUCER"}]})
        hb = await requester.invoke(h.broker_addr, make_request(RequestCode.HEART_BEAT, None, body.encode()), 5.0)
        assert hb.code == ResponseCode.SUCCESS
        await fn(requester, pushes)


def run(tmp_path: Path, fn: Callable[[Harness], Awaitable[None]], **overrides: Any) -> None:
    async def main() -> None:
        with trio.fail_after(30):
            async with broker_running(tmp_path / "store", with_namesrv=False, **overrides) as h:
                await fn(h)

    trio.run(main)


async def pulled_replies(h: Harness) -> list[Any]:
    h.wait_dispatched()
    assert (await h.heartbeat("127.0.0.1@reader", "reader-cg", REPLY_TOPIC)).code == 0
    return decode_pull_body(await h.pull(REPLY_TOPIC, "reader-cg", 0, 0, sys_flag=2, sub_version=1))


def test_v2_reply_is_pushed_to_the_requester_with_apaches_fields_and_stored(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        async def go(requester: RemotingClient, pushes: list[RemotingCommand]) -> None:
            props = reply_properties()
            ext = v2_ext(props)
            before = int(time.time() * 1000)
            resp = await h.invoke(RequestCode.SEND_REPLY_MESSAGE_V2, ext, b"the answer")
            after = int(time.time() * 1000)
            assert resp.code == ResponseCode.SUCCESS and resp.remark is None
            (push,) = pushes
            assert push.code == RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT and not push.is_oneway
            assert bytes(push.body or b"") == b"the answer"
            f = push.ext_fields or {}
            # makeCustomHeaderToNet: every field set, one HashMap (the order Apache 4.9.7 pushed to
            # a raw requester with these headers, 2026-12-01)
            assert list(f) == list(java_hashmap_order(dict.fromkeys(PUSH_FIELDS))) == [
                "queueId", "flag", "sysFlag", "reconsumeTimes", "storeTimestamp", "unitMode", "defaultTopic",
                "bornHost", "defaultTopicQueueNums", "producerGroup", "topic", "bornTimestamp", "storeHost",
                "properties"]
            replier = (await h.client.channel(h.broker_addr)).local_addr
            assert {k: f[k] for k in PUSH_FIELDS if k not in ("properties", "storeTimestamp")} == {
                "producerGroup": "replier-pg", "topic": REPLY_TOPIC, "defaultTopic": "TBW102",
                "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0", "bornTimestamp": ext["g"], "flag": "0",
                "reconsumeTimes": "0", "unitMode": "false", "bornHost": replier,
                "storeHost": f"127.0.0.1:{h.role.store_port}"}
            assert before <= int(f["storeTimestamp"]) <= after
            pushed_props = decode_properties(f["properties"])
            push_time = int(pushed_props["PUSH_REPLY_TIME"])
            assert before <= push_time <= after
            # the client's properties + PUSH_REPLY_TIME, rewritten in HashMap order (no CLUSTER)
            assert f["properties"] == encode_properties_java({**props, "PUSH_REPLY_TIME": str(push_time)})
            assert [kv.split("\x01")[0] for kv in f["properties"].split("\x02")] == [  # as Apache 4.9.7's
                "PUSH_REPLY_TIME", "MSG_TYPE", "REPLY_TO_CLIENT", "UNIQ_KEY", "TTL", "WAIT", "CORRELATION_ID"]
            # stored too (storeReplyMessageEnable defaults to true): its msgId in the answer
            assert list(resp.ext_fields or {}) == list(java_hashmap_order(dict.fromkeys(
                ["MSG_REGION", "TRACE_ON", "msgId", "queueId", "queueOffset"]))) == [
                "queueId", "TRACE_ON", "MSG_REGION", "msgId", "queueOffset"]  # Apache 4.9.7's answer
            assert resp.ext_fields is not None and resp.ext_fields["msgId"] != "0"
            assert (resp.ext_fields["queueId"], resp.ext_fields["queueOffset"]) == ("0", "0")
            (stored,) = await pulled_replies(h)
            assert stored.body == b"the answer" and stored.topic == REPLY_TOPIC and stored.sys_flag == 0
            # the client's properties string as sent: WAIT kept, no CLUSTER, no PUSH_REPLY_TIME
            assert stored.properties_raw == ext["i"].encode() and stored.properties == props
            assert stored.offset_msg_id == resp.ext_fields["msgId"]

        await with_requester(h, go)

    run(tmp_path, scenario)


def test_v1_reply_without_storing_answers_msg_id_zero(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        async def go(requester: RemotingClient, pushes: list[RemotingCommand]) -> None:
            resp = await h.invoke(RequestCode.SEND_REPLY_MESSAGE, v1_ext(reply_properties()), b"v1")
            assert resp.code == ResponseCode.SUCCESS
            assert resp.ext_fields is not None
            assert {k: resp.ext_fields[k] for k in ("msgId", "queueId", "queueOffset")} == {
                "msgId": "0", "queueId": "0", "queueOffset": "0"}
            (push,) = pushes
            assert (push.ext_fields or {})["producerGroup"] == "replier-pg" and push.body == b"v1"
            h.wait_dispatched()
            assert h.role.store.get_max_offset_in_queue(REPLY_TOPIC, 0) == 0

        await with_requester(h, go)

    run(tmp_path, scenario, storeReplyMessageEnable="false")


def test_requester_gone_or_failing_gets_apaches_remarks(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        # nobody registered under that client id: SYSTEM_ERROR, the reply stored anyway
        resp = await h.invoke(RequestCode.SEND_REPLY_MESSAGE_V2, v2_ext(reply_properties("127.0.0.1@nobody")), b"x")
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR,
                                            "push reply message fail, channel of <127.0.0.1@nobody> not found.")
        assert resp.ext_fields is not None and resp.ext_fields["queueOffset"] == "0"
        assert resp.ext_fields["msgId"] != "0"
        # no REPLY_TO_CLIENT at all
        resp = await h.invoke(RequestCode.SEND_REPLY_MESSAGE_V2, v2_ext(reply_properties(None)), b"y")
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR,
                                            "reply message properties[REPLY_TO_CLIENT] is null")

        # a requester that answers the push with an error
        async def refused(requester: RemotingClient, pushes: list[RemotingCommand]) -> None:
            resp = await h.invoke(RequestCode.SEND_REPLY_MESSAGE_V2, v2_ext(reply_properties()), b"z")
            assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, f"push reply message to {REQUESTER}fail.")
            assert len(pushes) == 1

        await with_requester(h, refused,
                             answer=lambda r: make_response(r, ResponseCode.SYSTEM_ERROR, "process reply message fail"))
        # the requester disconnected (its RemotingClient closed above): its channel is gone
        with trio.fail_after(5):
            while h.role.producer_manager.find_channel(REQUESTER) is not None:
                await trio.sleep(0.01)
        resp = await h.invoke(RequestCode.SEND_REPLY_MESSAGE_V2, v2_ext(reply_properties()), b"w")
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR,
                                            f"push reply message fail, channel of <{REQUESTER}> not found.")
        assert len(await pulled_replies(h)) == 4  # every reply stored, pushed or not

    run(tmp_path, scenario)


def test_malformed_reply_headers_get_a_code_and_remark(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        async def go(requester: RemotingClient, pushes: list[RemotingCommand]) -> None:
            missing = v2_ext(reply_properties())
            del missing["b"]
            bad_number = v1_ext(reply_properties())
            bad_number["queueId"] = "zero"
            cases = [
                (RequestCode.SEND_REPLY_MESSAGE_V2, missing),
                (RequestCode.SEND_REPLY_MESSAGE, bad_number),
                (RequestCode.SEND_REPLY_MESSAGE, None),
                (RequestCode.SEND_REPLY_MESSAGE_V2, v2_ext(reply_properties(), topic="bad/topic")),
                (RequestCode.SEND_REPLY_MESSAGE_V2, v2_ext(reply_properties(), queue_id=7)),
            ]
            for code, ext in cases:
                resp = await h.invoke(code, ext, b"m")
                assert resp.code == ResponseCode.SYSTEM_ERROR, (code, ext, resp)
                assert resp.remark, (code, ext)
            assert pushes == []
            # the send path's own failure answers: MSG_REGION and TRACE_ON, queue id named
            assert "request queueId[7] is illegal" in (resp.remark or "")
            assert resp.ext_fields is not None and set(resp.ext_fields) == {"MSG_REGION", "TRACE_ON"}

        await with_requester(h, go)

    run(tmp_path, scenario)


def test_acl_reply_codes_need_pub_on_the_reply_topic() -> None:
    """rmqd checks the replies like sends (4.9.8 checks nothing): the header's topic, PUB."""
    v2 = parse_request(make_request(RequestCode.SEND_REPLY_MESSAGE_V2, v2_ext(reply_properties()), b"x"), "h:1")
    v1 = parse_request(make_request(RequestCode.SEND_REPLY_MESSAGE, v1_ext(reply_properties()), b"x"), "h:1")
    assert v2.resources == v1.resources == {REPLY_TOPIC: PUB}
    retry = v1_ext(reply_properties(), topic="%RETRY%G")
    retry["group"] = "G"
    assert parse_request(make_request(RequestCode.SEND_REPLY_MESSAGE, retry, b"x"), "h:1").resources == {
        "%RETRY%G": SUB}
