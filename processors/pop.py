"""POP consumption (RocketMQ 5.x): the service both protocols call.

The Remoting POP codes (POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE,
CHANGE_MESSAGE_INVISIBLETIME; processors/pop_remoting.py) and the gRPC service's
ReceiveMessage / AckMessage / ChangeInvisibleDuration / ForwardMessageToDeadLetterQueue are thin
adapters over :class:`PopService`: one implementation of 5.3's PopMessageProcessor,
AckMessageProcessor and ChangeInvisibleTimeProcessor over rmqd's store, one place where the POP
state is written the way the 5.x broker writes it (docs/pop.md).

Errors are :class:`PopError` with RocketMQ's response code and remark (what a 5.3 broker answers
for the same request); an adapter turns it into its protocol's status. Every method may be called
from the trio thread only.

Stability: the signatures here are what the gRPC layer codes against. Extend them (new keyword
arguments with defaults, new result fields), do not change them.
"""

from __future__ import annotations

import collections
import enum
import logging
import random
import struct
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Protocol, Sequence

import trio

from rmqd.processors.client_manager import SUB_ALL, is_tag_type
from rmqd.processors.common import PERM_READ, PERM_WRITE, perm_readable, suggest_todo
from rmqd.processors.consumer_filter import NOT_SUPPORTED_REMARK, ConsumerFilterManager, build_filter_data
from rmqd.processors.pop_revive import PopReviveService
from rmqd.processors.pull import ExpressionMessageFilter, build_subscription_data
from rmqd.store.broker_stats import BrokerStatsManager
from rmqd.store.commitlog import MessageExtBrokerInner
from rmqd.store.consumer_offset import ConsumerOffsetManager
from rmqd.store.consumer_order_info import ConsumerOrderInfoManager
from rmqd.store.message_store import DefaultMessageStore, GetMessageStatus
from rmqd.store.pop import AckMsg, BatchAckMsg, PopCheckPoint, build_ack_message, build_ck_message, java5_properties
from rmqd.store.schedule import apply_timer
from rmqd.store.subscription_group import SubscriptionGroupManager
from rmqd.store.topic_config import TopicConfigManager
from rmqd.wire.bodies import TopicConfig
from rmqd.wire.codes import ResponseCode
from rmqd.wire.message import (SYSFLAG_POSITION, MessageSysFlag, decode_record, encode_properties_java, encode_record,
                               record_head_reader)
from rmqd.wire.names import RETRY_GROUP_TOPIC_PREFIX, topic_remark
from rmqd.wire.pop import (
    CONSUME_INIT_MODE_MAX, CONSUME_INIT_MODE_MIN, MAX_POP_NUMS, POP_ORDER_REVIVE_QUEUE, PROPERTY_POP_CK, BatchAck,
    ExtraInfo,
    ExtraInfoError, build_extra_info, checked_extra_info, msg_offset_info_item, parse_extra_info, pop_retry_topic,
    queue_id_order_count_item, queue_offset_order_count_item, real_topic_of_kind, revive_topic,
    start_offset_info_item,
)

# A pop needs two fields of each record it hands out: read in place at the record's own layout
# (keyed by the sysFlag's host-size bits), not a decode of the whole record and its properties.
_HOST_V6_BITS = MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
_POPPED_HEAD = record_head_reader(("physical_offset", "reconsume_times"))
_SYS_FLAG = struct.Struct(">i")


def popped_head(buf: bytes | memoryview) -> tuple[int, int]:
    """(physical offset, reconsume times) of a stored record, read where its layout puts them."""
    (sys_flag,) = _SYS_FLAG.unpack_from(buf, SYSFLAG_POSITION)
    physical_offset, reconsume_times = _POPPED_HEAD[sys_flag & _HOST_V6_BITS].unpack_from(buf, 0)
    return physical_offset, reconsume_times

log = logging.getLogger("rmqd.pop")

#: A FIFO pop that waits re-checks its queues this often: a queue unblocks when an invisible
#: time runs out, which no arrival announces.
FIFO_RECHECK_S = 0.5

__all__ = [
    "AckEntry", "ChangeInvisibleResult", "PopBroker", "PopError", "PopResult", "PopService",
    "PopStatus", "PoppedMessage", "ExtraInfo", "parse_extra_info", "MAX_POP_NUMS", "CONSUME_INIT_MODE_MAX",
    "popped_head",
]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class PopBrokerConfig(Protocol):
    """The broker.conf keys POP reads (BrokerConfig's names and 5.3 defaults, broker/config.py)."""

    brokerName: str
    brokerClusterName: str
    brokerIP1: str
    brokerPermission: int
    enablePropertyFilter: bool
    reviveQueueNum: int
    reviveInterval: int
    enableRetryTopicV2: bool
    retrieveMessageFromPopRetryTopicV1: bool
    popFromRetryProbability: int
    popPollingSize: int
    initPopOffsetByCheckMsgInMem: bool
    popResponseReturnActualRetryTopic: bool


class TimerService(Protocol):
    """The 5.x timer's side (store.schedule.ScheduleMessageService)."""

    def timer_horizon(self, now_ms: int) -> int: ...

    def timer_floor(self) -> int: ...


