"""The broker as the processors see it: typed seams instead of ``broker: Any``.

processors/ never imports broker/ (ARCHITECTURE.md). Each processor is handed the broker that
runs it (broker/broker.py's BrokerRole) and, per request, the request's context (broker/server.py's
RequestContext); the Protocols here say exactly what a processor may touch of them, so a reader
sees a processor's dependencies in its constructor and a type checker holds broker/ to them where
it builds the processors (``scripts/dev typecheck``). Store-side things are the store's concrete
classes; the broker's own configuration and counters are narrowed to the fields read here.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping, Protocol

from rmqd.wire.frame import RemotingCommand

if TYPE_CHECKING:  # (the processors' own classes: imported for annotations only, no cycle at run time)
    from rmqd.processors.client_manager import ConsumerManager, ProducerManager
    from rmqd.processors.consumer_filter import ConsumerFilterManager
    from rmqd.processors.pull import PullRequestHoldService
    from rmqd.store.commitlog import MessageExtBatch, MessageExtBrokerInner, PutMessageResult
    from rmqd.store.config import MessageStoreConfig
    from rmqd.store.consumer_offset import ConsumerOffsetManager
    from rmqd.store.message_store import DefaultMessageStore
    from rmqd.store.subscription_group import SubscriptionGroupManager
    # the broker's statistics (4.9's BrokerStatsManager): sends, pulls, retries and DLQ sends feed it
    from rmqd.store.broker_stats import BrokerStatsManager as StatsView
    from rmqd.store.topic_config import TopicConfig, TopicConfigManager


# -- a connection and a request's context ---------------------------------------------------------


class PeerChannel(Protocol):
    """A client's connection as processors keep and call it (broker.server.Channel)."""

    remote_addr: str
    closed: bool

    def close(self, reason: str = ...) -> None: ...

    async def send_request_oneway(self, cmd: RemotingCommand) -> None: ...

    async def invoke(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand: ...


class Context(Protocol):
    """What a handler gets besides the request (broker.server.RequestContext)."""

    @property
    def channel(self) -> PeerChannel: ...

    @property
    def remote_addr(self) -> str: ...


#: a request-code handler (broker.server.Handler, seen from here)
RequestHandler = Callable[[Context, RemotingCommand], Awaitable[RemotingCommand | None]]


class RequestProcessor(Protocol):
    """A processor: its handlers by request code, registered by the broker."""

    def handlers(self) -> Mapping[int, RequestHandler]: ...


# -- the broker's configuration and counters, as far as processors read them ---------------------


class BrokerConfigView(Protocol):
    """The BrokerConfig (broker/config.py) fields processors read."""

    @property
    def brokerName(self) -> str: ...
    @property
    def brokerClusterName(self) -> str: ...
    @property
    def brokerIP1(self) -> str: ...
    @property
    def brokerPermission(self) -> int: ...
    @property
    def regionId(self) -> str: ...
    @property
    def traceOn(self) -> bool: ...
    @property
    def enablePropertyFilter(self) -> bool: ...
    @property
    def longPollingEnable(self) -> bool: ...
    @property
    def autoDeleteUnusedStats(self) -> bool: ...
    @property
    def shortPollingTimeMills(self) -> int: ...
    @property
    def slaveReadEnable(self) -> bool: ...
    @property
    def rejectTransactionMessage(self) -> bool: ...
    @property
    def transactionTimeOut(self) -> int: ...
    @property
    def transactionCheckMax(self) -> int: ...
    @property
    def transactionCheckInterval(self) -> int: ...


# -- what each processor uses of the broker ------------------------------------------------------


class StoreBroker(Protocol):
    """Every broker-side processor: the store, its settings and the broker's identity."""

    @property
    def store(self) -> DefaultMessageStore: ...
    @property
    def message_store_config(self) -> MessageStoreConfig: ...
    @property
    def broker_config(self) -> BrokerConfigView: ...


class ConsumerBroker(StoreBroker, Protocol):
    """ConsumerManageProcessor: consumer lists and offsets."""

    @property
    def consumer_manager(self) -> ConsumerManager: ...
    @property
    def consumer_offset_manager(self) -> ConsumerOffsetManager: ...


class QueryBroker(StoreBroker, Protocol):
    """QueryMessageProcessor: the index, and a consumer's connection for VIEW/consume-directly."""

    @property
    def consumer_manager(self) -> ConsumerManager: ...


class TransactionBroker(StoreBroker, Protocol):
    """END_TRANSACTION and the check-back: producers' connections."""

    @property
    def producer_manager(self) -> ProducerManager: ...


class RetryBroker(StoreBroker, Protocol):
    """CONSUMER_SEND_MSG_BACK: groups' retry settings and the retry/DLQ topics it creates."""

    @property
    def subscription_group_manager(self) -> SubscriptionGroupManager: ...

    def create_topic_in_send_message_back_method(self, topic: str, queue_nums: int, perm: int,
                                                 topic_sys_flag: int) -> TopicConfig | None: ...
    @property
    def stats(self) -> StatsView: ...


class SendBroker(RetryBroker, Protocol):
    """SEND_MESSAGE(_V2), SEND_BATCH_MESSAGE: topic auto-creation, the message built for the
    store, half messages, the counters."""

    @property
    def topic_config_manager(self) -> TopicConfigManager: ...
    @property
    def stats(self) -> StatsView: ...

    #: the broker's address as a record stores it (brokerIP1) and its listen port
    store_host: bytes
    store_port: int

    @staticmethod
    def now_ms() -> int: ...

    def create_topic_in_send_message_method(self, topic: str, default_topic: str, remote_addr: str,
                                            queue_nums: int, topic_sys_flag: int) -> TopicConfig | None: ...

    def new_inner_message(self, *, topic: str, queue_id: int, body: bytes, flag: int, properties: dict[str, str],
                          properties_string: str, sys_flag: int, born_timestamp: int, born_host: tuple[str, int],
                          reconsume_times: int) -> MessageExtBrokerInner: ...

    def new_batch_message(self, *, topic: str, queue_id: int, body: bytes, flag: int, properties: dict[str, str],
                          properties_string: str, sys_flag: int, born_timestamp: int, born_host: tuple[str, int],
                          reconsume_times: int) -> MessageExtBatch: ...

    def put_half_message(self, msg: MessageExtBrokerInner) -> PutMessageResult: ...


class BrokerTables(StoreBroker, Protocol):
    """Pulls and the admin codes: the topic, group, consumer and offset tables, the counters."""

    @property
    def topic_config_manager(self) -> TopicConfigManager: ...
    @property
    def subscription_group_manager(self) -> SubscriptionGroupManager: ...
    @property
    def consumer_manager(self) -> ConsumerManager: ...
    @property
    def consumer_offset_manager(self) -> ConsumerOffsetManager: ...
    @property
    def stats(self) -> StatsView: ...


class PullBroker(BrokerTables, Protocol):
    """PULL_MESSAGE: subscriptions, filters, offsets, long polling, the counters."""

    @property
    def consumer_filter_manager(self) -> ConsumerFilterManager: ...
    @property
    def pull_hold_service(self) -> PullRequestHoldService: ...

    def generate_offset_moved_event(self, group: str, topic: str, queue_id: int, offset_request: int,
                                    offset_new: int) -> None: ...


class ClientBroker(Protocol):
    """HEART_BEAT, UNREGISTER_CLIENT, CHECK_CLIENT_CONFIG: the client tables and what a
    heartbeat may create (retry topics, groups) or check (filter expressions)."""

    @property
    def broker_config(self) -> BrokerConfigView: ...
    @property
    def consumer_manager(self) -> ConsumerManager: ...
    @property
    def producer_manager(self) -> ProducerManager: ...
    @property
    def subscription_group_manager(self) -> SubscriptionGroupManager: ...

    def create_retry_topic(self, topic: str, queue_nums: int, topic_sys_flag: int) -> TopicConfig | None: ...

    def compile_expression_error(self, expression_type: str | None, text: str | None) -> str | None: ...


class AdminBroker(BrokerTables, Protocol):
    """The admin codes mqadmin and the consoles send: topics, groups, offsets, config, stats."""

    @property
    def producer_manager(self) -> ProducerManager: ...
    @property
    def allow_config_update(self) -> bool: ...

    async def update_topic_config(self, *, topic: str, read_queue_nums: int, write_queue_nums: int, perm: int,
                                  topic_filter_type: str, topic_sys_flag: int, order: bool,
                                  attributes: dict[str, str] | None = None) -> None: ...

    async def delete_topic(self, topic: str) -> None: ...

    def update_subscription_group_from_body(self, body: bytes) -> None: ...

    def update_config(self, props: dict[str, str]) -> list[str]: ...

    def all_configs(self) -> dict[str, Any]: ...

    def config_data_version(self) -> dict[str, int]: ...

    def store_runtime_info(self) -> dict[str, str]: ...

    def dispatch_behind_bytes(self) -> int: ...

    def earliest_message_time(self) -> int: ...

    def remain_to_flush(self) -> int: ...


__all__ = ["AdminBroker", "BrokerConfigView", "BrokerTables", "ClientBroker", "ConsumerBroker", "Context", "PeerChannel",
           "PullBroker", "QueryBroker", "RequestHandler", "RequestProcessor", "RetryBroker", "SendBroker",
           "StoreBroker", "TransactionBroker"]
