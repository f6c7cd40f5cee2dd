"""Transactions: END_TRANSACTION (37) and the check-back of unresolved half messages, as 4.9.8's
``EndTransactionProcessor``, ``TransactionalMessageServiceImpl``, ``TransactionalMessageBridge``
and the check listeners do it.

* A half message (SEND with TRAN_MSG=true; ``BrokerRole.prepare_transaction_message``) lives in
  ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 with REAL_TOPIC / REAL_QID.
* END_TRANSACTION COMMIT writes the real copy (sysFlag COMMIT, preparedTransactionOffset = the
  half's commit-log offset, the half's property string — REAL_*/TRAN_MSG included, as the
  fixture shows) and an op message; ROLLBACK writes only the op message. An op message goes to
  ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` (same queue id as the half) with tag ``d`` and the half's queue
  offset as ASCII body.
* The check service (every transactionCheckInterval) walks the half queue from the
  ``CID_RMQ_SYS_TRANS`` offset, skips halves that have an op, re-puts each half older than
  transactionTimeOut with ``TRANSACTION_CHECK_TIMES`` + 1 and sends CHECK_TRANSACTION_STATE
  (oneway, the re-put copy's offsets, the message in the body) to a live producer of its group;
  after transactionCheckMax checks (or when older than fileReservedTime) the half moves to
  ``TRANS_CHECK_MAX_TIME_TOPIC``.

Beyond 4.9.8 (which would write a second real copy): a commit or rollback arriving twice, for a
re-put copy of a transaction already resolved, or late after the check resolved it, writes
nothing more. Outcomes are remembered by the half's UNIQ_KEY (its transaction id) and by half
offset; at start-up the memory is rebuilt from the last 10,000 op messages, so it also holds
across restarts. The duplicate gets SUCCESS (its op is written so
the check service does not ask about that copy again).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from rmqd.processors.common import (
    PERM_READ, PERM_WRITE, RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC,
    java_hashmap_order,
)
from rmqd.processors.names import guard_names
from rmqd.processors.send import wait_flushed
from rmqd.store.commitlog import MessageExtBrokerInner
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand, make_response
from rmqd.wire.headers import EndTransactionRequestHeader
from rmqd.wire.message import MessageConst, MessageRecord, MessageSysFlag, encode_properties, encode_record
from rmqd.processors.seams import Context, RequestHandler, TransactionBroker

log = logging.getLogger("rmqd.transaction")

__all__ = [
    "TransactionalMessageService",
    "EndTransactionProcessor",
    "TransactionalMessageCheckService",
    "CheckRequest",
    "TRANS_CONSUMER_GROUP",
    "REMOVE_TAG",
]

TRANS_CONSUMER_GROUP = "CID_RMQ_SYS_TRANS"  # TransactionalMessageUtil.buildConsumerGroup
REMOVE_TAG = "d"
TCMT_QUEUE_NUMS = 1
MAX_PROCESS_TIME_LIMIT = 60_000
MAX_RETRY_COUNT_WHEN_HALF_NULL = 1
OP_PULL_BATCH = 32
RESOLVED_MEMORY = 200_000
LOAD_WINDOW = 10_000  # op messages re-read at start to remember recent outcomes

NOT_TYPE = MessageSysFlag.TRANSACTION_NOT_TYPE
COMMIT_TYPE = MessageSysFlag.TRANSACTION_COMMIT_TYPE
ROLLBACK_TYPE = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _java_long(text: str | None, default: int = -1) -> int:
    try:
        return int(text) if text is not None and text.strip() == text else default
    except ValueError:
        return default


@dataclass(slots=True)
class _OpPull:
    status: str  # FOUND / NO_NEW_MSG / NO_MATCHED_MSG / OFFSET_ILLEGAL
    next_begin_offset: int
    found: list[MessageRecord] | None = None


@dataclass(slots=True)
class CheckRequest:
    """One CHECK_TRANSACTION_STATE to send (oneway) to a producer of ``group``."""

    group: str
    ext_fields: dict[str, str]
    body: bytes

    def command(self) -> RemotingCommand:
        return RemotingCommand(code=RequestCode.CHECK_TRANSACTION_STATE, ext_fields=dict(self.ext_fields),
                               body=self.body)


@dataclass(slots=True)
class EndResult:
    code: int
    remark: str | None = None
    wrote: list[str] = field(default_factory=list)  # what was written, for tests/logs
    #: end offset of the committed copy when the answer must wait until it is durable /
    #: replicated: 4.9.8's final message takes the half's properties, WAIT included, so its
    #: putMessage waits for SYNC_FLUSH and SYNC_MASTER (and answers SUCCESS either way)
    wait_until: int | None = None


class TransactionalMessageService:
    """Plain calls over the store; safe to run in a worker thread (one lock inside)."""

    def __init__(self, store: Any, consumer_offset_manager: Any, *, store_host: bytes, store_port: int,
                 create_topic: Callable[[str, int, int, int], Any] | None = None,
                 file_reserved_time_hours: int = 72, clock: Callable[[], int] = _now_ms) -> None:
        self.store = store
        self.offsets = consumer_offset_manager
        self.store_host = store_host
        self.store_port = store_port
        self.create_topic = create_topic
        self.file_reserved_time_ms = int(file_reserved_time_hours) * 3600 * 1000
        self.clock = clock
        self.resolved: OrderedDict[Any, int] = OrderedDict()
        self._lock = threading.RLock()

    # ---- memory of outcomes ------------------------------------------------------------------
    def _remember(self, half: MessageRecord, outcome: int) -> None:
        keys: list[Any] = [("offset", half.queue_id, half.queue_offset)]
        uniq = half.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if uniq:
            keys.append(("uniq", uniq))
        for key in keys:
            self.resolved[key] = outcome
            self.resolved.move_to_end(key)
        while len(self.resolved) > RESOLVED_MEMORY:
            self.resolved.popitem(last=False)

    def resolved_outcome(self, half: MessageRecord) -> int | None:
        uniq = half.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if uniq and ("uniq", uniq) in self.resolved:
            return self.resolved[("uniq", uniq)]
        return self.resolved.get(("offset", half.queue_id, half.queue_offset))

    def load(self) -> None:
        """Rebuild the outcome memory from the last LOAD_WINDOW op messages (a restart must not turn
        a late duplicate commit into a second copy)."""
        with self._lock:
            end = self.store.get_max_offset_in_queue(RMQ_SYS_TRANS_OP_HALF_TOPIC, 0)
            offset = max(self.store.get_min_offset_in_queue(RMQ_SYS_TRANS_OP_HALF_TOPIC, 0), end - LOAD_WINDOW)
            while offset < end:
                pull = self._pull(RMQ_SYS_TRANS_OP_HALF_TOPIC, offset, OP_PULL_BATCH)
                if pull.status != "FOUND" or not pull.found:
                    if pull.next_begin_offset <= offset:
                        break
                    offset = pull.next_begin_offset
                    continue
                for op in pull.found:
                    half = self._half_at(op.queue_id, _java_long(bytes(op.body).decode("utf-8", "replace")))
                    if half is not None:
                        self._remember(half, COMMIT_TYPE)
                offset = pull.next_begin_offset

    # ---- store helpers -------------------------------------------------------------------------
    def _ensure_topic(self, topic: str, queues: int = 1) -> None:
        if self.create_topic is not None:
            self.create_topic(topic, queues, PERM_WRITE | PERM_READ, 0)

    def fetch_consume_offset(self, topic: str, queue_id: int) -> int:
        offset = self.offsets.query_offset(TRANS_CONSUMER_GROUP, topic, queue_id)
        if offset == -1:
            offset = self.store.get_min_offset_in_queue(topic, queue_id)
        return offset

    def update_consume_offset(self, topic: str, queue_id: int, offset: int) -> None:
        host = f"{'.'.join(str(b) for b in self.store_host)}:{self.store_port}" if len(self.store_host) == 4 else None
        self.offsets.commit_offset(host, TRANS_CONSUMER_GROUP, topic, queue_id, offset)

    def _pull(self, topic: str, offset: int, nums: int) -> _OpPull:
        res = self.store.get_message(TRANS_CONSUMER_GROUP, topic, 0, offset, nums, None)
        if res is None:
            return _OpPull("OFFSET_ILLEGAL", offset)
        status = res.status.name
        if status == "FOUND":
            from rmqd.wire.message import decode_record
            return _OpPull("FOUND", res.next_begin_offset, [decode_record(b) for b in res.message_buffers])
        if status == "NO_MATCHED_MESSAGE":
            return _OpPull("NO_MATCHED_MSG", res.next_begin_offset)
        if status in ("NO_MESSAGE_IN_QUEUE", "OFFSET_OVERFLOW_ONE"):
            return _OpPull("NO_NEW_MSG", res.next_begin_offset)
        return _OpPull("OFFSET_ILLEGAL", res.next_begin_offset)

    def _half_at(self, queue_id: int, queue_offset: int) -> MessageRecord | None:
        if queue_offset < 0:
            return None
        cq = self.store.get_consume_queue(RMQ_SYS_TRANS_HALF_TOPIC, queue_id)
        unit = cq.get_unit(queue_offset) if cq is not None else None
        if unit is None or unit[1] == 0x7FFFFFFF:
            return None
        return self.store.look_message_by_offset(unit[0], unit[1])

    def half_by_commit_log_offset(self, offset: int) -> MessageRecord | None:
        """``getHalfMessageByOffset``; anything that is not a stored half message is "not found"."""
        try:
            rec = self.store.look_message_by_offset(int(offset))
        except Exception:  # noqa: BLE001 - an offset inside a record decodes as garbage
            return None
        if rec is None or rec.topic != RMQ_SYS_TRANS_HALF_TOPIC or rec.physical_offset != int(offset):
            return None
        return rec

    def _put(self, msg: MessageExtBrokerInner) -> Any:
        return self.store.put_message(msg)

    def put_op_message(self, half: MessageRecord) -> bool:
        """``addRemoveTagInTransactionOp``: tag d, body = the half's queue offset. Written with no
        topic config, as 4.9.8's writeOp: the op topic is not in the broker's topic table."""
        string_props = java_hashmap_order({MessageConst.PROPERTY_TAGS: REMOVE_TAG,
                                           MessageConst.PROPERTY_WAIT_STORE_MSG_OK: "true"})
        msg = MessageExtBrokerInner(
            topic=RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id=half.queue_id, body=str(half.queue_offset).encode("utf-8"),
            properties={MessageConst.PROPERTY_TAGS: REMOVE_TAG, MessageConst.PROPERTY_WAIT_STORE_MSG_OK: "false"},
            sys_flag=0, born_timestamp=self.clock(), born_host=self.store_host, born_port=self.store_port,
            store_host=self.store_host, store_port=self.store_port, properties_string=encode_properties(string_props))
        result = self._put(msg)
        ok = result is not None and result.is_ok()
        if not ok:
            log.error("writing the op message for half %d failed: %s", half.queue_offset,
                      getattr(result, "putMessageStatus", None))
        return ok

    # ---- END_TRANSACTION ---------------------------------------------------------------------
    def end_transaction(self, h: EndTransactionRequestHeader) -> EndResult | None:
        """The END_TRANSACTION outcome; None where RocketMQ sends no answer (UNKNOW / bad type)."""
        kind = int(h.commitOrRollback)
        if kind not in (COMMIT_TYPE, ROLLBACK_TYPE):
            return None
        with self._lock:
            half = self.half_by_commit_log_offset(int(h.commitLogOffset))
            if half is None:
                return EndResult(ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")
            error = self._check_prepare_message(half, h)
            if error is not None:
                return EndResult(ResponseCode.SYSTEM_ERROR, error)
            if self.resolved_outcome(half) is not None:
                # already committed or rolled back (another copy, a retry, or the check): no 2nd copy
                wrote = ["op"] if self.resolved.get(("offset", half.queue_id, half.queue_offset)) is None else []
                if wrote:
                    self.put_op_message(half)
                    self._remember(half, kind)
                return EndResult(ResponseCode.SUCCESS, None, wrote)
            if kind == ROLLBACK_TYPE:
                self.put_op_message(half)
                self._remember(half, kind)
                return EndResult(ResponseCode.SUCCESS, None, ["op"])
            final = self._end_message_transaction(half, h)
            result = self._put(final)
            code, remark = _final_put_answer(result, getattr(self.store.config, "maxMessageSize", 4 * 1024 * 1024))
            if code != ResponseCode.SUCCESS:
                return EndResult(code, remark)
            self.put_op_message(half)
            self._remember(half, kind)
            append = result.appendMessageResult
            wait = half.properties.get(MessageConst.PROPERTY_WAIT_STORE_MSG_OK, "true") != "false"
            return EndResult(ResponseCode.SUCCESS, None, ["commit", "op"],
                             append.wroteOffset + append.wroteBytes if wait and append is not None else None)

    @staticmethod
    def _check_prepare_message(half: MessageRecord, h: EndTransactionRequestHeader) -> str | None:
        if half.properties.get(MessageConst.PROPERTY_PRODUCER_GROUP) != h.producerGroup:
            return "The producer group wrong"
        if half.queue_offset != int(h.tranStateTableOffset):
            return "The transaction state table offset wrong"
        if half.physical_offset != int(h.commitLogOffset):
            return "The commit log offset wrong"
        return None

    @staticmethod
    def _end_message_transaction(half: MessageRecord, h: EndTransactionRequestHeader) -> MessageExtBrokerInner:
        props = dict(half.properties)
        props_string = _raw_properties(half)
        for k in (MessageConst.PROPERTY_REAL_TOPIC, MessageConst.PROPERTY_REAL_QUEUE_ID,
                  MessageConst.PROPERTY_TRANSACTION_PREPARED):
            props.pop(k, None)
        props[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = "false"
        real_topic = half.properties.get(MessageConst.PROPERTY_REAL_TOPIC, "")
        real_qid = _java_long(half.properties.get(MessageConst.PROPERTY_REAL_QUEUE_ID), 0)
        return MessageExtBrokerInner(
            topic=real_topic, queue_id=real_qid, body=bytes(half.body), properties=props, flag=half.flag,
            sys_flag=MessageSysFlag.reset_transaction_value(half.sys_flag, COMMIT_TYPE),
            born_timestamp=half.born_timestamp, born_host=half.born_ip, born_port=half.born_port,
            store_host=half.store_ip, store_port=half.store_port, reconsume_times=half.reconsume_times,
            prepared_transaction_offset=int(h.commitLogOffset), properties_string=props_string)

    # ---- the check ---------------------------------------------------------------------------
    def check(self, transaction_timeout: int, transaction_check_max: int, now: int | None = None) -> list[CheckRequest]:
        """One ``TransactionalMessageServiceImpl.check`` round over half queue 0; returns the
        CHECK_TRANSACTION_STATE requests to send."""
        with self._lock:
            return self._check(transaction_timeout, transaction_check_max, self.clock() if now is None else now)

    def _check(self, timeout: int, check_max: int, start: int) -> list[CheckRequest]:
        requests: list[CheckRequest] = []
        # fetchMessageQueues: the half topic's config, created by the first round (4.9.8 lists
        # RMQ_SYS_TRANS_HALF_TOPIC from then on)
        self._ensure_topic(RMQ_SYS_TRANS_HALF_TOPIC)
        if self.store.get_consume_queue(RMQ_SYS_TRANS_HALF_TOPIC, 0) is None:
            return requests
        half_offset = self.fetch_consume_offset(RMQ_SYS_TRANS_HALF_TOPIC, 0)
        op_offset = self.fetch_consume_offset(RMQ_SYS_TRANS_OP_HALF_TOPIC, 0)
        if half_offset < 0 or op_offset < 0:
            return requests
        done_op: list[int] = []
        remove_map: dict[int, int] = {}
        pull = self._fill_op_remove_map(remove_map, op_offset, half_offset, done_op)
        null_count = 1
        new_offset = i = half_offset
        wall_start = self.clock()
        while True:
            if self.clock() - wall_start > MAX_PROCESS_TIME_LIMIT:
                break
            if i in remove_map:
                done_op.append(remove_map.pop(i))
            else:
                half = self._half_at(0, i)
                if half is None:
                    null_count += 1
                    if null_count > MAX_RETRY_COUNT_WHEN_HALF_NULL + 1:
                        break
                    max_off = self.store.get_max_offset_in_queue(RMQ_SYS_TRANS_HALF_TOPIC, 0)
                    if i >= max_off:
                        break  # NO_NEW_MSG
                    i = max(i + 1, self.store.get_min_offset_in_queue(RMQ_SYS_TRANS_HALF_TOPIC, 0))
                    new_offset = i
                    continue
                if self.resolved_outcome(half) is not None:
                    # rmqd: resolved through another copy of the same transaction
                    self.put_op_message(half)
                    self._remember(half, self.resolved_outcome(half) or COMMIT_TYPE)
                    new_offset = i = i + 1
                    continue
                props = dict(half.properties)
                if self._need_discard(props, check_max) or start - half.born_timestamp > self.file_reserved_time_ms:
                    self._resolve_discard(half, props)
                    new_offset = i = i + 1
                    continue
                if half.store_timestamp >= start:
                    break
                age = start - half.born_timestamp
                immunity = timeout
                immunity_str = props.get(MessageConst.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
                if immunity_str is not None:
                    value = _java_long(immunity_str)
                    immunity = timeout if value == -1 else value * 1000
                    if age < immunity:
                        if self._check_prepare_queue_offset(remove_map, done_op, half, props):
                            new_offset = i = i + 1
                            continue
                elif 0 <= age < immunity:
                    break
                ops = pull.found if pull is not None else None
                need_check = ((not ops and age > immunity)
                              or (ops is not None and bool(ops) and ops[-1].born_timestamp - start > timeout)
                              or age <= -1)
                if need_check:
                    request = self._put_back_and_build_check(half, props)
                    if request is None:
                        break  # the store refused the re-put: try again next round
                    if request.group:
                        requests.append(request)
                else:
                    nxt = pull.next_begin_offset if pull is not None else op_offset
                    pull = self._fill_op_remove_map(remove_map, nxt, half_offset, done_op)
                    if (pull is None or pull.status != "FOUND") and not age > immunity:
                        break  # no more ops and not old enough yet: next round
                    continue
            new_offset = i = i + 1
        if new_offset != half_offset:
            self.update_consume_offset(RMQ_SYS_TRANS_HALF_TOPIC, 0, new_offset)
        new_op = op_offset
        for off in sorted(done_op):
            if off == new_op:
                new_op += 1
            elif off > new_op:
                break
        if new_op != op_offset:
            self.update_consume_offset(RMQ_SYS_TRANS_OP_HALF_TOPIC, 0, new_op)
        return requests

    def _fill_op_remove_map(self, remove_map: dict[int, int], op_offset: int, mini_offset: int,
                            done_op: list[int]) -> _OpPull | None:
        pull = self._pull(RMQ_SYS_TRANS_OP_HALF_TOPIC, op_offset, OP_PULL_BATCH)
        if pull.status in ("OFFSET_ILLEGAL", "NO_MATCHED_MSG"):
            self.update_consume_offset(RMQ_SYS_TRANS_OP_HALF_TOPIC, 0, pull.next_begin_offset)
            return pull
        if pull.status == "NO_NEW_MSG" or not pull.found:
            return pull
        for op in pull.found:
            half_off = _java_long(bytes(op.body).decode("utf-8", "replace"))
            if op.properties.get(MessageConst.PROPERTY_TAGS) == REMOVE_TAG:
                if half_off < mini_offset:
                    done_op.append(op.queue_offset)
                else:
                    remove_map[half_off] = op.queue_offset
        return pull

    @staticmethod
    def _need_discard(props: dict[str, str], check_max: int) -> bool:
        times = props.get(MessageConst.PROPERTY_TRANSACTION_CHECK_TIMES)
        check_time = 1
        if times is not None:
            check_time = _java_long(times)
            if check_time >= check_max:
                return True
            check_time += 1
        props[MessageConst.PROPERTY_TRANSACTION_CHECK_TIMES] = str(check_time)
        return False

    def _check_prepare_queue_offset(self, remove_map: dict[int, int], done_op: list[int], half: MessageRecord,
                                    props: dict[str, str]) -> bool:
        prepared = props.get(MessageConst.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET)
        if prepared is not None:
            value = _java_long(prepared)
            if value == -1:
                return False
            if value in remove_map:
                done_op.append(remove_map.pop(value))
                return True
        else:
            props[MessageConst.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET] = str(half.queue_offset)
        result = self._put(self._renew_half(half, props))
        return result is not None and result.is_ok()

    def _renew_half(self, half: MessageRecord, props: dict[str, str]) -> MessageExtBrokerInner:
        ordered = java_hashmap_order(props)
        return MessageExtBrokerInner(
            topic=RMQ_SYS_TRANS_HALF_TOPIC, queue_id=half.queue_id, body=bytes(half.body), properties=dict(ordered),
            flag=half.flag, sys_flag=half.sys_flag, born_timestamp=half.born_timestamp, born_host=half.born_ip,
            born_port=half.born_port, store_host=half.store_ip, store_port=half.store_port,
            properties_string=encode_properties(ordered))

    def _put_back_and_build_check(self, half: MessageRecord, props: dict[str, str]) -> CheckRequest | None:
        result = self._put(self._renew_half(half, props))
        if result is None or not result.is_ok():
            log.error("re-putting half message %d failed: %s", half.queue_offset,
                      getattr(result, "putMessageStatus", None))
            return None
        append = result.appendMessageResult
        new_queue_offset, new_phy, new_msg_id = append.logicsOffset, append.wroteOffset, append.msgId
        uniq = props.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        ext = {
            "commitLogOffset": str(new_phy),
            "offsetMsgId": new_msg_id,
            "tranStateTableOffset": str(new_queue_offset),
        }
        if uniq is not None:
            ext["msgId"] = uniq
            ext["transactionId"] = uniq
        real_topic = props.get(MessageConst.PROPERTY_REAL_TOPIC, half.topic)
        real_qid = _java_long(props.get(MessageConst.PROPERTY_REAL_QUEUE_ID), 0)
        body = encode_record(
            queue_id=real_qid, flag=half.flag, queue_offset=new_queue_offset, physical_offset=new_phy,
            sys_flag=half.sys_flag, born_timestamp=half.born_timestamp, born_ip=half.born_ip,
            born_port=half.born_port, store_timestamp=half.store_timestamp, store_ip=half.store_ip,
            store_port=half.store_port, reconsume_times=half.reconsume_times,
            prepared_transaction_offset=half.prepared_transaction_offset, body=bytes(half.body), topic=real_topic,
            properties=encode_properties(java_hashmap_order(props)), body_crc=half.body_crc)
        return CheckRequest(props.get(MessageConst.PROPERTY_PRODUCER_GROUP) or "", java_hashmap_order(ext), body)

    def _resolve_discard(self, half: MessageRecord, props: dict[str, str]) -> None:
        """``resolveDiscardMsg``: checked too often (or too old): park it in TRANS_CHECK_MAX_TIME_TOPIC."""
        log.error("half message %s checked too many times, moved to %s", half.offset_msg_id,
                  RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC)
        self._ensure_topic(RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, TCMT_QUEUE_NUMS)
        ordered = java_hashmap_order(props)
        msg = MessageExtBrokerInner(
            topic=RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, queue_id=random.randrange(99999999) % TCMT_QUEUE_NUMS,
            body=bytes(half.body), properties=dict(ordered), flag=half.flag, sys_flag=half.sys_flag,
            born_timestamp=half.born_timestamp, born_host=half.born_ip, born_port=half.born_port,
            store_host=half.store_ip, store_port=half.store_port, reconsume_times=half.reconsume_times,
            properties_string=encode_properties(ordered))
        self._put(msg)


def _raw_properties(rec: MessageRecord) -> str:
    try:
        return bytes(rec.properties_raw).decode("utf-8")
    except (UnicodeDecodeError, TypeError):
        return encode_properties(rec.properties)


def _final_put_answer(result: Any, max_message_size: int) -> tuple[int, str | None]:
    """``sendFinalMessage``'s mapping of the store status."""
    if result is None:
        return ResponseCode.SYSTEM_ERROR, "store putMessage return null"
    status = result.putMessageStatus.name
    if status in ("PUT_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"):
        return ResponseCode.SUCCESS, None
    if status == "CREATE_MAPEDFILE_FAILED":
        return ResponseCode.SYSTEM_ERROR, "Create mapped file failed."
    if status in ("MESSAGE_ILLEGAL", "PROPERTIES_SIZE_EXCEEDED"):
        return ResponseCode.MESSAGE_ILLEGAL, (
            f"The message is illegal, maybe msg body or properties length not matched. msg body length limit "
            f"{max_message_size}B, msg properties length limit 32KB.")
    if status == "SERVICE_NOT_AVAILABLE":
        return ResponseCode.SERVICE_NOT_AVAILABLE, "Service not available now."
    if status == "OS_PAGECACHE_BUSY":
        return ResponseCode.SYSTEM_ERROR, "OS page cache busy, please try another machine"
    if status == "UNKNOWN_ERROR":
        return ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"
    return ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT"


