"""The 5.x ACL signature on gRPC calls, checked against the plain ACL rules the Remoting side uses.

Why: a 5.x client with credentials signs every call: metadata ``authorization:
MQv2-HMAC-SHA1 Credential=<accessKey>, SignedHeaders=x-mq-date-time, Signature=<hex>`` where
the signature is HMAC-SHA1 of the ``x-mq-date-time`` value under the secret key. An
``aclEnable=true`` broker must hold gRPC clients to the same plain_acl.yml accounts as
Remoting ones. The resources each request needs follow PlainAccessResource.parse for gRPC
messages (rocketmq 5.1.4, the last release with plain ACL for gRPC); the verdict itself is
processors/acl.py's (white lists, signature, per-resource and default permissions), so the
two protocols cannot drift apart. The signature arrives in hex and is compared in base64,
as AuthorizationHeader.hexToBase64 does.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from rmqd.processors.acl import ANY, PUB, SUB, AclError, AclState, NeededAccess, retry_topic, validate
from rmqd.processors.grpc_common import AUTHORIZATION, DATE_TIME, SESSION_TOKEN
from rmqd.wire.rocketmq_v2 import ClientType

#: an rpc code for the verdict's admin check: no gRPC call needs admin rights
GRPC_CODE = -1


def parse_authorization(header: str) -> tuple[str | None, str | None]:
    """(access key, signature in base64) of an authorization header; AclError when malformed."""
    method, sep, rest = header.partition(" ")
    if not sep:
        raise AclError("authorization header is incorrect")
    access_key = signature = None
    for item in rest.split(","):
        key, eq, value = item.strip().partition("=")
        if not eq:
            raise AclError(f"authorization keyValues length is incorrect, actual length=1")
        if key == "Credential":
            access_key = value.split("/")[0]
        elif key == "Signature":
            try:
                signature = base64.b64encode(binascii.unhexlify(value)).decode("ascii")
            except (binascii.Error, ValueError):
                raise AclError("authorization signature is not hex") from None
    return access_key, signature


def _add_group(need: NeededAccess, group: Any, perm: int) -> None:
    name = getattr(group, "name", None)
    if name is not None:
        need.add(retry_topic(name), perm)


def _add_topic(need: NeededAccess, topic: Any, perm: int) -> None:
    name = getattr(topic, "name", None)
    if name is not None:
        need.add(name, perm)


def needed_access(method: str, request: Any, metadata: Mapping[str, str], remote_host: str) -> NeededAccess:
    """PlainAccessResource.parse(GeneratedMessageV3, AuthenticationHeader): who signs and what
    the call touches."""
    need = NeededAccess(remote_ip=remote_host, code=GRPC_CODE)
    header = metadata.get(AUTHORIZATION)
    if header:
        need.access_key, need.signature = parse_authorization(header)
    need.security_token = metadata.get(SESSION_TOKEN)
    need.content = metadata.get(DATE_TIME, "").encode("utf-8")
    if method == "Heartbeat":
        if request.client_type in (ClientType.PUSH_CONSUMER, ClientType.SIMPLE_CONSUMER):
            if not request.HasField("group"):
                raise AclError("Consumer heartbeat doesn't have group")
            _add_group(need, request.group, SUB)
    elif method == "SendMessage":
        if not request.messages:
            raise AclError("SendMessageRequest, messageCount is zero")
        topic = request.messages[0].topic
        if any(m.topic != topic for m in request.messages):
            raise AclError("SendMessageRequest, messages' topic is not consistent")
        _add_topic(need, topic, PUB)
    elif method == "ReceiveMessage":
        _add_group(need, request.group, SUB)
        _add_topic(need, request.message_queue.topic, SUB)
    elif method in ("AckMessage", "ForwardMessageToDeadLetterQueue", "ChangeInvisibleDuration", "QueryAssignment"):
        _add_group(need, request.group, SUB)
        _add_topic(need, request.topic, SUB)
    elif method == "EndTransaction":
        _add_topic(need, request.topic, PUB)
    elif method == "Telemetry":
        if request.WhichOneof("command") == "settings":
            settings = request.settings
            if settings.HasField("publishing"):
                for topic in settings.publishing.topics:
                    _add_topic(need, topic, PUB)
            if settings.HasField("subscription"):
                _add_group(need, settings.subscription.group, SUB)
                for entry in settings.subscription.subscriptions:
                    _add_topic(need, entry.topic, SUB)
            if not settings.HasField("publishing") and not settings.HasField("subscription"):
                raise AclError("settings command doesn't have publishing or subscription")
    elif method == "NotifyClientTermination":
        _add_group(need, request.group, SUB)
    elif method == "QueryRoute":
        _add_topic(need, request.topic, ANY)
    elif method in ("PullMessage", "UpdateOffset", "GetOffset"):
        _add_group(need, request.group, SUB)
        _add_topic(need, request.message_queue.topic, SUB)
    elif method == "QueryOffset":
        _add_topic(need, request.message_queue.topic, SUB)
    return need


def check(state: AclState, method: str, request: Any, metadata: Mapping[str, str], remote_host: str) -> AclError | None:
    """None when the call may proceed, else the refusal."""
    try:
        validate(needed_access(method, request, metadata, remote_host), state)
    except AclError as exc:
        return exc
    return None


__all__ = ["check", "needed_access", "parse_authorization"]
