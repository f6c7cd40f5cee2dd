"""RocketMQ 5's broker metrics as Prometheus metric families (a prometheus_client collector).

Names, labels and buckets are those a RocketMQ 5.3 broker's Prometheus endpoint shows
(BrokerMetricsConstant, RemotingMetricsConstant, DefaultStoreMetricsConstant and the
OpenTelemetry 1.29 Prometheus exporter's naming: a unit becomes a name suffix, e.g.
``rocketmq_rpc_latency`` in milliseconds is ``rocketmq_rpc_latency_milliseconds``), so a
Grafana dashboard built for RocketMQ 5 reads rmqd unchanged. docs/observability.md lists
them beside Apache's.

Nothing here runs per message: the counters live in store/broker_stats.py (incremented by
the send and pull paths) and this collector turns them into metric families at scrape
time, on the event loop (the tables it reads are only changed there). Imported only when
the exporter is on (prometheus_client costs start-up time otherwise).
"""
from __future__ import annotations

import logging
import math
import shutil
import time
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from rmqd.processors.common import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, is_system_topic
from rmqd.store.broker_stats import Histogram, RpcLatency
from rmqd.wire.codes import LanguageCode, RequestCode, ResponseCode, version_desc

if TYPE_CHECKING:
    from rmqd.broker.broker import BrokerRole

log = logging.getLogger("rmqd.metrics")

#: BrokerMetricsConstant.OPEN_TELEMETRY_METER_NAME: the OpenTelemetry exporter labels every sample with it.
METER_NAME = "broker-meter"
#: MixAll.CID_RMQ_SYS_PREFIX, lower-cased as BrokerMetricsManager.isSystemGroup compares it.
SYSTEM_GROUP_PREFIX = "cid_rmq_sys_"
#: Topics 5.x stores delayed / half messages under; their put counts carry that message type.
_MESSAGE_TYPE_BY_TOPIC = {"SCHEDULE_TOPIC_XXXX": "delay", "rmq_sys_wheel_timer": "delay",
                          "RMQ_SYS_TRANS_HALF_TOPIC": "transaction"}


def _code_names(enum_cls: Any) -> dict[int, str]:
    """RemotingHelper.REQUEST_CODE_MAP / RESPONSE_CODE_MAP: the field name, lower case (the last
    field of a value wins, as Java's HashMap puts them in declaration order)."""
    return {int(member.value): name.lower() for name, member in enum_cls.__members__.items()}


REQUEST_CODE_NAMES = _code_names(RequestCode)
RESPONSE_CODE_NAMES = _code_names(ResponseCode)


def _java_bool(value: bool) -> str:
    return "true" if value else "false"


