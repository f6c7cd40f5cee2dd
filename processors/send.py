"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320) as RocketMQ 4.9.8's
SendMessageProcessor answers them.

What the broker does to a message on the way in, byte for byte as the capture shows:
the client's properties are parsed into a Java HashMap, CLUSTER=<brokerClusterName> is
added, WAIT=true is dropped from what is stored (single sends only — a batch keeps it and
gets `CLUSTER…WAIT…` appended to every message), and the string is rebuilt in HashMap
order. A batch is a batch only when the header's `batch` parses as Java's
Boolean.parseBoolean — C++'s `batch: "1"` does not, so its encoded batch is stored as one
message, exactly as a Java broker stores it.

The answer carries msgId (offsetMsgId, comma-joined for a batch), queueId, queueOffset,
plus MSG_REGION and TRACE_ON on every answer, success or not. With SYNC_FLUSH the answer
waits for the flush (group commit) and degrades to FLUSH_DISK_TIMEOUT — still a stored
message — when the flush takes longer than syncFlushTimeout.
"""

from __future__ import annotations

import logging
import random
from typing import Any, Awaitable

import trio

from rmqd.processors.common import (
    AUTO_CREATE_TOPIC_KEY_TOPIC, PERM_READ, PERM_WRITE, build_topic_sys_flag, dlq_topic, java_hashmap_key_order,
    java_hashmap_order, not_allowed_send_remark, perm_to_string, suggest_todo, validate_group,
    validate_topic, NOT_ALLOWED_SEND_TOPIC_SET,
    RETRY_GROUP_TOPIC_PREFIX,
)
from rmqd.store.commitlog import PutMessageStatus
from rmqd.store.commitlog import new_inner_message as commitlog_new_inner_message
from rmqd.store.schedule import apply_timer
from rmqd.wire.codes import MQVersion, RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand, make_response
from rmqd.wire.bodies import TopicFilterType
from rmqd.wire.headers import SendMessageRequestHeader, SendMessageRequestHeaderV2
from rmqd.wire.message import MessageSysFlag, decode_properties, encode_properties, ip_to_bytes
from rmqd.processors.seams import Context, RequestHandler, SendBroker

log = logging.getLogger("rmqd.send")

DLQ_NUMS_PER_GROUP = 1
PROPERTY_CLUSTER = "CLUSTER"
PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_MSG_REGION = "MSG_REGION"
PROPERTY_TRACE_SWITCH = "TRACE_ON"
V3_4_9 = MQVersion["V3_4_9"].value
# Enum members read on every send, as module constants: an access through an Enum class runs its
# metaclass's __getattr__ hook and a member's .name is a Python-level property (~850 instructions
# each on CPython 3.11).
_SEND_MESSAGE = RequestCode.SEND_MESSAGE
_SUCCESS = ResponseCode.SUCCESS
_PUT_OK = PutMessageStatus.PUT_OK
_SINGLE_TAG = TopicFilterType.SINGLE_TAG


def java_parse_boolean(value: Any) -> bool:
    """Boolean.parseBoolean: only a case-insensitive "true" is true."""
    if isinstance(value, bool):
        return value
    return isinstance(value, str) and value.lower() == "true"


def random_queue_id(write_queue_nums: int) -> int:
    return random.randrange(99999999) % write_queue_nums if write_queue_nums > 0 else 0


def topic_config_to_string(tc: Any) -> str:
    """TopicConfig.toString, used in the 'queueId is illegal' remark."""
    filter_type = getattr(tc.topicFilterType, "name", tc.topicFilterType)
    return (f"TopicConfig [topicName={tc.topicName}, readQueueNums={tc.readQueueNums}, "
            f"writeQueueNums={tc.writeQueueNums}, perm={perm_to_string(tc.perm)}, topicFilterType={filter_type}, "
            f"topicSysFlag={tc.topicSysFlag}, order={'true' if tc.order else 'false'}]")


def _host_port(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host.strip("[]"), int(port or 0)


def _body_bytes(request: RemotingCommand) -> bytes:
    body = request.body
    if body is None:
        return b""
    return body if isinstance(body, bytes) else bytes(body)


async def wait_flushed(store: Any, offset_end: int, timeout_ms: int) -> bool:
    """Wait (without blocking trio) until the store's flush thread has made offset_end durable."""
    token = trio.lowlevel.current_trio_token()
    done = trio.Event()
    outcome = [False]

    def on_flushed(ok: bool) -> None:
        outcome[0] = bool(ok)
        try:
            token.run_sync_soon(done.set)
        except trio.RunFinishedError:
            pass

    store.add_flush_listener(offset_end, on_flushed)
    with trio.move_on_after(max(timeout_ms, 0) / 1000.0):
        await done.wait()
    return done.is_set() and outcome[0]