class PopBroker(Protocol):
    """What PopService needs from the broker (broker/broker.py's BrokerRole has all of it)."""

    @property
    def broker_config(self) -> PopBrokerConfig: ...
    @property
    def store(self) -> DefaultMessageStore: ...
    @property
    def topic_config_manager(self) -> TopicConfigManager: ...
    @property
    def subscription_group_manager(self) -> SubscriptionGroupManager: ...
    @property
    def consumer_offset_manager(self) -> ConsumerOffsetManager: ...
    @property
    def consumer_filter_manager(self) -> ConsumerFilterManager: ...
    @property
    def store_host(self) -> bytes: ...
    @property
    def store_port(self) -> int: ...
    @property
    def schedule_service(self) -> TimerService | None: ...

    def send_message_back(self, *, group: str, commit_log_offset: int, delay_level: int,
                          max_reconsume_times: int | None) -> Awaitable[tuple[int, str | None]]:
        """CONSUMER_SEND_MSG_BACK's work (processors/retry.py): (response code, remark)."""
        ...

    def register_soon(self) -> None:
        """Tell the name servers about new topics (the POP retry topics) in the background."""
        ...


class PopError(Exception):
    """A request the broker refuses: ``code`` is RocketMQ's ResponseCode (wire.codes), ``remark``
    the text a 5.3 broker answers with."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


class PopStatus(enum.Enum):
    """How a pop ended: messages found, or none within the long-polling time (5.3 answers
    POLLING_TIMEOUT, code 210), or too many pops already waiting (POLLING_FULL, 209)."""

    FOUND = "FOUND"
    POLLING_TIMEOUT = "POLLING_TIMEOUT"
    POLLING_FULL = "POLLING_FULL"


@dataclass(slots=True)
class PoppedMessage:
    """One message handed out by a pop.

    ``record`` is the message as a 5.3 broker puts it into the POP_MESSAGE answer body: the stored
    commit-log record for a message of the topic itself; for one of its POP retry topic, the
    record re-encoded with the original topic and ``POP_CK`` = the extra info (5.3 with
    popResponseReturnActualRetryTopic=false). Decode it with ``wire.message.decode_record``.

    ``topic`` is the topic the message was popped from (the subscribed topic or its POP retry
    topic ``%RETRY%<group>_<topic>``): acks and changes of invisible time name this topic.
    ``extra_info`` is the receipt (``ExtraInfoUtil.buildExtraInfo`` with the queue offset, what the
    5.x Remoting client puts into ``POP_CK``); the gRPC receipt handle is built from it plus
    ``commit_log_offset``."""

    record: bytes | memoryview
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    reconsume_times: int
    extra_info: str
    retry: bool = False


@dataclass(slots=True)
class PopResult:
    """The answer of one pop: the POP_MESSAGE response header's fields plus the messages."""

    status: PopStatus
    messages: list[PoppedMessage] = field(default_factory=list)
    pop_time: int = 0
    invisible_time: int = 0
    revive_qid: int = 0
    rest_num: int = 0
    start_offset_info: str = ""
    msg_offset_info: str = ""
    order_count_info: str | None = None


@dataclass(frozen=True, slots=True)
class AckEntry:
    """One message to acknowledge in :meth:`PopService.batch_ack`: the topic it was popped from
    (``PoppedMessage.topic``), its queue and offset, and its extra info."""

    topic: str
    queue_id: int
    offset: int
    extra_info: str


@dataclass(frozen=True, slots=True)
class ChangeInvisibleResult:
    """The new receipt after a change of invisible time: 5.3's ChangeInvisibleTimeResponseHeader
    (popTime, invisibleTime, reviveQid) and the extra info a client builds from it."""

    pop_time: int
    invisible_time: int
    revive_qid: int
    extra_info: str


@dataclass(slots=True)
class _Pop:
    """One pass of a pop over its queues: the request and what it collected."""

    group: str
    max_count: int
    invisible_time: int
    fifo: bool
    attempt_id: str | None
    init_mode: int
    client: str
    message_filter: ExpressionMessageFilter
    revive_qid: int
    pop_time: int
    request_topic: str
    messages: list[PoppedMessage] = field(default_factory=list)
    rest_num: int = 0
    start_info: list[str] = field(default_factory=list)
    msg_info: list[str] = field(default_factory=list)
    order_info: list[str] = field(default_factory=list)
    order_counts: dict[tuple[str, int, int], int] = field(default_factory=dict)
    order_queue_min: dict[tuple[str, int], int] = field(default_factory=dict)
    order_changed: bool = False


def recode_retry_record(buf: bytes | memoryview, topic: str, extra_info: str) -> bytes:
    """A POP retry message as 5.3 answers it: re-encoded under the original ``topic`` with
    ``POP_CK`` = its extra info (MessageDecoder.encode of the decoded message)."""
    rec = decode_record(buf, 0)
    props = dict(rec.properties)
    props.setdefault(PROPERTY_POP_CK, extra_info)
    return encode_record(queue_id=rec.queue_id, flag=rec.flag, queue_offset=rec.queue_offset,
                         physical_offset=rec.physical_offset, sys_flag=rec.sys_flag,
                         born_timestamp=rec.born_timestamp, born_ip=rec.born_ip, born_port=rec.born_port,
                         store_timestamp=rec.store_timestamp, store_ip=rec.store_ip, store_port=rec.store_port,
                         reconsume_times=rec.reconsume_times,
                         prepared_transaction_offset=rec.prepared_transaction_offset, body=bytes(rec.body),
                         topic=topic, properties=java5_properties(encode_properties_java(props)),
                         body_crc=rec.body_crc)


class PopWaiter:
    """A pop waiting for messages of its topics (long polling)."""

    __slots__ = ("topics", "event")

    def __init__(self, topics: tuple[str, ...]) -> None:
        self.topics = topics
        self.event = trio.Event()


