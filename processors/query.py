"""Message queries (4.9.8 ``QueryMessageProcessor`` and the admin codes mqadmin uses).

* QUERY_MESSAGE (12): messages of ``topic`` whose KEYS token or UNIQ_KEY is ``key`` stored in
  [beginTimestamp, endTimestamp], through the index. With ext ``_UNIQUE_KEY_QUERY=true``
  (``queryMsgByUniqueKey``, and ``queryMsgById`` for a client msgId) maxNum becomes
  ``defaultQueryMaxNum``. The answer always carries indexLastUpdateTimestamp /
  indexLastUpdatePhyoffset; the body is the stored records back to back, or QUERY_NOT_FOUND
  "can not find message, maybe time range not correct". Clients re-check the keys (the index
  is a hash, collisions happen), as with RocketMQ.
* VIEW_MESSAGE_BY_ID (33): the record at commit-log ``offset`` (decoded from an offsetMsgId
  by the client), or SYSTEM_ERROR "can not find message by the offset, N".
* CONSUME_MESSAGE_DIRECTLY (309, mqadmin ``queryMsgById -g G -d CLIENT`` / ``consumeMessage``):
  the broker loads the message named by the offsetMsgId, adds ``brokerName`` and forwards the
  request to that consumer's connection, answering with the consumer's reply.
(GET_CONSUMER_RUNNING_INFO, forwarded the same way, is in processors/admin_observe.py; a 5.x gRPC
consumer answers both over its Telemetry stream.)
"""

from __future__ import annotations

import logging
from typing import Any

from rmqd.processors.broker2client import call_consumer
from rmqd.processors.common import java_hashmap_order
from rmqd.processors.names import guard_names
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand, make_response
from rmqd.wire.headers import ConsumeMessageDirectlyResultRequestHeader, QueryMessageRequestHeader, ViewMessageRequestHeader
from rmqd.wire.message import parse_offset_msg_id
from rmqd.processors.seams import Context, QueryBroker, RequestHandler

log = logging.getLogger("rmqd.query")

__all__ = ["QueryMessageProcessor", "UNIQUE_MSG_QUERY_FLAG"]

UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"


def _join(buffers: list[Any]) -> bytes:
    return b"".join(bytes(b) for b in buffers)


class QueryMessageProcessor:
    """``broker`` provides store, message_store_config, broker_config and consumer_manager."""

    def __init__(self, broker: QueryBroker) -> None:
        self.broker = broker

    def handlers(self) -> dict[int, RequestHandler]:
        return guard_names({
            RequestCode.QUERY_MESSAGE: self.query_message,
            RequestCode.VIEW_MESSAGE_BY_ID: self.view_message_by_id,
            RequestCode.CONSUME_MESSAGE_DIRECTLY: self.consume_message_directly,
        })

    async def query_message(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        b = self.broker
        h = QueryMessageRequestHeader.from_ext(request.ext_fields)
        max_num = int(h.maxNum)
        if (request.ext_fields or {}).get(UNIQUE_MSG_QUERY_FLAG) == "true":
            max_num = int(b.message_store_config.defaultQueryMaxNum)
        result = b.store.query_message(h.topic, h.key, max_num, int(h.beginTimestamp), int(h.endTimestamp))
        ext = java_hashmap_order({
            "indexLastUpdateTimestamp": str(result.index_last_update_timestamp),
            "indexLastUpdatePhyoffset": str(result.index_last_update_phyoffset),
        })
        if result.buffer_total_size > 0:
            return make_response(request, ResponseCode.SUCCESS, ext_fields=ext, body=_join(result.message_buffers))
        return make_response(request, ResponseCode.QUERY_NOT_FOUND,
                             "can not find message, maybe time range not correct", ext_fields=ext)

    async def view_message_by_id(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        h = ViewMessageRequestHeader.from_ext(request.ext_fields)
        view = self.broker.store.select_one_message_by_offset(int(h.offset))
        if view is None:
            return make_response(request, ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {h.offset}")
        return make_response(request, ResponseCode.SUCCESS, body=bytes(view))

    async def consume_message_directly(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        b = self.broker
        h = ConsumeMessageDirectlyResultRequestHeader.from_ext(request.ext_fields)
        ext = dict(request.ext_fields or {})
        ext["brokerName"] = b.broker_config.brokerName
        body = request.body
        try:
            _ip, _port, offset = parse_offset_msg_id(h.msgId or "")
            view = b.store.select_one_message_by_offset(offset)
            if view is not None:
                body = bytes(view)
        except ValueError:  # not an offsetMsgId: forwarded without a message, as Java does
            pass
        return await call_consumer(b.consumer_manager, RequestCode.CONSUME_MESSAGE_DIRECTLY, request,
                                   h.consumerGroup, h.clientId, ext=ext, body=body)
