"""Broker2Client.callClient: a request the broker sends over a connection a client opened, and
the client's answer. Two users: AdminBrokerProcessor.callConsumer (an admin request about one
consumer, CONSUME_MESSAGE_DIRECTLY / GET_CONSUMER_RUNNING_INFO, forwarded and its answer
relayed) and the reply processor's PUSH_REPLY_MESSAGE_TO_CLIENT to a requester (processors/reply.py).

Why one helper: both codes check the same things first (the consumer is online in its group,
its client is at least V3_1_8_SNAPSHOT) and map a failed call to the same codes and remarks.
"""
from __future__ import annotations

from typing import Any, Protocol

from rmqd.wire.codes import MQVersion, ResponseCode, version_desc
from rmqd.wire.frame import RemotingCommand, make_response

#: Broker2Client.callClient waits this long for the consumer.
CALL_CLIENT_TIMEOUT_S = 10.0
V3_1_8_SNAPSHOT = MQVersion["V3_1_8_SNAPSHOT"].value


class ClientChannel(Protocol):
    async def invoke(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand: ...


async def call_client(channel: ClientChannel, request: RemotingCommand,
                      timeout_s: float = CALL_CLIENT_TIMEOUT_S) -> RemotingCommand:
    """callClient: invokeSync on the client's channel; a timeout or a closed connection raises."""
    return await channel.invoke(request, timeout_s)


class ConsumerFinder(Protocol):
    def find_channel(self, group: str, client_id: str) -> Any | None: ...


async def call_consumer(consumers: ConsumerFinder, code: int, request: RemotingCommand, group: str,
                        client_id: str, *, ext: dict[str, str] | None = None, body: Any = None,
                        timeout_s: float = CALL_CLIENT_TIMEOUT_S) -> RemotingCommand:
    """The consumer's answer to request ``code`` (``ext`` / ``body`` default to the admin
    request's), or the broker's own error answer when it cannot be asked."""
    info = consumers.find_channel(group, client_id)
    if info is None:
        return make_response(request, ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
    if info.version < V3_1_8_SNAPSHOT:
        return make_response(request, ResponseCode.SYSTEM_ERROR,
                             f"The Consumer <{client_id}> Version <{version_desc(info.version)}> too low to finish, "
                             f"please upgrade it to V3_1_8_SNAPSHOT")
    forward = RemotingCommand(code=code, ext_fields=dict(request.ext_fields or {}) if ext is None else ext,
                              body=request.body if body is None else body)
    try:
        reply = await call_client(info.channel, forward, timeout_s)
    except Exception as exc:  # noqa: BLE001 - any failure of the call becomes the answer's remark
        if isinstance(exc, TimeoutError) or "Timeout" in type(exc).__name__:
            return make_response(request, ResponseCode.CONSUME_MSG_TIMEOUT,
                                 f"consumer <{group}> <{client_id}> Timeout: {exc}")
        return make_response(request, ResponseCode.SYSTEM_ERROR,
                             f"invoke consumer <{group}> <{client_id}> Exception: {exc}")
    return make_response(request, reply.code, reply.remark, ext_fields=reply.ext_fields, body=reply.body)


__all__ = ["CALL_CLIENT_TIMEOUT_S", "call_client", "call_consumer"]