class PopLongPolling:
    """PopLongPollingService without its thread: waiting pops by topic (the topic and its POP
    retry topic), woken by the store's arrival listener (any thread, one trio hop for many
    arrivals) and by orderly acks. At most ``max_waiting`` pops wait per topic (5.3's
    popPollingSize); one more answers POLLING_FULL."""

    FULL: Any = object()

    def __init__(self, max_waiting: int) -> None:
        self.max_waiting = max(int(max_waiting), 1)
        self.table: dict[str, set[PopWaiter]] = {}
        self._token: trio.lowlevel.TrioToken | None = None
        self._arrivals: collections.deque[str] = collections.deque()
        self._hop_pending = False

    def bind_trio(self) -> None:
        self._token = trio.lowlevel.current_trio_token()

    def register(self, *topics: str) -> PopWaiter | Any:
        if len(self.table.get(topics[0], ())) >= self.max_waiting:
            return self.FULL
        w = PopWaiter(topics)
        for t in topics:
            self.table.setdefault(t, set()).add(w)
        return w

    def unregister(self, w: PopWaiter) -> None:
        for t in w.topics:
            waiting = self.table.get(t)
            if waiting is not None:
                waiting.discard(w)
                if not waiting:
                    del self.table[t]

    def notify(self, topic: str) -> None:
        for w in list(self.table.get(topic, ())):
            w.event.set()

    def arrival_listener(self, topic: str, queue_id: int, max_offset: int, *_: Any) -> None:
        """The store's arrival callback; safe from any thread, costs nothing when no pop waits."""
        token = self._token
        if token is None or topic not in self.table:
            return
        self._arrivals.append(topic)
        if self._hop_pending:
            return
        self._hop_pending = True
        try:
            token.run_sync_soon(self._drain)
        except trio.RunFinishedError:
            self._hop_pending = False

    def _drain(self) -> None:
        self._hop_pending = False
        while self._arrivals:
            self.notify(self._arrivals.popleft())

    def wake_all(self) -> None:
        for waiting in list(self.table.values()):
            for w in waiting:
                w.event.set()


class DurableState:
    """Group commit for the orderly POP state: ``await wait()`` returns once a persist that began
    after the call has written consumerOffset.json and consumerOrderInfo.json, so an orderly ack
    answered is an ack a SIGKILL cannot undo. Concurrent callers share one write."""

    def __init__(self, persist: Callable[[], None]) -> None:
        self._persist = persist
        self._wanted = 0
        self._completed = 0
        self._running = False
        self._done = trio.Event()

    async def wait(self) -> None:
        self._wanted += 1
        mine = self._wanted
        while self._completed < mine:
            if self._running:
                await self._done.wait()
                continue
            self._running = True
            target = self._wanted
            try:
                await trio.to_thread.run_sync(self._persist)
            except Exception:  # noqa: BLE001 - the state stays in memory; the next persist retries
                log.exception("persisting the orderly POP state failed")
            finally:
                self._running = False
                self._completed = target
                done, self._done = self._done, trio.Event()
                done.set()


