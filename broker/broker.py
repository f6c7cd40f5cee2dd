"""The broker role (RocketMQ 4.9.8 BrokerController): the store, the config managers, the
client managers, the request processors, the trio server on listenPort and its fast/VIP
port (listenPort - 2), and registration with the name servers every 30 s.

Everything runs in one trio task tree. Store work that may block on the disk (recovery,
flushing config files, shutdown) goes through trio.to_thread; appends and reads are mmap
copies and run inline. The store's threads reach trio only through the pull-hold service's
arrival hop and the SYNC_FLUSH flush callback (both via the trio token).

Lifecycle (issue 4): `bound = await nursery.start(role.run)`; `await role.stop()` stops
accepting, answers held pulls, lets in-flight requests finish, unregisters from the name
servers, persists offsets and config, and shuts the store down (flush, checkpoint, abort
file removed).
"""

from __future__ import annotations

import functools
import logging
import time
from pathlib import Path
from typing import Any

import trio

from rmqd.broker.acl_config import AclService
from rmqd.broker.acl_messages import StoredMessageLookup
from rmqd.broker.config import BrokerSettings, ConfigError
from rmqd.broker.dispatch_loop import LoopDispatch
from rmqd.broker.ha_master import HAMasterService
from rmqd.broker.metrics import Observability
from rmqd.broker.grpc_server import GrpcServer
from rmqd.broker.ha_slave import HAClient
from rmqd.broker.registration import BrokerRegistrar, Coalescer
from rmqd.broker.slave_sync import SlaveSynchronize, get_all_delay_offset
from rmqd.broker.remoting_client import BrokerOuterAPI, RemotingClient
from rmqd.broker.server import RemotingServer
from rmqd.broker.tls import TlsAcceptor, TlsConfig, client_stream_wrapper
from rmqd.processors.acl import admin_codes
from rmqd.processors.acl_admin import AclAdminProcessor
from rmqd.processors.admin import AdminBrokerProcessor
from rmqd.processors.admin_observe import AdminObserveProcessor
from rmqd.processors.client_manager import (
    HOUSEKEEPING_INTERVAL_S, ClientManageProcessor, ConsumerIdsChangeNotifier, ConsumerManager, ProducerManager,
    scan_exception_channels,
)
from rmqd.processors.common import (
    PERM_READ, PERM_WRITE, RMQ_SYS_OFFSET_MOVED_EVENT, RMQ_SYS_TRANS_HALF_TOPIC, java_hashmap_order,
)
from rmqd.processors.consumer import ConsumerManageProcessor
from rmqd.processors.consumer_filter import ConsumerFilterManager, check_expression
from rmqd.processors.assignment import AssignmentProcessor
from rmqd.processors.grpc_service import MessagingService
from rmqd.processors.lock import LockProcessor, RebalanceLockManager
from rmqd.processors.pop import PopService
from rmqd.processors.pop_remoting import PopRemotingProcessor
from rmqd.processors.pull import PullMessageProcessor, PullRequestHoldService
from rmqd.processors.query import QueryMessageProcessor
from rmqd.processors.retry import ConsumerSendMsgBackProcessor, send_message_back
from rmqd.processors.seams import RequestProcessor
from rmqd.processors.reply import ReplyMessageProcessor
from rmqd.processors.send import SendMessageProcessor
from rmqd.processors.transaction import (
    EndTransactionProcessor, TransactionalMessageCheckService, TransactionalMessageService,
)
from rmqd.store.broker_stats import BrokerStats, BrokerStatsManager
from rmqd.store.commitlog import (MessageExtBatch, MessageExtBrokerInner, PutMessageResult,
                                  new_inner_message as commitlog_new_inner_message)
