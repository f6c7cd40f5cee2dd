"""Client bookkeeping of the broker: who produces and consumes what, over which connection.

Mirrors RocketMQ 4.9.8's broker/client package (ConsumerManager, ConsumerGroupInfo,
ProducerManager, ClientHousekeepingService, DefaultConsumerIdsChangeListener) and the
HEART_BEAT / UNREGISTER_CLIENT / CHECK_CLIENT_CONFIG handlers of ClientManageProcessor.

Why the tables are keyed by connection and not by client id: a client that reconnects gets
a new connection, and the old one must disappear with its socket (doChannelCloseEvent),
whatever id it claimed. Membership changes are pushed to every member of the group with
NOTIFY_CONSUMER_IDS_CHANGED over the member's own connection, so consumers rebalance at
once instead of at their next 20 s rebalance tick.

The managers are plain synchronous objects (the trio thread is their only user); sending
the notifications is queued to a trio task (`ConsumerIdsChangeNotifier.run`) so a close
listener or a heartbeat never waits on a peer's socket.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Iterable

import trio

from rmqd.processors.common import build_topic_sys_flag, retry_topic
from rmqd.processors.names import guard_names
from rmqd.wire.codes import LanguageCode, RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand, make_response
from rmqd.processors.seams import ClientBroker, Context, PeerChannel, RequestHandler

log = logging.getLogger("rmqd.client_manager")

#: ConsumerManager / ProducerManager CHANNEL_EXPIRED_TIMEOUT.
CHANNEL_EXPIRED_TIMEOUT_MS = 120_000
#: ClientHousekeepingService scans every 10 s.
HOUSEKEEPING_INTERVAL_S = 10.0

SUB_ALL = "*"
EXPRESSION_TAG = "TAG"
EXPRESSION_SQL92 = "SQL92"


def now_ms() -> int:
    return int(time.time() * 1000)


def is_tag_type(expression_type: str | None) -> bool:
    """ExpressionType.isTagType: no type or TAG."""
    return expression_type is None or expression_type == "" or expression_type == EXPRESSION_TAG


class ConsumerGroupEvent(Enum):
    CHANGE = "CHANGE"
    UNREGISTER = "UNREGISTER"
    REGISTER = "REGISTER"


ChannelLike = PeerChannel  # (the name this module's callers know)


def enum_name(value: Any) -> Any:
    """Name of a heartbeat enum (wire.bodies decodes C++ ordinals and Java names alike)."""
    return getattr(value, "name", value)


@dataclass(eq=False, slots=True)
class ClientChannelInfo:
    channel: PeerChannel
    client_id: str
    language: int = LanguageCode.JAVA
    version: int = 0
    last_update_timestamp: int = field(default_factory=now_ms)

    @property
    def language_name(self) -> str:
        try:
            return LanguageCode(self.language).name
        except ValueError:
            return str(self.language)


class ConsumerGroupInfo:
    """One consumer group: its members (by connection) and the topics they subscribe."""

    def __init__(self, group_name: str, consume_type: Any, message_model: Any, consume_from_where: Any,
                 clock: Callable[[], int] = now_ms) -> None:
        self.group_name = group_name
        self.consume_type = consume_type
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        self.subscription_table: dict[str, Any] = {}
        self.channel_info_table: dict[Any, ClientChannelInfo] = {}
        self._clock = clock
        self.last_update_timestamp = clock()

    def find_channel(self, client_id: str) -> ClientChannelInfo | None:
        for info in self.channel_info_table.values():
            if info.client_id == client_id:
                return info
        return None

    def get_all_channel(self) -> list[Any]:
        return list(self.channel_info_table)

    def get_all_client_id(self) -> list[str]:
        return [info.client_id for info in self.channel_info_table.values()]

    def unregister_channel(self, info: ClientChannelInfo) -> bool:
        return self.channel_info_table.pop(info.channel, None) is not None

    def do_channel_close_event(self, channel: PeerChannel) -> bool:
        return self.channel_info_table.pop(channel, None) is not None

    def update_channel(self, info_new: ClientChannelInfo, consume_type: Any, message_model: Any,
                       consume_from_where: Any) -> bool:
        """True when the connection is new to the group (a membership change)."""
        updated = False
        self.consume_type = consume_type
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        info_old = self.channel_info_table.get(info_new.channel)
        if info_old is None:
            self.channel_info_table[info_new.channel] = info_new
            updated = True
            info_old = info_new
        elif info_old.client_id != info_new.client_id:
            log.error("consumer group %s: channel client id changed %s -> %s", self.group_name,
                      info_old.client_id, info_new.client_id)
            self.channel_info_table[info_new.channel] = info_new
        self.last_update_timestamp = self._clock()
        info_old.last_update_timestamp = self.last_update_timestamp
        return updated

    def update_subscription(self, sub_list: Iterable[Any]) -> bool:
        """Adopt the heartbeat's subscriptions: new topics and dropped topics are changes;
        a newer subVersion of a known topic replaces it silently (as RocketMQ)."""
        sub_list = list(sub_list)
        updated = False
        for sub in sub_list:
            old = self.subscription_table.get(sub.topic)
            if old is None:
                self.subscription_table[sub.topic] = sub
                updated = True
            elif int(sub.subVersion) > int(old.subVersion):
                self.subscription_table[sub.topic] = sub
        topics = {sub.topic for sub in sub_list}
        for old_topic in list(self.subscription_table):
            if old_topic not in topics:
                del self.subscription_table[old_topic]
                updated = True
        self.last_update_timestamp = self._clock()
        return updated

    def find_subscription_data(self, topic: str) -> Any | None:
        return self.subscription_table.get(topic)

    def get_subscribe_topics(self) -> set[str]:
        return set(self.subscription_table)


IdsChangeListener = Callable[..., None]


class ConsumerManager:
    def __init__(self, listener: IdsChangeListener | None = None, clock: Callable[[], int] = now_ms,
                 channel_expired_timeout_ms: int = CHANNEL_EXPIRED_TIMEOUT_MS) -> None:
        self.consumer_table: dict[str, ConsumerGroupInfo] = {}
        self._listener = listener or (lambda *args: None)
        self._clock = clock
        self.channel_expired_timeout_ms = channel_expired_timeout_ms

    def find_channel(self, group: str, client_id: str) -> ClientChannelInfo | None:
        info = self.consumer_table.get(group)
        return info.find_channel(client_id) if info else None

    def find_subscription_data(self, group: str, topic: str) -> Any | None:
        info = self.consumer_table.get(group)
        return info.find_subscription_data(topic) if info else None

    def get_consumer_group_info(self, group: str) -> ConsumerGroupInfo | None:
        return self.consumer_table.get(group)

    def find_subscription_data_count(self, group: str) -> int:
        info = self.consumer_table.get(group)
        return len(info.subscription_table) if info else 0

    def do_channel_close_event(self, channel: PeerChannel) -> None:
        for group, info in list(self.consumer_table.items()):
            if info.do_channel_close_event(channel):
                if not info.channel_info_table:
                    if self.consumer_table.pop(group, None) is not None:
                        self._listener(ConsumerGroupEvent.UNREGISTER, group)
                self._listener(ConsumerGroupEvent.CHANGE, group, info.get_all_channel())

    def register_consumer(self, group: str, client: ClientChannelInfo, consume_type: Any, message_model: Any,
                          consume_from_where: Any, sub_list: Iterable[Any],
                          notify_consumer_ids_changed_enable: bool = True) -> bool:
        sub_list = list(sub_list)
        info = self.consumer_table.get(group)
        if info is None:
            info = ConsumerGroupInfo(group, consume_type, message_model, consume_from_where, self._clock)
            self.consumer_table[group] = info
        r1 = info.update_channel(client, consume_type, message_model, consume_from_where)
        r2 = info.update_subscription(sub_list)
        if (r1 or r2) and notify_consumer_ids_changed_enable:
            self._listener(ConsumerGroupEvent.CHANGE, group, info.get_all_channel())
        self._listener(ConsumerGroupEvent.REGISTER, group, sub_list)
        return r1 or r2

    def unregister_consumer(self, group: str, client: ClientChannelInfo,
                            notify_consumer_ids_changed_enable: bool = True) -> None:
        info = self.consumer_table.get(group)
        if info is None:
            return
        info.unregister_channel(client)
        if not info.channel_info_table:
            if self.consumer_table.pop(group, None) is not None:
                self._listener(ConsumerGroupEvent.UNREGISTER, group)
        if notify_consumer_ids_changed_enable:
            self._listener(ConsumerGroupEvent.CHANGE, group, info.get_all_channel())

    def scan_not_active_channel(self) -> list[Any]:
        """Drop (and close) members silent for more than 120 s. RocketMQ sends no
        notification here: closing the connection fires the close event, which does."""
        now = self._clock()
        expired = []
        for group, info in list(self.consumer_table.items()):
            for channel, client in list(info.channel_info_table.items()):
                if now - client.last_update_timestamp > self.channel_expired_timeout_ms:
                    log.warning("SCAN: remove expired channel %s from consumer group %s",
                                getattr(channel, "remote_addr", channel), group)
                    del info.channel_info_table[channel]
                    expired.append(channel)
            if not info.channel_info_table:
                del self.consumer_table[group]
        return expired

    def query_topic_consume_by_who(self, topic: str) -> set[str]:
        return {group for group, info in self.consumer_table.items() if topic in info.subscription_table}


class ProducerManager:
    def __init__(self, clock: Callable[[], int] = now_ms,
                 channel_expired_timeout_ms: int = CHANNEL_EXPIRED_TIMEOUT_MS) -> None:
        self.group_channel_table: dict[str, dict[Any, ClientChannelInfo]] = {}
        self.client_channel_table: dict[str, Any] = {}
        self._clock = clock
        self._counter = 0
        self.channel_expired_timeout_ms = channel_expired_timeout_ms

    def register_producer(self, group: str, client: ClientChannelInfo) -> None:
        table = self.group_channel_table.setdefault(group, {})
        found = table.get(client.channel)
        if found is None:
            table[client.channel] = client
            self.client_channel_table[client.client_id] = client.channel
        else:
            found.last_update_timestamp = self._clock()

    def unregister_producer(self, group: str, client: ClientChannelInfo) -> None:
        table = self.group_channel_table.get(group)
        if table:
            table.pop(client.channel, None)
            self.client_channel_table.pop(client.client_id, None)
            if not table:
                del self.group_channel_table[group]

    def do_channel_close_event(self, channel: PeerChannel) -> None:
        for table in self.group_channel_table.values():
            info = table.pop(channel, None)
            if info is not None:
                self.client_channel_table.pop(info.client_id, None)

    def scan_not_active_channel(self) -> list[Any]:
        now = self._clock()
        expired = []
        for group, table in self.group_channel_table.items():
            for channel, info in list(table.items()):
                if now - info.last_update_timestamp > self.channel_expired_timeout_ms:
                    del table[channel]
                    self.client_channel_table.pop(info.client_id, None)
                    log.warning("SCAN: remove expired channel %s from producer group %s",
                                getattr(channel, "remote_addr", channel), group)
                    expired.append(channel)
        return expired

    def get_available_channel(self, group: str | None) -> Any | None:
        """A live member of the group, round robin (transaction check-backs use this)."""
        if group is None:
            return None
        channels = list(self.group_channel_table.get(group, {}))
        if not channels:
            return None
        self._counter = (self._counter + 1) & 0x7FFFFFFF
        for i in range(len(channels)):
            channel = channels[(self._counter + i) % len(channels)]
            if not getattr(channel, "closed", False):
                return channel
        return None

    def find_channel(self, client_id: str) -> Any | None:
        return self.client_channel_table.get(client_id)


class ConsumerIdsChangeNotifier:
    """DefaultConsumerIdsChangeListener + Broker2Client.notifyConsumerIdsChanged.

    `__call__` is the ConsumerManager listener (synchronous, on the trio thread); the
    sends run in `run`, one oneway NOTIFY_CONSUMER_IDS_CHANGED per member channel.
    """

    def __init__(self, enabled: bool = True, on_register: Callable[[str, list[Any]], None] | None = None,
                 on_unregister: Callable[[str], None] | None = None) -> None:
        self.enabled = enabled
        self.on_register = on_register
        self.on_unregister = on_unregister
        self._send, self._receive = trio.open_memory_channel(math.inf)

    def __call__(self, event: ConsumerGroupEvent, group: str, *args: Any) -> None:
        if event is ConsumerGroupEvent.CHANGE:
            if args and args[0] is not None and self.enabled:
                for channel in args[0]:
                    self._send.send_nowait((channel, group))
        elif event is ConsumerGroupEvent.REGISTER:
            if self.on_register is not None and args:
                self.on_register(group, args[0])
        elif event is ConsumerGroupEvent.UNREGISTER:
            if self.on_unregister is not None:
                self.on_unregister(group)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        async for channel, group in self._receive:
            await notify_consumer_ids_changed(channel, group)


async def notify_consumer_ids_changed(channel: ChannelLike, group: str) -> None:
    if channel is None or getattr(channel, "closed", False):
        return
    cmd = RemotingCommand(code=RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, ext_fields={"consumerGroup": group})
    try:
        await channel.send_request_oneway(cmd)
    except Exception as exc:  # noqa: BLE001 - a dead member must not stop the others' notices
        log.warning("notifyConsumerIdsChanged to %s for %s failed: %s",
                    getattr(channel, "remote_addr", channel), group, exc)


def scan_exception_channels(producer_manager: ProducerManager, consumer_manager: ConsumerManager) -> None:
    """ClientHousekeepingService.scanExceptionChannel: expire, then close, silent clients.
    Closing runs the server's close listeners, which clear every other table and notify."""
    for channel in producer_manager.scan_not_active_channel() + consumer_manager.scan_not_active_channel():
        close = getattr(channel, "close", None)
        if close is not None and not getattr(channel, "closed", False):
            close("client channel expired (no heartbeat for 120 s)")