class PopService:
    """POP consumption over the broker's store (see the module docstring and docs/pop.md).

    The broker builds one (``BrokerRole.pop_service``) from itself: its store, topic, group,
    offset and filter managers and broker.conf. Other code reaches it there. ``start()`` (a
    thread, before the broker serves) creates the revive topic and recovers the POP offsets a
    SIGKILL may have left behind; ``run`` (a trio task) is the revive service and long polling.
    """

    def __init__(self, broker: PopBroker, *, clock: Callable[[], int] = _now_ms) -> None:
        self.broker = broker
        self.clock = clock
        bc = broker.broker_config
        self.revive_topic = revive_topic(bc.brokerClusterName)
        self.order_info = ConsumerOrderInfoManager(broker.store.config.storePathRootDir, exists=self._queue_exists,
                                                   clock=clock)
        self.polling = PopLongPolling(bc.popPollingSize)
        self.revive = PopReviveService(self)
        self._ck_number = 0
        self._random = random.Random()
        self._durable = DurableState(self._persist_order_state)

    # ---- lifecycle -------------------------------------------------------------------------------
    def load(self) -> bool:
        """consumerOrderInfo.json (False and ``order_info.load_error`` when it cannot be read)."""
        return self.order_info.load()

    def start(self) -> None:
        """Before serving (a worker thread): the revive topic exists, and every POP offset is at
        least past the last message a stored checkpoint handed out (a SIGKILL can leave
        consumerOffset.json older than the checkpoints: without this an acknowledged message
        would be popped again)."""
        self._ensure_revive_topic()
        self.revive.recover_offsets()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.polling.bind_trio()
        # called only for topics a POP waits on: the dispatch loop skips the rest in compiled code
        self.broker.store.add_arrival_listener(self.polling.arrival_listener, self.polling.table)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.revive.run)
            task_status.started()

    def persist(self) -> None:
        """consumerOrderInfo.json (on shutdown; orderly pops and acks persist it themselves)."""
        self.order_info.persist()

    def _persist_order_state(self) -> None:
        self.broker.consumer_offset_manager.persist()
        self.order_info.persist()

    def _ensure_revive_topic(self) -> None:
        tcm = self.broker.topic_config_manager
        n = max(int(self.broker.broker_config.reviveQueueNum), 1)
        tc = tcm.select_topic_config(self.revive_topic)
        if tc is None:
            tcm.update_topic_config(TopicConfig(topicName=self.revive_topic, readQueueNums=n, writeQueueNums=n,
                                                perm=PERM_READ | PERM_WRITE))
        tcm.system_topics.add(self.revive_topic)

    def _queue_exists(self, topic: str, group: str, queue_id: int) -> bool:
        tc = self.broker.topic_config_manager.select_topic_config(topic)
        if tc is None or queue_id >= tc.readQueueNums:
            return False
        return self.broker.subscription_group_manager.subscription_group_table.get(group) is not None

    # ---- helpers ---------------------------------------------------------------------------------
    @property
    def broker_name(self) -> str:
        return self.broker.broker_config.brokerName

    def retry_topic(self, topic: str, group: str) -> str:
        return pop_retry_topic(topic, group, bool(self.broker.broker_config.enableRetryTopicV2))

    def _check_topic_queue(self, topic: str, queue_id: int, illegal_code: int) -> TopicConfig:
        tc = self.broker.topic_config_manager.select_topic_config(topic)
        if tc is None:
            raise PopError(ResponseCode.TOPIC_NOT_EXIST,
                           f"topic[{topic}] not exist, apply first please! {suggest_todo()}")
        if queue_id >= tc.readQueueNums or queue_id < 0:
            raise PopError(illegal_code, f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                                         f"topicConfig.readQueueNums:[{tc.readQueueNums}] consumer:[]")
        return tc

    def _extra(self, extra_info: str | ExtraInfo) -> ExtraInfo:
        try:
            if isinstance(extra_info, ExtraInfo):
                return checked_extra_info(extra_info)
            return parse_extra_info(extra_info)
        except ExtraInfoError as exc:
            raise PopError(ResponseCode.INVALID_PARAMETER, f"extraInfo is illegal: {exc}") from None

    def _put(self, msg: MessageExtBrokerInner) -> bool:
        """A revive-topic record through the 5.x timer hook into the store."""
        remark = apply_timer(msg, self.clock())
        if remark is not None:  # a deliver time beyond timerMaxDelaySec (an absurd invisible time)
            log.warning("pop: %s record not put: %s", msg.topic, remark)
            return False
        msg.properties_string = java5_properties(msg.get_properties_string())
        result = self.broker.store.put_message(msg)
        return result is not None and result.is_ok()

    def put_revive_record(self, msg: MessageExtBrokerInner) -> bool:
        """A checkpoint or ack built elsewhere (the revive service's re-put checkpoints)."""
        return self._put(msg)

    def timer_horizon(self, now: int) -> int:
        """The time up to which the 5.x timer has delivered every record (``now`` unless it is behind)."""
        timer = self.broker.schedule_service
        return now if timer is None else timer.timer_horizon(now)

    def timer_floor(self) -> int:
        """The timer queue offset below which every timer record is delivered."""
        timer = self.broker.schedule_service
        return 0 if timer is None else timer.timer_floor()

    def max_delivery_attempts(self, group: str) -> int:
        cfg = self.broker.subscription_group_manager.subscription_group_table.get(group)
        return (cfg.retryMaxTimes if cfg is not None else 16) + 1

    # ---- pop ---------------------------------------------------------------------------------------
    async def pop(self, *, group: str, topic: str, invisible_time_ms: int, max_count: int = MAX_POP_NUMS,
                  queue_id: int = -1, poll_time_ms: int = 0, expression_type: str = "TAG",
                  expression: str = "*", fifo: bool = False, attempt_id: str | None = None,
                  init_mode: int = CONSUME_INIT_MODE_MAX, client: str = "",
                  max_attempts: int | None = None) -> PopResult:
        """Hand out up to ``max_count`` (1..32) messages of ``topic`` to ``group`` and make them
        invisible to every pop for ``invisible_time_ms``.

        ``queue_id`` -1 reads every readable queue (starting at a random one, as 5.3), else that
        queue only. The group's POP retry topic is read too (not for ``fifo``), with 5.3's
        probability of reading it first. ``poll_time_ms`` > 0 waits that long for a message to
        arrive when none is there (long polling); ``expression_type`` is "TAG" or "SQL92".

        ``fifo`` pops orderly: a queue whose earlier messages are still unacknowledged and
        invisible gives nothing, so a message group is never handed out twice at once;
        ``attempt_id`` (the gRPC client's receive attempt) lets a retried receive get the same
        messages again. ``init_mode`` is ConsumeInitMode (where a group without an offset
        starts). ``client`` names the caller (its address) for offsets and logs.

        ``max_attempts``: when given, a message delivered that many times already
        (reconsumeTimes >= max_attempts) is not returned but forwarded to the group's dead-letter
        queue and acknowledged, as the 5.x proxy does with its PopMessageResultFilter.

        Raises PopError for what 5.3 refuses (unknown topic or group, bad queue, more than 32,
        a filter that does not parse, a broker without read permission)."""
        message_filter = self._check_pop(group, topic, queue_id, max_count, expression_type, expression, fifo)
        deadline = trio.current_time() + max(poll_time_ms, 0) / 1000.0
        while True:
            waiter = self.polling.register(topic, self.retry_topic(topic, group)) if poll_time_ms > 0 else None
            try:
                result = self._pop_once(group=group, topic=topic, queue_id=queue_id, max_count=max_count,
                                        invisible_time=invisible_time_ms, fifo=fifo, attempt_id=attempt_id,
                                        init_mode=init_mode, client=client, message_filter=message_filter)
                if fifo and result.messages:
                    await self._durable.wait()  # the order info a SIGKILL must not lose
                if max_attempts is not None and result.messages:
                    await self._dead_letter_exhausted(group, topic, result, max_attempts)
                if result.messages or waiter is None:
                    if not result.messages:
                        result.status = PopStatus.POLLING_TIMEOUT
                    return result
                if waiter is PopLongPolling.FULL:
                    result.status = PopStatus.POLLING_FULL
                    return result
                left = deadline - trio.current_time()
                if left <= 0:
                    result.status = PopStatus.POLLING_TIMEOUT
                    return result
                # a FIFO queue also unblocks when an invisible time runs out (no arrival says so)
                with trio.move_on_after(min(left, FIFO_RECHECK_S) if fifo else left):
                    await waiter.event.wait()
            finally:
                if isinstance(waiter, PopWaiter):
                    self.polling.unregister(waiter)

    def _check_pop(self, group: str, topic: str, queue_id: int, max_count: int, expression_type: str | None,
                   expression: str | None, fifo: bool = False) -> ExpressionMessageFilter:
        """The refusals of PopMessageProcessor.processRequest, in its order; the message filter.

        One of rmqd's own (docs/pop.md): a non-FIFO pop whose POP retry topic is not a topic
        rmqd's store can keep (over 127 chars: a record 4.9.x could not read), for the revive
        service could never put an unacked message back. A FIFO pop is never refused for it:
        an orderly pop neither reads nor writes the retry topic (5.x redelivers from the
        original queue), whatever the length of its name."""
        b = self.broker
        bc = b.broker_config
        if not perm_readable(bc.brokerPermission):
            raise PopError(ResponseCode.NO_PERMISSION, f"the broker[{bc.brokerIP1}] pop message is forbidden")
        if max_count > MAX_POP_NUMS:
            raise PopError(ResponseCode.INVALID_PARAMETER,
                           f"the broker[{bc.brokerIP1}] pop message's num is greater than 32")
        if not getattr(b.store.config, "timerWheelEnable", True):
            raise PopError(ResponseCode.SYSTEM_ERROR, f"the broker[{bc.brokerIP1}] pop message is forbidden "
                                                      f"because timerWheelEnable is false")
        tc = b.topic_config_manager.select_topic_config(topic)
        if tc is None:
            raise PopError(ResponseCode.TOPIC_NOT_EXIST,
                           f"topic[{topic}] not exist, apply first please! {suggest_todo()}")
        if not perm_readable(tc.perm):
            raise PopError(ResponseCode.NO_PERMISSION, f"the topic[{topic}] peeking message is forbidden")
        if queue_id >= tc.readQueueNums:
            raise PopError(ResponseCode.INVALID_PARAMETER,
                           f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                           f"[{tc.readQueueNums}] consumer:[]")
        retry_remark = None if fifo else topic_remark(self.retry_topic(topic, group))
        if retry_remark is not None:  # rmqd: unacked messages could never come back (docs/pop.md)
            raise PopError(ResponseCode.SYSTEM_ERROR, f"the POP retry topic of group {group} and topic {topic} "
                                                      f"is not a valid topic: {retry_remark} (unacknowledged "
                                                      f"messages could never come back; FIFO consumption needs "
                                                      f"no retry topic)")
        cfg = b.subscription_group_manager.find_subscription_group_config(group)
        if cfg is None:
            raise PopError(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                           f"subscription group [{group}] does not exist, {suggest_todo()}")
        if not cfg.consumeEnable:
            raise PopError(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
        if not expression:
            return ExpressionMessageFilter(build_subscription_data(topic, SUB_ALL, "TAG"))
        try:
            subscription = build_subscription_data(topic, expression, expression_type)
        except Exception:  # noqa: BLE001 - any bad expression is a parse failure
            raise PopError(ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed") from None
        if is_tag_type(subscription.expressionType):
            return ExpressionMessageFilter(subscription)
        if not bc.enablePropertyFilter:
            raise PopError(ResponseCode.SYSTEM_ERROR, NOT_SUPPORTED_REMARK(subscription.expressionType))
        data = build_filter_data(topic, group, expression, expression_type, 0)
        if data is None:
            raise PopError(ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed")
        return ExpressionMessageFilter(subscription, data.matches)

    def _pop_once(self, *, group: str, topic: str, queue_id: int, max_count: int, invisible_time: int, fifo: bool,
                  attempt_id: str | None, init_mode: int, client: str,
                  message_filter: ExpressionMessageFilter) -> PopResult:
        """One pass over the queues (PopMessageProcessor.processRequest after its checks)."""
        bc = self.broker.broker_config
        random_q = self._random.randrange(100)
        if fifo:
            revive_qid = POP_ORDER_REVIVE_QUEUE
        else:
            revive_qid = self._ck_number % max(int(bc.reviveQueueNum), 1)
            self._ck_number += 1
        pop = _Pop(group=group, max_count=max_count, invisible_time=invisible_time, fifo=fifo, attempt_id=attempt_id,
                   init_mode=init_mode, client=client, message_filter=message_filter, revive_qid=revive_qid,
                   pop_time=self.clock(), request_topic=topic)
        need_retry = random_q < int(bc.popFromRetryProbability)
        retry_topic = self.retry_topic(topic, group)
        if need_retry and not fifo:
            self._pop_from_topic(pop, retry_topic, True, random_q)
        if queue_id < 0:
            self._pop_from_topic(pop, topic, False, random_q)
        else:
            self._pop_from_queue(pop, topic, False, queue_id)
        if not need_retry and len(pop.messages) < max_count and not fifo:
            self._pop_from_topic(pop, retry_topic, True, random_q)
        status = PopStatus.FOUND if pop.messages else PopStatus.POLLING_TIMEOUT
        return PopResult(status=status, messages=pop.messages, pop_time=pop.pop_time, invisible_time=invisible_time,
                         revive_qid=revive_qid, rest_num=pop.rest_num, start_offset_info=";".join(pop.start_info),
                         msg_offset_info=";".join(pop.msg_info),
                         order_count_info=";".join(pop.order_info) if fifo else None)

    def _pop_from_topic(self, pop: "_Pop", topic: str, is_retry: bool, random_q: int) -> None:
        tc = self.broker.topic_config_manager.select_topic_config(topic)
        if tc is None:
            return
        n = tc.readQueueNums
        for i in range(n):
            self._pop_from_queue(pop, topic, is_retry, (random_q + i) % n)

    def _pop_offset(self, topic: str, group: str, queue_id: int, init_mode: int, init: bool) -> int:
        """PopMessageProcessor.getPopOffset (without the 5.3 pop buffer: offsets commit at once)."""
        offset = self.broker.consumer_offset_manager.query_offset(group, topic, queue_id)
        if offset >= 0:
            return offset
        store = self.broker.store
        if init_mode == CONSUME_INIT_MODE_MIN or topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            offset = store.get_min_offset_in_queue(topic, queue_id)
        elif (self.broker.broker_config.initPopOffsetByCheckMsgInMem
              and store.get_min_offset_in_queue(topic, queue_id) <= 0
              and store.get_max_offset_in_queue(topic, queue_id) > 0
              and not store.check_in_disk_by_consume_offset(topic, queue_id, 0)):
            offset = 0
        else:
            offset = max(store.get_max_offset_in_queue(topic, queue_id) - 1, 0)
        if init:
            self.broker.consumer_offset_manager.commit_offset("getPopOffset", group, topic, queue_id, offset)
        return offset

    def _pop_from_queue(self, pop: "_Pop", topic: str, is_retry: bool, queue_id: int) -> None:
        b = self.broker
        store = b.store
        group = pop.group
        offset = self._pop_offset(topic, group, queue_id, pop.init_mode, True)
        if pop.fifo:
            if self.order_info.check_block(pop.attempt_id, topic, group, queue_id, pop.invisible_time):
                return
        if len(pop.messages) >= pop.max_count:
            pop.rest_num += store.get_max_offset_in_queue(topic, queue_id) - offset
            return
        want = pop.max_count - len(pop.messages)
        result = store.get_message(group, topic, queue_id, offset, want, pop.message_filter)
        if result is None:
            pop.rest_num += store.get_max_offset_in_queue(topic, queue_id) - offset
            return
        if result.status in (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY,
                             GetMessageStatus.OFFSET_FOUND_NULL):
            # the stored offset is outside the queue: start where the store says
            b.consumer_offset_manager.commit_offset(pop.client, group, topic, queue_id, result.next_begin_offset)
            offset = result.next_begin_offset
            result = store.get_message(group, topic, queue_id, offset, want, pop.message_filter)
            if result is None:
                return
        if result.message_buffers:
            offsets = list(result.message_queue_offsets)
            if pop.fifo:
                counts = self.order_info.update(pop.attempt_id, topic, group, queue_id, pop.pop_time,
                                                pop.invisible_time, offsets)
                for qo, times in counts:
                    pop.order_info.append(queue_id_order_count_item(topic, queue_id, times) if qo is None
                                          else queue_offset_order_count_item(topic, queue_id, qo, times))
                pop.order_counts.update({(topic, queue_id, qo): t for qo, t in counts if qo is not None})
                pop.order_queue_min[(topic, queue_id)] = next(t for qo, t in counts if qo is None)
                b.consumer_offset_manager.commit_offset(pop.client, group, topic, queue_id, offset)
                pop.order_changed = True
            else:
                ck = PopCheckPoint(start_offset=offset, pop_time=pop.pop_time, invisible_time=pop.invisible_time,
                                   bit_map=0, num=len(offsets), queue_id=queue_id, topic=topic, cid=group,
                                   broker_name=self.broker_name)
                for qo in offsets:
                    ck.add_diff(qo - offset)
                msg = build_ck_message(ck, revive_topic=self.revive_topic, revive_qid=pop.revive_qid,
                                       now_ms=self.clock(), store_host=b.store_host, store_port=b.store_port)
                if not self._put(msg):
                    pop.rest_num += result.msg_count
                    return
                # 5.3 commits when the checkpoint is stored (PopBufferMergeService): here that is now
                b.consumer_offset_manager.commit_offset(pop.client, group, topic, queue_id, result.next_begin_offset)
            pop.start_info.append(start_offset_info_item(topic, queue_id, offset))
            pop.msg_info.append(msg_offset_info_item(topic, queue_id, offsets))
            stats: BrokerStatsManager | None = getattr(b, "stats", None)
            if stats is not None:  # 4.9's GROUP_GET_* count pops as they count pulls
                stats.on_get(group, topic, queue_id, result.msg_count, result.buffer_total_size,
                             result.next_begin_offset, 0)
        elif result.status in (GetMessageStatus.NO_MATCHED_MESSAGE, GetMessageStatus.OFFSET_FOUND_NULL,
                               GetMessageStatus.MESSAGE_WAS_REMOVING, GetMessageStatus.NO_MATCHED_LOGIC_QUEUE) \
                and result.next_begin_offset > -1:
            # nothing for this filter up to next_begin_offset: skip it (5.3: a mock checkpoint)
            b.consumer_offset_manager.commit_offset(pop.client, group, topic, queue_id, result.next_begin_offset)
        pop.rest_num += result.max_offset - result.next_begin_offset
        for buf, qo in zip(result.message_buffers, result.message_queue_offsets):
            pop.messages.append(self._popped(pop, buf, topic, queue_id, qo, offset, is_retry))

    def _popped(self, pop: "_Pop", buf: memoryview, topic: str, queue_id: int, queue_offset: int, ck_offset: int,
                is_retry: bool) -> PoppedMessage:
        extra = build_extra_info(ck_offset, pop.pop_time, pop.invisible_time, pop.revive_qid, topic, self.broker_name,
                                 queue_id, queue_offset)
        physical_offset, reconsume = popped_head(buf)
        if pop.fifo:
            count = pop.order_counts.get((topic, queue_id, queue_offset))
            if count is None:
                count = pop.order_queue_min.get((topic, queue_id))
            if count is not None and count > 0:
                reconsume = count
        record: bytes | memoryview = buf
        if is_retry and not getattr(self.broker.broker_config, "popResponseReturnActualRetryTopic", False):
            record = recode_retry_record(buf, pop.request_topic, extra)
        return PoppedMessage(record=record, topic=topic, queue_id=queue_id, queue_offset=queue_offset,
                             commit_log_offset=physical_offset, reconsume_times=reconsume, extra_info=extra,
                             retry=is_retry)

    async def _dead_letter_exhausted(self, group: str, topic: str, result: PopResult, max_attempts: int) -> None:
        keep = []
        for m in result.messages:
            if m.reconsume_times >= max_attempts:
                try:
                    await self.forward_to_dlq(group=group, topic=m.topic, queue_id=m.queue_id, offset=m.queue_offset,
                                              extra_info=m.extra_info)
                    continue
                except PopError as exc:
                    log.warning("pop: dead-lettering %s@%d:%d failed: %s", m.topic, m.queue_id, m.queue_offset,
                                exc.remark)
            keep.append(m)
        result.messages = keep

    # ---- ack -----------------------------------------------------------------------------------------
    async def ack(self, *, group: str, topic: str, queue_id: int, offset: int, extra_info: str) -> None:
        """Acknowledge one popped message: it is never handed out again (ACK_MESSAGE).

        ``topic`` is the topic the message was popped from (``PoppedMessage.topic``; a client
        that only knows the subscribed topic gets it from ``parse_extra_info(x).real_topic``),
        ``offset`` its queue offset. An ack after the invisible time ran out is recorded but the
        message may already be on its way again (as in 5.3). Raises PopError (unknown topic,
        bad queue, offset outside the queue: NO_MESSAGE, bad extra info)."""
        pending = self.ack_now(group=group, topic=topic, queue_id=queue_id, offset=offset, extra_info=extra_info)
        if pending is not None:
            await pending

    def ack_now(self, *, group: str, topic: str, queue_id: int, offset: int,
                extra_info: str | ExtraInfo) -> Awaitable[None] | None:
        """``ack`` up to its only wait: None when the ack is done, else what to await before
        answering (an orderly ack's new offset becoming durable). ``extra_info`` parsed already
        (the proxy's receipt handle) is checked as its text would be."""
        self._check_ack(topic, queue_id, offset)
        x = self._extra(extra_info)
        if x.order:
            self._ack_orderly(topic, group, queue_id, offset, x.pop_time, x.invisible_time)
            return self._durable.wait()
        ack = AckMsg(ack_offset=offset, start_offset=x.ck_queue_offset, consumer_group=group, topic=topic,
                     queue_id=queue_id, pop_time=x.pop_time, broker_name=x.broker_name)
        self._append_ack(ack, x.revive_qid, x.invisible_time)
        return None

    def _check_ack(self, topic: str, queue_id: int, offset: int) -> None:
        """AckMessageProcessor's refusals: unknown topic, bad queue, offset outside the queue."""
        self._check_topic_queue(topic, queue_id, ResponseCode.MESSAGE_ILLEGAL)
        store = self.broker.store
        lo, hi = store.get_min_offset_in_queue(topic, queue_id), store.get_max_offset_in_queue(topic, queue_id)
        if offset < lo or offset > hi:
            raise PopError(ResponseCode.NO_MESSAGE, f"offset is illegal, key:{topic}@{queue_id}, commit:{offset}, "
                                                    f"store:{lo}~{hi}")

    def _append_ack(self, ack: AckMsg, revive_qid: int, invisible_time: int) -> None:
        b = self.broker
        msg = build_ack_message(ack, invisible_time=invisible_time, revive_topic=self.revive_topic,
                                revive_qid=revive_qid, now_ms=self.clock(), store_host=b.store_host,
                                store_port=b.store_port)
        if not self._put(msg):
            log.error("pop: put ack msg error: %s", ack)

    def _ack_orderly(self, topic: str, group: str, queue_id: int, ack_offset: int, pop_time: int,
                     invisible_time: int) -> None:
        """AckMessageProcessor.ackOrderly."""
        com = self.broker.consumer_offset_manager
        old = com.query_offset(group, topic, queue_id)
        if ack_offset < old:
            return
        next_offset = self.order_info.commit_and_next(topic, group, queue_id, ack_offset, pop_time)
        if next_offset > -1:
            com.commit_offset("ackOrderly", group, topic, queue_id, next_offset)
            if not self.order_info.check_block(None, topic, group, queue_id, invisible_time):
                self.polling.notify(topic)
        elif next_offset == -1:
            raise PopError(ResponseCode.MESSAGE_ILLEGAL,
                           f"offset is illegal, key:{topic}@{group}@{queue_id}, old:{old}, commit:{ack_offset}, "
                           f"next:{next_offset}")

    async def batch_ack(self, *, group: str, entries: Sequence[AckEntry]) -> list[PopError | None]:
        """Acknowledge several messages (BATCH_ACK_MESSAGE): entries of one pop (same topic,
        queue, checkpoint and pop time) become one batch-ack record. Returns, per entry, None or
        the PopError that entry alone would have raised."""
        out: list[PopError | None] = [None] * len(entries)
        batches: dict[tuple[str, int, int, int, int, str], list[tuple[int, ExtraInfo]]] = {}
        orderly = False
        for i, e in enumerate(entries):
            try:
                x = self._extra(e.extra_info)
                self._check_ack(e.topic, e.queue_id, e.offset)
                if x.order:
                    self._ack_orderly(e.topic, group, e.queue_id, e.offset, x.pop_time, x.invisible_time)
                    orderly = True
                    continue
                key = (e.topic, e.queue_id, x.ck_queue_offset, x.pop_time, x.revive_qid, x.broker_name)
                batches.setdefault(key, []).append((e.offset, x))
            except PopError as exc:
                out[i] = exc
        for (topic, queue_id, start, pop_time, revive_qid, broker_name), items in batches.items():
            ack = BatchAckMsg(ack_offset=-1, start_offset=start, consumer_group=group, topic=topic, queue_id=queue_id,
                              pop_time=pop_time, broker_name=broker_name, ack_offset_list=[o for o, _ in items])
            self._append_ack(ack, revive_qid, items[0][1].invisible_time)
        if orderly:
            await self._durable.wait()
        return out

    async def batch_ack_records(self, *, broker_name: str | None, acks: Sequence[BatchAck]) -> None:
        """BATCH_ACK_MESSAGE as 5.3 answers it: one batch-ack record per BatchAck of the body
        (offsets outside the queue left out; orderly ones acked one by one)."""
        store = self.broker.store
        orderly = False
        for a in acks:
            group = a.consumer_group
            try:
                topic = real_topic_of_kind(a.topic, group, a.retry)
            except ValueError:
                continue
            if self.broker.topic_config_manager.select_topic_config(topic) is None:
                continue  # 5.3: min/max offset -1 -> "Illegal topic or queue found when batch ack"
            lo, hi = store.get_min_offset_in_queue(topic, a.queue_id), store.get_max_offset_in_queue(topic, a.queue_id)
            offsets = [a.start_offset + i for i in a.bits if lo <= a.start_offset + i <= hi]
            if a.revive_queue_id == POP_ORDER_REVIVE_QUEUE:
                for o in offsets:
                    try:
                        self._ack_orderly(topic, group, a.queue_id, o, a.pop_time, a.invisible_time)
                    except PopError:
                        pass
                orderly = True
                continue
            if not offsets:
                continue
            ack = BatchAckMsg(ack_offset=-1, start_offset=a.start_offset, consumer_group=group, topic=topic,
                              queue_id=a.queue_id, pop_time=a.pop_time, broker_name=broker_name,
                              ack_offset_list=offsets)
            self._append_ack(ack, a.revive_queue_id, a.invisible_time)
        if orderly:
            await self._durable.wait()

    # ---- change invisible time ------------------------------------------------------------------
    async def change_invisible_time(self, *, group: str, topic: str, queue_id: int, offset: int, extra_info: str,
                                    invisible_time_ms: int) -> ChangeInvisibleResult:
        """Make a popped message invisible for ``invisible_time_ms`` from now on instead of
        until its current deadline (CHANGE_MESSAGE_INVISIBLETIME; a negative acknowledgement
        with a backoff is this with the backoff as the time). The old receipt stops working
        for acks once the new one is returned: ack with the returned ``extra_info``."""
        self._check_topic_queue(topic, queue_id, ResponseCode.MESSAGE_ILLEGAL)
        store = self.broker.store
        lo, hi = store.get_min_offset_in_queue(topic, queue_id), store.get_max_offset_in_queue(topic, queue_id)
        if offset < lo or offset >= hi:
            raise PopError(ResponseCode.NO_MESSAGE, "")
        x = self._extra(extra_info)
        if x.order:
            pop_time = x.pop_time
            com = self.broker.consumer_offset_manager
            if offset < com.query_offset(group, topic, queue_id):
                new_invisible = invisible_time_ms
            else:
                next_visible = self.clock() + invisible_time_ms
                self.order_info.update_next_visible_time(topic, group, queue_id, offset, pop_time, next_visible)
                new_invisible = next_visible - pop_time
                await self._durable.wait()
            return ChangeInvisibleResult(pop_time, new_invisible, x.revive_qid,
                                         build_extra_info(offset, pop_time, new_invisible, x.revive_qid, topic,
                                                          self.broker_name, queue_id, offset))
        now = self.clock()
        b = self.broker
        ck = PopCheckPoint(start_offset=offset, pop_time=now, invisible_time=invisible_time_ms, bit_map=0, num=1,
                           queue_id=queue_id, topic=topic, cid=group, broker_name=x.broker_name)
        ck.add_diff(0)
        msg = build_ck_message(ck, revive_topic=self.revive_topic, revive_qid=x.revive_qid, now_ms=now,
                               store_host=b.store_host, store_port=b.store_port)
        if not self._put(msg):
            raise PopError(ResponseCode.SYSTEM_ERROR, "change invisible, put new ck error")
        ack = AckMsg(ack_offset=offset, start_offset=x.ck_queue_offset, consumer_group=group, topic=topic,
                     queue_id=queue_id, pop_time=x.pop_time, broker_name=x.broker_name)
        self._append_ack(ack, x.revive_qid, x.invisible_time)
        return ChangeInvisibleResult(now, invisible_time_ms, x.revive_qid,
                                     build_extra_info(offset, now, invisible_time_ms, x.revive_qid, topic,
                                                      self.broker_name, queue_id, offset))

    # ---- dead letters ------------------------------------------------------------------------------
    async def forward_to_dlq(self, *, group: str, topic: str, queue_id: int, offset: int, extra_info: str,
                             origin_msg_id: str | None = None) -> None:
        """Move a popped message to ``%DLQ%<group>`` and acknowledge it (the proxy's
        ForwardMessageToDeadLetterQueue: CONSUMER_SEND_MSG_BACK with delay level -1, then an ack)."""
        self._check_topic_queue(topic, queue_id, ResponseCode.MESSAGE_ILLEGAL)
        cq = self.broker.store.get_consume_queue(topic, queue_id)
        unit = cq.get_unit(offset) if cq is not None else None
        if unit is None:
            raise PopError(ResponseCode.NO_MESSAGE, f"offset is illegal, key:{topic}@{queue_id}, commit:{offset}")
        code, remark = await self.broker.send_message_back(group=group, commit_log_offset=unit[0], delay_level=-1,
                                                           max_reconsume_times=0)
        if code != ResponseCode.SUCCESS:
            raise PopError(code, remark or "")
        await self.ack(group=group, topic=topic, queue_id=queue_id, offset=offset, extra_info=extra_info)
