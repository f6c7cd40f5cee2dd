"""Every topic and group name a request carries is checked before its handler runs.

Why a table and a wrapper instead of a check in each handler: a name that reaches the store
becomes a directory (consumequeue/<topic>/), a commit-log field the dispatcher must index, or
a key of a config file — a NUL or ``../`` in one wedged dispatch and wrote outside the store
(issue 11). Checking in every handler is one forgotten line away from that again. Here, the
names of each request code are declared once (``NAME_CHECKS``, derived from the typed request
headers plus the codes whose names travel in the body) and ``guard_names`` wraps a
processor's handler table with them; tests/processors/test_bad_names.py fails when a broker
handler for one of these codes is registered without the guard.

Answer to a bad name: SYSTEM_ERROR with TopicValidator's remark for a topic (what 4.9.8
answers where it checks: send, create topic), Validators.checkGroup's message for a group,
and for a consumer group whose ``%RETRY%``/``%DLQ%`` topic would be too long a remark naming
that topic (see wire.names). Nothing is looked up, created or written first.

The send codes check their topic themselves (their failure answers carry MSG_REGION and
TRACE_ON, as 4.9.8's do); the name server's codes keep names in memory only and are not
refused (4.9.8 answers an odd topic with TOPIC_NOT_EXIST, and so does rmqd).
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable, Mapping

from rmqd.wire.bodies import CheckClientRequestBody, HeartbeatData, LockBatchRequestBody
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand, make_response
from rmqd.wire.headers import REQUEST_HEADERS
from rmqd.wire.names import consumer_group_remark, group_remark, java_is_blank, topic_remark
from rmqd.processors.seams import Context

#: A check of one request: None when its names are valid, else the remark.
NameCheck = Callable[[RemotingCommand], "str | None"]
Validator = Callable[[object], "str | None"]

#: Header fields that hold a topic or a group, by name (the Java field names are the keys).
TOPIC_FIELDS = frozenset({"topic"})
GROUP_FIELDS = frozenset({"group", "consumerGroup", "producerGroup", "groupName", "srcGroup", "destGroup",
                          "compareGroup"})

#: Codes whose handler checks its own names (reason), so the wrapper leaves them alone.
SELF_CHECKED: dict[int, str] = {
    RequestCode.SEND_MESSAGE: "pre_send: TopicValidator, answer with the send extFields",
    RequestCode.SEND_MESSAGE_V2: "pre_send: TopicValidator, answer with the send extFields",
    RequestCode.SEND_BATCH_MESSAGE: "pre_send: TopicValidator, answer with the send extFields",
    RequestCode.SEND_REPLY_MESSAGE: "reply: pre_send's TopicValidator, answer with the send extFields",
    RequestCode.SEND_REPLY_MESSAGE_V2: "reply: pre_send's TopicValidator, answer with the send extFields",
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: "admin: the whole body is checked before the table is touched",
}
#: Name-server codes: names live in memory only; an odd name is simply not found.
NOT_CHECKED: dict[int, str] = {
    RequestCode.GET_ROUTEINFO_BY_TOPIC: "name server lookup: an unknown topic is TOPIC_NOT_EXIST",
    RequestCode.DELETE_TOPIC_IN_NAMESRV: "name server: removes nothing for an unknown topic",
}
#: Fields checked with a stricter rule than their kind's.
_FIELD_OVERRIDES: dict[tuple[int, str], Validator] = {
    # the group names the retry and DLQ topics this request creates
    (RequestCode.CONSUMER_SEND_MSG_BACK, "group"): consumer_group_remark,
}


def _header_check(code: int, fields: tuple[tuple[str, Validator, bool], ...]) -> NameCheck:
    """Check the named extFields. A missing required field is left to the header decoder
    (its own 'is missing' error); an optional one may be absent or blank."""

    def check(request: RemotingCommand) -> str | None:
        ext = request.ext_fields or {}
        for key, validator, required in fields:
            value = ext.get(key)
            if value is None or (not required and java_is_blank(value)):
                continue
            remark = validator(value)
            if remark is not None:
                return remark
        return None

    check.__name__ = f"check_names_{code}"
    return check


def _header_checks() -> dict[int, NameCheck]:
    checks: dict[int, NameCheck] = {}
    for code, header_class in REQUEST_HEADERS.items():
        if code in SELF_CHECKED or code in NOT_CHECKED:
            continue
        cls: type = header_class  # (each is a dataclass: wire.headers._header)
        fields = []
        for f in dataclasses.fields(cls):
            if f.name in TOPIC_FIELDS:
                validator: Validator = topic_remark
            elif f.name in GROUP_FIELDS:
                validator = group_remark
            else:
                continue
            validator = _FIELD_OVERRIDES.get((code, f.name), validator)
            fields.append((f.name, validator, bool(f.metadata.get("required"))))
        if fields:
            checks[code] = _header_check(code, tuple(fields))
    return checks


def _first(remarks: Any) -> str | None:
    for remark in remarks:
        if remark is not None:
            return remark
    return None


def check_heartbeat(request: RemotingCommand) -> str | None:
    """HEART_BEAT: producer groups, consumer groups (with their retry/DLQ topics) and every
    subscribed topic; one bad name refuses the whole heartbeat, so nothing is half-registered."""
    hb = HeartbeatData.decode(request.body)
    return _first(
        [group_remark(p.groupName) for p in hb.producerDataSet]
        + [remark for c in hb.consumerDataSet
           for remark in [consumer_group_remark(c.groupName)] + [topic_remark(s.topic) for s in c.subscriptionDataSet]])


def check_lock_batch(request: RemotingCommand) -> str | None:
    """LOCK_BATCH_MQ / UNLOCK_BATCH_MQ: the consumer group and each queue's topic."""
    body = LockBatchRequestBody.decode(request.body)
    return _first([group_remark(body.consumerGroup)] + [topic_remark(mq.topic) for mq in body.mqSet])


