"""Request-reply (RocketMQ 4.6+) with the official Java clients: a requester calls
``DefaultMQProducer.request(msg, timeout)``, a push consumer answers each request with
``MessageUtil.createReplyMessage`` + ``send`` (what Spring's RocketMQReplyListener does), the
broker takes the reply (SEND_REPLY_MESSAGE_V2, 325) and pushes it to the requester's connection
(PUSH_REPLY_MESSAGE_TO_CLIENT, 326). The same case runs in the Apache reference column
(test_compat_apache.py) against Apache RocketMQ 4.9.7.

Only the Java drivers have a request role: the C++ wrapper and ali-ons have no request API, and
the Go driver has no request role yet (rocketmq-client-go v2 has Producer.Request).

The 5.3.3 client asks with the callback form only: its synchronous ``request(msg, timeout)``
returns as soon as the request is sent (the send callback counts the reply latch down,
apache/rocketmq #8272 in 5.3.1, removed again by #9608 after 5.3.3), so it throws
RequestTimeoutException "... OK, but wait reply message timeout" on any broker."""

from __future__ import annotations

from typing import Iterator

import pytest

from compat_harness import RmqdServer, body_of, msg_spec, run_driver
from compat_session import ExternalServer, Session, module_server

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def rmqd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RmqdServer | ExternalServer]:
    yield from module_server(tmp_path_factory, "rmqd-request-reply")


@pytest.mark.compat_case("request-reply (request / createReplyMessage)")
@pytest.mark.parametrize("client", ["java", "java5"])
def test_request_reply(session: Session) -> None:
    """Two requests, each answered by the replying consumer and delivered back to the waiting
    request() call with the request's correlation id, as a 4.9.x broker delivers it."""
    s = session
    topic = s.name("t")
    s.create_topic(topic)
    c = s.push(topic, s.name("cg"), reply=True)
    s.barrier([c], topic)
    asks = [b"ask-1-" + s.tag.encode(), b"ask-2-" + s.tag.encode()]
    specs = [msg_spec(a, tags="TagReq", keys=f"rk{i}") for i, a in enumerate(asks)]
    specs[1]["async"] = True  # request(msg, RequestCallback, timeout)
    if s.client == "java5":
        specs[0]["async"] = True  # see the module docstring
    case = {"role": "request", "namesrv": s.namesrv, "topic": topic, "group": s.name("rqg"), "messages": specs,
            "request_timeout_ms": 10000, "deadline_s": 60}
    r = run_driver(s.client, case, s.workdir, s._next(f"{s.client}-request"), 75)
    assert r.first("done") and not r.of("request_error") and not r.of("driver_error"), r.diagnostics()
    replies = sorted(r.of("reply"), key=lambda e: e["index"])
    assert [body_of(e) for e in replies] == [b"reply:" + a for a in asks], r.diagnostics()
    for e in replies:
        props = e["properties"]
        assert e["topic"].endswith("_REPLY_TOPIC"), e
        assert props.get("MSG_TYPE") == "reply" and props.get("CORRELATION_ID") == e["requestCorrelationId"], e
        assert props.get("REPLY_TO_CLIENT") == e["requestReplyTo"], e
        # set by the broker (pushReplyMessage) and by the requester (receiveReplyMessage)
        assert "PUSH_REPLY_TIME" in props and "ARRIVE_TIME" in props, e
        assert e["storeHost"] and e["bornHost"], e
    c.wait_for(lambda evs: len([x for x in evs if x["event"] == "replied"]) >= 2, 5.0)
    c.stop()
    replied = c.of("replied")
    assert not c.of("reply_error"), c.diagnostics()
    assert sorted(e["correlationId"] for e in replied) == sorted(e["requestCorrelationId"] for e in replies)
    assert {e["status"] for e in replied} == {"SEND_OK"}, replied