class EndTransactionProcessor:
    """END_TRANSACTION handler. ``broker`` provides message_store_config (brokerRole)."""

    def __init__(self, broker: TransactionBroker, service: TransactionalMessageService) -> None:
        self.broker = broker
        self.service = service

    def handlers(self) -> dict[int, RequestHandler]:
        return guard_names({RequestCode.END_TRANSACTION: self.end_transaction})

    async def end_transaction(self, ctx: Context, request: RemotingCommand) -> RemotingCommand | None:
        h = EndTransactionRequestHeader.from_ext(request.ext_fields)
        if str(getattr(self.broker.message_store_config, "brokerRole", "")) == "SLAVE":
            return make_response(request, ResponseCode.SLAVE_NOT_AVAILABLE)
        result = await trio.to_thread.run_sync(self.service.end_transaction, h)
        if result is None:
            return None
        if result.wait_until is not None:
            await self._wait_durable(result.wait_until)
        return make_response(request, result.code, result.remark)

    async def _wait_durable(self, offset_end: int) -> None:
        """SYNC_FLUSH / SYNC_MASTER: the answer waits for the flush and the slave; their
        timeouts still answer SUCCESS, as sendFinalMessage maps them."""
        cfg = self.broker.message_store_config
        timeout = int(getattr(cfg, "syncFlushTimeout", 5000))
        if getattr(cfg, "flushDiskType", "ASYNC_FLUSH") == "SYNC_FLUSH":
            await wait_flushed(self.broker.store, offset_end, timeout)
        ha = getattr(self.broker, "ha_service", None)
        if str(getattr(cfg, "brokerRole", "")) == "SYNC_MASTER" and ha is not None:
            await ha.wait_replicated(offset_end, timeout)


