"""Consumer-side queries: offsets, group membership, queue bounds, time lookups
(RocketMQ 4.9.8 ConsumerManageProcessor, plus the offset/time codes of AdminBrokerProcessor).

QUERY_CONSUMER_OFFSET for a group that never committed answers 0 — not "not found" —
while the queue's first message is still in memory, because clients then start at the
beginning (the consume cases of every real client rely on that), and QUERY_NOT_FOUND
once the queue has rolled past what memory holds (RocketMQ's checkInDiskByConsumeOffset).
"""

from __future__ import annotations

import os
from typing import Any

from rmqd.processors.common import java_hashmap_order
from rmqd.processors.names import guard_names
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand, make_response
from rmqd.processors.seams import ConsumerBroker, Context, RequestHandler


def total_physical_memory() -> int:
    """StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 24 * 1024 * 1024 * 1024


def _ok(request: RemotingCommand, ext: dict[str, str] | None = None, body: bytes | None = None) -> RemotingCommand:
    return make_response(request, ResponseCode.SUCCESS, None, ext_fields=java_hashmap_order(ext or {}), body=body)


class ConsumerManageProcessor:
    def __init__(self, broker: ConsumerBroker) -> None:
        self.broker = broker

    async def get_consumer_list_by_group(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        from rmqd.wire.bodies import ConsumerListByGroupResponseBody
        from rmqd.wire.headers import GetConsumerListByGroupRequestHeader

        h = GetConsumerListByGroupRequestHeader.from_ext(request.ext_fields)
        info = self.broker.consumer_manager.get_consumer_group_info(h.consumerGroup)
        if info is not None:
            client_ids = info.get_all_client_id()
            if client_ids:
                return _ok(request, body=ConsumerListByGroupResponseBody(consumerIdList=client_ids).encode())
        return make_response(request, ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {h.consumerGroup}",
                             ext_fields={})

    async def update_consumer_offset(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        from rmqd.wire.headers import UpdateConsumerOffsetRequestHeader

        h = UpdateConsumerOffsetRequestHeader.from_ext(request.ext_fields)
        self.broker.consumer_offset_manager.commit_offset(ctx.channel.remote_addr, h.consumerGroup, h.topic,
                                                          int(h.queueId), int(h.commitOffset))
        return _ok(request)

    async def query_consumer_offset(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        from rmqd.wire.headers import QueryConsumerOffsetRequestHeader

        b = self.broker
        h = QueryConsumerOffsetRequestHeader.from_ext(request.ext_fields)
        queue_id = int(h.queueId)
        offset = b.consumer_offset_manager.query_offset(h.consumerGroup, h.topic, queue_id)
        if offset >= 0:
            return _ok(request, {"offset": str(offset)})
        min_offset = b.store.get_min_offset_in_queue(h.topic, queue_id)
        if min_offset <= 0 and not self.check_in_disk_by_consume_offset(h.topic, queue_id, 0):
            return _ok(request, {"offset": "0"})
        return make_response(request, ResponseCode.QUERY_NOT_FOUND,
                             "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first", ext_fields={})

    def check_in_disk_by_consume_offset(self, topic: str, queue_id: int, consume_offset: int) -> bool:
        """DefaultMessageStore.checkInDiskByConsumeOffset: is that message older than what
        accessMessageInMemoryMaxRatio of RAM holds?"""
        store = self.broker.store
        phy = store.get_commit_log_offset_in_queue(topic, queue_id, consume_offset)
        if phy is None or phy < 0:
            return False
        ratio = int(self.broker.message_store_config.accessMessageInMemoryMaxRatio)
        memory = int(total_physical_memory() * (ratio / 100.0))
        return store.get_max_phy_offset() - phy > memory

    async def get_max_offset(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        from rmqd.wire.headers import GetMaxOffsetRequestHeader

        h = GetMaxOffsetRequestHeader.from_ext(request.ext_fields)
        return _ok(request, {"offset": str(self.broker.store.get_max_offset_in_queue(h.topic, int(h.queueId)))})

    async def get_min_offset(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        from rmqd.wire.headers import GetMinOffsetRequestHeader

        h = GetMinOffsetRequestHeader.from_ext(request.ext_fields)
        return _ok(request, {"offset": str(self.broker.store.get_min_offset_in_queue(h.topic, int(h.queueId)))})

    async def get_earliest_msg_storetime(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        from rmqd.wire.headers import GetEarliestMsgStoretimeRequestHeader

        h = GetEarliestMsgStoretimeRequestHeader.from_ext(request.ext_fields)
        ts = self.broker.store.get_earliest_message_time(h.topic, int(h.queueId))
        return _ok(request, {"timestamp": str(ts)})

    async def search_offset_by_timestamp(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        from rmqd.wire.headers import SearchOffsetRequestHeader

        h = SearchOffsetRequestHeader.from_ext(request.ext_fields)
        offset = self.broker.store.get_offset_in_queue_by_time(h.topic, int(h.queueId), int(h.timestamp))
        return _ok(request, {"offset": str(offset)})

    def handlers(self) -> dict[int, RequestHandler]:
        return guard_names({
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: self.get_consumer_list_by_group,
            RequestCode.UPDATE_CONSUMER_OFFSET: self.update_consumer_offset,
            RequestCode.QUERY_CONSUMER_OFFSET: self.query_consumer_offset,
            RequestCode.GET_MAX_OFFSET: self.get_max_offset,
            RequestCode.GET_MIN_OFFSET: self.get_min_offset,
            RequestCode.GET_EARLIEST_MSG_STORETIME: self.get_earliest_msg_storetime,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset_by_timestamp,
        })
