"""PULL_MESSAGE with long polling (RocketMQ 4.9.8 PullMessageProcessor + PullRequestHoldService).

A pull that finds nothing and carries the suspend flag is held, not answered: it waits up
to the client's suspendTimeoutMillis and is re-run the moment a matching message lands in
its queue (the store's arrival listener) — that is what makes push consumers see a message
within milliseconds without busy polling. A re-run never suspends again and never commits
an offset (brokerAllowSuspend = false in RocketMQ), so a held pull is answered exactly once.

Where the subscription comes from matters for real clients: C++ and ali-ons post it with
every pull (sysFlag bit 2); Go and Java push consumers do not and rely on the one their
HEART_BEAT registered — a pull that outruns its heartbeat gets SUBSCRIPTION_NOT_LATEST,
as the 4.9.8 capture shows.

The response body is the stored record bytes as they are (memoryviews of the commit log),
never decoded and re-encoded.
"""

from __future__ import annotations

import collections
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping

import trio

from rmqd.processors.client_manager import SUB_ALL, enum_name, is_tag_type
from rmqd.processors.consumer_filter import build_filter_data, registered_filter
from rmqd.processors.common import MASTER_ID, java_hashmap_order, perm_readable, suggest_todo
from rmqd.processors.names import guard_names
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand, make_response
from rmqd.wire.headers import PullMessageRequestHeader
from rmqd.wire.message import java_string_hash

log = logging.getLogger("rmqd.pull")

# PullSysFlag bits
FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
FLAG_CLASS_FILTER = 0x8
FLAG_LITE_PULL_MESSAGE = 0x10

#: PullRequestHoldService re-checks every held pull this often even without arrivals.
HOLD_CHECK_INTERVAL_S = 5.0


def _to_int32(value: int) -> int:
    """Java Long.intValue()."""
    value &= 0xFFFFFFFF
    return value - 0x1_0000_0000 if value & 0x8000_0000 else value


@dataclass(slots=True)
class SubscriptionData:
    """The broker's view of one subscription (RocketMQ SubscriptionData)."""

    topic: str
    subString: str = SUB_ALL
    tagsSet: set[str] = field(default_factory=set)
    codeSet: set[int] = field(default_factory=set)
    subVersion: int = 0
    expressionType: str = "TAG"
    classFilterMode: bool = False


class SubscriptionParseError(ValueError):
    pass


def build_subscription_data(topic: str, sub_string: str | None, expression_type: str | None = None,
                            sub_version: int = 0) -> SubscriptionData:
    """FilterAPI.build: a TAG expression "A || B" becomes its tag set and their Java hash codes."""
    if expression_type is None or expression_type == "TAG":
        data = SubscriptionData(topic=topic, subString=sub_string or SUB_ALL, subVersion=sub_version)
        if sub_string and sub_string != SUB_ALL:
            for tag in sub_string.split("||"):
                tag = tag.strip()
                if tag:
                    data.tagsSet.add(tag)
                    data.codeSet.add(java_string_hash(tag))
        return data
    if not sub_string:
        raise SubscriptionParseError(f"Expression can't be null! {expression_type}")
    return SubscriptionData(topic=topic, subString=sub_string, expressionType=expression_type,
                            subVersion=sub_version)


def adopt_subscription(sub: Any) -> SubscriptionData:
    """A heartbeat-registered subscription (wire.bodies object or SubscriptionData) as ours.
    The code set is taken as sent, like RocketMQ (C++ sends none; it also posts its
    subscription with every pull, so that never matters)."""
    if isinstance(sub, SubscriptionData):
        return sub
    code_set = {_to_int32(int(c)) for c in (getattr(sub, "codeSet", None) or ())}
    return SubscriptionData(
        topic=sub.topic,
        subString=getattr(sub, "subString", None) or SUB_ALL,
        tagsSet=set(getattr(sub, "tagsSet", None) or ()),
        codeSet=code_set,
        subVersion=int(getattr(sub, "subVersion", 0) or 0),
        expressionType=getattr(sub, "expressionType", None) or "TAG",
        classFilterMode=bool(getattr(sub, "classFilterMode", False)),
    )


