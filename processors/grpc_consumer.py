"""ReceiveMessage, AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue over
the POP service (processors/pop.py), as Apache RocketMQ 5.3.3's proxy does them in local mode.

Why here and not in pop.py: what is gRPC's own is the receipt handle (the pop's extra info plus
the message's commit-log offset, ReceiptHandle.encode), the long-polling time taken from the
call's deadline, the shape of the answer stream (a status, the messages, a delivery timestamp),
the proxy's checks and codes, and auto-renewal: a PushConsumer receives with auto_renew, the
proxy makes the messages invisible for 60 s and keeps extending that while the client holds
them (1 m, 3 m, 5 m, 10 m, 30 m, 1 h, up to 3 h), and gives them back within a second when the
client goes away. The invisibility, acks and retries themselves are the POP service's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio
from google.protobuf.message import DecodeError

from rmqd.processors.grpc_clients import GrpcClientChannel
from rmqd.processors.grpc_common import (
    CONSUMER_MAX_LONG_POLLING_MS, CONSUMER_MIN_LONG_POLLING_MS, DEFAULT_INVISIBLE_TIME_MS,
    MIN_INVISIBLE_TIME_MS_FOR_RECV, GrpcContext, ProxyError, check_group, check_invisible_time, check_topic,
    code_of_remoting, duration_ms, status,
)
from rmqd.processors.grpc_convert import ack_ok_response, build_message
from rmqd.processors.pop import PopError, PopStatus
from rmqd.processors.pull import SubscriptionParseError, build_subscription_data
from rmqd.wire.grpc import CallClosedError, GrpcStatus
from rmqd.wire.message import decode_record
from rmqd.wire.pop import ExtraInfo, real_topic_of_kind
from rmqd.wire.rocketmq_v2 import Code, FilterType, pb

if TYPE_CHECKING:
    from rmqd.processors.grpc_service import Call, GrpcHandler, MessagingService
    from rmqd.processors.pop import PopService

log = logging.getLogger("rmqd.grpc.consumer")

#: ReceiveMessageActivity: clients older than this get BAD_REQUEST instead of ILLEGAL_POLLING_TIME
ILLEGAL_POLLING_TIME_INTRODUCED_CLIENT_VERSION = "5.0.3"
#: ReceiveMessageResponseStreamWriter: a message the client could not be sent comes back this soon
NACK_INVISIBLE_TIME_MS = 1000
MAX_MSG_NUMS_FOR_POP_REQUEST = 32
# ProxyConfig (5.3.3): receipt-handle renewal
RENEW_AHEAD_MS = 10_000
RENEW_MAX_MS = 3 * 3600 * 1000
RENEW_PERIOD_S = 5.0
MAX_RENEW_RETRY_TIMES = 3
INVISIBLE_TIME_MS_WHEN_CLEAR = 1000
#: RenewStrategyPolicy: how far each renewal pushes the deadline
RENEW_NEXT_MS = (60_000, 180_000, 300_000, 600_000, 1_800_000, 3_600_000)
#: an entry's OK status, copied into each acked entry (one Status built, not one per ack)
_OK_STATUS = status(Code.OK)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class ReceiptHandle:
    """The proxy's receipt handle: the pop's extra info and the commit-log offset (9 fields)."""

    start_offset: int
    retrieve_time: int
    invisible_time: int
    revive_qid: int
    topic_type: str
    broker_name: str
    queue_id: int
    offset: int
    commit_log_offset: int = -1

    @classmethod
    def decode(cls, text: str) -> "ReceiptHandle":
        """ReceiptHandle.decode; ProxyError(INTERNAL_SERVER_ERROR) for text it cannot parse,
        as the proxy's IllegalArgumentException / NumberFormatException become."""
        parts = text.split(" ")
        if len(parts) < 8:
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, f"Parse failed, dataList size {len(parts)}")
        try:
            return cls(int(parts[0]), int(parts[1]), int(parts[2]), int(parts[3]), parts[4], parts[5],
                       int(parts[6]), int(parts[7]), int(parts[8]) if len(parts) >= 9 else -1)
        except ValueError as exc:
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, f"NumberFormatException: {exc}") from None

    @property
    def extra_info(self) -> str:
        """The eight fields the broker's POP codes take."""
        return " ".join(str(p) for p in (self.start_offset, self.retrieve_time, self.invisible_time,
                                         self.revive_qid, self.topic_type, self.broker_name, self.queue_id,
                                         self.offset))

    def extra(self) -> ExtraInfo:
        """``extra_info`` as the broker parses it, without writing it out (PopService checks it
        as it checks the text)."""
        return ExtraInfo(self.start_offset, self.retrieve_time, self.invisible_time, self.revive_qid, self.topic_type,
                         self.broker_name, self.queue_id, self.offset)

    def encode(self) -> str:
        return f"{self.extra_info} {self.commit_log_offset}"

    @property
    def next_visible_time(self) -> int:
        return self.retrieve_time + self.invisible_time

    def expired(self, now_ms: int) -> bool:
        return self.next_visible_time <= now_ms

    def real_topic(self, topic: str, group: str) -> str:
        return real_topic_of_kind(topic, group, self.topic_type)


