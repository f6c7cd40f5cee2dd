"""SEND_REPLY_MESSAGE (324) and SEND_REPLY_MESSAGE_V2 (325) as RocketMQ 4.9.x's
ReplyMessageProcessor answers them: the request-reply feature of 4.6+ clients
(``DefaultMQProducer.request()``, Spring's ``sendAndReceive`` / ``RocketMQReplyListener``).

How request-reply runs through a broker: the requester sends an ordinary message carrying
CORRELATION_ID, REPLY_TO_CLIENT (its own client id) and TTL; the send path adds CLUSTER. The
replier builds its answer with ``MessageUtil.createReplyMessage`` (topic
``<CLUSTER>_REPLY_TOPIC``, MSG_TYPE=reply, the three properties copied) and sends it with code
324/325. The broker does not route the reply through a queue: it finds the requester's
connection among the producers by REPLY_TO_CLIENT (ProducerManager.findChannel) and calls it
with PUSH_REPLY_MESSAGE_TO_CLIENT (326), waiting up to 10 s (Broker2Client.callClient).

What 4.9.x does, and so rmqd, in this order:

* the same checks as a send (startAcceptSendRequestTimeStamp, msgCheck: topic name, not-allowed
  topics, auto-creation, queue id) — ``SendMessageProcessor.pre_send``, whose failure answers
  (with MSG_REGION and TRACE_ON) are the ones a reply gets;
* the push: a ReplyMessageRequestHeader with the send header's fields, bornHost (the replier's
  address), storeHost (brokerIP1:listenPort), storeTimestamp (now), and the properties with
  PUSH_REPLY_TIME added, rewritten in HashMap order; the body as sent;
* the answer's code comes from the push alone: SUCCESS (msgId "0", the queue id, queueOffset 0),
  or SYSTEM_ERROR with the remark naming why (no REPLY_TO_CLIENT, requester not connected,
  requester failed or did not answer);
* with ``storeReplyMessageEnable`` (default true) the reply is then also stored, under its own
  topic and queue, whatever the push did; a stored reply puts its msgId and queueOffset in the
  answer. It is stored as 4.9.x stores it: the client's properties string untouched (no
  CLUSTER, WAIT kept), sysFlag 0 (the reply processor never copies the header's sysFlag).
"""

from __future__ import annotations

import logging
import time
from typing import Protocol

from rmqd.processors.broker2client import call_client
from rmqd.processors.client_manager import ProducerManager
from rmqd.processors.seams import BrokerConfigView, Context, RequestHandler, SendBroker
from rmqd.processors.send import SendMessageProcessor, put_status_to_response, send_header_from_v2, wait_flushed
from rmqd.store.commitlog import MessageExtBrokerInner, new_inner_message
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand, make_response
from rmqd.wire.headers import ReplyMessageRequestHeader, SendMessageRequestHeader, SendMessageResponseHeader
from rmqd.wire.message import MessageConst, decode_properties, encode_properties_java, ip_to_bytes

log = logging.getLogger("rmqd.reply")

REPLY_TO_CLIENT = MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT
PUSH_REPLY_TIME = MessageConst.PROPERTY_PUSH_REPLY_TIME
#: the put statuses 4.9.x's reply processor counts as stored (the others are only logged)
_STORED = frozenset({"PUT_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"})


class ReplyConfigView(BrokerConfigView, Protocol):
    @property
    def storeReplyMessageEnable(self) -> bool: ...


class ReplyBroker(SendBroker, Protocol):
    """The send path's broker, plus the producers' connections and the reply switch."""

    @property
    def broker_config(self) -> ReplyConfigView: ...
    @property
    def producer_manager(self) -> ProducerManager: ...


def java_host_port(addr: str) -> tuple[str, int]:
    """(host, port) of an "ip:port" connection address; an IPv6 host without brackets, as
    Java's InetAddress.getHostAddress writes it."""
    host, _, port = addr.rpartition(":")
    return host.strip("[]"), int(port or 0)


def reply_header(h: SendMessageRequestHeader, born_host: str, store_host: str,
                 store_timestamp: int) -> ReplyMessageRequestHeader:
    """pushReplyMessage's header: the send header's fields as the replier sent them (the
    queue id too, even when the broker drew a random one to store it)."""
    return ReplyMessageRequestHeader(
        producerGroup=h.producerGroup, topic=h.topic, defaultTopic=h.defaultTopic,
        defaultTopicQueueNums=h.defaultTopicQueueNums, queueId=h.queueId, sysFlag=h.sysFlag,
        bornTimestamp=h.bornTimestamp, flag=h.flag, properties=h.properties, reconsumeTimes=h.reconsumeTimes,
        unitMode=bool(h.unitMode), bornHost=born_host, storeHost=store_host, storeTimestamp=store_timestamp)