class ExpressionMessageFilter:
    """Tag filter by consume-queue tag code; the client re-checks the tag text.
    Property (SQL92) expressions plug in through `property_matcher` (issue 5)."""

    __slots__ = ("subscription", "property_matcher", "_all", "_codes", "_tag_type")

    def __init__(self, subscription: SubscriptionData | None,
                 property_matcher: Callable[[Mapping[str, str]], bool] | None = None) -> None:
        self.subscription = subscription
        self.property_matcher = property_matcher
        self._tag_type = subscription is None or is_tag_type(subscription.expressionType)
        self._all = (subscription is None or subscription.classFilterMode
                     or (self._tag_type and subscription.subString == SUB_ALL))
        self._codes = frozenset(subscription.codeSet) if subscription is not None else frozenset()

    def is_matched_by_consume_queue(self, tags_code: int | None, cq_ext_unit: Any = None) -> bool:
        if self._all or not self._tag_type or tags_code is None:
            return True
        return _to_int32(tags_code) in self._codes

    def is_matched_by_commit_log(self, msg_buffer: Any = None, properties: Mapping[str, str] | None = None) -> bool:
        if self._tag_type or self.subscription is None or self.subscription.classFilterMode:
            return True
        if self.property_matcher is None:
            return True
        if properties is None and msg_buffer is not None:
            from rmqd.wire.message import decode_record
            properties = decode_record(msg_buffer, 0).properties
        return bool(self.property_matcher(properties or {}))

    # camelCase aliases: the store may call the RocketMQ names
    isMatchedByConsumeQueue = is_matched_by_consume_queue
    isMatchedByCommitLog = is_matched_by_commit_log


@dataclass(eq=False, slots=True)
class _HeldPull:
    offset: int
    message_filter: ExpressionMessageFilter
    woken: trio.Event = field(default_factory=trio.Event)


