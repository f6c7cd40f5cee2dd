"""The admin codes mqadmin uses to look into a broker, and the two clean-ups that go with them
(RocketMQ 4.9.7 AdminBrokerProcessor):

* VIEW_BROKER_STATS_DATA (315, ``statsAll``, ``exportMetrics``): one stats item's minute, hour
  and day windows (store/broker_stats.py), or SYSTEM_ERROR "The stats <name> <key> not exist".
* GET_BROKER_CONSUME_STATS (317, ``brokerConsumeStats``): for every subscription group, the
  ConsumeStats of every topic it has offsets for, and the total lag.
* GET_ALL_PRODUCER_INFO (328, ``producer -b``): the producer connections of every group.
* GET_CONSUMER_RUNNING_INFO (307, ``consumerStatus``): forwarded to the consumer's own
  connection; its answer is the answer (a 5.x gRPC consumer answers over its Telemetry stream,
  a PrintThreadStackTraceCommand when jstackEnable is set).
* QUERY_CONSUME_QUEUE (321, ``queryCq``): units of one consume queue, with the group's
  subscription and filter data when a group is named.
* CLEAN_EXPIRED_CONSUMEQUEUE (306, ``cleanExpiredCQ``), CLEAN_UNUSED_TOPIC (316,
  ``cleanUnusedTopic``): the store's clean-ups, run off the event loop (they wait for
  dispatch under the put lock).
* and, from processors/admin5.py, the 5.x codes mqadmin 5.x uses to look into a broker
  (haStatus, getColdDataFlowCtrInfo, setCommitLogReadAheadMode, exportPopRecord,
  checkRocksdbCqWriteProgress, rocksDBConfigToJson).

A module of its own so the stats side of the admin codes can change without touching the
config side (processors/admin.py).
"""
from __future__ import annotations

import logging
from typing import Any

import trio

from rmqd.processors.admin5 import Admin5Processor
from rmqd.processors.broker2client import call_consumer
from rmqd.processors.names import guard_names
from rmqd.store.consumequeue import CQ_STORE_UNIT_SIZE, ConsumeQueue
from rmqd.store.errors import StoreBusyError
from rmqd.wire import fastjson
from rmqd.wire.bodies import (
    BrokerStatsData, BrokerStatsItem, ConsumeQueueData, ConsumeStats, ConsumeStatsList, MessageQueue, OffsetWrapper,
    ProducerInfo, ProducerTableInfo, QueryConsumeQueueResponseBody,
)
from rmqd.wire.codes import LanguageCode, RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand, make_response

log = logging.getLogger("rmqd.admin")


def consume_stats_of(broker: Any, group: str, topic: str, queue_nums: int) -> ConsumeStats:
    """ConsumeStats of one group on one topic's first ``queue_nums`` queues, its consumeTps the
    minute window of GROUP_GET_NUMS (AdminBrokerProcessor.getConsumeStats' loop body)."""
    b = broker
    stats = ConsumeStats()
    for i in range(queue_nums):
        mq = MessageQueue(topic=topic, brokerName=b.broker_config.brokerName, queueId=i)
        broker_offset = max(b.store.get_max_offset_in_queue(topic, i), 0)
        consumer_offset = max(b.consumer_offset_manager.query_offset(group, topic, i), 0)
        wrapper = OffsetWrapper(brokerOffset=broker_offset, consumerOffset=consumer_offset)
        if consumer_offset - 1 >= 0:
            last = b.store.get_message_store_timestamp(topic, i, consumer_offset - 1)
            if last > 0:
                wrapper.lastTimestamp = last
        stats.offsetTable[mq] = wrapper
    stats.consumeTps += b.stats.group_get_tps(group, topic)
    return stats


def _ok(request: RemotingCommand, body: bytes | None = None) -> RemotingCommand:
    return make_response(request, ResponseCode.SUCCESS, None, body=body)


