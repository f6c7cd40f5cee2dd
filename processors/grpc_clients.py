"""5.x clients as the broker's client tables see them: their settings, their channel, and the
transactions they left open.

Why a channel object: the 4.x machinery calls clients over their connection — the
transaction check-back sends CHECK_TRANSACTION_STATE to a producer of the group
(ProducerManager.get_available_channel), mqadmin's CONSUME_MESSAGE_DIRECTLY and
GET_CONSUMER_RUNNING_INFO reach a consumer. A 5.x client has no Remoting connection; its
Telemetry stream plays that part. `GrpcClientChannel` stands in the producer and consumer
tables like a connection and turns those commands into the telemetry commands Apache's
proxy sends (GrpcClientChannel / ProxyChannel, 5.3.3): RecoverOrphanedTransactionCommand,
VerifyMessageCommand, PrintThreadStackTraceCommand, answering with the client's reply.
So the check-back, the producer tables and the admin codes stay the 4.x processors' own.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import trio

from rmqd.processors.grpc_common import (
    CONSUMER_LONG_POLLING_BATCH_SIZE, CONSUMER_MAX_LONG_POLLING_MS, PRODUCER_BACKOFF_INITIAL_MS,
    PRODUCER_BACKOFF_MAX_MS, PRODUCER_BACKOFF_MULTIPLIER, PRODUCER_MAX_ATTEMPTS,
)
from rmqd.processors.grpc_convert import build_message
from rmqd.wire import fastjson
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.errors import WireError
from rmqd.wire.frame import RemotingCommand, make_response
from rmqd.wire.message import decode_record
from rmqd.wire.rocketmq_v2 import ClientType, Code, Duration, pb

log = logging.getLogger("rmqd.grpc.clients")

#: CustomizedRetryPolicy's default `next` (5.3.3): the delay levels from 1 s on, in ms
DEFAULT_RETRY_NEXT_MS = (1000, 5000, 10000, 30000, 60000, 120000, 180000, 240000, 300000, 360000, 420000,
                         480000, 540000, 600000, 1200000, 1800000, 3600000, 7200000)
#: ProxyConfig.transactionDataExpireMillis / transactionDataMaxNum
TRANSACTION_DATA_EXPIRE_MS = 30_000
TRANSACTION_DATA_MAX_NUM = 15
#: how long an admin call waits for the client's telemetry reply (Broker2Client.callClient)
CALL_CLIENT_TIMEOUT_S = 10.0


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _duration(ms: int) -> Any:
    out: Any = Duration()
    out.FromMilliseconds(int(ms))
    return out


# -- settings ---------------------------------------------------------------------------------

def _group_retry(group_config: Any) -> tuple[int, str, Any]:
    """(retryMaxTimes, policy type, policy) of a subscription group config (5.x groupRetryPolicy
    when the config carries one, else CustomizedRetryPolicy's defaults)."""
    max_times = int(getattr(group_config, "retryMaxTimes", 16)) if group_config is not None else 16
    policy = getattr(group_config, "groupRetryPolicy", None) if group_config is not None else None
    if isinstance(policy, dict):
        kind = str(policy.get("type") or "CUSTOMIZED")
        detail = policy.get("exponentialRetryPolicy" if kind == "EXPONENTIAL" else "customizedRetryPolicy")
        return max_times, kind, detail
    if policy is not None:
        kind = str(getattr(policy, "type", "CUSTOMIZED"))
        kind = getattr(kind, "name", kind)
        detail = getattr(policy, "exponentialRetryPolicy" if kind == "EXPONENTIAL" else "customizedRetryPolicy",
                         None)
        return max_times, kind, detail
    return max_times, "CUSTOMIZED", None


def _get(obj: Any, name: str, default: Any) -> Any:
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def merge_subscription(settings: "pb.Settings", group_config: Any) -> "pb.Settings":
    """GrpcClientSettingsManager.mergeSubscriptionData: what the server decides for a consumer."""
    out = pb.Settings()
    out.CopyFrom(settings)
    sub = out.subscription
    sub.receive_batch_size = CONSUMER_LONG_POLLING_BATCH_SIZE
    sub.long_polling_timeout.CopyFrom(_duration(CONSUMER_MAX_LONG_POLLING_MS))
    sub.fifo = bool(getattr(group_config, "consumeMessageOrderly", False))
    max_times, kind, detail = _group_retry(group_config)
    out.backoff_policy.max_attempts = max_times + 1
    if kind == "EXPONENTIAL":
        exp = out.backoff_policy.exponential_backoff
        exp.initial.CopyFrom(_duration(int(_get(detail, "initial", 5000))))
        exp.max.CopyFrom(_duration(int(_get(detail, "max", 7200000))))
        exp.multiplier = float(_get(detail, "multiplier", 2))
    else:
        nxt = _get(detail, "next", None) or DEFAULT_RETRY_NEXT_MS
        custom = out.backoff_policy.customized_backoff
        del custom.next[:]
        for ms in nxt:
            custom.next.append(_duration(int(ms)))
    return out


def merge_producer(settings: "pb.Settings", max_body_size: int) -> "pb.Settings":
    """GrpcClientSettingsManager.mergeProducerData."""
    out = pb.Settings()
    out.CopyFrom(settings)
    out.backoff_policy.max_attempts = PRODUCER_MAX_ATTEMPTS
    exp = out.backoff_policy.exponential_backoff
    exp.initial.CopyFrom(_duration(PRODUCER_BACKOFF_INITIAL_MS))
    exp.max.CopyFrom(_duration(PRODUCER_BACKOFF_MAX_MS))
    exp.multiplier = float(PRODUCER_BACKOFF_MULTIPLIER)
    out.publishing.validate_message_type = True
    out.publishing.max_body_size = max_body_size
    return out


class ClientSettingsManager:
    """The settings each client (by client id) announced on its Telemetry stream."""

    def __init__(self, group_config: Callable[[str], Any], max_body_size: int) -> None:
        self._raw: dict[str, "pb.Settings"] = {}
        self._group_config = group_config
        self.max_body_size = max_body_size

    def update(self, client_id: str, settings: "pb.Settings") -> None:
        if settings.HasField("subscription"):
            base = merge_subscription(pb.Settings(), None)
            base.MergeFrom(settings)
            settings = base
        self._raw[client_id] = settings

    def raw(self, client_id: str) -> "pb.Settings | None":
        return self._raw.get(client_id)

    def remove(self, client_id: str) -> "pb.Settings | None":
        return self._raw.pop(client_id, None)

    def merged(self, settings: "pb.Settings | None") -> "pb.Settings | None":
        """The client's settings with the server's decisions (getClientSettings)."""
        if settings is None:
            return None
        if settings.HasField("publishing"):
            settings = merge_producer(settings, self.max_body_size)
        elif settings.HasField("subscription"):
            config = self._group_config(settings.subscription.group.name)
            if config is not None:
                settings = merge_subscription(settings, config)
        out = pb.Settings()
        out.CopyFrom(settings)
        out.metric.on = False  # metricCollectorMode=off
        out.metric.ClearField("endpoints")
        return out

    def get(self, client_id: str) -> "pb.Settings | None":
        return self.merged(self._raw.get(client_id))


# -- transactions waiting for their end ---------------------------------------------------------

@dataclass(slots=True)
class TransactionData:
    tran_state_table_offset: int
    commit_log_offset: int
    expire_at_ms: int


class TransactionDataManager:
    """TransactionDataManager: what END_TRANSACTION needs (the half's offsets), by producer group
    and transaction id, from the send or from a check-back, for TRANSACTION_DATA_EXPIRE_MS."""

    def __init__(self, clock: Callable[[], int] = _now_ms) -> None:
        self._data: OrderedDict[tuple[str, str], list[TransactionData]] = OrderedDict()
        self._clock = clock

    def add(self, group: str, transaction_id: str, tran_state_table_offset: int, commit_log_offset: int) -> None:
        entries = self._data.setdefault((group, transaction_id), [])
        entries.append(TransactionData(tran_state_table_offset, commit_log_offset,
                                       self._clock() + TRANSACTION_DATA_EXPIRE_MS))
        del entries[:-TRANSACTION_DATA_MAX_NUM]
        self._data.move_to_end((group, transaction_id))
        self._expire()

    def poll(self, group: str, transaction_id: str) -> TransactionData | None:
        """The newest unexpired entry (removed), or None."""
        self._expire()
        entries = self._data.get((group, transaction_id))
        if not entries:
            return None
        data = entries.pop()
        if not entries:
            del self._data[(group, transaction_id)]
        return data

    def _expire(self) -> None:
        now = self._clock()
        while self._data:
            key, entries = next(iter(self._data.items()))
            if entries and entries[-1].expire_at_ms > now:
                break
            del self._data[key]


# -- the channel ----------------------------------------------------------------------------------

class TelemetryWriter(Protocol):
    """The server side of one client's Telemetry stream."""

    async def write(self, command: "pb.TelemetryCommand") -> None: ...


class GrpcClientChannel:
    """A 5.x client in the producer / consumer tables (ChannelLike), reached over Telemetry."""

    _nonces = itertools.count(1)

    def __init__(self, client_id: str, remote_addr: str, local_addr: str,
                 transactions: TransactionDataManager, on_close: Callable[["GrpcClientChannel"], None]) -> None:
        self.client_id = client_id
        self.remote_addr = remote_addr
        self.local_addr = local_addr
        self.transactions = transactions
        self.closed = False
        self.close_reason: str | None = None
        self.attrs: dict[str, Any] = {}
        self._writer: TelemetryWriter | None = None
        self._on_close = on_close
        self._pending: dict[str, tuple[trio.Event, list[Any]]] = {}

    def __repr__(self) -> str:
        return f"<GrpcClientChannel {self.client_id} {self.remote_addr}{' closed' if self.closed else ''}>"

    # -- the stream ------------------------------------------------------------------------------
    def attach(self, writer: TelemetryWriter, remote_addr: str) -> None:
        self._writer = writer
        self.remote_addr = remote_addr

    def detach(self, writer: TelemetryWriter) -> None:
        if self._writer is writer:
            self._writer = None

    @property
    def active(self) -> bool:
        return self._writer is not None and not self.closed

    async def write(self, command: "pb.TelemetryCommand") -> bool:
        writer = self._writer
        if writer is None or self.closed:
            log.warning("telemetry stream of %s is not open: %s not sent", self.client_id,
                        command.WhichOneof("command"))
            return False
        try:
            await writer.write(command)
        except Exception as exc:  # noqa: BLE001 - a broken stream: the client re-opens it
            log.warning("writing telemetry to %s failed: %s", self.client_id, exc)
            self.detach(writer)
            return False
        return True

    # -- what a reply on the stream resolves -------------------------------------------------------
    def resolve(self, nonce: str, status: "pb.Status", payload: Any) -> None:
        pending = self._pending.pop(nonce, None)
        if pending is not None:
            pending[1].extend((status, payload))
            pending[0].set()

    # -- ChannelLike -----------------------------------------------------------------------------
    async def send_request_oneway(self, cmd: RemotingCommand) -> None:
        if cmd.code == RequestCode.CHECK_TRANSACTION_STATE:
            await self._check_transaction(cmd)
        # NOTIFY_CONSUMER_IDS_CHANGED and the like: a 5.x client asks for its assignment itself

    async def _check_transaction(self, cmd: RemotingCommand) -> None:
        ext = cmd.ext_fields or {}
        try:
            record = decode_record(bytes(cmd.body or b""))
        except WireError as exc:
            log.warning("check-back for %s: the half message does not decode: %s", self.client_id, exc)
            return
        transaction_id = ext.get("transactionId") or record.uniq_key or ""
        group = record.properties.get("PGROUP", "")
        try:
            self.transactions.add(group, transaction_id, int(ext.get("tranStateTableOffset", "-1")),
                                  int(ext.get("commitLogOffset", "-1")))
        except ValueError:
            return
        command = pb.TelemetryCommand()
        command.recover_orphaned_transaction_command.transaction_id = transaction_id
        command.recover_orphaned_transaction_command.message.CopyFrom(build_message(record, now_ms=_now_ms()))
        await self.write(command)

    async def invoke(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """CONSUME_MESSAGE_DIRECTLY -> VerifyMessageCommand, GET_CONSUMER_RUNNING_INFO (jstack)
        -> PrintThreadStackTraceCommand; the reply as the Remoting answer."""
        nonce = f"{self.client_id}-{next(self._nonces)}"
        command = pb.TelemetryCommand()
        if cmd.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
            try:
                record = decode_record(bytes(cmd.body or b""))
            except WireError:
                return make_response(cmd, ResponseCode.SYSTEM_ERROR, "the message to verify does not decode")
            command.verify_message_command.nonce = nonce
            command.verify_message_command.message.CopyFrom(build_message(record, now_ms=_now_ms()))
        elif cmd.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
            if (cmd.ext_fields or {}).get("jstackEnable") != "true":
                return make_response(cmd, ResponseCode.SUCCESS, body=fastjson.dumps({"properties": {}}).encode())
            command.print_thread_stack_trace_command.nonce = nonce
        else:
            return make_response(cmd, ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                 f"request code {cmd.code} is not supported by a gRPC client")
        event = trio.Event()
        reply: list[Any] = []
        self._pending[nonce] = (event, reply)
        try:
            if not await self.write(command):
                return make_response(cmd, ResponseCode.SYSTEM_ERROR, "the client's telemetry stream is not open")
            with trio.move_on_after(timeout):
                await event.wait()
        finally:
            self._pending.pop(nonce, None)
        if not reply:
            raise TimeoutError(f"no telemetry reply from {self.client_id} in {timeout:.0f} s")
        status_, payload = reply
        if cmd.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
            result = {Code.OK: "CR_SUCCESS", Code.FAILED_TO_CONSUME_MESSAGE: "CR_LATER",
                      Code.MESSAGE_CORRUPTED: "CR_RETURN_NULL"}.get(status_.code, "CR_THROW_EXCEPTION")
            body = {"autoCommit": True, "consumeResult": result, "order": False, "remark": "from gRPC client",
                    "spentTimeMills": 0}
            return make_response(cmd, ResponseCode.SUCCESS, body=fastjson.dumps(body).encode())
        if status_.code == Code.OK:
            return make_response(cmd, ResponseCode.SUCCESS,
                                 body=fastjson.dumps({"jstack": payload or "", "properties": {}}).encode())
        if status_.code == Code.VERIFY_FIFO_MESSAGE_UNSUPPORTED:
            return make_response(cmd, ResponseCode.NO_PERMISSION, "forbidden to verify message")
        return make_response(cmd, ResponseCode.SYSTEM_ERROR, "verify message failed")

    def close(self, reason: str = "closed locally") -> None:
        if self.closed:
            return
        self.closed = True
        self.close_reason = reason
        for event, _ in self._pending.values():
            event.set()
        self._on_close(self)


class GrpcChannelManager:
    """Client id -> its channel (GrpcChannelManager)."""

    def __init__(self, transactions: TransactionDataManager, on_close: Callable[[GrpcClientChannel], None]) -> None:
        self.channels: dict[str, GrpcClientChannel] = {}
        self.transactions = transactions
        self._on_close = on_close

    def create(self, client_id: str, remote_addr: str, local_addr: str) -> GrpcClientChannel:
        channel = self.channels.get(client_id)
        if channel is None or channel.closed:
            channel = GrpcClientChannel(client_id, remote_addr, local_addr, self.transactions, self._closed)
            self.channels[client_id] = channel
        return channel

    def get(self, client_id: str) -> GrpcClientChannel | None:
        return self.channels.get(client_id)

    def remove(self, client_id: str) -> GrpcClientChannel | None:
        return self.channels.pop(client_id, None)

    def _closed(self, channel: GrpcClientChannel) -> None:
        if self.channels.get(channel.client_id) is channel:
            del self.channels[channel.client_id]
        self._on_close(channel)


def client_type_name(value: int) -> str:
    return {v: k for k, v in vars(ClientType).items() if not k.startswith("_")}.get(value, str(value))


__all__ = [
    "ClientSettingsManager", "GrpcChannelManager", "GrpcClientChannel", "TelemetryWriter", "TransactionDataManager",
    "client_type_name", "merge_producer", "merge_subscription",
]