class ReplyMessageProcessor:
    """The two reply codes; the send processor supplies the checks and the answers' base fields."""

    def __init__(self, broker: ReplyBroker, send: SendMessageProcessor) -> None:
        self.broker = broker
        self.send = send

    async def send_reply_message(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        b = self.broker
        header = (SendMessageRequestHeader.from_ext(request.ext_fields)
                  if request.code == RequestCode.SEND_REPLY_MESSAGE else send_header_from_v2(request.ext_fields))
        target = self.send.pre_send(ctx, request, header)
        if isinstance(target, RemotingCommand):
            return target
        _, queue_id, _ = target
        body = bytes(request.body or b"")
        # one map, as in 4.9.x: the push adds PUSH_REPLY_TIME to the message's own properties
        props = decode_properties(header.properties)
        host, port = java_host_port(ctx.channel.remote_addr)
        msg = new_inner_message(str(header.topic), queue_id, body, props, int(header.flag or 0), 0,
                                int(header.bornTimestamp or 0), ip_to_bytes(host or "127.0.0.1"), port,
                                b.store_host, b.store_port, int(header.reconsumeTimes or 0), header.properties or "")

        pushed, remark = await self.push_reply_message(
            reply_header(header, f"{host}:{port}", f"{b.broker_config.brokerIP1}:{b.store_port}", b.now_ms()),
            props, body)
        answer = SendMessageResponseHeader(msgId="0", queueId=queue_id, queueOffset=0) if pushed \
            else SendMessageResponseHeader()
        if b.broker_config.storeReplyMessageEnable:
            await self.store_reply(msg, answer, queue_id)
        ext = answer.to_ext(self.send._base_ext())
        if pushed:
            return make_response(request, ResponseCode.SUCCESS, None, ext)
        return make_response(request, ResponseCode.SYSTEM_ERROR, remark, ext)

    async def push_reply_message(self, header: ReplyMessageRequestHeader, props: dict[str, str],
                                 body: bytes) -> tuple[bool, str]:
        """(pushed, the remark when not): the reply handed to the requester's connection."""
        sender = props.get(REPLY_TO_CLIENT)
        if sender is None:
            log.warning("%s is null, can not reply message", REPLY_TO_CLIENT)
            return False, f"reply message properties[{REPLY_TO_CLIENT}] is null"
        channel = self.broker.producer_manager.find_channel(sender)
        if channel is None:
            remark = f"push reply message fail, channel of <{sender}> not found."
            log.warning(remark)
            return False, remark
        props[PUSH_REPLY_TIME] = str(int(time.time() * 1000))
        header.properties = encode_properties_java(props)
        push = RemotingCommand(code=RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, ext_fields=header.to_ext(), body=body)
        try:
            response = await call_client(channel, push)
        except Exception as exc:  # noqa: BLE001 - a dead or slow requester is the replier's answer, not ours
            log.warning("push reply message to <%s> fail. %s", sender, exc)
            return False, f"push reply message to {sender}fail."
        if response.code != ResponseCode.SUCCESS:
            log.warning("push reply message to <%s> return fail, response remark: %s", sender, response.remark)
            return False, f"push reply message to {sender}fail."
        return True, ""

    async def store_reply(self, msg: MessageExtBrokerInner, answer: SendMessageResponseHeader, queue_id: int) -> None:
        """Put the reply in the commit log (waiting for the flush / the slave as a put does);
        a stored reply's msgId and offset go into ``answer``, a failed put is only logged."""
        b = self.broker
        result = b.store.put_message(msg)
        if result is None:
            log.warning("process reply message, store putMessage return null")
            return
        status = getattr(result.putMessageStatus, "name", str(result.putMessageStatus))
        append = result.appendMessageResult
        if status not in _STORED or append is None:
            log.warning("reply message not stored: %s",
                        put_status_to_response(status, int(b.message_store_config.maxMessageSize))[1])
            return
        if status == "PUT_OK":
            end = append.wroteOffset + append.wroteBytes
            config = b.message_store_config
            if config.flushDiskType == "SYNC_FLUSH":
                await wait_flushed(b.store, end, int(config.syncFlushTimeout))
            ha = getattr(b, "ha_service", None)
            if config.brokerRole == "SYNC_MASTER" and ha is not None:
                await ha.wait_replicated(end, int(config.syncFlushTimeout))
        b.stats.on_put(msg.topic, queue_id, append.msgNum, append.wroteBytes)
        msg_id = append.msgId
        answer.msgId = msg_id if isinstance(msg_id, str) else str(msg_id)
        answer.queueId = queue_id
        answer.queueOffset = append.logicsOffset

    def handlers(self) -> dict[int, RequestHandler]:
        return {
            RequestCode.SEND_REPLY_MESSAGE: self.send_reply_message,
            RequestCode.SEND_REPLY_MESSAGE_V2: self.send_reply_message,
        }


__all__ = ["ReplyMessageProcessor", "java_host_port", "reply_header"]