from rmqd.store.config_files import config_refusal
from rmqd.store.consumer_offset import ConsumerOffsetManager
from rmqd.store.delay_offset import DelayOffsetManager
from rmqd.store.errors import StoreConfigError
from rmqd.store.message_request_mode import MessageRequestModeManager
from rmqd.store.message_store import DefaultMessageStore
from rmqd.store.schedule import ScheduleMessageService, TimerProgress
from rmqd.store.subscription_group import SubscriptionGroupConfig, SubscriptionGroupManager
from rmqd.store.topic_config import TopicBrokerSettings, TopicConfigManager
from rmqd.wire import fastjson
from rmqd.wire.codes import RequestCode
from rmqd.wire.bodies import TopicConfig, TopicConfigSerializeWrapper, TopicFilterType
from rmqd.wire.message import MessageConst, MessageSysFlag, encode_properties, ip_to_bytes

log = logging.getLogger("rmqd.broker")

#: BrokerController: first periodic registration 10 s after start.
REGISTER_INITIAL_DELAY_S = 10.0


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class BrokerRole:
    """`bound = await nursery.start(role.run)` -> {"broker": (host, port), "fast": (host, port)}."""

    def __init__(self, settings: BrokerSettings, host: str = "0.0.0.0") -> None:
        self.settings = settings
        self.host = host
        b = settings.broker
        root = settings.store.storePathRootDir
        self.broker_config = b
        self.message_store_config = settings.store
        self.server = RemotingServer("broker", idle_seconds=float(settings.netty_server.serverChannelMaxIdleTimeSeconds))
        self.topic_config_manager = TopicConfigManager(root, TopicBrokerSettings.of(b))
        self.consumer_offset_manager = ConsumerOffsetManager(root)
        self.subscription_group_manager = SubscriptionGroupManager(root, b.autoCreateSubscriptionGroup)
        self.consumer_filter_manager = ConsumerFilterManager(clean_time_span_ms=b.filterDataCleanTimeSpan)
        self.notifier = ConsumerIdsChangeNotifier(
            enabled=b.notifyConsumerIdsChangedEnable,
            on_register=self.consumer_filter_manager.register,
            on_unregister=self.consumer_filter_manager.unregister)
        self.consumer_manager = ConsumerManager(self.notifier)
        self.producer_manager = ProducerManager()
        self.store: DefaultMessageStore = DefaultMessageStore(settings.store)
        self.store_host = ip_to_bytes(b.brokerIP1)
        self.store_port = settings.netty_server.listenPort
        self.loop_dispatch = LoopDispatch(self.store.reput_service,
                                          hook_follows=lambda: self.server.in_inline_call)
        self.server.add_after_requests_hook(self.loop_dispatch.catch_up)
        self.pull_hold_service = PullRequestHoldService(self.store.get_max_offset_in_queue)
        # 4.9 BrokerStatsManager (+ the counts 5.x metrics need); msgPutTotal* from the store's totals
        self.stats = BrokerStatsManager(b.brokerClusterName, b.enableDetailStat)
        self.stats.broker_stats = BrokerStats(lambda: self.store.stats.put_times_total,
                                              lambda: self.store.stats.get_transfered)
        self.allow_config_update = bool(getattr(b, "enableUpdateConfig", False))
        # delay levels / 5.x timers (started with the store unless the store runs its own)
        self.schedule_service: ScheduleMessageService | None = None
        if getattr(self.store, "schedule_service", None) is None:
            self.schedule_service = ScheduleMessageService(
                self.store, DelayOffsetManager(root), settings.store.messageDelayLevel,
                timer_progress=TimerProgress(root))
        self.rebalance_lock_manager = RebalanceLockManager()
        self.transaction_service = TransactionalMessageService(
            self.store, self.consumer_offset_manager, store_host=self.store_host, store_port=self.store_port,
            create_topic=self.create_topic_in_send_message_back_method,
            file_reserved_time_hours=int(settings.store.fileReservedTime))
        self.transaction_check_service = TransactionalMessageCheckService(self, self.transaction_service)
        # RocketMQ 5.x POP consumption and the broker-side queue assignment (docs/pop.md)
        self.pop_service = PopService(self)
        self.message_request_mode_manager = MessageRequestModeManager(root)
        send_processor = SendMessageProcessor(self)
        end_transaction_processor = EndTransactionProcessor(self, self.transaction_service)
        self.processors: list[RequestProcessor] = [
                           send_processor, PullMessageProcessor(self), ConsumerManageProcessor(self),
                           ClientManageProcessor(self), AdminBrokerProcessor(self),
                           LockProcessor(self.rebalance_lock_manager), QueryMessageProcessor(self),
                           ConsumerSendMsgBackProcessor(self), AdminObserveProcessor(self), end_transaction_processor,
                           PopRemotingProcessor(self.pop_service),
                           AssignmentProcessor(self, self.message_request_mode_manager),
                           ReplyMessageProcessor(self, send_processor)]
        for processor in self.processors:
            self.server.register_many(processor.handlers())
            inline = getattr(processor, "inline_handlers", None)
            if inline is not None:  # hot codes answered on the read loop, no task per request
                self.server.register_inline_many(inline())
        self.server.add_close_listener(self._on_channel_close)
        # ACL (4.9.8 BrokerController.initialAcl): checked before every request's handler
        self.acl: AclService | None = None
        if b.aclEnable:
            self.acl = AclService(b.rocketmqHome, admin_only=admin_codes(b.nonAdminAclConfigEnable),
                                  message_lookup=StoredMessageLookup(self.store))
            self.server.add_request_hook(self.acl.hook)
        # TLS on the remoting ports (4.9.8 TlsSystemConfig: tls.server.mode, default permissive)
        self.server.stream_wrapper = TlsAcceptor(
            TlsConfig.load(), "broker",
            first_byte_seconds=float(settings.netty_server.serverChannelMaxIdleTimeSeconds)).wrap
        self.server.register_many(AclAdminProcessor(
            self.acl, broker_name=b.brokerName, broker_addr=settings.broker_addr,
            cluster_name=b.brokerClusterName).handlers())
        self.server.register(RequestCode.GET_ALL_DELAY_OFFSET, functools.partial(get_all_delay_offset, self))
        #: monotonic time of the last registration a name server answered (the health check)
        self.last_registered: float | None = None
        self.bound: dict[str, tuple[str, int]] = {}
        # RocketMQ 5.x clients: apache.rocketmq.v2 over gRPC on grpcServerPort (TLS or h2c, one port)
        self.grpc_service = MessagingService(self, send=send_processor.send_decoded_now,
                                             end_transaction=end_transaction_processor.end_transaction,
                                             grpc_port=lambda: self.bound.get("grpc", ("", 0))[1],
                                             pop=lambda: self.pop_service)
        self.grpc_server: GrpcServer | None = None
        if settings.proxy.grpcServerPort >= 0:
            self.grpc_server = GrpcServer(
                self.grpc_service.handlers(), inline_handlers=self.grpc_service.inline_handlers(),
                tls=TlsAcceptor(TlsConfig.load(), "grpc",
                                first_byte_seconds=float(settings.netty_server.serverChannelMaxIdleTimeSeconds)),
                idle_seconds=float(settings.netty_server.serverChannelMaxIdleTimeSeconds))
        self._outer: BrokerOuterAPI | None = None
        # one REGISTER_BROKER and one topics.json save in flight, later asks coalesced (registration.py)
        self.registrar = BrokerRegistrar(self.topic_config_manager, self._send_registration)
        # (saves nobody waits for, after auto-created topics, keep the writer busy 1/5 of the time at most)
        self.topics_writer = Coalescer("saving topics.json", self._persist_topics, pace=4.0)
        self._nursery: trio.Nursery | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._config_version = {"counter": 0, "timestamp": now_ms()}
        self._stop = trio.Event()
        self._done = trio.Event()
        self._store_started = False
        # HA replication (BrokerStartup 4.9.8: haListenPort is always listenPort + 1)
        self.ha_service: HAMasterService | None = None
        self.ha_client: HAClient | None = None
        self.slave_synchronize: SlaveSynchronize | None = None
        port = settings.netty_server.listenPort
        settings.store.haListenPort = port + 1 if port else 0
        if settings.store.brokerRole == "SLAVE":
            self.ha_client = HAClient(self.store, settings.store)
            self.slave_synchronize = SlaveSynchronize(self)
        else:
            # haBindAddress (rmqd): keep the port, which serves the commit log to anyone who
            # connects, to the replication network
            self.ha_service = HAMasterService(self.store, settings.store, settings.store.haBindAddress or host)
        # statistics sampling, the Prometheus exporter and /health (after every handler is registered)
        self.observability = Observability(self)

    # -- lifecycle ---------------------------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[dict[str, tuple[str, int]]] = trio.TASK_STATUS_IGNORED) -> None:
        s = self.settings
        Path(s.store.storePathRootDir).mkdir(parents=True, exist_ok=True)
        for manager in (self.topic_config_manager, self.consumer_offset_manager, self.subscription_group_manager,
                        self.pop_service.order_info, self.message_request_mode_manager):
            if not manager.load():
                raise StoreConfigError(config_refusal(manager.load_error, s.store.storePathRootDir))
        # dispatch runs on this event loop, not in the store's thread (broker/dispatch_loop.py)
        self.loop_dispatch.attach()
        await trio.to_thread.run_sync(self._start_store)
        try:
            main, fast = await self.server.open_listeners([(self.host, s.listen_port), (self.host, s.fast_listen_port)])
            self.bound = {"broker": main, "fast": fast}
            await self._open_grpc_listener()
            async with RemotingClient("broker-outer") as client:
                client.stream_wrapper = client_stream_wrapper()  # tls.enable=true: TLS to the name servers
                self._outer = BrokerOuterAPI(client, BrokerOuterAPI.split_namesrv_addr(s.broker.namesrvAddr),
                                             timeout=s.broker.registerBrokerTimeoutMills / 1000)
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    self._token = trio.lowlevel.current_trio_token()
                    await nursery.start(self.loop_dispatch.run)
                    bound_metrics = await nursery.start(self.observability.run)
                    if bound_metrics is not None:
                        self.bound["metrics"] = bound_metrics
                    await nursery.start(self.pull_hold_service.run)
                    await nursery.start(self.pop_service.run)
                    self.store.add_arrival_listener(self.pull_hold_service.arrival_listener)
                    await nursery.start(self.notifier.run)
                    if self.message_store_config.brokerRole != "SLAVE":
                        await nursery.start(self.transaction_check_service.run)
                    await nursery.start(self.server.serve)
                    if "grpc" in self.bound and self.grpc_server is not None:
                        await nursery.start(self.grpc_server.serve)
                        await nursery.start(self.grpc_service.consumer.run_renewal)
                    if self.ha_service is not None:
                        self.bound["ha"] = await nursery.start(self.ha_service.run)
                        s.store.haListenPort = self.bound["ha"][1]
                    if self.ha_client is not None:
                        await nursery.start(self.ha_client.run)
                    if self.slave_synchronize is not None:
                        nursery.start_soon(self.slave_synchronize.run)
                    nursery.start_soon(self._housekeeping_loop)
                    if self.acl is not None:
                        nursery.start_soon(self.acl.watch)
                    nursery.start_soon(self._persist_loop)
                    await nursery.start(self.topics_writer.run)
                    await trio.to_thread.run_sync(self.topic_config_manager.start_journal)
                    self.topic_config_manager.deferred_persist = self._topics_changed
                    registrar_scope = trio.CancelScope()
                    await nursery.start(self._run_in, registrar_scope, self.registrar.run)
                    await self.register_broker_all()
                    nursery.start_soon(self._register_loop)
                    task_status.started(self.bound)
                    await self._stop.wait()
                    self.pull_hold_service.wake_all()
                    self.pop_service.polling.wake_all()
                    await self.grpc_service.stop()
                    if "grpc" in self.bound and self.grpc_server is not None:
                        await self.grpc_server.stop()
                    await self.server.stop()
                    registrar_scope.cancel()  # no registration may land after the unregistration
                    await self.unregister_broker_all()
                    nursery.cancel_scope.cancel()
        finally:
            self._nursery = None
            self.topic_config_manager.deferred_persist = None  # saved below, and at once from now on
            self.topic_config_manager.stop_journal()
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self._shutdown_store)
            self._done.set()

    async def _open_grpc_listener(self) -> None:
        """grpcServerPort: Apache's proxy default 8081 when not configured. Taken by another
        process while nobody asked for it, the gRPC endpoint is left out with a warning (the
        Remoting ports still serve); a configured port that cannot be bound stops the start."""
        if self.grpc_server is None:
            return
        port = self.settings.proxy.grpcServerPort
        try:
            (self.bound["grpc"],) = await self.grpc_server.open_listeners([(self.host, port)])
        except OSError as exc:
            if "grpcServerPort" in self.settings.explicit_keys:
                raise
            log.warning("gRPC endpoint not started: the default grpcServerPort %d cannot be bound (%s); "
                        "set grpcServerPort to serve RocketMQ 5.x clients", port, exc.strerror or exc)
            self.grpc_server = None

    def _start_store(self) -> None:
        self.store.load()
        self.store.start()
        self._store_started = True
        if self.schedule_service is not None and self.message_store_config.brokerRole != "SLAVE":
            if not self.schedule_service.load():
                errors = [m.load_error for m in (self.schedule_service.offsets, self.schedule_service.timer)
                          if m is not None and m.load_error]
                self.store.shutdown()
                self._store_started = False
                raise StoreConfigError(config_refusal("; ".join(errors), self.message_store_config.storePathRootDir))
            self.schedule_service.start()
        if self.message_store_config.brokerRole != "SLAVE":
            self.pop_service.start()

    def _shutdown_store(self) -> None:
        # (messageRequestMode.json is written when it changes, as 5.3 does)
        for manager in (self.consumer_offset_manager, self.topic_config_manager, self.subscription_group_manager,
                        self.pop_service.order_info):
            try:
                manager.persist()
            except Exception:  # noqa: BLE001 - keep shutting down; the store matters most
                log.exception("persisting %s failed", type(manager).__name__)
        if self.schedule_service is not None:
            try:
                self.schedule_service.shutdown()
            except Exception:  # noqa: BLE001
                log.exception("schedule service shutdown failed")
        if self._store_started:
            self.store.shutdown()
            self._store_started = False

    async def stop(self) -> None:
        self._stop.set()
        await self._done.wait()

    @property
    def store_running(self) -> bool:
        """The store recovered and started, and the broker is not stopping (the health check)."""
        return self._store_started and not self._stop.is_set()

    async def _register_loop(self) -> None:
        await trio.sleep(REGISTER_INITIAL_DELAY_S)
        period = self.settings.broker.register_period_ms() / 1000
        while True:
            await self.register_broker_all()
            await trio.sleep(period)

    async def _housekeeping_loop(self) -> None:
        while True:
            await trio.sleep(HOUSEKEEPING_INTERVAL_S)
            scan_exception_channels(self.producer_manager, self.consumer_manager)

    @staticmethod
    async def _run_in(scope: trio.CancelScope, run: Any, *,
                      task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with scope:
            await run(task_status=task_status)

    async def _persist_topics(self) -> None:
        manager = self.topic_config_manager
        if manager.change_seq > manager.persisted_seq:
            await trio.to_thread.run_sync(manager.persist)

    def _topics_changed(self) -> None:
        """TopicConfigManager.deferred_persist: called on any thread, under the manager's lock."""
        self._soon(self.topics_writer.request)

    def _soon(self, fn: Any) -> None:
        token = self._token
        if token is None:
            return
        try:
            token.run_sync_soon(fn)
        except trio.RunFinishedError:
            pass

    async def _persist_loop(self) -> None:
        interval = max(self.broker_config.flushConsumerOffsetInterval, 100) / 1000
        while True:
            await trio.sleep(interval)
            try:
                await trio.to_thread.run_sync(self.consumer_offset_manager.persist)
            except Exception:  # noqa: BLE001
                log.exception("consumerOffset.json persist failed")

    def _on_channel_close(self, channel: Any) -> None:
        self.producer_manager.do_channel_close_event(channel)
        self.consumer_manager.do_channel_close_event(channel)

    # -- name servers ---------------------------------------------------------------------------------
    async def register_broker_all(self) -> None:
        """A full registration (BrokerController.registerBrokerAll(true, false, true)), or
        the next one when one is in flight; returns once it is done."""
        if self._outer is None or not self._outer.namesrv_addrs:
            return
        await self.registrar.wait(self.registrar.request_full())

    async def _send_registration(self, wrapper: TopicConfigSerializeWrapper, check_order_config: bool) -> bool:
        """BrokerOuterAPI.registerBrokerAll of one snapshot (the registrar's worker)."""
        if self._outer is None or not self._outer.namesrv_addrs:
            return True
        s = self.settings
        perm = self.broker_config.brokerPermission
        if not (perm & PERM_READ and perm & PERM_WRITE):
            wrapper.topicConfigTable = {
                name: TopicConfig(topicName=name, readQueueNums=tc.readQueueNums, writeQueueNums=tc.writeQueueNums,
                                  perm=perm)
                for name, tc in wrapper.topicConfigTable.items()}
        results = await self._outer.register_broker_all(
            cluster_name=s.broker.brokerClusterName, broker_addr=s.broker_addr, broker_name=s.broker.brokerName,
            broker_id=s.broker.brokerId, ha_server_addr=s.ha_server_addr, topic_config_wrapper=wrapper,
            compressed=s.broker.compressedRegister)
        if results:  # /health: a name server took a registration (broker/metrics.py)
            self.last_registered = time.monotonic()
        if results and self.ha_client is not None:
            self.ha_client.update_master_address(results[0].haServerAddr)
            if self.slave_synchronize is not None:
                self.slave_synchronize.master_addr = results[0].masterAddr
        if results and results[0].kvTable is not None and check_order_config:
            order = {k for k in results[0].kvTable.table}
            if order:
                self.topic_config_manager.update_order_topic_config(order)
        return len(results) == len(self._outer.namesrv_addrs)

    def register_soon(self) -> None:
        """After an auto-created topic (4.9: registerBrokerAll(false, true, true) on the
        sending thread): an incremental registration in the background, coalesced with any
        others asked meanwhile. Safe from worker threads (the transaction service creates
        topics there)."""
        self._soon(self.registrar.request_increment)

    async def unregister_broker_all(self) -> None:
        if self._outer is None or not self._outer.namesrv_addrs:
            return
        s = self.settings
        await self._outer.unregister_broker_all(cluster_name=s.broker.brokerClusterName, broker_addr=s.broker_addr,
                                                broker_name=s.broker.brokerName, broker_id=s.broker.brokerId)

    # -- services the processors call ----------------------------------------------------------------
    @staticmethod
    def now_ms() -> int:
        return now_ms()

    def create_topic_in_send_message_method(self, topic: str, default_topic: str, remote_addr: str,
                                            queue_nums: int, topic_sys_flag: int) -> Any:
        tc, created = self.topic_config_manager.create_topic_in_send_message_method(
            topic, default_topic, queue_nums, topic_sys_flag)
        if created:
            log.info("auto-created topic %s from %s for %s", topic, default_topic, remote_addr)
            self.register_soon()
        return tc

    def create_topic_in_send_message_back_method(self, topic: str, queue_nums: int, perm: int,
                                                 topic_sys_flag: int) -> Any:
        tc, created = self.topic_config_manager.create_topic_in_send_message_back_method(
            topic, queue_nums, perm, topic_sys_flag)
        if created:
            self.register_soon()
        return tc

    def create_retry_topic(self, topic: str, queue_nums: int, topic_sys_flag: int) -> Any:
        return self.create_topic_in_send_message_back_method(topic, queue_nums, PERM_WRITE | PERM_READ,
                                                             topic_sys_flag)

    def compile_expression_error(self, expression_type: str | None, text: str | None) -> str | None:
        return check_expression(expression_type, text)

    def new_inner_message(self, *, topic: str, queue_id: int, body: bytes, flag: int, properties: dict[str, str],
                          properties_string: str, sys_flag: int, born_timestamp: int, born_host: tuple[str, int],
                          reconsume_times: int) -> MessageExtBrokerInner:
        host, port = born_host
        return commitlog_new_inner_message(topic, queue_id, body, properties, flag, sys_flag, born_timestamp,
                                           _ip_bytes(host or "127.0.0.1"), port, self.store_host, self.store_port,
                                           reconsume_times, properties_string)

    def new_batch_message(self, *, topic: str, queue_id: int, body: bytes, flag: int, properties: dict[str, str],
                          properties_string: str, sys_flag: int, born_timestamp: int, born_host: tuple[str, int],
                          reconsume_times: int) -> MessageExtBatch:
        host, port = born_host
        ordered = java_hashmap_order(properties)
        return MessageExtBatch(
            topic=topic, queue_id=queue_id, body=body, properties=ordered, sys_flag=sys_flag,
            born_timestamp=born_timestamp, born_host=_ip_bytes(host or "127.0.0.1"), born_port=port,
            store_host=self.store_host, store_port=self.store_port, reconsume_times=reconsume_times)

    async def send_message_back(self, *, group: str, commit_log_offset: int, delay_level: int,
                                max_reconsume_times: int | None) -> tuple[int, str | None]:
        """CONSUMER_SEND_MSG_BACK's work for POP's forward-to-DLQ (processors/retry.py)."""
        return await send_message_back(self, group=group, commit_log_offset=commit_log_offset,
                                       delay_level=delay_level, max_reconsume_times=max_reconsume_times)

    async def topic_route_queues(self, topic: str) -> list[tuple[str, int]] | None:
        """(brokerName, queueId) of the topic's readable queues in the cluster, from the name
        server's route (QUERY_ASSIGNMENT); this broker's own queues when it cannot be asked."""
        outer = self._outer
        if outer is not None and outer.namesrv_addrs:
            route = await outer.get_topic_route(topic)
            if route is not None:
                return [(qd.brokerName, q) for qd in route.queueDatas if qd.perm & PERM_READ
                        for q in range(qd.readQueueNums)]
        tc = self.topic_config_manager.select_topic_config(topic)
        if tc is None:
            return None
        return [(self.broker_config.brokerName, q) for q in range(tc.readQueueNums)]

    async def prepare_transaction_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        return self.put_half_message(msg)

    def put_half_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        """TransactionalMessageBridge.parseHalfMessageInner + putMessage: the half message goes to
        RMQ_SYS_TRANS_HALF_TOPIC queue 0 with its real topic/queue in properties (issue 5 resolves it)."""
        props = dict(msg.properties)
        if MessageConst.PROPERTY_WAIT_STORE_MSG_OK in props:  # removed and put back by the send path
            props[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = props.pop(MessageConst.PROPERTY_WAIT_STORE_MSG_OK)
        held = len(props)
        props[MessageConst.PROPERTY_REAL_TOPIC] = msg.topic
        props[MessageConst.PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
        msg.properties = props
        msg.properties_string = encode_properties(java_hashmap_order(props, max_size=max(held, len(props))))
        msg.sys_flag = MessageSysFlag.reset_transaction_value(msg.sys_flag, MessageSysFlag.TRANSACTION_NOT_TYPE)
        msg.topic = RMQ_SYS_TRANS_HALF_TOPIC
        msg.queue_id = 0
        return self.store.put_message(msg)

    def generate_offset_moved_event(self, group: str, topic: str, queue_id: int, offset_request: int,
                                    offset_new: int) -> None:
        """PullMessageProcessor.generateOffsetMovedEvent: a record of the correction in OFFSET_MOVED_EVENT."""
        try:
            event = {"consumerGroup": group,
                     "messageQueue": {"brokerName": self.broker_config.brokerName, "queueId": queue_id,
                                      "topic": topic},
                     "offsetNew": offset_new, "offsetRequest": offset_request}
            props = java_hashmap_order({MessageConst.PROPERTY_TAGS: group, MessageConst.PROPERTY_DELAY_TIME_LEVEL: "0",
                                        MessageConst.PROPERTY_KEYS: group})
            msg = MessageExtBrokerInner(
                topic=RMQ_SYS_OFFSET_MOVED_EVENT, queue_id=0, body=fastjson.dumps(event).encode("utf-8"),
                properties=props, properties_string=encode_properties(props), born_timestamp=now_ms(),
                born_host=self.store_host, born_port=self.store_port, store_host=self.store_host,
                store_port=self.store_port)
            self.store.put_message(msg)
        except Exception:  # noqa: BLE001 - an audit record must never fail a pull
            log.exception("generateOffsetMovedEvent failed")

    # -- admin support ----------------------------------------------------------------------------------
    async def update_topic_config(self, *, topic: str, read_queue_nums: int, write_queue_nums: int, perm: int,
                                  topic_filter_type: str, topic_sys_flag: int, order: bool,
                                  attributes: dict[str, str] | None = None) -> None:
        """UPDATE_AND_CREATE_TOPIC: returns once the change is on disk (journaled) and the
        name servers were told (4.9.7: updateTopicConfig + registerIncrementBrokerData, both
        synchronous), the registration shared with whatever else changed meanwhile."""
        try:
            filter_type = TopicFilterType[topic_filter_type]
        except KeyError:
            filter_type = TopicFilterType.SINGLE_TAG
        tc = TopicConfig(topicName=topic, readQueueNums=read_queue_nums, writeQueueNums=write_queue_nums, perm=perm,
                         topicFilterType=filter_type, topicSysFlag=topic_sys_flag, order=order, attributes=attributes)
        self.topic_config_manager.update_topic_config(tc)
        if self._nursery is not None:
            await self.registrar.wait(self.registrar.request_increment(check_order_config=True))

    async def delete_topic(self, topic: str) -> None:
        """The queues first: when the store cannot delete them yet (StoreBusyError, raised to
        the caller) the topic is left whole, config included."""
        await trio.to_thread.run_sync(self.store.delete_topics, {topic})
        self.topic_config_manager.delete_topic_config(topic)  # journaled (fdatasync) before the answer
        if self.broker_config.autoDeleteUnusedStats:
            self.stats.on_topic_deleted(topic)

    def update_subscription_group_from_body(self, body: bytes) -> None:
        if not body:
            return
        cfg = SubscriptionGroupConfig.from_json_obj(fastjson.loads(body.decode("utf-8")))
        self.subscription_group_manager.update_subscription_group_config(cfg)

    def update_config(self, props: dict[str, str]) -> list[str]:
        try:
            self.settings.apply(props, source="UPDATE_BROKER_CONFIG")
        except ConfigError as exc:
            return [str(exc)]
        self._config_version = {"counter": self._config_version["counter"] + 1, "timestamp": now_ms()}
        return []

    def all_configs(self) -> dict[str, Any]:
        # MixAll.object2Properties leaves out null fields
        return {k: _java_text(v) for k, v in self.settings.all_properties().items() if v is not None}

    def config_data_version(self) -> dict[str, int]:
        return dict(self._config_version)

    def store_runtime_info(self) -> dict[str, str]:
        info = getattr(self.store, "get_runtime_info", None)
        if info is not None:
            return {k: str(v) for k, v in info().items()}
        return {
            "commitLogMinOffset": str(self.store.get_min_phy_offset()),
            "commitLogMaxOffset": str(self.store.get_max_phy_offset()),
        }

    def dispatch_behind_bytes(self) -> int:
        return self.store.dispatch_behind_bytes()

    def earliest_message_time(self) -> int:
        fn = getattr(self.store, "get_earliest_message_time_all", None)
        return int(fn()) if fn is not None else 0

    def remain_to_flush(self) -> int:
        fs = getattr(self.store, "flush_service", None)
        flushed = getattr(fs, "flushed_offset", None) if fs is not None else None
        if flushed is None:
            return 0
        return max(self.store.get_max_phy_offset() - int(flushed), 0)


@functools.lru_cache(maxsize=1024)
def _ip_bytes(host: str) -> bytes:
    """ip_to_bytes of a client address (the same few repeat on every message)."""
    return ip_to_bytes(host)


def _java_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return ""
    return str(v)


__all__ = ["BrokerRole"]
