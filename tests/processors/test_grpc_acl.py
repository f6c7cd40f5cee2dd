"""The 5.x ACL signature on gRPC calls against the plain_acl.yml the Remoting side reads:
the authorization header (MQv2-HMAC-SHA1, HMAC-SHA1 of x-mq-date-time in hex), accepted and
refused with UNAUTHORIZED, per-resource permissions, the global white list."""

from __future__ import annotations

import hashlib
import hmac
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from broker_harness import Harness, broker_running
from grpc_support import V2Client, new_message, resource
from rmqd.processors.acl import AclError
from rmqd.processors.grpc_acl import needed_access, parse_authorization
from rmqd.wire.bodies import TopicConfig
from rmqd.wire.rocketmq_v2 import ClientType, Code, pb

PLAIN_ACL = """\
globalWhiteRemoteAddresses:
- 10.10.103.*
accounts:
- accessKey: RocketMQ5
  secretKey: 12345678
  whiteRemoteAddress:
  admin: false
  defaultTopicPerm: DENY
  defaultGroupPerm: SUB
  topicPerms:
  - TopicA=PUB|SUB
  - TopicB=SUB
"""


def signed(access_key: str, secret: str, when: str | None = None) -> dict[str, str]:
    """What a 5.x client adds to every call's metadata (the Java client's Signature.sign)."""
    when = when or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    sig = hmac.new(secret.encode(), when.encode(), hashlib.sha1).hexdigest().upper()
    return {"authorization": f"MQv2-HMAC-SHA1 Credential={access_key}, SignedHeaders=x-mq-date-time, Signature={sig}",
            "x-mq-date-time": when}


def test_parse_authorization() -> None:
    ak, sig = parse_authorization("MQv2-HMAC-SHA1 Credential=ak1/x, SignedHeaders=x-mq-date-time, Signature=0A0B")
    assert ak == "ak1" and sig == "Cgs="
    for bad in ("nospace", "MQv2-HMAC-SHA1 Credential", "MQv2-HMAC-SHA1 Signature=zz"):
        with pytest.raises(AclError):
            parse_authorization(bad)


def test_needed_resources() -> None:
    msg = new_message("TopicA", b"x")
    need = needed_access("SendMessage", pb.SendMessageRequest(messages=[msg]), {}, "127.0.0.1")
    assert need.resources == {"TopicA": 4}  # PUB
    r = pb.ReceiveMessageRequest(group=resource("G"))
    r.message_queue.topic.name = "TopicB"
    assert needed_access("ReceiveMessage", r, {}, "127.0.0.1").resources == {"%RETRY%G": 8, "TopicB": 8}
    with pytest.raises(AclError):
        needed_access("Heartbeat", pb.HeartbeatRequest(client_type=ClientType.SIMPLE_CONSUMER), {}, "127.0.0.1")


def test_signed_calls_accepted_and_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)

    async def main() -> None:
        async with broker_running(tmp_path / "store", with_namesrv=False, rocketmqHome=str(home),
                                  aclEnable="true") as h:
            for t in ("TopicA", "TopicB"):
                h.role.topic_config_manager.update_topic_config(TopicConfig(topicName=t, readQueueNums=2,
                                                                            writeQueueNums=2))
            out = await trio.to_thread.run_sync(_calls, h.role.bound["grpc"][1])
        good, bad_secret, unsigned, denied, route_b = out
        assert good.status.code == Code.OK, good
        assert bad_secret.status.code == Code.UNAUTHORIZED and "signature" in bad_secret.status.message.lower()
        assert unsigned.status.code == Code.UNAUTHORIZED
        assert denied.status.code == Code.UNAUTHORIZED  # TopicB is SUB only
        assert route_b.status.code == Code.OK  # QueryRoute needs ANY: SUB is enough

    trio.run(main)


def _calls(port: int) -> list[Any]:
    c = V2Client(port)
    try:
        send_a = pb.SendMessageRequest(messages=[new_message("TopicA", b"ok")])
        send_b = pb.SendMessageRequest(messages=[new_message("TopicB", b"no")])
        return [
            c.call("SendMessage", send_a, **signed("RocketMQ5", "12345678")),
            c.call("SendMessage", send_a, **signed("RocketMQ5", "wrong-secret")),
            c.call("SendMessage", send_a),
            c.call("SendMessage", send_b, **signed("RocketMQ5", "12345678")),
            c.call("QueryRoute", pb.QueryRouteRequest(topic=resource("TopicB")), **signed("RocketMQ5", "12345678")),
        ]
    finally:
        c.close()