def _plain_digits(v: str | None, limit: int) -> int:
    """``int(v)`` when ``v`` is 1..limit ASCII digits (no sign, no blank), else -1: the numbers
    every client writes, read without the general rules (``wire.headers``' conversions)."""
    if type(v) is not str:
        return -1
    text = v
    n = len(text)
    if n == 0 or n > limit:
        return -1
    r = 0
    for ch in text:
        d = ord(ch) - 48
        if d < 0 or d > 9:
            return -1
        r = r * 10 + d
    return r


def send_header_from_v2(ext: dict[str, str] | None) -> SendMessageRequestHeader:
    """``SendMessageRequestHeaderV2.v1_from_ext(ext)``: the same object, built directly when the
    required fields are there and every number is plain digits (what every client sends); the
    general decoder, with its Java conversions and errors, for anything else.

    Why: the general decoder costs a tenth of a send, most of it in per-field calls that this
    (compiled, send.pxd) does as C loops."""
    if type(ext) is not dict:
        return SendMessageRequestHeaderV2.v1_from_ext(ext)
    fields = ext  # send.pxd: a dict, so each get is a C lookup rather than a method call
    a = fields.get("a")
    b = fields.get("b")
    c = fields.get("c")
    d = _plain_digits(fields.get("d"), 9)
    e = _plain_digits(fields.get("e"), 9)
    f = _plain_digits(fields.get("f"), 9)
    g = _plain_digits(fields.get("g"), 18)
    h = _plain_digits(fields.get("h"), 9)
    if a is None or b is None or c is None or d < 0 or e < 0 or f < 0 or g < 0 or h < 0:
        return SendMessageRequestHeaderV2.v1_from_ext(ext)
    j = fields.get("j")
    if j is not None:
        jv = _plain_digits(j, 9)
        if jv < 0:
            return SendMessageRequestHeaderV2.v1_from_ext(ext)
    l_ = fields.get("l")
    if l_ is not None:
        lv = _plain_digits(l_, 9)
        if lv < 0:
            return SendMessageRequestHeaderV2.v1_from_ext(ext)
    k = fields.get("k")
    m = fields.get("m")
    hdr = _new_send_header(SendMessageRequestHeader)
    hdr.bname = fields.get("n")
    hdr.producerGroup = a
    hdr.topic = b
    hdr.defaultTopic = c
    hdr.defaultTopicQueueNums = d
    hdr.queueId = e
    hdr.sysFlag = f
    hdr.bornTimestamp = g
    hdr.flag = h
    hdr.properties = fields.get("i")
    hdr.reconsumeTimes = None if j is None else jv
    hdr.unitMode = k is not None and k.lower() == "true"
    hdr.batch = m is not None and m.lower() == "true"
    hdr.maxReconsumeTimes = None if l_ is None else lv
    return hdr


_new_send_header = object.__new__


