"""QUERY_ASSIGNMENT (400) and SET_MESSAGE_REQUEST_MODE (401): the broker-side queue assignment of
RocketMQ 5.x (QueryAssignmentProcessor), which is how a 5.x Remoting push consumer with
``setClientRebalance(false)`` learns its queues and whether to pull or to pop.

SET_MESSAGE_REQUEST_MODE (``mqadmin setConsumeMode -t T -g G -m POP``) records the mode of
(topic, group) in config/messageRequestMode.json. QUERY_ASSIGNMENT answers the queues of the
topic (from the name server's route, so every broker's queues; this broker's own when the
name server cannot be asked) with that mode: POP hands every client all queues as queue id -1
("pop from any queue", popShareQueueNum 0); PULL divides them as the client's strategy would
(AllocateMessageQueueAveragely "AVG" or AllocateMessageQueueAveragelyByCircle "AVG_BY_CIRCLE").

Source: apache/rocketmq 5.3.3 broker/.../processor/QueryAssignmentProcessor.java,
client/.../rebalance/AllocateMessageQueueAveragely*.java.
"""

from __future__ import annotations

import logging
from typing import Any, Awaitable, Callable, Protocol

from rmqd.processors.names import guard_names
from rmqd.store.message_request_mode import MessageRequestModeManager, SetMessageRequestMode
from rmqd.wire import fastjson
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.errors import WireError
from rmqd.wire.frame import RemotingCommand, make_response
from rmqd.wire.names import RETRY_GROUP_TOPIC_PREFIX

log = logging.getLogger("rmqd.assignment")

__all__ = ["AssignmentProcessor", "allocate_averagely", "allocate_averagely_by_circle"]

Queue = tuple[str, str, int]  # (topic, brokerName, queueId): MessageQueue's sort order


def allocate_averagely(client_id: str, mq_all: list[Queue], cid_all: list[str]) -> list[Queue]:
    """AllocateMessageQueueAveragely.allocate."""
    if client_id not in cid_all or not mq_all:
        return []
    index = cid_all.index(client_id)
    mod = len(mq_all) % len(cid_all)
    if len(mq_all) <= len(cid_all):
        average = 1
    elif mod > 0 and index < mod:
        average = len(mq_all) // len(cid_all) + 1
    else:
        average = len(mq_all) // len(cid_all)
    start = index * average if mod > 0 and index < mod else index * average + mod
    rng = min(average, len(mq_all) - start)
    return [mq_all[(start + i) % len(mq_all)] for i in range(max(rng, 0))]


def allocate_averagely_by_circle(client_id: str, mq_all: list[Queue], cid_all: list[str]) -> list[Queue]:
    """AllocateMessageQueueAveragelyByCircle.allocate."""
    if client_id not in cid_all:
        return []
    index = cid_all.index(client_id)
    return [mq for i, mq in enumerate(mq_all) if i % len(cid_all) == index]


STRATEGIES: dict[str, Callable[[str, list[Queue], list[str]], list[Queue]]] = {
    "AVG": allocate_averagely,
    "AVG_BY_CIRCLE": allocate_averagely_by_circle,
}


class AssignmentBroker(Protocol):
    """What the processor needs from the broker (broker/broker.py's BrokerRole)."""

    topic_config_manager: Any  # store.topic_config.TopicConfigManager
    subscription_group_manager: Any  # store.subscription_group.SubscriptionGroupManager
    consumer_manager: Any  # processors.client_manager.ConsumerManager

    def topic_route_queues(self, topic: str) -> Awaitable[list[tuple[str, int]] | None]:
        """(brokerName, queueId) of every readable queue of ``topic`` in the cluster, or None."""
        ...


def _body(request: RemotingCommand) -> dict[str, Any]:
    try:
        obj = fastjson.loads(bytes(request.body or b"").decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise WireError(f"request body is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise WireError("request body is not a JSON object")
    return obj


class AssignmentProcessor:
    def __init__(self, broker: AssignmentBroker, modes: MessageRequestModeManager) -> None:
        self.broker = broker
        self.modes = modes

    def handlers(self) -> dict[int, Any]:
        return guard_names({RequestCode.QUERY_ASSIGNMENT: self.query_assignment,
                            RequestCode.SET_MESSAGE_REQUEST_MODE: self.set_message_request_mode})

    async def query_assignment(self, ctx: Any, request: RemotingCommand) -> RemotingCommand:
        body = _body(request)
        topic = str(body.get("topic") or "")
        group = str(body.get("consumerGroup") or "")
        client_id = str(body.get("clientId") or "")
        strategy = str(body.get("strategyName") or "")
        model = str(body.get("messageModel") or "CLUSTERING")
        mode = self.modes.get_mode(topic, group)
        if mode is None:  # retry topics always pull; defaultMessageRequestMode is PULL
            mode = SetMessageRequestMode(topic=topic, consumer_group=group, mode="PULL")
        queues = await self._load_balance(topic, group, client_id, model, strategy, mode)
        out: dict[str, Any] = {}
        if queues is not None:
            out["messageQueueAssignments"] = [
                {"messageQueue": {"brokerName": b, "queueId": q, "topic": t}, "mode": mode.mode}
                for t, b, q in sorted(set(queues))]
        return make_response(request, ResponseCode.SUCCESS, body=fastjson.dumps(out).encode("utf-8"))

    async def _load_balance(self, topic: str, group: str, client_id: str, model: str, strategy: str,
                            mode: SetMessageRequestMode) -> list[Queue] | None:
        route = await self.broker.topic_route_queues(topic)
        if route is None:
            return None
        mq_set = sorted({(topic, b, q) for b, q in route})
        if model == "BROADCASTING":
            return mq_set
        if model != "CLUSTERING":
            return None
        info = self.broker.consumer_manager.get_consumer_group_info(group)
        if info is None:
            return None
        cid_all = sorted(info.get_all_client_id())
        allocate = STRATEGIES.get(strategy)
        if allocate is None:
            log.warning("QueryLoad: unsupported strategy [%s]", strategy)
            return None
        if mode.mode == "POP":
            share = mode.pop_share_queue_num
            if share <= 0 or share >= len(cid_all) - 1:
                return [(t, b, -1) for t, b, _q in mq_set]
            if len(cid_all) <= len(mq_set):
                result = allocate(client_id, mq_set, cid_all)
                if client_id in cid_all:
                    index = cid_all.index(client_id)
                    for _ in range(share):
                        index = (index + 1) % len(cid_all)
                        result += allocate(cid_all[index], mq_set, cid_all)
                return result
            if client_id not in cid_all or not mq_set:
                return []
            return [mq_set[cid_all.index(client_id) % len(mq_set)]]
        return allocate(client_id, mq_set, cid_all)

    async def set_message_request_mode(self, ctx: Any, request: RemotingCommand) -> RemotingCommand:
        try:
            body = SetMessageRequestMode.from_json_obj(_body(request))
        except ValueError as exc:
            raise WireError(f"SetMessageRequestModeRequestBody: {exc}") from None
        if body.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return make_response(request, ResponseCode.NO_PERMISSION, "retry topic is not allowed to set mode")
        if self.broker.topic_config_manager.select_topic_config(body.topic) is None:
            return make_response(request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{body.topic}] not exist")
        if self.broker.subscription_group_manager.find_subscription_group_config(body.consumer_group) is None:
            return make_response(request, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "subscription group does not exist")
        self.modes.set_mode(body)
        self.modes.persist()
        return make_response(request, ResponseCode.SUCCESS)