class AdminObserveProcessor:
    def __init__(self, broker: Any) -> None:
        self.broker = broker

    def handlers(self) -> dict[int, Any]:
        return guard_names({
            RequestCode.VIEW_BROKER_STATS_DATA: self.view_broker_stats_data,
            RequestCode.GET_BROKER_CONSUME_STATS: self.fetch_all_consume_stats_in_broker,
            RequestCode.GET_ALL_PRODUCER_INFO: self.get_all_producer_info,
            RequestCode.GET_CONSUMER_RUNNING_INFO: self.get_consumer_running_info,
            RequestCode.QUERY_CONSUME_QUEUE: self.query_consume_queue,
            RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: self.clean_expired_consume_queue,
            RequestCode.CLEAN_UNUSED_TOPIC: self.clean_unused_topic,
            # the 5.x admin codes with no 4.9.8 counterpart (processors/admin5.py)
            **Admin5Processor(self.broker).handlers(),
        })

    async def view_broker_stats_data(self, ctx: Any, request: RemotingCommand) -> RemotingCommand:
        from rmqd.wire.headers import ViewBrokerStatsDataRequestHeader

        h = ViewBrokerStatsDataRequestHeader.from_ext(request.ext_fields)
        windows = self.broker.stats.view(h.statsName, h.statsKey)
        if windows is None:
            return make_response(request, ResponseCode.SYSTEM_ERROR,
                                 f"The stats <{h.statsName}> <{h.statsKey}> not exist")
        minute, hour, day = (BrokerStatsItem(sum=s.sum, tps=s.tps, avgpt=s.avgpt) for s in windows)
        return _ok(request, BrokerStatsData(statsMinute=minute, statsHour=hour, statsDay=day).encode())

    async def fetch_all_consume_stats_in_broker(self, ctx: Any, request: RemotingCommand) -> RemotingCommand:
        from rmqd.wire.headers import GetConsumeStatsInBrokerHeader

        b = self.broker
        h = GetConsumeStatsInBrokerHeader.from_ext(request.ext_fields)
        entries: list[dict[str, list[ConsumeStats]]] = []
        total_diff = 0
        for group in list(b.subscription_group_manager.subscription_group_table):
            stats_list = []
            for topic in b.consumer_offset_manager.which_topic_by_consumer(group):
                tc = b.topic_config_manager.select_topic_config(topic)
                if tc is None:
                    log.warning("consumeStats, topic config not exist, %s", topic)
                    continue
                if h.isOrder and not tc.order:
                    continue
                if (b.consumer_manager.find_subscription_data(group, topic) is None
                        and b.consumer_manager.find_subscription_data_count(group) > 0):
                    continue
                stats = consume_stats_of(b, group, topic, tc.writeQueueNums)
                total_diff += sum(w.brokerOffset - w.consumerOffset for w in stats.offsetTable.values())
                stats_list.append(stats)
            entries.append({group: stats_list})
        body = ConsumeStatsList(consumeStatsList=entries, brokerAddr=b.settings.broker_addr, totalDiff=total_diff)
        return _ok(request, body.encode())

    async def get_all_producer_info(self, ctx: Any, request: RemotingCommand) -> RemotingCommand:
        """ProducerManager.getProducerTable; remoteIP as Netty's remoteAddress().toString()."""
        data: dict[str, list[ProducerInfo]] = {}
        for group, table in list(self.broker.producer_manager.group_channel_table.items()):
            for channel, info in list(table.items()):
                data.setdefault(group, []).append(ProducerInfo(
                    clientId=info.client_id, remoteIP="/" + getattr(channel, "remote_addr", ""),
                    language=LanguageCode.of(info.language), version=info.version,
                    lastUpdateTimestamp=info.last_update_timestamp))
        return _ok(request, ProducerTableInfo(data=data).encode())

    async def get_consumer_running_info(self, ctx: Any, request: RemotingCommand) -> RemotingCommand:
        from rmqd.wire.headers import GetConsumerRunningInfoRequestHeader

        h = GetConsumerRunningInfoRequestHeader.from_ext(request.ext_fields)
        return await call_consumer(self.broker.consumer_manager, RequestCode.GET_CONSUMER_RUNNING_INFO, request,
                                   h.consumerGroup or "", h.clientId or "")

    async def query_consume_queue(self, ctx: Any, request: RemotingCommand) -> RemotingCommand:
        from rmqd.wire.headers import QueryConsumeQueueRequestHeader

        b = self.broker
        h = QueryConsumeQueueRequestHeader.from_ext(request.ext_fields)
        topic, queue_id = h.topic or "", int(h.queueId)
        cq: ConsumeQueue | None = b.store.get_consume_queue(topic, queue_id)
        if cq is None:
            return make_response(request, ResponseCode.SYSTEM_ERROR, f"{queue_id}@{topic} is not exist!")
        body = QueryConsumeQueueResponseBody(maxQueueIndex=cq.get_max_offset_in_queue(),
                                             minQueueIndex=cq.get_min_offset_in_queue())
        if h.consumerGroup is not None:
            sub = b.consumer_manager.find_subscription_data(h.consumerGroup, topic)
            body.subscriptionData = sub
            if sub is None:
                body.filterData = f"{h.consumerGroup}@{topic} is not online!"
            else:
                filter_data = b.consumer_filter_manager.get(topic, h.consumerGroup)
                body.filterData = fastjson.dumps(None if filter_data is None else filter_data.to_json(), pretty=True)
        buf = cq.get_index_buffer(int(h.index))
        if buf is None:
            return make_response(request, ResponseCode.SUCCESS,
                                 f"Index {h.index} of {queue_id}@{topic} is not exist!")
        limit = max(int(h.count), 0) * CQ_STORE_UNIT_SIZE
        units = ConsumeQueue.iter_buffer(buf[:limit])
        body.queueData = [ConsumeQueueData(physicOffset=off, physicSize=size, tagsCode=tags)
                          for off, size, tags in units]
        return _ok(request, body.encode())

    async def clean_expired_consume_queue(self, ctx: Any, request: RemotingCommand) -> RemotingCommand:
        log.warning("invoke cleanExpiredConsumeQueue start.")
        await trio.to_thread.run_sync(self.broker.store.clean_expired_consumer_queue)
        log.warning("invoke cleanExpiredConsumeQueue end.")
        return _ok(request)

    async def clean_unused_topic(self, ctx: Any, request: RemotingCommand) -> RemotingCommand:
        b = self.broker
        log.warning("invoke cleanUnusedTopic start.")
        in_use = set(b.topic_config_manager.topic_config_table)
        try:
            removed = await trio.to_thread.run_sync(b.store.clean_unused_topic, in_use)
        except StoreBusyError as exc:
            return make_response(request, ResponseCode.SYSTEM_ERROR, str(exc))
        if b.broker_config.autoDeleteUnusedStats:
            for topic in removed:
                b.stats.on_topic_deleted(topic)
        log.warning("invoke cleanUnusedTopic end.")
        return _ok(request)


__all__ = ["AdminObserveProcessor", "consume_stats_of"]
