"""CONSUMER_SEND_MSG_BACK (36): a message the consumer failed goes back for a retry, or to the
dead-letter queue, as 4.9.8's ``SendMessageProcessor.asyncConsumerSendMsgBack`` does.

The message is looked up by its commit-log offset and re-put with
* topic ``%RETRY%<group>`` (created on demand with retryQueueNums queues, perm RW) and the
  ``DELAY`` level from the request, or ``3 + reconsumeTimes`` when the request says 0 — the
  commit log then parks it in SCHEDULE_TOPIC_XXXX and the schedule service delivers it;
* ``reconsumeTimes + 1``, ``RETRY_TOPIC`` = the original topic (kept from earlier retries),
  ``ORIGIN_MESSAGE_ID`` = the first offsetMsgId, ``WAIT=false``; born/store host and time,
  flag, sysFlag and body unchanged;
* or, once reconsumeTimes reaches maxReconsumeTimes (the request's, for clients >= V3_4_9,
  else the group's retryMaxTimes; a negative delay level forces it), topic ``%DLQ%<group>``
  queue 0 with ``DELAY=0``. 4.9.8 creates the DLQ topic with perm 6 (read+write, see the fixture
  store's topics.json), so that is what rmqd does too.
"""

from __future__ import annotations

import logging
import random
from typing import Any

from rmqd.processors.common import (
    PERM_READ, PERM_WRITE, build_topic_sys_flag, dlq_topic, java_hashmap_order, perm_writeable, retry_topic,
    suggest_todo,
)
from rmqd.processors.names import guard_names
from rmqd.store.commitlog import MessageExtBrokerInner
from rmqd.wire.codes import MQVersion, RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand, make_response
from rmqd.wire.headers import ConsumerSendMsgBackRequestHeader
from rmqd.wire.message import MessageConst, encode_properties

log = logging.getLogger("rmqd.retry")

__all__ = ["ConsumerSendMsgBackProcessor", "build_send_back_message", "send_message_back", "DLQ_NUMS_PER_GROUP"]

DLQ_NUMS_PER_GROUP = 1
V3_4_9 = MQVersion.V3_4_9.value


def build_send_back_message(rec: Any, topic: str, queue_id: int, delay_level: int) -> MessageExtBrokerInner:
    """The retry/DLQ copy of stored message ``rec`` (a wire.message.MessageRecord)."""
    props = dict(rec.properties)
    held = len(props)
    if MessageConst.PROPERTY_RETRY_TOPIC not in props:
        props[MessageConst.PROPERTY_RETRY_TOPIC] = rec.topic
    props[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = "false"
    props[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = str(delay_level)
    origin = props.get(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID)
    if origin is None or origin.strip() == "":
        props[MessageConst.PROPERTY_ORIGIN_MESSAGE_ID] = rec.offset_msg_id
    ordered = java_hashmap_order(props, max_size=max(held, len(props)))
    return MessageExtBrokerInner(
        topic=topic, queue_id=queue_id, body=bytes(rec.body), properties=ordered, flag=rec.flag,
        sys_flag=rec.sys_flag, born_timestamp=rec.born_timestamp, born_host=rec.born_ip, born_port=rec.born_port,
        store_host=rec.store_ip, store_port=rec.store_port, reconsume_times=rec.reconsume_times + 1,
        properties_string=encode_properties(ordered))


class ConsumerSendMsgBackProcessor:
    """CONSUMER_SEND_MSG_BACK. ``broker`` provides store, subscription_group_manager, broker_config
    and create_topic_in_send_message_back_method (broker/broker.py's BrokerRole)."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker

    def handlers(self) -> dict[int, Any]:
        return guard_names({RequestCode.CONSUMER_SEND_MSG_BACK: self.consumer_send_msg_back})

    async def consumer_send_msg_back(self, ctx: Any, request: RemotingCommand) -> RemotingCommand:
        h = ConsumerSendMsgBackRequestHeader.from_ext(request.ext_fields)
        max_reconsume_times = None
        if request.version >= V3_4_9 and h.maxReconsumeTimes is not None:
            max_reconsume_times = int(h.maxReconsumeTimes)
        code, remark = await send_message_back(self.broker, group=h.group, commit_log_offset=int(h.offset),
                                               delay_level=int(h.delayLevel), max_reconsume_times=max_reconsume_times,
                                               unit_mode=bool(h.unitMode))
        return make_response(request, code, remark)


async def send_message_back(b: Any, *, group: str, commit_log_offset: int, delay_level: int,
                            max_reconsume_times: int | None, unit_mode: bool = False) -> tuple[int, str | None]:
    """The work of CONSUMER_SEND_MSG_BACK: (response code, remark). ``max_reconsume_times`` None
    means the group's retryMaxTimes; a negative ``delay_level`` sends to the DLQ (the 5.x proxy's
    ForwardMessageToDeadLetterQueue uses it, through processors/pop.py)."""
    group_config = b.subscription_group_manager.find_subscription_group_config(group)
    if group_config is None:
        return ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group} {suggest_todo()}"
    if not perm_writeable(b.broker_config.brokerPermission):
        return ResponseCode.NO_PERMISSION, f"the broker[{b.broker_config.brokerIP1}] sending message is forbidden"
    retry_queue_nums = int(group_config.retryQueueNums)
    if retry_queue_nums <= 0:
        return ResponseCode.SUCCESS, None

    new_topic = retry_topic(group)
    queue_id = random.randrange(99999999) % retry_queue_nums
    topic_sys_flag = build_topic_sys_flag(False, True) if unit_mode else 0
    tc = b.create_topic_in_send_message_back_method(new_topic, retry_queue_nums, PERM_WRITE | PERM_READ,
                                                    topic_sys_flag)
    if tc is None:
        return ResponseCode.SYSTEM_ERROR, f"topic[{new_topic}] not exist"
    if not perm_writeable(tc.perm):
        return ResponseCode.NO_PERMISSION, f"the topic[{new_topic}] sending message is forbidden"
    rec = b.store.look_message_by_offset(commit_log_offset)
    if rec is None:
        return ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {commit_log_offset}"

    if max_reconsume_times is None:
        max_reconsume_times = int(group_config.retryMaxTimes)
    if rec.reconsume_times >= max_reconsume_times or delay_level < 0:
        new_topic = dlq_topic(group)
        queue_id = random.randrange(99999999) % DLQ_NUMS_PER_GROUP
        tc = b.create_topic_in_send_message_back_method(new_topic, DLQ_NUMS_PER_GROUP, PERM_WRITE | PERM_READ, 0)
        if tc is None:
            return ResponseCode.SYSTEM_ERROR, f"topic[{new_topic}] not exist"
        delay_level = 0
    elif delay_level == 0:
        delay_level = 3 + rec.reconsume_times

    msg = build_send_back_message(rec, new_topic, queue_id, delay_level)
    result = b.store.put_message(msg)
    if result is None:
        return ResponseCode.SYSTEM_ERROR, "putMessageResult is null"
    status = result.putMessageStatus.name
    ha = getattr(b, "ha_service", None)  # SYNC_MASTER: the send-back waits for the slave too
    if status == "PUT_OK" and ha is not None and b.message_store_config.brokerRole == "SYNC_MASTER":
        a = result.appendMessageResult
        status = await ha.wait_replicated(a.wroteOffset + a.wroteBytes, int(b.message_store_config.syncFlushTimeout))
    if status == "PUT_OK":
        return ResponseCode.SUCCESS, None
    return ResponseCode.SYSTEM_ERROR, status
