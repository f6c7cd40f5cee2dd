"""The name server's view of the cluster (RocketMQ RouteInfoManager).

Tables as in RocketMQ 4.9.8: topic -> {brokerName: QueueData}, brokerName -> BrokerData,
cluster -> brokerNames, brokerAddr -> live info (last update, data version, channel,
haServerAddr), brokerAddr -> filter servers. Everything runs on the trio thread, so no
locks are needed. Time is injectable (`now_ms`) so expiry is testable without waiting.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from rmqd.wire.bodies import (PERM_READ, PERM_WRITE, BrokerData, ClusterInfo, DataVersion, QueueData, RegisterBrokerResult,
                         TopicConfig, TopicConfigSerializeWrapper, TopicList, TopicRouteData)

log = logging.getLogger("rmqd.namesrv.route")

BROKER_CHANNEL_EXPIRED_TIME_MS = 1000 * 60 * 2  # RouteInfoManager.BROKER_CHANNEL_EXPIRED_TIME
MASTER_ID = 0
# TopicSysFlag bits
FLAG_UNIT = 0x1
FLAG_UNIT_SUB = 0x2


def _wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class BrokerLiveInfo:
    last_update_timestamp: int
    data_version: DataVersion
    channel: Any
    ha_server_addr: str | None


class RouteInfoManager:
    def __init__(self, now_ms: Callable[[], int] = _wall_ms) -> None:
        self.now_ms = now_ms
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        self.filter_server_table: dict[str, list[str]] = {}

    # -- registration ------------------------------------------------------------------------
    def register_broker(self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int,
                        ha_server_addr: str | None, topic_config_wrapper: TopicConfigSerializeWrapper | None,
                        filter_server_list: list[str] | None, channel: Any) -> RegisterBrokerResult:
        result = RegisterBrokerResult()
        self.cluster_addr_table.setdefault(cluster_name, set()).add(broker_name)

        register_first = False
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is None:
            register_first = True
            broker_data = BrokerData(cluster=cluster_name, brokerName=broker_name, brokerAddrs={})
            self.broker_addr_table[broker_name] = broker_data
        addrs = broker_data.brokerAddrs
        # slave switched to master (or the reverse): one record per ip:port
        for bid in [bid for bid, addr in addrs.items() if addr == broker_addr and bid != broker_id]:
            del addrs[bid]
        old_addr = addrs.get(broker_id)
        addrs[broker_id] = broker_addr
        register_first = register_first or old_addr is None

        if topic_config_wrapper is not None and broker_id == MASTER_ID:
            if self.is_broker_topic_config_changed(broker_addr, topic_config_wrapper.dataVersion) or register_first:
                for cfg in topic_config_wrapper.topicConfigTable.values():
                    self._create_and_update_queue_data(broker_name, cfg)

        data_version = topic_config_wrapper.dataVersion if topic_config_wrapper is not None else DataVersion()
        prev = self.broker_live_table.get(broker_addr)
        self.broker_live_table[broker_addr] = BrokerLiveInfo(self.now_ms(), data_version, channel, ha_server_addr)
        if prev is None:
            log.info("new broker registered, %s HAServer: %s", broker_addr, ha_server_addr)

        if filter_server_list is not None:
            if filter_server_list:
                self.filter_server_table[broker_addr] = list(filter_server_list)
            else:
                self.filter_server_table.pop(broker_addr, None)

        if broker_id != MASTER_ID:
            master_addr = addrs.get(MASTER_ID)
            if master_addr is not None:
                master_live = self.broker_live_table.get(master_addr)
                if master_live is not None:
                    result.haServerAddr = master_live.ha_server_addr
                    result.masterAddr = master_addr
        return result

    def wants_topic_table(self, broker_addr: str, broker_name: str, broker_id: int,
                          data_version: DataVersion) -> bool:
        """Whether register_broker would read the topic table of this registration (a master's
        first, or one with a new DataVersion): the name server decodes the 10,000 topic
        configs of a periodic registration only then."""
        if broker_id != MASTER_ID:
            return False
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is None or broker_data.brokerAddrs.get(broker_id) is None:
            return True
        return self.is_broker_topic_config_changed(broker_addr, data_version)

    def is_broker_topic_config_changed(self, broker_addr: str, data_version: DataVersion) -> bool:
        prev = self.query_broker_topic_config(broker_addr)
        return prev is None or prev != data_version

    def query_broker_topic_config(self, broker_addr: str) -> DataVersion | None:
        live = self.broker_live_table.get(broker_addr)
        return live.data_version if live is not None else None

    def update_broker_info_update_timestamp(self, broker_addr: str, timestamp: int) -> None:
        live = self.broker_live_table.get(broker_addr)
        if live is not None:
            live.last_update_timestamp = timestamp

    def _create_and_update_queue_data(self, broker_name: str, cfg: TopicConfig) -> None:
        queue_data = QueueData(brokerName=broker_name, readQueueNums=cfg.readQueueNums,
                               writeQueueNums=cfg.writeQueueNums, perm=cfg.perm, topicSysFlag=cfg.topicSysFlag)
        self.topic_queue_table.setdefault(cfg.topicName or "", {})[broker_name] = queue_data

    def unregister_broker(self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int) -> None:
        removed = self.broker_live_table.pop(broker_addr, None)
        log.info("unregisterBroker, remove from brokerLiveTable %s, %s", "OK" if removed else "Failed", broker_addr)
        self.filter_server_table.pop(broker_addr, None)
        remove_broker_name = False
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is not None:
            broker_data.brokerAddrs.pop(broker_id, None)
            if not broker_data.brokerAddrs:
                del self.broker_addr_table[broker_name]
                remove_broker_name = True
        if remove_broker_name:
            names = self.cluster_addr_table.get(cluster_name)
            if names is not None:
                names.discard(broker_name)
                if not names:
                    del self.cluster_addr_table[cluster_name]
            self._remove_topic_by_broker_name(broker_name)

    def _remove_topic_by_broker_name(self, broker_name: str) -> None:
        for topic in list(self.topic_queue_table):
            queue_map = self.topic_queue_table[topic]
            queue_map.pop(broker_name, None)
            if not queue_map:
                del self.topic_queue_table[topic]

    # -- expiry / channel loss ---------------------------------------------------------------
    def scan_not_active_broker(self) -> int:
        """Drop brokers silent for 2 minutes (RocketMQ scans every 10 s). Returns how many."""
        now = self.now_ms()
        expired = [(addr, live) for addr, live in self.broker_live_table.items()
                   if live.last_update_timestamp + BROKER_CHANNEL_EXPIRED_TIME_MS < now]
        for addr, live in expired:
            log.warning("The broker channel expired, %s %sms", addr, BROKER_CHANNEL_EXPIRED_TIME_MS)
            self.broker_live_table.pop(addr, None)
            close = getattr(live.channel, "close", None)
            if callable(close):
                close("broker expired")
            self.on_channel_destroy(addr, live.channel)
        return len(expired)

    def on_channel_destroy(self, remote_addr: str | None, channel: Any) -> None:
        """A connection closed: if a broker registered over it, forget that broker."""
        found = None
        if channel is not None:
            for addr, live in self.broker_live_table.items():
                if live.channel is channel:
                    found = addr
                    break
        if found is None:
            found = remote_addr
        if not found:
            return
        self.broker_live_table.pop(found, None)
        self.filter_server_table.pop(found, None)
        broker_name_found = None
        remove_broker_name = False
        for name in list(self.broker_addr_table):
            broker_data = self.broker_addr_table[name]
            for bid, addr in list(broker_data.brokerAddrs.items()):
                if addr == found:
                    broker_name_found = name
                    del broker_data.brokerAddrs[bid]
                    break
            if not broker_data.brokerAddrs:
                remove_broker_name = True
                del self.broker_addr_table[name]
            if broker_name_found is not None:
                break
        if broker_name_found is not None and remove_broker_name:
            for cluster in list(self.cluster_addr_table):
                names = self.cluster_addr_table[cluster]
                if broker_name_found in names:
                    names.discard(broker_name_found)
                    if not names:
                        del self.cluster_addr_table[cluster]
                    break
        if remove_broker_name and broker_name_found is not None:
            self._remove_topic_by_broker_name(broker_name_found)

    # -- queries -----------------------------------------------------------------------------
    def pickup_topic_route_data(self, topic: str) -> TopicRouteData | None:
        queue_map = self.topic_queue_table.get(topic)
        if queue_map is None:
            return None
        route = TopicRouteData(queueDatas=[dataclasses.replace(q) for q in queue_map.values()],
                               brokerDatas=[], filterServerTable={})
        for broker_name in queue_map:
            broker_data = self.broker_addr_table.get(broker_name)
            if broker_data is None:
                continue
            clone = broker_data.clone()
            route.brokerDatas.append(clone)
            if self.filter_server_table:
                for addr in clone.brokerAddrs.values():
                    servers = self.filter_server_table.get(addr)
                    if servers is not None:
                        route.filterServerTable[addr] = list(servers)
        return route if route.brokerDatas else None

    def get_all_cluster_info(self) -> ClusterInfo:
        return ClusterInfo(brokerAddrTable={k: v.clone() for k, v in self.broker_addr_table.items()},
                           clusterAddrTable={k: sorted(v) for k, v in self.cluster_addr_table.items()})

    def get_all_topic_list(self) -> TopicList:
        return TopicList(topicList=list(self.topic_queue_table))

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> None:
        if not cluster_name:
            self.topic_queue_table.pop(topic, None)
            return
        names = self.cluster_addr_table.get(cluster_name)
        queue_map = self.topic_queue_table.get(topic)
        if not names or queue_map is None:
            return
        for name in names:
            queue_map.pop(name, None)
        if not queue_map:
            del self.topic_queue_table[topic]

    def get_system_topic_list(self) -> TopicList:
        topics: list[str] = []
        for cluster, names in self.cluster_addr_table.items():
            topics.append(cluster)
            topics.extend(sorted(names))
        result = TopicList(topicList=list(dict.fromkeys(topics)))
        for broker_data in self.broker_addr_table.values():
            if broker_data.brokerAddrs:
                result.brokerAddr = next(iter(broker_data.brokerAddrs.values()))
                break
        return result

    def get_topics_by_cluster(self, cluster: str | None) -> TopicList | None:
        """None for an unknown cluster (Java iterates a null set there and fails; the
        processor answers SYSTEM_ERROR naming the cluster)."""
        names = self.cluster_addr_table.get(cluster or "")
        if names is None:
            return None
        topics = [t for t, queue_map in self.topic_queue_table.items() if any(n in queue_map for n in names)]
        return TopicList(topicList=topics)

    def _topics_where(self, pick: Callable[[QueueData], bool]) -> TopicList:
        topics = []
        for topic, queue_map in self.topic_queue_table.items():
            first = next(iter(queue_map.values()), None)  # RocketMQ looks at one queue data only
            if first is not None and pick(first):
                topics.append(topic)
        return TopicList(topicList=topics)

    def get_unit_topics(self) -> TopicList:
        return self._topics_where(lambda q: bool(q.topicSysFlag & FLAG_UNIT))

    def get_has_unit_sub_topic_list(self) -> TopicList:
        return self._topics_where(lambda q: bool(q.topicSysFlag & FLAG_UNIT_SUB))

    def get_has_unit_sub_ununit_topic_list(self) -> TopicList:
        return self._topics_where(lambda q: not q.topicSysFlag & FLAG_UNIT and bool(q.topicSysFlag & FLAG_UNIT_SUB))

    def operate_write_perm_of_broker(self, broker_name: str, wipe: bool) -> int:
        """WIPE_WRITE_PERM_OF_BROKER clears the write bit; ADD_WRITE_PERM sets read|write."""
        count = 0
        for queue_map in self.topic_queue_table.values():
            queue_data = queue_map.get(broker_name)
            if queue_data is not None:
                queue_data.perm = queue_data.perm & ~PERM_WRITE if wipe else PERM_READ | PERM_WRITE
                count += 1
        return count

    def brokers(self) -> Iterable[str]:
        return list(self.broker_live_table)

