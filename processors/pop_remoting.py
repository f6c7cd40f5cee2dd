"""The Remoting POP codes (RocketMQ 5.x): POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE and
CHANGE_MESSAGE_INVISIBLETIME, thin adapters over processors/pop.py's PopService: decode the
header (or body), call the service, answer with 5.3's codes, remarks and response headers.

What 5.3.3's processors answer (broker/.../processor/PopMessageProcessor.java,
AckMessageProcessor.java, ChangeInvisibleTimeProcessor.java), besides the refusals the service
raises as PopError:
* POP_MESSAGE: SUCCESS with the records as the body and PopMessageResponseHeader, remark
  "FOUND"; nothing within the poll time: POLLING_TIMEOUT (210), remark "NO_MESSAGE_IN_QUEUE",
  the header still set; a request older than bornTime + pollTime + 500 ms: POLLING_TIMEOUT
  "the broker[..] pop message is timeout too much".
* ACK_MESSAGE / BATCH_ACK_MESSAGE: SUCCESS, no header (a BATCH_ACK without acks: NO_MESSAGE).
* CHANGE_MESSAGE_INVISIBLETIME: SUCCESS with ChangeInvisibleTimeResponseHeader (popTime,
  invisibleTime, reviveQid).
"""

from __future__ import annotations

import time
from typing import Any

from rmqd.processors.names import guard_names
from rmqd.processors.pop import PopError, PopService, PopStatus
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand, make_response
from rmqd.wire.headers import (
    AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader, PopMessageResponseHeader,
)
from rmqd.wire.pop import decode_batch_ack_body

__all__ = ["PopRemotingProcessor"]

#: PopMessageRequestHeader.isTimeoutTooMuch: a pop that arrives this late is answered at once.
TIMEOUT_TOO_MUCH_MS = 500


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class PopRemotingProcessor:
    def __init__(self, service: PopService) -> None:
        self.service = service

    def handlers(self) -> dict[int, Any]:
        return guard_names({
            RequestCode.POP_MESSAGE: self.pop_message,
            RequestCode.ACK_MESSAGE: self.ack_message,
            RequestCode.BATCH_ACK_MESSAGE: self.batch_ack_message,
            RequestCode.CHANGE_MESSAGE_INVISIBLETIME: self.change_invisible_time,
        })

    def _ip(self) -> str:
        return self.service.broker.broker_config.brokerIP1

    async def pop_message(self, ctx: Any, request: RemotingCommand) -> RemotingCommand:
        h = PopMessageRequestHeader.from_ext(request.ext_fields)
        born, poll = int(h.bornTime), int(h.pollTime)
        if _now_ms() - born - poll > TIMEOUT_TOO_MUCH_MS:
            return make_response(request, ResponseCode.POLLING_TIMEOUT,
                                 f"the broker[{self._ip()}] pop message is timeout too much")
        try:
            r = await self.service.pop(
                group=h.consumerGroup, topic=h.topic, invisible_time_ms=int(h.invisibleTime),
                max_count=int(h.maxMsgNums), queue_id=int(h.queueId), poll_time_ms=poll,
                expression_type=h.expType or "TAG", expression=h.exp or "", fifo=bool(h.order),
                attempt_id=h.attemptId, init_mode=int(h.initMode), client=ctx.channel.remote_addr)
        except PopError as exc:
            return make_response(request, exc.code, exc.remark)
        header = PopMessageResponseHeader(
            popTime=r.pop_time, invisibleTime=r.invisible_time, reviveQid=r.revive_qid, restNum=r.rest_num,
            startOffsetInfo=r.start_offset_info, msgOffsetInfo=r.msg_offset_info,
            orderCountInfo=r.order_count_info if h.order else None)
        if r.status is PopStatus.FOUND:
            response = make_response(request, ResponseCode.SUCCESS, "FOUND", ext_fields=header.to_ext())
            response.body = [m.record for m in r.messages]
            return response
        code = ResponseCode.POLLING_FULL if r.status is PopStatus.POLLING_FULL else ResponseCode.POLLING_TIMEOUT
        return make_response(request, code, "NO_MESSAGE_IN_QUEUE", ext_fields=header.to_ext())

    async def ack_message(self, ctx: Any, request: RemotingCommand) -> RemotingCommand:
        h = AckMessageRequestHeader.from_ext(request.ext_fields)
        try:
            await self.service.ack(group=h.consumerGroup, topic=h.topic, queue_id=int(h.queueId),
                                   offset=int(h.offset), extra_info=h.extraInfo)
        except PopError as exc:
            return make_response(request, exc.code, exc.remark)
        return make_response(request, ResponseCode.SUCCESS)

    async def batch_ack_message(self, ctx: Any, request: RemotingCommand) -> RemotingCommand:
        broker_name, acks = decode_batch_ack_body(request.body)
        if not acks:
            return make_response(request, ResponseCode.NO_MESSAGE)
        try:
            await self.service.batch_ack_records(broker_name=broker_name, acks=acks)
        except PopError as exc:
            return make_response(request, exc.code, exc.remark)
        return make_response(request, ResponseCode.SUCCESS)

    async def change_invisible_time(self, ctx: Any, request: RemotingCommand) -> RemotingCommand:
        h = ChangeInvisibleTimeRequestHeader.from_ext(request.ext_fields)
        try:
            r = await self.service.change_invisible_time(
                group=h.consumerGroup, topic=h.topic, queue_id=int(h.queueId), offset=int(h.offset),
                extra_info=h.extraInfo, invisible_time_ms=int(h.invisibleTime))
        except PopError as exc:
            return make_response(request, exc.code, exc.remark or None)
        header = ChangeInvisibleTimeResponseHeader(popTime=r.pop_time, invisibleTime=r.invisible_time,
                                                   reviveQid=r.revive_qid)
        return make_response(request, ResponseCode.SUCCESS, ext_fields=header.to_ext())