def check_client_config(request: RemotingCommand) -> str | None:
    """CHECK_CLIENT_CONFIG: the group and the subscription's topic, when the body has them."""
    if not request.body:
        return None
    body = CheckClientRequestBody.decode(request.body)
    sub = body.subscriptionData
    return _first([group_remark(body.group), None if sub is None else topic_remark(sub.topic)])


def _json_body(request: RemotingCommand) -> dict[str, Any]:
    from rmqd.wire import fastjson
    from rmqd.wire.errors import WireError
    try:
        obj = fastjson.loads(bytes(request.body or b"{}").decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise WireError(f"request body is not JSON: {exc}") from None
    return obj if isinstance(obj, dict) else {}


def check_batch_ack(request: RemotingCommand) -> str | None:
    """BATCH_ACK_MESSAGE (5.x): each BatchAck's group and topic (``c``/``t``)."""
    from rmqd.wire.pop import decode_batch_ack_body
    _broker, acks = decode_batch_ack_body(request.body)
    return _first([r for a in acks for r in (group_remark(a.consumer_group), topic_remark(a.topic))])


def check_assignment_body(request: RemotingCommand) -> str | None:
    """QUERY_ASSIGNMENT / SET_MESSAGE_REQUEST_MODE (5.x): the body's topic and consumerGroup."""
    body = _json_body(request)
    return _first([topic_remark(str(body.get("topic") or "")), group_remark(str(body.get("consumerGroup") or ""))])


NAME_CHECKS: dict[int, NameCheck] = {
    **_header_checks(),
    RequestCode.HEART_BEAT: check_heartbeat,
    RequestCode.LOCK_BATCH_MQ: check_lock_batch,
    RequestCode.UNLOCK_BATCH_MQ: check_lock_batch,
    RequestCode.CHECK_CLIENT_CONFIG: check_client_config,
    RequestCode.BATCH_ACK_MESSAGE: check_batch_ack,
    RequestCode.QUERY_ASSIGNMENT: check_assignment_body,
    RequestCode.SET_MESSAGE_REQUEST_MODE: check_assignment_body,
}


def refuse_bad_names(request: RemotingCommand) -> RemotingCommand | None:
    """The SYSTEM_ERROR answer for a request with a bad name, or None to go on."""
    check = NAME_CHECKS.get(request.code)
    if check is None:
        return None
    remark = check(request)
    return None if remark is None else make_response(request, ResponseCode.SYSTEM_ERROR, remark)


def _guard(code: int, handler: Any) -> Any:
    check = NAME_CHECKS[code]

    def refusal(request: RemotingCommand) -> RemotingCommand | None:
        remark = check(request)
        return None if remark is None else make_response(request, ResponseCode.SYSTEM_ERROR, remark)

    if inspect.iscoroutinefunction(handler):
        async def guarded_async(ctx: Context, request: RemotingCommand) -> Any:
            refused = refusal(request)
            if refused is not None:
                return refused
            return await handler(ctx, request)
        guarded: Any = guarded_async
    else:
        def guarded_sync(ctx: Context, request: RemotingCommand) -> Any:  # inline handlers (send, pull)
            refused = refusal(request)
            if refused is not None:
                return refused
            return handler(ctx, request)
        guarded = guarded_sync
    guarded.names_guarded = True
    guarded.__wrapped__ = handler
    guarded.__name__ = getattr(handler, "__name__", "handler")
    return guarded


def guard_names(table: Mapping[int, Any]) -> dict[int, Any]:
    """A processor's handler table with the name checks of its codes in front."""
    return {code: _guard(code, handler) if code in NAME_CHECKS else handler for code, handler in table.items()}


def is_guarded(handler: Any) -> bool:
    return bool(getattr(handler, "names_guarded", False))


__all__ = ["GROUP_FIELDS", "NAME_CHECKS", "NOT_CHECKED", "SELF_CHECKED", "TOPIC_FIELDS", "guard_names",
           "is_guarded", "refuse_bad_names"]
