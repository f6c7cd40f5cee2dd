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

import enum
from dataclasses import dataclass, field
from typing import Protocol, Sequence

from rmqd.processors.consumer_filter import ConsumerFilterManager
from rmqd.store.consumer_offset import ConsumerOffsetManager
from rmqd.store.message_store import DefaultMessageStore
from rmqd.store.subscription_group import SubscriptionGroupManager
from rmqd.store.topic_config import TopicConfigManager
from rmqd.wire.pop import CONSUME_INIT_MODE_MAX, MAX_POP_NUMS, ExtraInfo, parse_extra_info

__all__ = [
    "AckEntry", "ChangeInvisibleResult", "PopError", "PopResult", "PopService", "PopStatus", "PoppedMessage",
    "ExtraInfo", "parse_extra_info", "MAX_POP_NUMS", "CONSUME_INIT_MODE_MAX",
]


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


class PopBroker(Protocol):
    """What PopService needs from the broker (broker/broker.py's BrokerRole has all of it)."""

    broker_config: PopBrokerConfig
    store: DefaultMessageStore
    topic_config_manager: TopicConfigManager
    subscription_group_manager: SubscriptionGroupManager
    consumer_offset_manager: ConsumerOffsetManager
    consumer_filter_manager: ConsumerFilterManager
    store_host: bytes
    store_port: int


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


class PopService:
    """POP consumption over the broker's store (see the module docstring and docs/pop.md).

    The broker builds one (``BrokerRole.pop_service``) from itself: its store, topic, group,
    offset and filter managers and broker.conf. Other code reaches it there."""

    def __init__(self, broker: "PopBroker") -> None:
        self.broker = broker

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
        raise NotImplementedError

    async def ack(self, *, group: str, topic: str, queue_id: int, offset: int, extra_info: str) -> None:
        """Acknowledge one popped message: it is never handed out again (ACK_MESSAGE).

        ``topic`` is the topic the message was popped from (``PoppedMessage.topic``; a client
        that only knows the subscribed topic gets it from ``parse_extra_info(x).real_topic``),
        ``offset`` its queue offset. An ack after the invisible time ran out is recorded but the
        message may already be on its way again (as in 5.3). Raises PopError (unknown topic,
        bad queue, offset outside the queue: NO_MESSAGE, bad extra info)."""
        raise NotImplementedError

    async def batch_ack(self, *, group: str, entries: Sequence[AckEntry]) -> list[PopError | None]:
        """Acknowledge several messages (BATCH_ACK_MESSAGE): entries of one pop (same topic,
        queue, checkpoint and pop time) become one batch-ack record. Returns, per entry, None or
        the PopError that entry alone would have raised."""
        raise NotImplementedError

    async def change_invisible_time(self, *, group: str, topic: str, queue_id: int, offset: int, extra_info: str,
                                    invisible_time_ms: int) -> ChangeInvisibleResult:
        """Make a popped message invisible for ``invisible_time_ms`` from now on instead of
        until its current deadline (CHANGE_MESSAGE_INVISIBLETIME; a negative acknowledgement
        with a backoff is this with the backoff as the time). The old receipt stops working
        for acks once the new one is returned: ack with the returned ``extra_info``."""
        raise NotImplementedError

    async def forward_to_dlq(self, *, group: str, topic: str, queue_id: int, offset: int, extra_info: str,
                             origin_msg_id: str | None = None) -> None:
        """Move a popped message to ``%DLQ%<group>`` and acknowledge it (the proxy's
        ForwardMessageToDeadLetterQueue: CONSUMER_SEND_MSG_BACK with delay level -1, then an ack)."""
        raise NotImplementedError

    def max_delivery_attempts(self, group: str) -> int:
        """The group's retry policy as a number of deliveries: retryMaxTimes + 1 (the 5.x
        proxy's maxDeliveryAttempts); KeyError-free: an unknown group gets the default 17."""
        raise NotImplementedError