@dataclass(slots=True)
class _Held:
    """MessageReceiptHandle: a message a client holds under auto-renewal."""

    group: str
    topic: str
    msg_id: str
    original: str
    current: str
    consume_timestamp: int
    reconsume_times: int
    renew_times: int = 0
    renew_retry_times: int = 0


@dataclass(slots=True)
class ReceiptHandleManager:
    """DefaultReceiptHandleManager: handles by (client channel, group), renewed in the background."""

    groups: dict[tuple[GrpcClientChannel, str], dict[str, _Held]] = field(default_factory=dict)

    def add(self, channel: GrpcClientChannel, held: _Held) -> None:
        self.groups.setdefault((channel, held.group), {})[held.msg_id] = held

    def remove(self, channel: GrpcClientChannel | None, group: str, msg_id: str, handle: str) -> _Held | None:
        if channel is None:
            return None
        held_map = self.groups.get((channel, group))
        if not held_map:
            return None
        held = held_map.get(msg_id)
        if held is None or handle not in (held.original, held.current):
            return None
        del held_map[msg_id]
        if not held_map:
            del self.groups[(channel, group)]
        return held


class ConsumerActivity:
    """The POP-based methods of MessagingService."""

    def __init__(self, service: "MessagingService", pop: Callable[[], "PopService | None"]) -> None:
        self.service = service
        self._pop = pop
        self.receipts = ReceiptHandleManager()

    def _pop_service(self) -> "PopService":
        pop = self._pop()
        if pop is None:
            raise ProxyError(Code.NOT_IMPLEMENTED, "POP consumption is not available")
        return pop

    def handlers(self) -> dict[str, "GrpcHandler"]:
        s = self.service
        return {
            "ReceiveMessage": self.receive_message,
            "AckMessage": s.unary("AckMessage", pb.AckMessageRequest, pb.AckMessageResponse, self.ack_message),
            "ChangeInvisibleDuration": s.unary("ChangeInvisibleDuration", pb.ChangeInvisibleDurationRequest,
                                               pb.ChangeInvisibleDurationResponse, self.change_invisible_duration),
            "ForwardMessageToDeadLetterQueue": s.unary(
                "ForwardMessageToDeadLetterQueue", pb.ForwardMessageToDeadLetterQueueRequest,
                pb.ForwardMessageToDeadLetterQueueResponse, self.forward_to_dead_letter_queue),
        }

    # -- receive ----------------------------------------------------------------------------------
    async def receive_message(self, call: "Call") -> None:
        payload = await call.recv()
        if payload is None:
            await call.finish(GrpcStatus.INTERNAL, "Half-closed without a request")
            return
        try:
            request = pb.ReceiveMessageRequest.FromString(payload)
        except (DecodeError, RuntimeWarning, ValueError) as exc:
            await call.finish(GrpcStatus.INTERNAL, f"Invalid protobuf byte sequence: {exc}")
            return
        ctx = self.service.context_of(call)
        try:
            self.service.pipeline(ctx, "ReceiveMessage", request)
            await self._receive(ctx, request, call)
        except CallClosedError:
            raise  # the client is gone (what it was handed is given back in _receive)
        except ProxyError as exc:
            await call.send(pb.ReceiveMessageResponse(status=status(exc.code, exc.message)).SerializeToString())
        except Exception as exc:  # noqa: BLE001 - ResponseBuilder: INTERNAL_SERVER_ERROR, never a traceback
            log.error("gRPC ReceiveMessage from %s failed", ctx.remote_addr, exc_info=exc)
            await call.send(pb.ReceiveMessageResponse(
                status=status(Code.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")).SerializeToString())
        done = pb.ReceiveMessageResponse()
        done.delivery_timestamp.FromMilliseconds(_now_ms())
        await call.send(done.SerializeToString(), flush=False)  # leaves with the trailers, in one write
        await call.finish()

    def _polling_time_ms(self, ctx: GrpcContext, request: "pb.ReceiveMessageRequest", settings: Any) -> int:
        remaining = None if ctx.remaining is None else int(ctx.remaining * 1000)
        if request.HasField("long_polling_timeout"):
            polling = duration_ms(request.long_polling_timeout)
        else:
            timeout = duration_ms(settings.request_timeout) if settings is not None else 0
            polling = (remaining if remaining is not None else CONSUMER_MAX_LONG_POLLING_MS) - timeout // 2
        polling = min(max(polling, CONSUMER_MIN_LONG_POLLING_MS), CONSUMER_MAX_LONG_POLLING_MS)
        if remaining is not None and polling > remaining:
            if remaining >= CONSUMER_MIN_LONG_POLLING_MS:
                polling = remaining
            else:
                version = ctx.client_version or None
                code = Code.BAD_REQUEST if version is None or version < ILLEGAL_POLLING_TIME_INTRODUCED_CLIENT_VERSION \
                    else Code.ILLEGAL_POLLING_TIME
                raise ProxyError(code, "The deadline time remaining is not enough for polling, "
                                       "please check network condition")
        return polling

    async def _receive(self, ctx: GrpcContext, request: "pb.ReceiveMessageRequest", call: "Call") -> None:
        service = self.service
        settings = service.settings.get(ctx.client_id)
        if settings is None:
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, "cannot find client settings for this client")
        fifo = bool(settings.subscription.fifo)
        max_attempts = int(settings.backoff_policy.max_attempts)
        polling = self._polling_time_ms(ctx, request, settings)
        topic = check_topic(request.message_queue.topic)
        group = check_group(request.group)
        auto_renew = bool(request.auto_renew)
        if auto_renew:
            invisible = DEFAULT_INVISIBLE_TIME_MS
        else:
            invisible = duration_ms(request.invisible_duration)
            check_invisible_time(invisible, MIN_INVISIBLE_TIME_MS_FOR_RECV)
        expression = request.filter_expression
        expression_type = "SQL92" if expression.type == FilterType.SQL else "TAG"
        try:
            build_subscription_data(topic, expression.expression, expression_type)
        except SubscriptionParseError as exc:
            raise ProxyError(Code.ILLEGAL_FILTER_EXPRESSION, str(exc)) from None
        service.topic_config(topic)  # TOPIC_NOT_FOUND, as the proxy's route lookup
        pop = self._pop_service()
        result = None
        try:
            with service.held():  # a stopping broker answers held receives at once
                result = await pop.pop(
                    group=group, topic=topic, invisible_time_ms=invisible,
                    max_count=min(max(int(request.batch_size), 1), MAX_MSG_NUMS_FOR_POP_REQUEST),
                    queue_id=-1, poll_time_ms=polling, expression_type=expression_type,
                    expression=expression.expression or "*", fifo=fifo,
                    attempt_id=request.attempt_id if request.HasField("attempt_id") else None,
                    client=ctx.remote_addr, max_attempts=max_attempts)
        except PopError as exc:  # LocalMessageService: any other broker answer is INTERNAL_SERVER_ERROR
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, exc.remark) from None
        if result is None:
            raise ProxyError(Code.MESSAGE_NOT_FOUND, "no new message")
        if result.status is PopStatus.POLLING_FULL:
            raise ProxyError(Code.TOO_MANY_REQUESTS, "polling full")
        if result.status is not PopStatus.FOUND:
            raise ProxyError(Code.MESSAGE_NOT_FOUND, "no new message")
        if not result.messages:
            raise ProxyError(Code.MESSAGE_NOT_FOUND, "no match message")
        now = _now_ms()
        channel = service.channels.get(ctx.client_id)
        out: list[tuple[Any, str]] = []
        for popped in result.messages:
            record = decode_record(popped.record)
            handle = f"{popped.extra_info} {popped.commit_log_offset}"
            message = build_message(record, topic=topic, receipt_handle=handle, now_ms=now)
            message.system_properties.delivery_attempt = popped.reconsume_times + 1
            out.append((message, handle))
            if auto_renew and channel is not None:
                msg_id = message.system_properties.message_id
                self.receipts.add(channel, _Held(group, topic, msg_id, handle, handle, now, popped.reconsume_times))
        payloads = [pb.ReceiveMessageResponse(status=status(Code.OK)).SerializeToString()]
        payloads += [pb.ReceiveMessageResponse(message=message).SerializeToString() for message, _ in out]
        try:  # the status and the messages leave with the trailers, in one write
            await call.send_many(payloads, flush=False)
        except CallClosedError:  # the client is gone: what it may not have been sent comes back soon
            for _, handle in out:
                await self._nack_quietly(group, topic, handle)
            raise

    async def _nack_quietly(self, group: str, topic: str, handle_text: str) -> None:
        try:
            handle = ReceiptHandle.decode(handle_text)
            await self._pop_service().change_invisible_time(
                group=group, topic=handle.real_topic(topic, group), queue_id=handle.queue_id, offset=handle.offset,
                extra_info=handle.extra_info, invisible_time_ms=NACK_INVISIBLE_TIME_MS)
        except (ProxyError, PopError) as exc:
            log.warning("giving back message %s of %s failed: %s", handle_text, group, exc)

    # -- ack / change / DLQ ---------------------------------------------------------------------------
    def _current_handle(self, ctx: GrpcContext, group: str, msg_id: str, handle: str) -> str:
        held = self.receipts.remove(self.service.channels.get(ctx.client_id), group, msg_id, handle)
        return held.current if held is not None else handle

    async def ack_message(self, ctx: GrpcContext, request: "pb.AckMessageRequest") -> "pb.AckMessageResponse":
        results, pending = self._ack(ctx, request)
        return await self._answer_when_durable(_ack_response(results), pending)

    def ack_message_now(self, ctx: GrpcContext, request: "pb.AckMessageRequest"
                        ) -> "bytes | pb.AckMessageResponse | Awaitable[pb.AckMessageResponse]":
        """ack_message without a task of its own (the transport's read loop answers it): the
        response (serialized already when every entry is acked), or an awaitable of it while an
        orderly ack's offset becomes durable."""
        results, pending = self._ack(ctx, request)
        if pending:
            return self._answer_when_durable(_ack_response(results), pending)
        if results and all(failed is None for _, _, failed in results):
            return ack_ok_response([(message_id, handle) for message_id, handle, _ in results])
        return _ack_response(results)

    @staticmethod
    async def _answer_when_durable(response: "pb.AckMessageResponse",
                                   pending: list[Awaitable[None]]) -> "pb.AckMessageResponse":
        for wait in pending:
            await wait
        return response

    def _ack(self, ctx: GrpcContext, request: "pb.AckMessageRequest"
             ) -> tuple[list[tuple[str, str, "pb.Status | None"]], list[Awaitable[None]]]:
        """AckMessageActivity: each entry's message id, receipt handle and status (None: acked),
        and what to await before answering."""
        topic = check_topic(request.topic)
        group = check_group(request.group)
        results: list[tuple[str, str, "pb.Status | None"]] = []
        pending: list[Awaitable[None]] = []
        for entry in request.entries:
            message_id, receipt = entry.message_id, entry.receipt_handle
            failed = None
            try:
                handle = ReceiptHandle.decode(self._current_handle(ctx, group, message_id, receipt))
                if handle.expired(_now_ms()):
                    raise ProxyError(Code.INVALID_RECEIPT_HANDLE, "receipt handle is expired")
                try:
                    wait = self._pop_service().ack_now(group=group, topic=handle.real_topic(topic, group),
                                                       queue_id=handle.queue_id, offset=handle.offset,
                                                       extra_info=handle.extra())
                    if wait is not None:
                        pending.append(wait)
                except PopError:
                    failed = status(Code.INTERNAL_SERVER_ERROR, "ack failed: status is abnormal")
            except ProxyError as exc:
                failed = status(exc.code, exc.message)
            results.append((message_id, receipt, failed))
        return results, pending

    async def change_invisible_duration(self, ctx: GrpcContext, request: "pb.ChangeInvisibleDurationRequest"
                                        ) -> "pb.ChangeInvisibleDurationResponse":
        topic = check_topic(request.topic)
        group = check_group(request.group)
        invisible = duration_ms(request.invisible_duration)
        check_invisible_time(invisible)
        handle = ReceiptHandle.decode(request.receipt_handle)
        handle = ReceiptHandle.decode(self._current_handle(ctx, group, request.message_id, handle.encode()
                                                           if handle.commit_log_offset >= 0 else request.receipt_handle))
        new_handle = await self._change(group, topic, handle, invisible)
        if new_handle is None:
            return pb.ChangeInvisibleDurationResponse(
                status=status(Code.INTERNAL_SERVER_ERROR, "changeInvisibleDuration failed: status is abnormal"))
        return pb.ChangeInvisibleDurationResponse(status=status(Code.OK), receipt_handle=new_handle)

    async def _change(self, group: str, topic: str, handle: ReceiptHandle, invisible_ms: int) -> str | None:
        """ConsumerProcessor.changeInvisibleTime: the new receipt handle, or None when refused."""
        if handle.expired(_now_ms()):
            raise ProxyError(Code.INVALID_RECEIPT_HANDLE, "receipt handle is expired")
        try:
            result = await self._pop_service().change_invisible_time(
                group=group, topic=handle.real_topic(topic, group), queue_id=handle.queue_id, offset=handle.offset,
                extra_info=handle.extra_info, invisible_time_ms=invisible_ms)
        except PopError:
            return None
        return ReceiptHandle(handle.start_offset, result.pop_time, result.invisible_time, result.revive_qid,
                             handle.topic_type, handle.broker_name, handle.queue_id, handle.offset,
                             handle.commit_log_offset).encode()

    async def forward_to_dead_letter_queue(self, ctx: GrpcContext, request: "pb.ForwardMessageToDeadLetterQueueRequest"
                                           ) -> "pb.ForwardMessageToDeadLetterQueueResponse":
        topic = check_topic(request.topic)
        group = check_group(request.group)
        handle = ReceiptHandle.decode(self._current_handle(ctx, group, request.message_id, request.receipt_handle))
        if handle.commit_log_offset < 0:
            raise ProxyError(Code.INVALID_RECEIPT_HANDLE, "commit log offset is empty")
        try:
            await self._pop_service().forward_to_dlq(group=group, topic=handle.real_topic(topic, group),
                                                     queue_id=handle.queue_id, offset=handle.offset,
                                                     extra_info=handle.extra_info, origin_msg_id=request.message_id)
        except PopError as exc:
            return pb.ForwardMessageToDeadLetterQueueResponse(status=status(code_of_remoting(exc.code), exc.remark))
        return pb.ForwardMessageToDeadLetterQueueResponse(status=status(Code.OK))

    # -- auto-renewal -------------------------------------------------------------------------------
    async def run_renewal(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await trio.sleep(RENEW_PERIOD_S)
            try:
                await self.renew_once()
            except Exception:  # noqa: BLE001 - try again next round
                log.exception("receipt handle renewal round failed")

    def _client_offline(self, channel: GrpcClientChannel, group: str) -> bool:
        info = self.service.broker.consumer_manager.get_consumer_group_info(group)
        return channel.closed or info is None or channel not in info.channel_info_table

    async def renew_once(self, now_ms: int | None = None) -> None:
        """scheduleRenewTask: renew what is about to become visible; give back what an offline
        client held."""
        now = _now_ms() if now_ms is None else now_ms
        for key in list(self.receipts.groups):
            channel, group = key
            held_map = self.receipts.groups.get(key)
            if held_map is None:
                continue
            if self._client_offline(channel, group):
                del self.receipts.groups[key]
                for held in list(held_map.values()):
                    await self._renew(held, INVISIBLE_TIME_MS_WHEN_CLEAR)
                continue
            for msg_id, held in list(held_map.items()):
                try:
                    handle = ReceiptHandle.decode(held.current)
                except ProxyError:
                    held_map.pop(msg_id, None)
                    continue
                if handle.next_visible_time - now > RENEW_AHEAD_MS:
                    continue
                if held.renew_retry_times >= MAX_RENEW_RETRY_TIMES:
                    held_map.pop(msg_id, None)
                    continue
                if now - held.consume_timestamp < RENEW_MAX_MS:
                    delay = RENEW_NEXT_MS[min(held.renew_times, len(RENEW_NEXT_MS) - 1)]
                    new = await self._renew(held, delay)
                    if new is None:
                        held.renew_retry_times += 1
                    else:
                        held.current = new
                        held.renew_retry_times = 0
                        held.renew_times += 1
                else:  # held too long: stop renewing, back after the group's retry delay
                    held_map.pop(msg_id, None)
                    await self._renew(held, self._retry_delay(group, held.reconsume_times))

    def _retry_delay(self, group: str, reconsume_times: int) -> int:
        from rmqd.processors.grpc_clients import DEFAULT_RETRY_NEXT_MS
        return DEFAULT_RETRY_NEXT_MS[min(max(reconsume_times, 0), len(DEFAULT_RETRY_NEXT_MS) - 1)]

    async def _renew(self, held: _Held, invisible_ms: int) -> str | None:
        try:
            handle = ReceiptHandle.decode(held.current)
            return await self._change(held.group, held.topic, handle, invisible_ms)
        except ProxyError as exc:
            log.info("renewing %s of %s: %s", held.msg_id, held.group, exc.message)
            return None



def _ack_response(results: list[tuple[str, str, "pb.Status | None"]]) -> "pb.AckMessageResponse":
    """The AckMessageResponse of these entries: their statuses, and the call's (the one code
    they share, MULTIPLE_RESULTS when they differ)."""
    response = pb.AckMessageResponse()
    codes: set[int] = set()
    for message_id, handle, failed in results:
        result = response.entries.add(message_id=message_id, receipt_handle=handle)
        result.status.CopyFrom(_OK_STATUS if failed is None else failed)
        codes.add(result.status.code)
    if len(codes) > 1:
        response.status.CopyFrom(status(Code.MULTIPLE_RESULTS))
    elif codes:
        response.status.CopyFrom(status(codes.pop()))
    else:
        response.status.CopyFrom(status(Code.INTERNAL_SERVER_ERROR, "ack message result is empty"))
    return response

__all__ = ["ConsumerActivity", "ReceiptHandle", "ReceiptHandleManager"]