class SendMessageProcessor:
    """The send path runs on the connection's read loop (`send_message_now`): an ASYNC_FLUSH
    send is answered without a task or a thread hop; only a SYNC_FLUSH wait for the disk
    comes back as an awaitable that the server runs in a task of its own."""

    def __init__(self, broker: SendBroker) -> None:
        self.broker = broker
        # extFields of a success, in the HashMap order a 4.9.8 broker writes them
        self._ok_keys = java_hashmap_key_order((PROPERTY_MSG_REGION, PROPERTY_TRACE_SWITCH, "msgId", "queueId",
                                                "queueOffset"))
        self._base_cache: tuple[Any, Any, dict[str, str], dict[str, str]] | None = None
        self._hosts: dict[str, tuple[str, int]] = {}
        self._born: dict[str, tuple[bytes, int]] = {}

    async def send_message(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        result = self.send_message_now(ctx, request)
        if isinstance(result, RemotingCommand):
            return result
        return await result

    def send_message_now(self, ctx: Context, request: RemotingCommand) -> RemotingCommand | Awaitable[RemotingCommand]:
        """The answer, or an awaitable of it when the send has to wait (SYNC_FLUSH)."""
        # SEND_MESSAGE's header as V1 declares it, V2's and a batch's as V2 does; the decoded
        # batch flag (a bool) read as it is
        header = (SendMessageRequestHeader.from_ext(request.ext_fields) if request.code == _SEND_MESSAGE
                  else send_header_from_v2(request.ext_fields))
        target = self.pre_send(ctx, request, header)
        if isinstance(target, RemotingCommand):
            return target
        _, queue_id, sys_flag = target
        batch = header.batch
        if batch is True or (batch is not False and java_parse_boolean(batch)):
            return self.send_batch_message(ctx, request, header, queue_id, sys_flag)
        return self.send_single_message(ctx, request, header, queue_id, sys_flag)

    def send_decoded_now(self, ctx: Context, header: SendMessageRequestHeader, props: dict[str, str],
                         body: bytes) -> RemotingCommand | Awaitable[RemotingCommand]:
        """One SEND_MESSAGE whose header and properties a front end already holds decoded (the
        gRPC service): what ``send_message_now`` does after parsing, without writing the
        properties out as text for this method to parse back. ``props`` must be the map that
        text would decode to (``decode_properties(encode_properties(props))``)."""
        request = RemotingCommand(code=_SEND_MESSAGE, body=body)
        target = self.pre_send(ctx, request, header)
        if isinstance(target, RemotingCommand):
            return target
        _, queue_id, sys_flag = target
        return self.send_single_message(ctx, request, header, queue_id, sys_flag, props)

    # -- shared checks (preSend + msgCheck) --------------------------------------------------
    def _base_ext(self) -> dict[str, str]:
        """MSG_REGION and TRACE_ON, on every answer."""
        return dict(self._base()[2])

    def _base(self) -> tuple[Any, Any, dict[str, str], dict[str, str]]:
        """(regionId, traceOn, base extFields, success extFields template in HashMap order),
        built again only when the broker config changes."""
        bc = self.broker.broker_config
        base = self._base_cache
        if base is None or base[0] != bc.regionId or base[1] != bc.traceOn:
            ext = {PROPERTY_MSG_REGION: str(bc.regionId), PROPERTY_TRACE_SWITCH: "true" if bc.traceOn else "false"}
            # assigning to a key of a copy keeps its place: answers are built from this in order
            template = {k: ext.get(k, "") for k in self._ok_keys}
            base = self._base_cache = (bc.regionId, bc.traceOn, ext, template)
        return base

    def _fail(self, request: RemotingCommand, code: int, remark: str | None) -> RemotingCommand:
        return make_response(request, code, remark, ext_fields=java_hashmap_order(self._base_ext()))

    def pre_send(self, ctx: Context, request: RemotingCommand, h: Any) -> RemotingCommand | tuple[Any, int, int]:
        """The failure answer, or (topic config, queue id, sysFlag) when the send may go on
        (the topic exists then, maybe just auto-created; a negative queue id is drawn at random)."""
        b = self.broker
        bc = b.broker_config
        start = int(getattr(bc, "startAcceptSendRequestTimeStamp", 0) or 0)
        if start and b.now_ms() < start:
            return self._fail(request, ResponseCode.SYSTEM_ERROR, f"broker unable to service, until {start}")
        topic = h.topic
        tcm = b.topic_config_manager
        # perm_writeable and select_topic_config written out: both are interpreted calls
        if not (int(bc.brokerPermission) & PERM_WRITE) and tcm.is_order_topic(topic):
            return self._fail(request, ResponseCode.NO_PERMISSION,
                              f"the broker[{bc.brokerIP1}] sending message is forbidden")
        remark = validate_topic(topic)
        if remark is not None:
            return self._fail(request, ResponseCode.SYSTEM_ERROR, remark)
        if topic in NOT_ALLOWED_SEND_TOPIC_SET:
            return self._fail(request, ResponseCode.NO_PERMISSION, not_allowed_send_remark(topic))

        topic_config = tcm.topic_config_table.get(topic)
        if topic_config is None:
            topic_sys_flag = 0
            if java_parse_boolean(getattr(h, "unitMode", False)):
                topic_sys_flag = (build_topic_sys_flag(False, True) if h.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
                                  else build_topic_sys_flag(True, False))
            topic_config = b.create_topic_in_send_message_method(
                h.topic, h.defaultTopic or AUTO_CREATE_TOPIC_KEY_TOPIC, ctx.channel.remote_addr,
                int(h.defaultTopicQueueNums or 0), topic_sys_flag)
            if topic_config is None and h.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                topic_config = b.create_topic_in_send_message_back_method(h.topic, 1, PERM_WRITE | PERM_READ,
                                                                          topic_sys_flag)
            if topic_config is None:
                return self._fail(request, ResponseCode.TOPIC_NOT_EXIST,
                                  f"topic[{h.topic}] not exist, apply first please!{suggest_todo()}")
        queue_id = int(h.queueId)
        if queue_id >= max(topic_config.writeQueueNums, topic_config.readQueueNums):
            return self._fail(request, ResponseCode.SYSTEM_ERROR,
                              f"request queueId[{queue_id}] is illegal, {topic_config_to_string(topic_config)} "
                              f"Producer: {ctx.channel.remote_addr}")
        if queue_id < 0:
            queue_id = random_queue_id(topic_config.writeQueueNums)
        sys_flag = int(h.sysFlag or 0)
        filter_type = topic_config.topicFilterType
        if filter_type is not _SINGLE_TAG and getattr(filter_type, "name", filter_type) == "MULTI_TAG":
            sys_flag |= MessageSysFlag.MULTI_TAGS_FLAG
        return topic_config, queue_id, sys_flag

    def _born_ip(self, remote_addr: str) -> tuple[bytes, int]:
        """(address bytes as the record stores them, port) of a producer connection, parsed
        once per address."""
        born = self._born.get(remote_addr)
        if born is None:
            host, port = self._born_host(remote_addr)
            if len(self._born) >= 4096:
                self._born.clear()
            born = self._born[remote_addr] = (ip_to_bytes(host or "127.0.0.1"), port)
        return born

    def _born_host(self, remote_addr: str) -> tuple[str, int]:
        """(host, port) of a producer connection (parsed once per address)."""
        host = self._hosts.get(remote_addr)
        if host is None:
            if len(self._hosts) >= 4096:
                self._hosts.clear()
            host = self._hosts[remote_addr] = _host_port(remote_addr)
        return host

    # -- single message ----------------------------------------------------------------------
    def send_single_message(self, ctx: Context, request: RemotingCommand, h: Any, queue_id: int,
                            sys_flag: int, decoded: dict[str, str] | None = None
                            ) -> RemotingCommand | Awaitable[RemotingCommand]:
        b = self.broker
        topic = h.topic
        msg_queue_id = queue_id  # the answer keeps the requested queue even when redirected to the DLQ
        reconsume_times = int(h.reconsumeTimes or 0)
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            group = topic[len(RETRY_GROUP_TOPIC_PREFIX):]
            remark = validate_group(group)  # "%RETRY%" alone names no group: never auto-create ""
            if remark is not None:
                return self._fail(request, ResponseCode.SYSTEM_ERROR, remark)
            group_config = b.subscription_group_manager.find_subscription_group_config(group)
            if group_config is None:
                return self._fail(request, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                  f"subscription group not exist, {group} {suggest_todo()}")
            max_reconsume = int(group_config.retryMaxTimes)
            if request.version >= V3_4_9 and getattr(h, "maxReconsumeTimes", None) is not None:
                max_reconsume = int(h.maxReconsumeTimes)
            if reconsume_times >= max_reconsume:
                b.stats.on_dlq(h.producerGroup or group, h.topic)
                topic = dlq_topic(group)
                msg_queue_id = random_queue_id(DLQ_NUMS_PER_GROUP)
                dlq_config = b.create_topic_in_send_message_back_method(topic, DLQ_NUMS_PER_GROUP,
                                                                        PERM_WRITE | PERM_READ, 0)
                if dlq_config is None:
                    return self._fail(request, ResponseCode.SYSTEM_ERROR, f"topic[{topic}] not exist")

        props, properties_string, stored = properties_to_store(h.properties if decoded is None else decoded,
                                                               b.broker_config.brokerClusterName)
        wait_store_msg_ok = props.get(PROPERTY_WAIT_STORE_MSG_OK) != "false"

        # the store's constructor called positionally (the broker's keyword seam is interpreted)
        born_ip, born_port = self._born_ip(ctx.channel.remote_addr)
        msg = commitlog_new_inner_message(topic, msg_queue_id, _body_bytes(request), props, int(h.flag or 0),
                                          sys_flag, int(h.bornTimestamp or 0), born_ip, born_port, b.store_host,
                                          b.store_port, reconsume_times, properties_string)
        if stored is not None:
            msg.stored_properties = (properties_string, stored)

        if java_parse_boolean(props.get(PROPERTY_TRANSACTION_PREPARED)):
            if b.broker_config.rejectTransactionMessage:
                return self._fail(request, ResponseCode.NO_PERMISSION,
                                  f"the broker[{b.broker_config.brokerIP1}] sending transaction message is forbidden")
            result = b.put_half_message(msg)
        else:
            remark = apply_timer(msg)
            if remark is not None:
                return self._fail(request, ResponseCode.MESSAGE_ILLEGAL, remark)
            result = b.store.put_message(msg)
        return self.handle_put_message_result(request, result, queue_id, wait_store_msg_ok, msg.topic)

    # -- batch ---------------------------------------------------------------------------------
    def send_batch_message(self, ctx: Context, request: RemotingCommand, h: Any, queue_id: int,
                           sys_flag: int) -> RemotingCommand | Awaitable[RemotingCommand]:
        b = self.broker
        if len(h.topic) > 127:
            return self._fail(request, ResponseCode.MESSAGE_ILLEGAL, f"message topic length too long {len(h.topic)}")
        props = decode_properties(h.properties)
        props[PROPERTY_CLUSTER] = b.broker_config.brokerClusterName
        batch_properties = encode_properties(java_hashmap_order(props))
        batch = b.new_batch_message(
            topic=h.topic, queue_id=queue_id, body=_body_bytes(request), flag=int(h.flag or 0),
            properties=props, properties_string=batch_properties, sys_flag=sys_flag,
            born_timestamp=int(h.bornTimestamp or 0), born_host=self._born_host(ctx.channel.remote_addr),
            reconsume_times=int(h.reconsumeTimes or 0))
        result = b.store.put_messages(batch)
        return self.handle_put_message_result(request, result, queue_id,
                                              props.get(PROPERTY_WAIT_STORE_MSG_OK) != "false", batch.topic)

    # -- result ----------------------------------------------------------------------------------
    def handle_put_message_result(self, request: RemotingCommand, result: Any, queue_id: int,
                                  wait_store_msg_ok: bool, topic: str) -> RemotingCommand | Awaitable[RemotingCommand]:
        """The answer; ``topic`` is the one the store kept the message under (the stats key)."""
        b = self.broker
        if result is None:
            return self._fail(request, ResponseCode.SYSTEM_ERROR, "store putMessage return null")
        status = result.putMessageStatus
        status = "PUT_OK" if status is _PUT_OK else getattr(status, "name", status)
        if status == "PUT_OK" and wait_store_msg_ok and (b.message_store_config.flushDiskType == "SYNC_FLUSH"
                                                        or b.message_store_config.brokerRole == "SYNC_MASTER"):
            return self._answer_when_flushed(request, result, queue_id, topic)
        return self._answer(request, result, status, queue_id, topic)

    async def _answer_when_flushed(self, request: RemotingCommand, result: Any, queue_id: int,
                                   topic: str) -> RemotingCommand:
        b = self.broker
        append = result.appendMessageResult
        status = "PUT_OK"
        if b.message_store_config.flushDiskType == "SYNC_FLUSH" and not await wait_flushed(
                b.store, append.wroteOffset + append.wroteBytes, int(b.message_store_config.syncFlushTimeout)):
            status = "FLUSH_DISK_TIMEOUT"
        ha = getattr(b, "ha_service", None)  # SYNC_MASTER: CommitLog.submitReplicaRequest (its status wins)
        if b.message_store_config.brokerRole == "SYNC_MASTER" and ha is not None:
            replica = await ha.wait_replicated(append.wroteOffset + append.wroteBytes,
                                               int(b.message_store_config.syncFlushTimeout))
            if replica != "PUT_OK":
                status = replica
        return self._answer(request, result, status, queue_id, topic)

    def _answer(self, request: RemotingCommand, result: Any, status: str, queue_id: int,
                topic: str) -> RemotingCommand:
        b = self.broker
        code: int
        if status == "PUT_OK":
            code = _SUCCESS
        else:
            code, remark, send_ok = put_status_to_response(status, b.message_store_config.maxMessageSize)
            if not send_ok:
                return self._fail(request, code, remark)
        append = result.appendMessageResult
        b.stats.on_put(topic, queue_id, append.msgNum, append.wroteBytes)
        msg_id = append.msgId
        if type(msg_id) is not str:
            msg_id = ",".join(msg_id) if isinstance(msg_id, (list, tuple)) else str(msg_id)
        ext = self._base()[3].copy()
        ext["msgId"] = msg_id
        ext["queueId"] = str(queue_id)
        ext["queueOffset"] = str(append.logicsOffset)
        return make_response(request, code, None, ext)

    def handlers(self) -> dict[int, RequestHandler]:
        return {
            RequestCode.SEND_MESSAGE: self.send_message,
            RequestCode.SEND_MESSAGE_V2: self.send_message,
            RequestCode.SEND_BATCH_MESSAGE: self.send_message,
        }

    def inline_handlers(self) -> dict[int, Any]:
        """The same codes for the server's read loop (see broker.server.InlineHandler)."""
        return {code: self.send_message_now for code in self.handlers()}


def properties_to_store(client_properties: str | dict[str, str] | None,
                        cluster: str) -> tuple[dict[str, str], str, dict[str, str] | None]:
    """The message's properties as the send processor keeps them (the client's, plus CLUSTER),
    the string the commit log stores (without WAIT, in the HashMap order of a map that held
    WAIT), and the map that string decodes back to, or None when it would not decode back to it.

    Whatever decode_properties returns round-trips (no name holds a separator, no value a
    property separator, none is empty), so only the cluster name can break the round trip; the
    map lets dispatch take the record's properties from the append (CommitLog.appended)."""
    # a dict is already the decoded map (send_decoded_now): copied, the caller's stays as it was
    props = dict(client_properties) if isinstance(client_properties, dict) else decode_properties(client_properties)
    props[PROPERTY_CLUSTER] = cluster  # the Java map held every key at once: its table is sized for all
    keys = tuple(props)
    layout = _STORED_LAYOUTS.get(keys)
    if layout is None:
        layout = _stored_layout(keys)
    stored = {k: props[k] for k in layout}
    properties_string = "\x02".join([f"{k}\x01{v}" for k, v in stored.items()])  # encode_properties
    return props, properties_string, stored if cluster and "\x02" not in cluster else None


#: the stored key order (HashMap order, WAIT left out) of each client key sequence seen: a
#: producer sends the same keys in the same order every time, so it is worked out once
_STORED_LAYOUTS: dict[tuple[str, ...], tuple[str, ...]] = {}


def _stored_layout(keys: tuple[str, ...]) -> tuple[str, ...]:
    stored = dict.fromkeys([k for k in keys if k != PROPERTY_WAIT_STORE_MSG_OK])
    layout = tuple(java_hashmap_order(stored, max_size=len(keys)))
    if len(_STORED_LAYOUTS) >= 1024:
        _STORED_LAYOUTS.clear()
    _STORED_LAYOUTS[keys] = layout
    return layout


def put_status_to_response(status: str, max_message_size: int) -> tuple[int, str | None, bool]:
    """SendMessageProcessor.handlePutMessageResult: (code, remark, message stored?)."""
    if status == "PUT_OK":
        return ResponseCode.SUCCESS, None, True
    if status == "FLUSH_DISK_TIMEOUT":
        return ResponseCode.FLUSH_DISK_TIMEOUT, None, True
    if status == "FLUSH_SLAVE_TIMEOUT":
        return ResponseCode.FLUSH_SLAVE_TIMEOUT, None, True
    if status == "SLAVE_NOT_AVAILABLE":
        return ResponseCode.SLAVE_NOT_AVAILABLE, None, True
    if status == "CREATE_MAPEDFILE_FAILED":
        return ResponseCode.SYSTEM_ERROR, "create mapped file failed, server is busy or broken.", False
    if status in ("MESSAGE_ILLEGAL", "PROPERTIES_SIZE_EXCEEDED"):
        return (ResponseCode.MESSAGE_ILLEGAL,
                f"the message is illegal, maybe msg body or properties length not matched. msg body length limit "
                f"{max_message_size}B, msg properties length limit 32KB.", False)
    if status == "SERVICE_NOT_AVAILABLE":
        return (ResponseCode.SERVICE_NOT_AVAILABLE,
                "service not available now. It may be caused by one of the following reasons: the broker's disk is "
                "full, messages are put to the slave, message store has been shut down, etc.", False)
    if status == "OS_PAGECACHE_BUSY":
        return ResponseCode.SYSTEM_ERROR, "[PC_SYNCHRONIZED]broker busy, start flow control for a while", False
    if status == "LMQ_CONSUME_QUEUE_NUM_EXCEEDED":
        return (ResponseCode.SYSTEM_ERROR,
                "[LMQ_CONSUME_QUEUE_NUM_EXCEEDED]broker config enableLmq and enableMultiDispatch, lmq consumeQueue num "
                "exceed maxLmqConsumeQueueNum config num, default limit 2w.", False)
    if status == "UNKNOWN_ERROR":
        return ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR", False
    return ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT", False