def is_retry_or_dlq_topic(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or topic.startswith(DLQ_GROUP_TOPIC_PREFIX)


def is_system_group(group: str) -> bool:
    return group.lower().startswith(SYSTEM_GROUP_PREFIX)


def _le(bound: float) -> str:
    """A bucket bound as the OpenTelemetry Java exporter writes it (Double.toString)."""
    return "+Inf" if math.isinf(bound) else repr(float(bound))


def _buckets(hist: Histogram) -> list[tuple[str, float]]:
    out, running = [], 0
    for bound, count in zip((*hist.bounds, math.inf), hist.counts):
        running += count
        out.append((_le(bound), float(running)))
    return out


class BrokerMetrics(Collector):
    """A prometheus_client collector over one BrokerRole."""

    def __init__(self, role: "BrokerRole") -> None:
        self.role = role
        bc = role.broker_config
        labels: dict[str, str] = {}
        for item in str(getattr(bc, "metricsLabel", "") or "").split(","):
            if not item:
                continue
            pair = item.split(":")
            if len(pair) != 2:
                log.warning("metricsLabel is not valid: %s", bc.metricsLabel)
                continue
            labels[pair[0]] = pair[1]
        if getattr(bc, "metricsInDelta", False):
            labels["aggregation"] = "delta"
        labels.update({"node_type": "broker", "cluster": bc.brokerClusterName, "node_id": bc.brokerName})
        self.base = {"otel_scope_name": METER_NAME, **labels}

    # -- helpers ----------------------------------------------------------------------------
    def _family(self, kind: type, name: str, doc: str, labels: Iterable[str]) -> Any:
        return kind(name, doc, labels=[*self.base, *labels])

    def _add(self, family: Any, values: Iterable[str], *args: Any) -> None:
        family.add_metric([*self.base.values(), *values], *args)

    # -- collection ---------------------------------------------------------------------------
    def collect(self) -> Iterator[Metric]:
        yield from self._broker_gauges()
        yield from self._request_metrics()
        yield from self._connection_metrics()
        yield from self._lag_metrics()
        yield from self._store_metrics()
        yield from self._rpc_latency(self.role.stats.rpc_latency)

    def _broker_gauges(self) -> Iterator[Metric]:
        r = self.role
        for name, doc, value in (
                ("rocketmq_broker_permission", "Broker permission", r.broker_config.brokerPermission),
                ("rocketmq_topic_number", "Active topic number", len(r.topic_config_manager.topic_config_table)),
                ("rocketmq_consumer_group_number", "Active subscription group number",
                 len(r.subscription_group_manager.subscription_group_table))):
            family = self._family(GaugeMetricFamily, name, doc, ())
            self._add(family, (), value)
            yield family

    def _request_metrics(self) -> Iterator[Metric]:
        stats = self.role.stats
        labels_in = ("topic", "message_type", "is_system")
        msgs_in = self._family(CounterMetricFamily, "rocketmq_messages_in_total", "Total number of incoming messages",
                               labels_in)
        bytes_in = self._family(CounterMetricFamily, "rocketmq_throughput_in_total",
                                "Total traffic of incoming messages", labels_in)
        size = self._family(HistogramMetricFamily, "rocketmq_message_size", "Incoming messages size", labels_in)
        for topic, rec in list(stats.topic_put.items()):
            if is_retry_or_dlq_topic(topic):
                continue
            values = (topic, _MESSAGE_TYPE_BY_TOPIC.get(topic, "normal"), _java_bool(is_system_topic(topic)))
            self._add(msgs_in, values, rec.msgs)
            self._add(bytes_in, values, rec.bytes)
            self._add(size, values, _buckets(rec.size), rec.size.sum)
        labels_out = ("topic", "consumer_group", "is_system")
        msgs_out = self._family(CounterMetricFamily, "rocketmq_messages_out_total",
                                "Total number of outgoing messages", labels_out)
        bytes_out = self._family(CounterMetricFamily, "rocketmq_throughput_out_total",
                                 "Total traffic of outgoing messages", labels_out)
        dlq = self._family(CounterMetricFamily, "rocketmq_send_to_dlq_messages_total", "Consumer send to DLQ messages",
                           ("consumer_group", "topic", "is_system"))
        for group, by_topic in list(stats.group_get.items()):
            for topic, rec in list(by_topic.items()):
                system = _java_bool(is_system_topic(topic) or is_system_group(group))
                if rec.times and not is_retry_or_dlq_topic(topic):
                    self._add(msgs_out, (topic, group, system), rec.msgs)
                    self._add(bytes_out, (topic, group, system), rec.bytes)
                if rec.dlq:
                    self._add(dlq, (group, topic, system), rec.dlq)
        yield from (msgs_in, bytes_in, size, msgs_out, bytes_out, dlq)

    def _connection_metrics(self) -> Iterator[Metric]:
        r = self.role
        producers: dict[tuple[str, str], int] = {}
        for table in list(r.producer_manager.group_channel_table.values()):
            for info in list(table.values()):
                key = (LanguageCode.of(info.language).name.lower(), _version(info.version))
                producers[key] = producers.get(key, 0) + 1
        family = self._family(GaugeMetricFamily, "rocketmq_producer_connections", "Producer connections",
                              ("language", "version", "protocol_type"))
        for (language, version), n in producers.items():
            self._add(family, (language, version, "remoting"), n)
        yield family
        consumers: dict[tuple[str, str, str, str], int] = {}
        for group, group_info in list(r.consumer_manager.consumer_table.items()):
            mode = str(getattr(group_info.consume_type, "value", group_info.consume_type) or "").lower()
            for info in list(group_info.channel_info_table.values()):
                key = (group, LanguageCode.of(info.language).name.lower(), _version(info.version), mode)
                consumers[key] = consumers.get(key, 0) + 1
        family = self._family(GaugeMetricFamily, "rocketmq_consumer_connections", "Consumer connections",
                              ("consumer_group", "language", "version", "consume_mode", "protocol_type", "is_system"))
        for (group, language, version, mode), n in consumers.items():
            self._add(family, (group, language, version, mode, "remoting", _java_bool(is_system_group(group))), n)
        yield family

    def _lag_metrics(self) -> Iterator[Metric]:
        """ConsumerLagCalculator (4.x consumers: no POP): for every subscription group online,
        each topic it subscribes (retry topics left out) that the broker serves."""
        r = self.role
        store, offsets, stats = r.store, r.consumer_offset_manager, r.stats
        labels = ("consumer_group", "topic", "is_retry", "is_system")
        lag = self._family(GaugeMetricFamily, "rocketmq_consumer_lag_messages", "Consumer lag messages", labels)
        lag_latency = self._family(GaugeMetricFamily, "rocketmq_consumer_lag_latency_milliseconds",
                                   "Consumer lag time", labels)
        inflight = self._family(GaugeMetricFamily, "rocketmq_consumer_inflight_messages",
                                "Consumer inflight messages", labels)
        queueing = self._family(GaugeMetricFamily, "rocketmq_consumer_queueing_latency_milliseconds",
                                "Consumer queueing time", labels)
        ready = self._family(GaugeMetricFamily, "rocketmq_consumer_ready_messages", "Consumer ready messages", labels)
        now = int(time.time() * 1000)
        broker_perm = r.broker_config.brokerPermission
        for group in list(r.subscription_group_manager.subscription_group_table):
            info = r.consumer_manager.get_consumer_group_info(group)
            if info is None:
                continue
            pulled = stats.group_get.get(group, {})
            for topic in sorted(info.subscription_table):
                if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                    continue
                tc = r.topic_config_manager.select_topic_config(topic)
                if tc is None or not (tc.perm & broker_perm & 0b110):
                    continue
                pull_offsets = pulled[topic].pull_offsets if topic in pulled else {}
                total_lag = total_inflight = total_ready = 0
                unconsumed_ts = unpulled_ts = math.inf
                for q in range(tc.writeQueueNums):
                    broker_offset = max(store.get_max_offset_in_queue(topic, q), 0)
                    committed = offsets.query_offset(group, topic, q)
                    consumer_offset = broker_offset if committed < 0 else committed
                    total_lag += max(broker_offset - consumer_offset, 0)
                    unconsumed_ts = min(unconsumed_ts, _store_ts(store, topic, q, consumer_offset))
                    pull = pull_offsets.get(q, committed)
                    total_ready += max(broker_offset - (broker_offset if pull < 0 else pull), 0)
                    pull = max(pull, 0)
                    total_inflight += max(pull - (pull if committed < 0 else committed), 0)
                    unpulled_ts = min(unpulled_ts, _store_ts(store, topic, q, pull))
                values = (group, topic, "false", _java_bool(is_system_topic(topic) or is_system_group(group)))
                self._add(lag, values, total_lag)
                self._add(lag_latency, values, 0 if math.isinf(unconsumed_ts) else now - unconsumed_ts)
                self._add(inflight, values, total_inflight)
                self._add(queueing, values, 0 if math.isinf(unpulled_ts) else now - unpulled_ts)
                self._add(ready, values, total_ready)
        yield from (lag, lag_latency, inflight, queueing, ready)

    def _store_metrics(self) -> Iterator[Metric]:
        """DefaultStoreMetricsManager: its own two labels on top of the broker's."""
        r = self.role
        extra = ("storage_type", "storage_medium")
        values = ("local", "disk")
        families = []
        try:
            usage = shutil.disk_usage(r.message_store_config.storePathRootDir)
            used: int | None = usage.total - usage.free if usage.total > 0 else None
        except OSError:
            used = None
        earliest = r.store.get_earliest_message_time_of_store()  # 5.x: the first message's store time
        for name, doc, value in (
                ("rocketmq_storage_size_bytes", "Broker storage size", used),
                ("rocketmq_storage_flush_behind_bytes", "Broker flush behind bytes", r.remain_to_flush()),
                ("rocketmq_storage_dispatch_behind_bytes", "Broker dispatch behind bytes", r.dispatch_behind_bytes()),
                ("rocketmq_storage_message_reserve_time_milliseconds", "Broker message reserve time",
                 int(time.time() * 1000) - earliest if earliest > 0 else None)):
            family = self._family(GaugeMetricFamily, name, doc, extra)
            if value is not None:
                self._add(family, values, value)
            families.append(family)
        yield from families

    def _rpc_latency(self, rpc: RpcLatency) -> Iterator[Metric]:
        family = self._family(HistogramMetricFamily, "rocketmq_rpc_latency_milliseconds", "Rpc latency",
                              ("protocol_type", "request_code", "response_code", "is_long_polling", "result"))
        for request_code, response_code, long_polling, oneway, hist in rpc.items():
            values = ("remoting", REQUEST_CODE_NAMES.get(request_code, str(request_code)),
                      RESPONSE_CODE_NAMES.get(response_code, str(response_code)), _java_bool(long_polling),
                      "oneway" if oneway else "success")
            self._add(family, values, _buckets(hist), hist.sum)
        yield family


def _version(version: int) -> str:
    return version_desc(version).lower() if version >= 0 else str(version)


def _store_ts(store: Any, topic: str, queue_id: int, offset: int) -> float:
    """ConsumerLagCalculator.getStoreTimeStamp: the message's store time, infinity when there is none."""
    if offset < 0:
        return math.inf
    ts = store.get_message_store_timestamp(topic, queue_id, offset)
    return ts if ts > 0 else math.inf


def registry_for(role: "BrokerRole") -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerMetrics(role))
    return registry


__all__ = ["BrokerMetrics", "REQUEST_CODE_NAMES", "RESPONSE_CODE_NAMES", "registry_for"]