class PullRequestHoldService:
    """Held pulls by (topic, queueId). All methods run on the trio thread; store threads
    reach `notify_message_arriving` through `arrival_listener` (trio token hop)."""

    def __init__(self, get_max_offset: Callable[[str, int], int]) -> None:
        self._get_max_offset = get_max_offset
        self.table: dict[tuple[str, int], list[_HeldPull]] = {}
        self._token: trio.lowlevel.TrioToken | None = None
        # arrivals from store threads wait here for one trio hop that handles them all
        self._arrivals: collections.deque[tuple] = collections.deque()
        self._hop_pending = False

    def bind_trio(self) -> None:
        self._token = trio.lowlevel.current_trio_token()

    def arrival_listener(self, topic: str, queue_id: int, max_offset: int, tags_code: int | None = None,
                         store_timestamp: int = 0, properties: Mapping[str, str] | None = None,
                         *_: Any) -> None:
        """The store's arrival callback (ReputMessageService: max_offset = the new message's
        queue offset + 1, as NotifyMessageArrivingListener gets it). Safe from any thread."""
        token = self._token
        if token is None or (topic, queue_id) not in self.table:
            # Nothing held on this queue: no trio hop (a wakeup write per message otherwise).
            # No race: hold() registers first and then re-reads the max offset, which the
            # store has already advanced before calling us.
            return
        self._arrivals.append((topic, queue_id, max_offset, tags_code, properties))
        if self._hop_pending:  # a hop is on its way and will take this one too
            return
        self._hop_pending = True
        try:
            token.run_sync_soon(self._drain_arrivals)
        except trio.RunFinishedError:
            self._hop_pending = False

    def _drain_arrivals(self) -> None:
        # reset before draining: an arrival appended after the last popleft below finds
        # the flag down and schedules the next hop itself
        self._hop_pending = False
        arrivals = self._arrivals
        while arrivals:
            self.notify_message_arriving(*arrivals.popleft())

    def notify_message_arriving(self, topic: str, queue_id: int, max_offset: int, tags_code: int | None = None,
                                properties: Mapping[str, str] | None = None) -> None:
        held = self.table.get((topic, queue_id))
        if not held:
            return
        keep = []
        for pull in held:
            newest = max_offset
            if newest <= pull.offset:
                newest = self._get_max_offset(topic, queue_id)
            if newest > pull.offset:
                match = pull.message_filter.is_matched_by_consume_queue(tags_code)
                if match and properties is not None:
                    match = pull.message_filter.is_matched_by_commit_log(None, properties)
                if match:
                    pull.woken.set()
                    continue
            keep.append(pull)
        if keep:
            self.table[(topic, queue_id)] = keep
        else:
            del self.table[(topic, queue_id)]

    def check_hold_requests(self) -> None:
        """checkHoldRequest: wake whatever a missed notification left behind."""
        for topic, queue_id in list(self.table):
            self.notify_message_arriving(topic, queue_id, self._get_max_offset(topic, queue_id))

    async def hold(self, topic: str, queue_id: int, offset: int, timeout_ms: int,
                   message_filter: ExpressionMessageFilter) -> bool:
        """Suspend until a matching message arrives (True) or the timeout passes (False)."""
        pull = _HeldPull(offset, message_filter)
        key = (topic, queue_id)
        self.table.setdefault(key, []).append(pull)
        try:
            # a message may have landed between the store read and now
            if self._get_max_offset(topic, queue_id) > offset:
                self.notify_message_arriving(topic, queue_id, self._get_max_offset(topic, queue_id))
            with trio.move_on_after(max(timeout_ms, 0) / 1000.0):
                await pull.woken.wait()
            return pull.woken.is_set()
        finally:
            held = self.table.get(key)
            if held is not None and pull in held:
                held.remove(pull)
                if not held:
                    del self.table[key]

    def wake_all(self) -> None:
        """Answer every held pull now (broker shutdown): each re-runs once and replies."""
        for held in self.table.values():
            for pull in held:
                pull.woken.set()
        self.table.clear()

    @property
    def held_count(self) -> int:
        return sum(len(v) for v in self.table.values())

    async def run(self, *, interval_s: float = HOLD_CHECK_INTERVAL_S,
                  task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.bind_trio()
        task_status.started()
        while True:
            await trio.sleep(interval_s)
            try:
                self.check_hold_requests()
            except Exception:  # noqa: BLE001
                log.exception("checkHoldRequest failed")


def _status_name(result: Any) -> str:
    status = result.status
    return getattr(status, "name", status)


class PullMessageProcessor:
    def __init__(self, broker: Any) -> None:
        self.broker = broker

    async def pull_message(self, ctx: Any, request: RemotingCommand) -> RemotingCommand | None:
        result = self.pull_message_now(ctx, request)
        if result is None or isinstance(result, RemotingCommand):
            return result
        return await result

    def pull_message_now(self, ctx: Any, request: RemotingCommand) -> RemotingCommand | None | Awaitable[Any]:
        """The answer, or (a pull to suspend) an awaitable of it: the server runs only the
        held part in a task, so a pull that finds messages costs no task at all."""
        header = PullMessageRequestHeader.from_ext(request.ext_fields)
        response, held = self.process(ctx.channel, request, header, allow_suspend=True)
        if held is None:
            return response
        return self._answer_when_woken(ctx, request, header, held)

    async def _answer_when_woken(self, ctx: Any, request: RemotingCommand, header: Any,
                                 held: tuple) -> RemotingCommand | None:
        topic, queue_id, offset, timeout_ms, message_filter = held
        await self.broker.pull_hold_service.hold(topic, queue_id, offset, timeout_ms, message_filter)
        response, _ = self.process(ctx.channel, request, header, allow_suspend=False)
        return response

    def process(self, channel: Any, request: RemotingCommand, h: Any,
                allow_suspend: bool) -> tuple[RemotingCommand | None, tuple | None]:
        """One pass of PullMessageProcessor.processRequest. Returns (response, None), or
        (None, hold parameters) when the pull must be suspended."""
        begin_ns = time.monotonic_ns()
        b = self.broker
        bc = b.broker_config
        if not perm_readable(bc.brokerPermission):
            return make_response(request, ResponseCode.NO_PERMISSION,
                                 f"the broker[{bc.brokerIP1}] pulling message is forbidden", ext_fields={}), None
        group_config = b.subscription_group_manager.find_subscription_group_config(h.consumerGroup)
        if group_config is None:
            return make_response(request, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                 f"subscription group [{h.consumerGroup}] does not exist, "
                                 f"{suggest_todo()}", ext_fields={}), None
        if not group_config.consumeEnable:
            return make_response(request, ResponseCode.NO_PERMISSION,
                                 f"subscription group no permission, {h.consumerGroup}", ext_fields={}), None

        sys_flag = int(h.sysFlag)
        has_suspend = bool(sys_flag & FLAG_SUSPEND)
        has_commit_offset = bool(sys_flag & FLAG_COMMIT_OFFSET)
        has_subscription = bool(sys_flag & FLAG_SUBSCRIPTION)
        suspend_timeout = int(h.suspendTimeoutMillis or 0) if has_suspend else 0

        topic_config = b.topic_config_manager.select_topic_config(h.topic)
        if topic_config is None:
            return make_response(request, ResponseCode.TOPIC_NOT_EXIST,
                                 f"topic[{h.topic}] not exist, apply first please! "
                                 f"{suggest_todo()}", ext_fields={}), None
        if not perm_readable(topic_config.perm):
            return make_response(request, ResponseCode.NO_PERMISSION,
                                 f"the topic[{h.topic}] pulling message is forbidden", ext_fields={}), None
        queue_id = int(h.queueId)
        if queue_id < 0 or queue_id >= topic_config.readQueueNums:
            return make_response(request, ResponseCode.SYSTEM_ERROR,
                                 f"queueId[{queue_id}] is illegal, topic:[{h.topic}] topicConfig.readQueueNums:"
                                 f"[{topic_config.readQueueNums}] consumer:[{channel.remote_addr}]",
                                 ext_fields={}), None

        sub_version = int(getattr(h, "subVersion", 0) or 0)
        filter_data = None
        if has_subscription:
            expression_type = getattr(h, "expressionType", None)
            try:
                subscription = build_subscription_data(h.topic, h.subscription, expression_type, sub_version)
            except Exception:  # noqa: BLE001 - any bad expression is a parse failure
                return make_response(request, ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                     "parse the consumer's subscription failed", ext_fields={}), None
            if not is_tag_type(subscription.expressionType):
                # RocketMQ asserts (assertions off) that this compiled: an expression that does
                # not compile yields no filter data, and then every message matches.
                filter_data = build_filter_data(h.topic, h.consumerGroup, h.subscription, expression_type,
                                                sub_version)
        else:
            group_info = b.consumer_manager.get_consumer_group_info(h.consumerGroup)
            if group_info is None:
                return make_response(request, ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                     "the consumer's group info not exist"
                                     + suggest_todo(), ext_fields={}), None
            if not group_config.consumeBroadcastEnable and enum_name(group_info.message_model) == "BROADCASTING":
                return make_response(request, ResponseCode.NO_PERMISSION,
                                     f"the consumer group[{h.consumerGroup}] can not consume by broadcast way",
                                     ext_fields={}), None
            registered = group_info.find_subscription_data(h.topic)
            if registered is None:
                return make_response(request, ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                     "the consumer's subscription not exist"
                                     + suggest_todo(), ext_fields={}), None
            subscription = adopt_subscription(registered)
            if subscription.subVersion < sub_version:
                return make_response(request, ResponseCode.SUBSCRIPTION_NOT_LATEST,
                                     "the consumer's subscription not latest", ext_fields={}), None
            if not is_tag_type(subscription.expressionType):
                found = registered_filter(b.consumer_filter_manager, h.topic, h.consumerGroup, sub_version)
                if isinstance(found, tuple):
                    return make_response(request, found[0], found[1], ext_fields={}), None
                filter_data = found

        if not is_tag_type(subscription.expressionType) and not bc.enablePropertyFilter:
            return make_response(request, ResponseCode.SYSTEM_ERROR,
                                 f"The broker does not support consumer to filter message by "
                                 f"{subscription.expressionType}", ext_fields={}), None

        message_filter = ExpressionMessageFilter(subscription, filter_data.matches if filter_data is not None else None)
        queue_offset = int(h.queueOffset)
        result = b.store.get_message(h.consumerGroup, h.topic, queue_id, queue_offset, int(h.maxMsgNums),
                                     message_filter)
        response: RemotingCommand | None
        held = None
        if result is None:
            response = make_response(request, ResponseCode.SYSTEM_ERROR, "store getMessage return null",
                                     ext_fields={})
        else:
            status = _status_name(result)
            suggest = MASTER_ID
            slave = b.message_store_config.brokerRole == "SLAVE"
            if bc.slaveReadEnable:
                suggest = (group_config.whichBrokerWhenConsumeSlowly if result.suggest_pulling_from_slave
                           else group_config.brokerId)
            # (RocketMQ also sets PULL_RETRY_IMMEDIATELY on a slave without slaveReadEnable,
            # then overwrites it from the status below: the status alone decides the code.)
            code = _status_to_code(status, queue_offset)
            ext = java_hashmap_order({
                "suggestWhichBrokerId": str(suggest),
                "nextBeginOffset": str(result.next_begin_offset),
                "minOffset": str(result.min_offset),
                "maxOffset": str(result.max_offset),
            })
            response = make_response(request, code, status, ext_fields=ext)
            if code == ResponseCode.SUCCESS:
                response.body = list(result.message_buffers)
                b.stats.on_get(h.consumerGroup, h.topic, queue_id, result.msg_count, result.buffer_total_size,
                               result.next_begin_offset, (time.monotonic_ns() - begin_ns) // 1_000_000)
            elif code == ResponseCode.PULL_NOT_FOUND:
                if allow_suspend and has_suspend:
                    timeout = suspend_timeout if bc.longPollingEnable else bc.shortPollingTimeMills
                    held = (h.topic, queue_id, queue_offset, timeout, message_filter)
                    response = None
            elif code == ResponseCode.PULL_OFFSET_MOVED:
                if not slave or b.message_store_config.offsetCheckInSlave:
                    b.generate_offset_moved_event(h.consumerGroup, h.topic, queue_id, queue_offset,
                                                  result.next_begin_offset)
                else:
                    ext["suggestWhichBrokerId"] = str(group_config.brokerId)
                    response.code = ResponseCode.PULL_RETRY_IMMEDIATELY

        if allow_suspend and has_commit_offset and b.message_store_config.brokerRole != "SLAVE":
            b.consumer_offset_manager.commit_offset(channel.remote_addr, h.consumerGroup, h.topic, queue_id,
                                                    int(h.commitOffset))
        return response, held

    def handlers(self) -> dict[int, Any]:
        return guard_names({RequestCode.PULL_MESSAGE: self.pull_message})

    def inline_handlers(self) -> dict[int, Any]:
        """PULL_MESSAGE on the server's read loop (see broker.server.InlineHandler)."""
        return guard_names({RequestCode.PULL_MESSAGE: self.pull_message_now})


def _status_to_code(status: str, request_offset: int) -> int:
    if status == "FOUND":
        return ResponseCode.SUCCESS
    if status in ("MESSAGE_WAS_REMOVING", "NO_MATCHED_MESSAGE"):
        return ResponseCode.PULL_RETRY_IMMEDIATELY
    if status in ("NO_MATCHED_LOGIC_QUEUE", "NO_MESSAGE_IN_QUEUE"):
        return ResponseCode.PULL_OFFSET_MOVED if request_offset != 0 else ResponseCode.PULL_NOT_FOUND
    if status in ("OFFSET_FOUND_NULL", "OFFSET_OVERFLOW_ONE"):
        return ResponseCode.PULL_NOT_FOUND
    if status in ("OFFSET_OVERFLOW_BADLY", "OFFSET_TOO_SMALL"):
        return ResponseCode.PULL_OFFSET_MOVED
    return ResponseCode.SYSTEM_ERROR


__all__ = [
    "ExpressionMessageFilter", "PullMessageProcessor", "PullRequestHoldService", "SubscriptionData",
    "build_subscription_data", "adopt_subscription",
]