class TransactionalMessageCheckService:
    """Runs ``check`` every transactionCheckInterval and sends the CHECK_TRANSACTION_STATE requests
    oneway to a live producer channel of each half's group (``broker.producer_manager``)."""

    def __init__(self, broker: TransactionBroker, service: TransactionalMessageService) -> None:
        self.broker = broker
        self.service = service

    async def run_once(self) -> int:
        bc = self.broker.broker_config
        requests = await trio.to_thread.run_sync(self.service.check, int(bc.transactionTimeOut),
                                                 int(bc.transactionCheckMax))
        sent = 0
        for req in requests:
            channel = self.broker.producer_manager.get_available_channel(req.group)
            if channel is None:
                log.warning("Check transaction failed, channel is null. groupId=%s", req.group)
                continue
            try:
                await channel.send_request_oneway(req.command())
                sent += 1
            except Exception as exc:  # noqa: BLE001 - one dead producer must not stop the round
                log.warning("CHECK_TRANSACTION_STATE to %s failed: %s", getattr(channel, "remote_addr", "?"), exc)
        return sent

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        await trio.to_thread.run_sync(self.service.load)
        task_status.started()
        while True:
            await trio.sleep(max(int(self.broker.broker_config.transactionCheckInterval), 100) / 1000)
            try:
                await self.run_once()
            except Exception:  # noqa: BLE001 - keep checking next interval
                log.exception("transaction check round failed")