class ClientManageProcessor:
    """HEART_BEAT, UNREGISTER_CLIENT, CHECK_CLIENT_CONFIG."""

    def __init__(self, broker: ClientBroker) -> None:
        self.broker = broker

    async def heart_beat(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        from rmqd.wire.bodies import HeartbeatData

        b = self.broker
        heartbeat = HeartbeatData.decode(bytes(request.body or b"{}"))
        client = ClientChannelInfo(ctx.channel, heartbeat.clientID, request.language, request.version)
        for data in heartbeat.consumerDataSet:
            group_config = b.subscription_group_manager.find_subscription_group_config(data.groupName)
            notify = True
            if group_config is not None:
                notify = bool(group_config.notifyConsumerIdsChangedEnable)
                topic_sys_flag = build_topic_sys_flag(False, True) if data.unitMode else 0
                b.create_retry_topic(retry_topic(data.groupName), group_config.retryQueueNums, topic_sys_flag)
            changed = b.consumer_manager.register_consumer(
                data.groupName, client, data.consumeType, data.messageModel, data.consumeFromWhere,
                data.subscriptionDataSet, notify)
            if changed:
                log.info("registerConsumer info changed %s %s", data.groupName, ctx.channel.remote_addr)
        for data in heartbeat.producerDataSet:
            b.producer_manager.register_producer(data.groupName, client)
        return make_response(request, ResponseCode.SUCCESS)

    async def unregister_client(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        from rmqd.wire.headers import UnregisterClientRequestHeader

        b = self.broker
        header = UnregisterClientRequestHeader.from_ext(request.ext_fields)
        client = ClientChannelInfo(ctx.channel, header.clientID, request.language, request.version)
        if header.producerGroup is not None:
            b.producer_manager.unregister_producer(header.producerGroup, client)
        if header.consumerGroup is not None:
            group_config = b.subscription_group_manager.find_subscription_group_config(header.consumerGroup)
            notify = True if group_config is None else bool(group_config.notifyConsumerIdsChangedEnable)
            b.consumer_manager.unregister_consumer(header.consumerGroup, client, notify)
        return make_response(request, ResponseCode.SUCCESS, ext_fields={})

    async def check_client_config(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        from rmqd.wire.bodies import CheckClientRequestBody

        body = CheckClientRequestBody.decode(bytes(request.body)) if request.body else None
        sub = getattr(body, "subscriptionData", None) if body is not None else None
        if sub is not None:
            expression_type = getattr(sub, "expressionType", None)
            if is_tag_type(expression_type):
                return make_response(request, ResponseCode.SUCCESS)
            if not self.broker.broker_config.enablePropertyFilter:
                return make_response(request, ResponseCode.SYSTEM_ERROR,
                                     f"The broker does not support consumer to filter message by {expression_type}")
            error = self.broker.compile_expression_error(expression_type, sub.subString)
            if error is not None:
                return make_response(request, ResponseCode.SUBSCRIPTION_PARSE_FAILED, error)
        return make_response(request, ResponseCode.SUCCESS)

    def handlers(self) -> dict[int, RequestHandler]:
        return guard_names({
            RequestCode.HEART_BEAT: self.heart_beat,
            RequestCode.UNREGISTER_CLIENT: self.unregister_client,
            RequestCode.CHECK_CLIENT_CONFIG: self.check_client_config,
        })
