"""apache.rocketmq.v2.MessagingService over rmqd's store and its 4.x processors.

Why it is thin: Apache RocketMQ 5.3.3's proxy in local mode hands each gRPC call to the
broker's own processors as a Remoting command; rmqd does the same. SendMessage becomes a
SEND_MESSAGE for SendMessageProcessor (topic checks, half messages of transactions, 5.x
timers for delay, the store, SYNC_FLUSH waits and their answers), EndTransaction an
END_TRANSACTION for EndTransactionProcessor, the route comes from the topic table, clients
go into the same producer / consumer tables (a `GrpcClientChannel` each), so the
transaction check-back, client expiry and mqadmin's client codes work unchanged. What is
gRPC's own lives here: the metadata context, the ACL signature, the proxy's checks and
codes, the settings exchange on Telemetry, and the message conversions (grpc_convert).

Every answer carries a RocketMQ status: a handler failure becomes INTERNAL_SERVER_ERROR in
the response's status, never an exception on the wire. Unary and streaming calls reach
this module through a `Call` (the transport's view of one RPC: metadata, recv, send,
finish), so processors/ does not depend on broker/.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import trio
from google.protobuf.message import DecodeError

from rmqd.processors.acl import AclError, AclState
from rmqd.processors.client_manager import ClientChannelInfo, ConsumerManager, ProducerManager
from rmqd.processors.common import (
    AUTO_CREATE_TOPIC_KEY_TOPIC, DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, perm_readable, perm_writeable,
)
from rmqd.processors.grpc_acl import check as acl_check
from rmqd.processors.grpc_clients import (
    CALL_CLIENT_TIMEOUT_S, ClientSettingsManager, GrpcChannelManager, GrpcClientChannel, TransactionDataManager,
    client_type_name,
)
from rmqd.processors.grpc_consumer import ConsumerActivity
from rmqd.processors.grpc_common import (
    GrpcContext, ProxyError, check_client_id, check_group, check_topic, code_of_remoting, consistent_hash, status,
)
from rmqd.processors.grpc_convert import (
    PROPERTY_BORN_TIMESTAMP, PROPERTY_SHARDING_KEY, as_broker_reads, build_message_properties, build_sys_flag, send_ok_response,
    topic_message_type,
)
from rmqd.processors.pull import SubscriptionParseError, build_subscription_data
from rmqd.processors.seams import BrokerConfigView
from rmqd.store.config import MessageStoreConfig
from rmqd.store.subscription_group import SubscriptionGroupManager
from rmqd.store.topic_config import TopicConfigManager
from rmqd.wire.bodies import ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData
from rmqd.wire.codes import LanguageCode, MQVersion, RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand
from rmqd.wire.headers import SendMessageRequestHeader
from rmqd.wire.grpc import CallClosedError, GrpcStatus, GrpcWireError
from rmqd.wire.javamap import java_string_hash
from rmqd.wire.message import MessageSysFlag, parse_offset_msg_id
from rmqd.wire.rocketmq_v2 import (
    MESSAGING_SERVICE, AddressScheme, ClientType, Code, FilterType, MessageType, Permission,
    TransactionResolution, TransactionSource, pb,
)

log = logging.getLogger("rmqd.grpc.service")

MASTER_ID = 0
#: the topic's message.type -> the accept_message_types of its queues (RouteActivity.parseTopicMessageType)
ACCEPT_TYPES = {
    "NORMAL": [MessageType.NORMAL], "FIFO": [MessageType.FIFO], "DELAY": [MessageType.DELAY],
    "TRANSACTION": [MessageType.TRANSACTION],
    "MIXED": [MessageType.NORMAL, MessageType.FIFO, MessageType.DELAY, MessageType.TRANSACTION],
}


class CallInfo(Protocol):
    """Who makes an RPC, from where, until when: all an inline handler reads of its call (the
    transport's GrpcCall, or its lighter TakenCall for a request it took whole)."""

    @property
    def metadata(self) -> Mapping[str, str]: ...
    @property
    def remote_addr(self) -> str: ...
    @property
    def local_addr(self) -> str: ...

    def remaining_seconds(self) -> float | None: ...


class Call(CallInfo, Protocol):
    """One RPC as the transport gives it (broker/grpc_server.GrpcCall)."""

    async def recv(self) -> bytes | None: ...

    async def send(self, payload: bytes, flush: bool = True) -> None: ...

    async def send_many(self, payloads: list[bytes], flush: bool = True) -> None: ...

    async def send_last(self, payload: bytes) -> None: ...

    async def finish(self, status: GrpcStatus = GrpcStatus.OK, message: str | None = None) -> None: ...


GrpcHandler = Callable[[Call], Awaitable[None]]
#: a unary method answered on the transport's read loop: (call, request message) -> the response
#: message, or an awaitable of it when it has to wait; a status-only answer raises GrpcWireError
InlineHandler = Callable[[CallInfo, bytes], "bytes | Awaitable[bytes]"]


class AclView(Protocol):
    """The broker's plain ACL (broker/acl_config.AclService): the accounts and white lists in force."""

    @property
    def state(self) -> AclState: ...


class GrpcBroker(Protocol):
    """What the service uses of the broker (broker/broker.BrokerRole)."""

    @property
    def broker_config(self) -> BrokerConfigView: ...
    @property
    def message_store_config(self) -> MessageStoreConfig: ...
    @property
    def topic_config_manager(self) -> TopicConfigManager: ...
    @property
    def subscription_group_manager(self) -> SubscriptionGroupManager: ...
    @property
    def producer_manager(self) -> ProducerManager: ...
    @property
    def consumer_manager(self) -> ConsumerManager: ...
    @property
    def acl(self) -> AclView | None: ...


#: SendMessageProcessor.send_decoded_now's shape: (context, header, decoded properties, body)
SendDecoded = Callable[[Any, SendMessageRequestHeader, dict[str, str], bytes],
                       "RemotingCommand | Awaitable[RemotingCommand]"]


class _LocalChannel:
    """The `channel` a 4.x processor reads from its context: the gRPC client's address."""

    __slots__ = ("remote_addr",)

    def __init__(self, remote_addr: str) -> None:
        self.remote_addr = remote_addr


@dataclass(slots=True)
class _LocalContext:
    channel: _LocalChannel


class _TelemetryStream:
    """TelemetryWriter over a Telemetry call: one writer at a time (the check-back and the
    settings answer may be written from different tasks)."""

    def __init__(self, call: Call) -> None:
        self.call = call
        self._lock = trio.Semaphore(1)  # not a Lock: see GrpcConnection._send_lock

    async def write(self, command: "pb.TelemetryCommand") -> None:
        async with self._lock:
            await self.call.send(command.SerializeToString())


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _language(name: str) -> int:
    try:
        return int(LanguageCode[name])
    except KeyError:
        return int(LanguageCode.OTHER)


def _client_version(text: str) -> int:
    """parseClientVersion: the MQVersion ordinal of "V5_0_8" (or "5.0.8"), else V5_0_0's."""
    for name in (text.upper(), "V" + text.replace(".", "_").upper()):
        if name in MQVersion.__members__:
            return int(MQVersion[name].value)
    return int(MQVersion["V5_0_0"].value)


class MessagingService:
    """The handlers of apache.rocketmq.v2.MessagingService."""

    def __init__(self, broker: GrpcBroker, *, send: SendDecoded,
                 end_transaction: Callable[[Any, RemotingCommand], Awaitable[RemotingCommand | None]],
                 grpc_port: Callable[[], int], pop: Callable[[], Any] = lambda: None) -> None:
        self.broker = broker
        #: SendMessageProcessor.send_decoded_now: the answer at once, or an awaitable of it when
        #: the store has to wait (SYNC_FLUSH, SYNC_MASTER)
        self._send = send
        self._end_transaction = end_transaction
        self._grpc_port = grpc_port
        self.transactions = TransactionDataManager()
        self.channels = GrpcChannelManager(self.transactions, self._channel_closed)
        max_body = int(getattr(broker.message_store_config, "maxMessageSize", 4 * 1024 * 1024))
        self.settings = ClientSettingsManager(self._group_config, max_body)
        self.max_body_size = max_body
        self.stopping = trio.Event()
        self._held: set[trio.CancelScope] = set()
        self._round_robin = itertools.count()
        #: receive / ack / change invisible time / DLQ over the broker's POP service
        self.consumer = ConsumerActivity(self, pop)

    # -- plumbing ---------------------------------------------------------------------------------
    def _group_config(self, group: str) -> Any:
        try:
            return self.broker.subscription_group_manager.find_subscription_group_config(group)
        except Exception:  # noqa: BLE001 - a bad name: no config
            return None

    def _acl_state(self) -> AclState | None:
        acl = getattr(self.broker, "acl", None)
        return acl.state if acl is not None else None

    def pipeline(self, ctx: GrpcContext, method: str, request: Any) -> None:
        """ContextInitPipeline, the ACL (AuthenticationPipeline), validateContext."""
        state = self._acl_state()
        if state is not None:
            try:
                error = acl_check(state, method, request, ctx.metadata, ctx.remote_host)
            except AclError as exc:
                error = exc
            if error is not None:
                log.warning("acl refused gRPC %s from %s: %s", method, ctx.remote_addr, error.message)
                raise ProxyError(Code.UNAUTHORIZED, error.message or "unauthorized")
        check_client_id(ctx)

    @staticmethod
    def context_of(call: CallInfo) -> GrpcContext:
        return GrpcContext.of(call.metadata, call.remote_addr, call.local_addr, call.remaining_seconds())

    def unary(self, method: str, request_cls: Any, response_cls: Any,
              fn: Callable[[GrpcContext, Any], Awaitable[Any]]) -> GrpcHandler:
        async def handle(call: Call) -> None:
            payload = await call.recv()
            if payload is None:
                await call.finish(GrpcStatus.INTERNAL, "Half-closed without a request")
                return
            try:
                request = _parse(request_cls, payload)
            except GrpcWireError as exc:
                await call.finish(exc.status, str(exc))
                return
            ctx = self.context_of(call)
            try:
                self.pipeline(ctx, method, request)
                response = await fn(ctx, request)
            except CallClosedError:
                raise
            except Exception as exc:  # noqa: BLE001 - becomes the response's status (_failed)
                response = self._failed(method, ctx, response_cls, exc)
            await call.send_last(response.SerializeToString())
        return handle

    def unary_now(self, method: str, request_cls: Any, response_cls: Any,
                  fn: Callable[[GrpcContext, Any], Any]) -> InlineHandler:
        """``unary`` for a method whose ``fn`` answers without waiting (or returns an awaitable
        when it must wait): the transport runs it on its read loop, no task per call."""
        def handle(call: CallInfo, payload: bytes) -> bytes | Awaitable[bytes]:
            request = _parse(request_cls, payload)
            ctx = self.context_of(call)
            try:
                self.pipeline(ctx, method, request)
                response = fn(ctx, request)
            except Exception as exc:  # noqa: BLE001 - becomes the response's status (_failed)
                response = self._failed(method, ctx, response_cls, exc)
            if isinstance(response, response_cls):
                return response.SerializeToString()
            if type(response) is bytes:  # serialized by fn itself (send_ok_response)
                return response
            return self._answer_later(method, ctx, response_cls, response)
        return handle

    async def _answer_later(self, method: str, ctx: GrpcContext, response_cls: Any, pending: Awaitable[Any]) -> bytes:
        try:
            response = await pending
        except CallClosedError:
            raise
        except Exception as exc:  # noqa: BLE001 - becomes the response's status (_failed)
            response = self._failed(method, ctx, response_cls, exc)
        return response.SerializeToString()

    @staticmethod
    def _failed(method: str, ctx: GrpcContext, response_cls: Any, exc: Exception) -> Any:
        """ResponseBuilder: a ProxyError's code and text, anything unexpected INTERNAL_SERVER_ERROR."""
        if isinstance(exc, ProxyError):
            return response_cls(status=status(exc.code, exc.message))
        log.error("gRPC %s from %s failed", method, ctx.remote_addr, exc_info=exc)
        return response_cls(status=status(Code.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}"))

    def inline_handlers(self) -> dict[tuple[str, str], InlineHandler]:
        """The unary methods the transport may answer on its read loop (the hot ones)."""
        svc = MESSAGING_SERVICE
        return {
            (svc, "SendMessage"): self.unary_now("SendMessage", pb.SendMessageRequest, pb.SendMessageResponse,
                                                  self.send_message_now),
            (svc, "AckMessage"): self.unary_now("AckMessage", pb.AckMessageRequest, pb.AckMessageResponse,
                                                 self.consumer.ack_message_now),
        }

    def handlers(self) -> dict[tuple[str, str], GrpcHandler]:
        svc = MESSAGING_SERVICE
        table: dict[tuple[str, str], GrpcHandler] = {
            (svc, "QueryRoute"): self.unary("QueryRoute", pb.QueryRouteRequest, pb.QueryRouteResponse,
                                             self.query_route),
            (svc, "Heartbeat"): self.unary("Heartbeat", pb.HeartbeatRequest, pb.HeartbeatResponse, self.heartbeat),
            (svc, "SendMessage"): self.unary("SendMessage", pb.SendMessageRequest, pb.SendMessageResponse,
                                              self.send_message),
            (svc, "QueryAssignment"): self.unary("QueryAssignment", pb.QueryAssignmentRequest,
                                                  pb.QueryAssignmentResponse, self.query_assignment),
            (svc, "EndTransaction"): self.unary("EndTransaction", pb.EndTransactionRequest,
                                                 pb.EndTransactionResponse, self.end_transaction),
            (svc, "NotifyClientTermination"): self.unary(
                "NotifyClientTermination", pb.NotifyClientTerminationRequest, pb.NotifyClientTerminationResponse,
                self.notify_client_termination),
            (svc, "RecallMessage"): self.unary("RecallMessage", pb.RecallMessageRequest, pb.RecallMessageResponse,
                                                self.recall_message),
            (svc, "Telemetry"): self.telemetry,
        }
        table.update({(svc, method): handler for method, handler in self.consumer.handlers().items()})
        return table

    # -- routes ---------------------------------------------------------------------------------
    def topic_config(self, topic: str) -> Any:
        tc = self.broker.topic_config_manager.select_topic_config(topic)
        if tc is None:
            raise ProxyError(Code.TOPIC_NOT_FOUND,
                             f"CODE: 17  DESC: No topic route info in name server for the topic: {topic}")
        return tc

    def _perm(self, tc: Any) -> int:
        perm = int(tc.perm)
        broker_perm = int(self.broker.broker_config.brokerPermission)
        if not (perm_readable(broker_perm) and perm_writeable(broker_perm)):
            perm = broker_perm  # a broker made read- or write-only registers its topics so
        return perm

    def _broker(self, endpoints: "pb.Endpoints", ctx: GrpcContext) -> "pb.Broker":
        """Our own gRPC address as the client reached it (useEndpointPortFromRequest=false)."""
        broker = pb.Broker(name=str(self.broker.broker_config.brokerName), id=MASTER_ID)
        port = self._grpc_port()
        hosts = [a.host for a in endpoints.addresses] if endpoints.addresses else []
        scheme = endpoints.scheme if endpoints.addresses else AddressScheme.IPv4
        if not hosts:
            local = ctx.local_addr.rpartition(":")[0].strip("[]") or "127.0.0.1"
            hosts = [local]
            scheme = AddressScheme.IPv6 if ":" in local else AddressScheme.IPv4
        broker.endpoints.scheme = scheme
        for host in hosts:
            broker.endpoints.addresses.add(host=host, port=port)
        return broker

    async def query_route(self, ctx: GrpcContext, request: "pb.QueryRouteRequest") -> "pb.QueryRouteResponse":
        topic = check_topic(request.topic)
        tc = self.topic_config(topic)
        broker = self._broker(request.endpoints, ctx)
        perm = self._perm(tc)
        accept = ACCEPT_TYPES.get(tc.message_type, [MessageType.MESSAGE_TYPE_UNSPECIFIED])
        read, write = int(tc.readQueueNums), int(tc.writeQueueNums)
        r = w = rw = n = 0
        if perm_writeable(perm) and perm_readable(perm):
            rw = min(write, read)
            r, w = read - rw, write - rw
        elif perm_writeable(perm):
            w = write
        elif perm_readable(perm):
            r = read
        else:
            n = max(1, write, read)
        response = pb.QueryRouteResponse(status=status(Code.OK))
        queue_id = 0
        for count, permission in ((r, Permission.READ), (w, Permission.WRITE), (rw, Permission.READ_WRITE),
                                  (n, Permission.NONE)):
            for _ in range(count):
                mq = response.message_queues.add(id=queue_id, permission=permission)
                mq.topic.CopyFrom(request.topic)
                mq.broker.CopyFrom(broker)
                mq.accept_message_types.extend(accept)
                queue_id += 1
        return response

    async def query_assignment(self, ctx: GrpcContext,
                               request: "pb.QueryAssignmentRequest") -> "pb.QueryAssignmentResponse":
        topic = check_topic(request.topic)
        group = check_group(request.group)
        tc = self.topic_config(topic)
        perm = self._perm(tc)
        config = self._group_config(group)
        fifo = bool(getattr(config, "consumeMessageOrderly", False)) if config is not None else False
        response = pb.QueryAssignmentResponse()
        if perm_readable(perm) and int(tc.readQueueNums) > 0:
            broker = self._broker(request.endpoints, ctx)
            permission = (Permission.READ_WRITE if perm_writeable(perm) else Permission.READ)
            for queue_id in (range(int(tc.readQueueNums)) if fifo else (-1,)):
                mq = response.assignments.add().message_queue
                mq.topic.CopyFrom(request.topic)
                mq.id = queue_id
                mq.permission = permission
                mq.broker.CopyFrom(broker)
        if not response.assignments:
            response.status.CopyFrom(status(Code.FORBIDDEN, "no readable queue"))
        else:
            response.status.CopyFrom(status(Code.OK))
        return response

    # -- clients ------------------------------------------------------------------------------------
    def _channel_closed(self, channel: GrpcClientChannel) -> None:
        """Client expiry closed the channel: out of every table, as a closed connection."""
        self.broker.producer_manager.do_channel_close_event(channel)
        self.broker.consumer_manager.do_channel_close_event(channel)
        self.settings.remove(channel.client_id)

    def _client_info(self, ctx: GrpcContext) -> tuple[GrpcClientChannel, ClientChannelInfo]:
        channel = self.channels.create(ctx.client_id, ctx.remote_addr, ctx.local_addr)
        info = ClientChannelInfo(channel, ctx.client_id, _language(ctx.language), _client_version(ctx.client_version))
        return channel, info

    def _register_producer(self, ctx: GrpcContext, topic: str) -> GrpcClientChannel:
        """The topic is the producer group (Apache's proxy: the check-back finds the client by it)."""
        channel, info = self._client_info(ctx)
        self.broker.producer_manager.register_producer(topic, info)
        return channel

    def _subscriptions(self, entries: Any) -> list[SubscriptionData]:
        subs = []
        version = _now_ms()
        for entry in entries:
            expression_type = "SQL92" if entry.expression.type == FilterType.SQL else "TAG"
            try:
                data = build_subscription_data(entry.topic.name, entry.expression.expression, expression_type)
            except SubscriptionParseError:
                raise ProxyError(Code.ILLEGAL_FILTER_EXPRESSION, "expression format is not correct") from None
            subs.append(SubscriptionData(topic=data.topic, subString=data.subString, tagsSet=sorted(data.tagsSet),
                                         codeSet=sorted(data.codeSet), subVersion=version,
                                         expressionType=data.expressionType))
        return subs

    def _register_consumer(self, ctx: GrpcContext, group: str, client_type: int, entries: Any) -> GrpcClientChannel:
        channel, info = self._client_info(ctx)
        consume_type = ConsumeType.CONSUME_ACTIVELY if client_type == ClientType.SIMPLE_CONSUMER \
            else ConsumeType.CONSUME_PASSIVELY
        config = self._group_config(group)
        notify = bool(getattr(config, "notifyConsumerIdsChangedEnable", True)) if config is not None else True
        self.broker.consumer_manager.register_consumer(
            group, info, consume_type, MessageModel.CLUSTERING, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
            self._subscriptions(entries), notify)
        return channel

    async def heartbeat(self, ctx: GrpcContext, request: "pb.HeartbeatRequest") -> "pb.HeartbeatResponse":
        settings = self.settings.get(ctx.client_id)
        if settings is None:
            return pb.HeartbeatResponse(status=status(Code.UNRECOGNIZED_CLIENT_TYPE,
                                                      "cannot find client settings for this client"))
        kind = settings.client_type
        if kind == ClientType.PRODUCER:
            for topic in settings.publishing.topics:
                self._register_producer(ctx, topic.name)
        elif kind in (ClientType.PUSH_CONSUMER, ClientType.SIMPLE_CONSUMER):
            group = check_group(request.group)
            self._register_consumer(ctx, group, kind, settings.subscription.subscriptions)
        else:
            return pb.HeartbeatResponse(status=status(Code.UNRECOGNIZED_CLIENT_TYPE, client_type_name(kind)))
        return pb.HeartbeatResponse(status=status(Code.OK))

    async def notify_client_termination(self, ctx: GrpcContext, request: "pb.NotifyClientTerminationRequest"
                                        ) -> "pb.NotifyClientTerminationResponse":
        settings = self.settings.remove(ctx.client_id)
        if settings is None:
            return pb.NotifyClientTerminationResponse(status=status(Code.UNRECOGNIZED_CLIENT_TYPE,
                                                                    "cannot find client settings for this client"))
        kind = settings.client_type
        if kind == ClientType.PRODUCER:
            channel = self.channels.remove(ctx.client_id)
            if channel is not None:
                info = ClientChannelInfo(channel, ctx.client_id, _language(ctx.language))
                for topic in settings.publishing.topics:
                    self.broker.producer_manager.unregister_producer(topic.name, info)
        elif kind in (ClientType.PUSH_CONSUMER, ClientType.SIMPLE_CONSUMER):
            group = check_group(request.group)
            channel = self.channels.remove(ctx.client_id)
            if channel is not None:
                info = ClientChannelInfo(channel, ctx.client_id, _language(ctx.language))
                config = self._group_config(group)
                notify = bool(getattr(config, "notifyConsumerIdsChangedEnable", True)) if config is not None else True
                self.broker.consumer_manager.unregister_consumer(group, info, notify)
        else:
            return pb.NotifyClientTerminationResponse(status=status(Code.UNRECOGNIZED_CLIENT_TYPE,
                                                                    client_type_name(kind)))
        return pb.NotifyClientTerminationResponse(status=status(Code.OK))

    # -- telemetry ----------------------------------------------------------------------------------
    async def telemetry(self, call: Call) -> None:
        """The client's settings in, the server's settings and its commands out; the stream
        stays open as long as the client keeps it (or the broker stops)."""
        stream = _TelemetryStream(call)
        attached: set[GrpcClientChannel] = set()
        try:
            with self.held():
                await self._telemetry_loop(call, stream, attached)
            await call.finish()
        finally:
            for channel in attached:
                channel.detach(stream)

    async def _telemetry_loop(self, call: Call, stream: _TelemetryStream, attached: set[GrpcClientChannel]) -> None:
        while True:
            payload = await call.recv()
            if payload is None:
                return
            try:
                command = pb.TelemetryCommand.FromString(payload)
            except (DecodeError, RuntimeWarning, ValueError) as exc:
                await call.finish(GrpcStatus.INTERNAL, f"Invalid protobuf byte sequence: {exc}")
                return
            ctx = self.context_of(call)
            try:
                self.pipeline(ctx, "Telemetry", command)
                kind = command.WhichOneof("command")
                if kind == "settings":
                    if not await self._client_settings(ctx, command.settings, stream, attached):
                        await call.finish(GrpcStatus.INVALID_ARGUMENT,
                                          "there is no publishing or subscription data in settings")
                        return
                elif kind == "thread_stack_trace":
                    channel = self.channels.get(ctx.client_id)
                    if channel is not None:
                        trace = command.thread_stack_trace
                        channel.resolve(trace.nonce, command.status, trace.thread_stack_trace)
                elif kind == "verify_message_result":
                    channel = self.channels.get(ctx.client_id)
                    if channel is not None:
                        channel.resolve(command.verify_message_result.nonce, command.status, None)
            except ProxyError as exc:
                grpc_status = GrpcStatus.INVALID_ARGUMENT if Code.BAD_REQUEST <= exc.code < Code.INTERNAL_ERROR \
                    else GrpcStatus.INTERNAL
                await call.finish(grpc_status, f"process client telemetryCommand failed. {exc.message}")
                return

    async def _client_settings(self, ctx: GrpcContext, settings: "pb.Settings", stream: _TelemetryStream,
                               attached: set[GrpcClientChannel]) -> bool:
        channel: GrpcClientChannel | None = None
        kind = settings.WhichOneof("pub_sub")
        if kind == "publishing":
            for topic in settings.publishing.topics:
                name = check_topic(topic)
                channel = self._register_producer(ctx, name)
        elif kind == "subscription":
            group = check_group(settings.subscription.group)
            channel = self._register_consumer(ctx, group, settings.client_type, settings.subscription.subscriptions)
        else:
            return False
        self.settings.update(ctx.client_id, settings)
        answer = pb.TelemetryCommand(status=status(Code.OK))
        merged = self.settings.get(ctx.client_id)
        if merged is not None:
            answer.settings.CopyFrom(merged)
        if channel is not None:
            channel.attach(stream, ctx.remote_addr)
            attached.add(channel)
        await stream.write(answer)
        return True

    # -- producer -----------------------------------------------------------------------------------
    def _select_queue(self, tc: Any, request: "pb.SendMessageRequest", message_group: str | None) -> int:
        """``message_group``: the one message's group (its properties' sharding key), if any."""
        perm = self._perm(tc)
        writes = int(tc.writeQueueNums)
        if not perm_writeable(perm) or writes <= 0:
            raise ProxyError(Code.FORBIDDEN, "no writable queue")
        if message_group and len(request.messages) == 1:
            return consistent_hash(java_string_hash(message_group), writes)
        return next(self._round_robin) % writes

    def _prepare_send(self, ctx: GrpcContext, request: "pb.SendMessageRequest"
                      ) -> tuple[list[tuple[SendMessageRequestHeader, dict[str, str]]], list["pb.Message"],
                                 list[bytes], str]:
        """SendMessageActivity's checks and conversion: one SEND_MESSAGE header and the
        properties the broker reads from it per message, the messages and their bodies (raises
        ProxyError with the client's status). Each upb field is read once: a read builds a Python
        object (a body's read copies it)."""
        messages = list(request.messages)
        if not messages:
            raise ProxyError(Code.MESSAGE_CORRUPTED, "no message to send")
        first = messages[0]
        first_topic = first.topic
        topic = check_topic(first_topic.name)
        now = _now_ms()
        prepared = []
        bodies = []
        for i, message in enumerate(messages):
            if i and message.topic != first_topic:
                raise ProxyError(Code.MESSAGE_CORRUPTED, "topic in message is not same")
            body = message.body
            if not body:
                raise ProxyError(Code.MESSAGE_BODY_EMPTY, "message body cannot be empty")
            if len(body) > self.max_body_size:
                raise ProxyError(Code.MESSAGE_BODY_TOO_LARGE,
                                 f"message body cannot exceed the max {self.max_body_size}")
            prepared.append(build_message_properties(ctx, message, topic, now))
            bodies.append(body)
        sys_flag = build_sys_flag(first)
        tc = self.topic_config(topic)
        if not topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
            expected, actual = tc.message_type, topic_message_type(prepared[0])
            if actual == "UNSPECIFIED" or (actual != expected and expected != "MIXED"):
                raise ProxyError(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                                 f"TopicMessageType validate failed, the expected type is {expected}, "
                                 f"but actual type is {actual}")
        queue_id = self._select_queue(tc, request, prepared[0].get(PROPERTY_SHARDING_KEY))
        requests = [(_send_header(topic, queue_id, sys_flag, props, now), as_broker_reads(props)) for props in prepared]
        return requests, messages, bodies, topic

    @staticmethod
    def _send_response(entries: list["pb.SendResultEntry"]) -> "pb.SendMessageResponse":
        response = pb.SendMessageResponse()
        codes: set[int] = set()
        for entry in entries:
            response.entries.append(entry)
            codes.add(entry.status.code)
        if len(codes) > 1:
            response.status.CopyFrom(status(Code.MULTIPLE_RESULTS))
        else:
            response.status.CopyFrom(status(codes.pop()))
        return response

    async def send_message(self, ctx: GrpcContext, request: "pb.SendMessageRequest") -> "pb.SendMessageResponse":
        requests, messages, bodies, topic = self._prepare_send(ctx, request)
        entries = []
        local = _LocalContext(_LocalChannel(ctx.remote_addr))
        for (header, props), message, body in zip(requests, messages, bodies):
            answer = self._send(local, header, props, body)
            if not isinstance(answer, RemotingCommand):
                answer = await answer
            entries.append(self._send_entry(topic, message, answer))
        return self._send_response(entries)

    def send_message_now(self, ctx: GrpcContext, request: "pb.SendMessageRequest"
                         ) -> "bytes | pb.SendMessageResponse | Awaitable[pb.SendMessageResponse]":
        """send_message without a task of its own (the transport's read loop answers it at once):
        the response (serialized already when it is the common one), or an awaitable of it when
        a store append has to wait (SYNC_FLUSH, SYNC_MASTER) or a batch holds more than one
        message."""
        if len(request.messages) != 1:
            return self.send_message(ctx, request)
        requests, messages, bodies, topic = self._prepare_send(ctx, request)
        header, props = requests[0]
        answer = self._send(_LocalContext(_LocalChannel(ctx.remote_addr)), header, props, bodies[0])
        if not isinstance(answer, RemotingCommand):
            return self._send_awaited(topic, messages[0], answer)
        message = messages[0]
        sp = message.system_properties
        if answer.code == ResponseCode.SUCCESS and sp.message_type != MessageType.TRANSACTION:
            # the common answer already serialized (what _send_response(_send_entry(...)) builds)
            return send_ok_response(sp.message_id, _queue_offset(answer.ext_fields))
        return self._send_response([self._send_entry(topic, message, answer)])

    async def _send_awaited(self, topic: str, message: "pb.Message",
                            answer: Awaitable[RemotingCommand]) -> "pb.SendMessageResponse":
        return self._send_response([self._send_entry(topic, message, await answer)])

    def _send_entry(self, topic: str, message: "pb.Message", answer: RemotingCommand) -> "pb.SendResultEntry":
        """The client's entry for one message from the broker's Remoting answer."""
        code = int(answer.code)
        out = answer.ext_fields or {}
        if code == ResponseCode.SUCCESS:
            entry = pb.SendResultEntry(status=status(Code.OK))
            uniq = message.system_properties.message_id
            entry.message_id = uniq
            entry.transaction_id = uniq
            entry.offset = _queue_offset(out)
            if message.system_properties.message_type == MessageType.TRANSACTION:
                self._remember_transaction(topic, uniq, out)
            return entry
        named = {int(ResponseCode.FLUSH_DISK_TIMEOUT): (Code.MASTER_PERSISTENCE_TIMEOUT, "FLUSH_DISK_TIMEOUT"),
                 int(ResponseCode.FLUSH_SLAVE_TIMEOUT): (Code.SLAVE_PERSISTENCE_TIMEOUT, "FLUSH_SLAVE_TIMEOUT"),
                 int(ResponseCode.SLAVE_NOT_AVAILABLE): (Code.HA_NOT_AVAILABLE, "SLAVE_NOT_AVAILABLE")}
        if code in named:
            v2, text = named[code]
            return pb.SendResultEntry(status=status(v2, f"send message failed, sendStatus={text}"))
        # LocalMessageService: any other broker answer fails the whole call
        raise ProxyError(Code.INTERNAL_SERVER_ERROR, answer.remark or str(code))

    def _remember_transaction(self, group: str, transaction_id: str, out: Mapping[str, str]) -> None:
        """fillTransactionData: the half's offsets for the EndTransaction to come."""
        try:
            _ip, _port, commit_log_offset = parse_offset_msg_id(out.get("msgId", ""))
            self.transactions.add(group, transaction_id, int(out.get("queueOffset", "-1")), commit_log_offset)
        except ValueError as exc:
            log.warning("transaction %s: cannot keep its offsets: %s", transaction_id, exc)

    async def end_transaction(self, ctx: GrpcContext,
                              request: "pb.EndTransactionRequest") -> "pb.EndTransactionResponse":
        topic = check_topic(request.topic)
        if not request.transaction_id.strip():
            raise ProxyError(Code.INVALID_TRANSACTION_ID, "transaction id cannot be empty")
        kind = {TransactionResolution.COMMIT: MessageSysFlag.TRANSACTION_COMMIT_TYPE,
                TransactionResolution.ROLLBACK: MessageSysFlag.TRANSACTION_ROLLBACK_TYPE}.get(
                    request.resolution, MessageSysFlag.TRANSACTION_NOT_TYPE)
        data = self.transactions.poll(topic, request.transaction_id)
        if data is None:
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, "cannot found transaction data")
        ext = {
            "topic": topic, "producerGroup": topic, "tranStateTableOffset": str(data.tran_state_table_offset),
            "commitLogOffset": str(data.commit_log_offset), "commitOrRollback": str(kind),
            "fromTransactionCheck": "true" if request.source == TransactionSource.SOURCE_SERVER_CHECK else "false",
            "msgId": request.message_id, "transactionId": request.transaction_id,
        }
        answer = await self._end_transaction(_LocalContext(_LocalChannel(ctx.remote_addr)),
                                             RemotingCommand(code=RequestCode.END_TRANSACTION, ext_fields=ext))
        if answer is not None and answer.code != ResponseCode.SUCCESS:
            # endTransactionOneway: the proxy does not wait for this answer; logged, OK to the client
            log.warning("end transaction %s of %s: %s %s", request.transaction_id, topic, answer.code, answer.remark)
        return pb.EndTransactionResponse(status=status(Code.OK))

    async def recall_message(self, ctx: GrpcContext, request: "pb.RecallMessageRequest") -> "pb.RecallMessageResponse":
        check_topic(request.topic)
        raise ProxyError(Code.NOT_IMPLEMENTED, "recalling a delay message is not supported by rmqd")

    # -- calls to clients from the admin side ---------------------------------------------------------
    def find_channel(self, client_id: str) -> GrpcClientChannel | None:
        return self.channels.get(client_id)

    @contextlib.contextmanager
    def held(self) -> Iterator[trio.CancelScope]:
        """A cancel scope for a call that may wait long (a Telemetry stream, a long-polling
        receive): stop() cancels it, so a stopping broker answers at once."""
        with trio.CancelScope() as scope:
            if self.stopping.is_set():
                scope.cancel()
            self._held.add(scope)
            try:
                yield scope
            finally:
                self._held.discard(scope)

    async def stop(self) -> None:
        """End the long-lived streams (Telemetry, held receives) so the transport can stop."""
        self.stopping.set()
        for scope in list(self._held):
            scope.cancel()


def _queue_offset(out: Mapping[str, str] | None) -> int:
    """The queue offset of a send's answer (0 when it has none, as an unset proto field reads)."""
    try:
        return int((out or {}).get("queueOffset", "0"))
    except ValueError:
        return 0


def _parse(request_cls: Any, payload: bytes) -> Any:
    try:
        return request_cls.FromString(payload)
    except (DecodeError, RuntimeWarning, ValueError) as exc:
        raise GrpcWireError(GrpcStatus.INTERNAL, f"Invalid protobuf byte sequence: {exc}") from None

def _send_header(topic: str, queue_id: int, sys_flag: int, props: dict[str, str], now_ms: int) -> SendMessageRequestHeader:
    """The SEND_MESSAGE header the proxy's local mode hands the broker for this message
    (its properties go beside it, already decoded: ``as_broker_reads``). Every field set here,
    past the dataclass's generated (interpreted) keyword __init__, as processors/send.py does
    for the Remoting sends."""
    born = props.get(PROPERTY_BORN_TIMESTAMP)
    h = _new_header(SendMessageRequestHeader)
    h.bname = None
    h.producerGroup = topic
    h.topic = topic
    h.defaultTopic = AUTO_CREATE_TOPIC_KEY_TOPIC
    h.defaultTopicQueueNums = 4
    h.queueId = queue_id
    h.sysFlag = sys_flag
    h.bornTimestamp = int(born) if born is not None else now_ms
    h.flag = 0
    h.properties = None
    h.reconsumeTimes = 0
    h.unitMode = False
    h.batch = False
    h.maxReconsumeTimes = None
    return h


_new_header = object.__new__


__all__ = ["CALL_CLIENT_TIMEOUT_S", "Call", "CallInfo", "GrpcBroker", "GrpcHandler", "InlineHandler", "MessagingService",
           "code_of_remoting"]
