"""The revive service (RocketMQ 5.x PopReviveService): what brings unacknowledged POP messages back.

Every pop writes a checkpoint and every ack an ack record into the revive topic
``rmq_sys_REVIVE_LOG_<cluster>`` (store/pop.py), both held back by the 5.x timer until the
checkpoint's revive time. This service reads each revive queue in order, pairs acks with their
checkpoint, and once a checkpoint is due puts each message it names that was not acknowledged
into the group's POP retry topic ``%RETRY%<group>_<topic>`` (queue 0, reconsumeTimes + 1,
``1ST_POP_TIME`` kept), where the next pops find it.

Its progress is RocketMQ's: the queue offset of the last checkpoint dealt with, committed in
consumerOffset.json as group ``CID_RMQ_SYS_REVIVE_GROUP`` of the revive topic (5.3's
``reviveOffset``); a restart reads the queue again from there. "Due" is 5.3's rule: the revive
time lies more than ackTimeInterval + 1 s behind the time up to which the timer has delivered
everything (now, unless the timer is behind), so every ack sent in time has arrived.

``recover_offsets`` runs at start-up, before any pop: the checkpoints still in the timer and
those after each revive offset name the last offset each (group, topic, queue) handed out; a
consumer offset behind that is moved up (consumerOffset.json is written every few seconds, the
checkpoints are in the commit log at once, so after a SIGKILL an acknowledged message would
otherwise be popped again). 5.3 does not do this (docs/pop.md).

Source: apache/rocketmq 5.3.3 broker/.../processor/PopReviveService.java.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator

import trio

from rmqd.processors.common import PERM_READ, PERM_WRITE
from rmqd.store.commitlog import MessageExtBrokerInner
from rmqd.store.message_store import GetMessageStatus
from rmqd.store.pop import AckMsg, PopCheckPoint, PopRecordError, build_ck_message, decode_revive_body, java5_properties
from rmqd.store.schedule import PROPERTY_TIMER_OUT_MS, TIMER_TOPIC
from rmqd.wire.bodies import TopicConfig
from rmqd.wire.message import MessageConst, MessageRecord, decode_record, encode_properties_java
from rmqd.wire.names import RETRY_GROUP_TOPIC_PREFIX, group_remark, topic_remark
from rmqd.wire.pop import (
    ACK_TIME_INTERVAL_MS, CK_TAG, PROPERTY_FIRST_POP_TIME, RETRY_QUEUE_NUM, REVIVE_GROUP, SECOND_MS,
    parse_normal_topic, pop_retry_topic,
)

if TYPE_CHECKING:
    from rmqd.processors.pop import PopBroker, PopService

log = logging.getLogger("rmqd.pop.revive")

__all__ = ["PopReviveService", "build_revive_message"]

#: PopReviveService.ckRewriteIntervalsInSeconds: how much later a checkpoint whose messages
#: could not be put back is tried again.
CK_REWRITE_INTERVALS_S = (10, 20, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
LOCAL_HOST = "127.0.0.1"  # PopAckConstants.LOCAL_HOST: the "client" of the revive offset commits
READ_BATCH = 32
MAX_READ_PER_ROUND = 20_000


def build_revive_message(rec: MessageRecord, ck: PopCheckPoint, retry_topic: str, *, store_host: bytes,
                         store_port: int) -> MessageExtBrokerInner:
    """PopReviveService.reviveRetry's message: the original, one more reconsume, into the retry topic."""
    props: dict[str, str] = {}
    tags = rec.tags
    if tags is not None:
        props[MessageConst.PROPERTY_TAGS] = tags
    props.update(rec.properties)
    if rec.reconsume_times == 0 or PROPERTY_FIRST_POP_TIME not in props:
        props[PROPERTY_FIRST_POP_TIME] = str(ck.pop_time)
    return MessageExtBrokerInner(
        topic=retry_topic, queue_id=0, body=bytes(rec.body), properties=props, flag=rec.flag, sys_flag=rec.sys_flag,
        born_timestamp=rec.born_timestamp, born_host=store_host, born_port=store_port, store_host=store_host,
        store_port=store_port, reconsume_times=rec.reconsume_times + 1,
        properties_string=java5_properties(encode_properties_java(props)))


@dataclass(slots=True)
class _ReviveQueue:
    """One revive queue's progress: the committed offset, where reading goes on, and the
    checkpoints read but not yet due (by merge key)."""

    committed: int
    next_read: int
    cks: dict[str, PopCheckPoint] = field(default_factory=dict)


class PopReviveService:
    def __init__(self, service: "PopService") -> None:
        self.service = service
        self.queues: dict[int, _ReviveQueue] = {}

    @property
    def _b(self) -> "PopBroker":
        return self.service.broker

    # ---- reading the revive topic ----------------------------------------------------------------
    def _queue(self, qid: int) -> _ReviveQueue:
        q = self.queues.get(qid)
        if q is None:
            committed = self._b.consumer_offset_manager.query_offset(REVIVE_GROUP, self.service.revive_topic, qid)
            q = self.queues[qid] = _ReviveQueue(committed=committed, next_read=max(committed + 1, 0))
        return q

    def _read(self, qid: int, start: int, limit: int = MAX_READ_PER_ROUND) -> Iterator[tuple[int, MessageRecord]]:
        """(queue offset, record) of the revive queue from ``start``; a start outside the queue
        moves to where the store says (5.3 commits that as the revive offset)."""
        store = self._b.store
        topic = self.service.revive_topic
        offset = start
        read = 0
        while read < limit:
            res = store.get_message(REVIVE_GROUP, topic, qid, offset, READ_BATCH, None)
            if res is None:
                return
            if res.status in (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY):
                if res.next_begin_offset == offset:
                    return
                offset = res.next_begin_offset
                continue
            if not res.message_buffers:
                if res.next_begin_offset > offset and res.status is not GetMessageStatus.OFFSET_OVERFLOW_ONE:
                    offset = res.next_begin_offset  # removed or unreadable units: skip them
                    continue
                return
            for buf, qo in zip(res.message_buffers, res.message_queue_offsets):
                try:
                    yield qo, decode_record(buf, 0)
                except Exception:  # noqa: BLE001 - one bad record must not stop the queue
                    log.exception("revive queue %d: record at %d does not decode", qid, qo)
                read += 1
            offset = res.next_begin_offset

    def _absorb(self, q: _ReviveQueue, qo: int, rec: MessageRecord) -> None:
        """One revive-queue message into the queue's state (consumeReviveMessage)."""
        try:
            item = decode_revive_body(rec.tags, rec.body)
        except PopRecordError as exc:
            log.warning("revive: %s@%d skipped: %s", rec.topic, qo, exc)
            return
        if isinstance(item, PopCheckPoint):
            if not item.topic or not item.cid:
                return
            item.revive_offset = qo
            q.cks[item.merge_key()] = item
        elif isinstance(item, AckMsg):
            ck = q.cks.get(item.merge_key(self.service.broker_name))
            if ck is None:
                return  # 5.3 too drops an ack whose checkpoint it has not seen
            for offset in item.ack_offsets():
                i = ck.index_of_ack(offset)
                if i > -1:
                    ck.set_acked(i)

    # ---- one round --------------------------------------------------------------------------------
    def revive_queue(self, qid: int, now: int) -> None:
        """Read what arrived in revive queue ``qid`` and put back what is due."""
        q = self._queue(qid)
        for qo, rec in self._read(qid, q.next_read):
            self._absorb(q, qo, rec)
            q.next_read = qo + 1
        horizon = self.service.timer_horizon(now)
        committed = q.committed
        for ck in sorted(q.cks.values(), key=lambda c: c.revive_offset):
            if horizon - ck.revive_time <= ACK_TIME_INTERVAL_MS + SECOND_MS:
                break
            self._revive(ck, qid)
            del q.cks[ck.merge_key()]
            committed = ck.revive_offset
        if not q.cks and q.next_read - 1 > committed:
            committed = q.next_read - 1  # only acks of checkpoints already dealt with are left behind
        if committed > q.committed:
            q.committed = committed
            self._b.consumer_offset_manager.commit_offset(LOCAL_HOST, REVIVE_GROUP, self.service.revive_topic, qid,
                                                          committed)

    def _revive(self, ck: PopCheckPoint, qid: int) -> None:
        """reviveMsgFromCk: every unacknowledged message of ``ck`` into the retry topic."""
        b = self._b
        if topic_remark(ck.topic) is not None or group_remark(ck.cid) is not None:
            log.warning("revive queue %d: a checkpoint names an invalid topic or group, skipped", qid)
            return
        normal = parse_normal_topic(ck.topic, ck.cid)
        if b.topic_config_manager.select_topic_config(normal) is None:
            log.warning("revive queue %d: topic %s is gone, checkpoint skipped", qid, ck.topic)
            return
        if b.subscription_group_manager.subscription_group_table.get(ck.cid) is None:
            log.warning("revive queue %d: group %s is gone, checkpoint skipped", qid, ck.cid)
            return
        store = b.store
        cq = store.get_consume_queue(ck.topic, ck.queue_id)
        retry_topic = ck.topic if ck.topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else \
            pop_retry_topic(ck.topic, ck.cid, bool(b.broker_config.enableRetryTopicV2))
        if topic_remark(retry_topic) is not None:  # the group/topic pair makes too long a name
            log.warning("revive queue %d: retry topic %s is not a valid topic, checkpoint skipped", qid,
                        retry_topic[:200])
            return
        for j, offset in ck.message_offsets():
            if ck.is_acked(j):
                continue
            unit = cq.get_unit(offset) if cq is not None else None
            rec = store.look_message_by_offset(unit[0], unit[1]) if unit is not None else None
            if rec is None:
                log.info("revive queue %d: %s@%d:%d is no longer stored, not revived", qid, ck.topic, ck.queue_id,
                         offset)
                continue
            self._ensure_retry_topic(retry_topic, ck.cid)
            msg = build_revive_message(rec, ck, retry_topic, store_host=b.store_host, store_port=b.store_port)
            result = store.put_message(msg)
            if result is None or not result.is_ok():
                log.error("revive queue %d: putting %s@%d:%d back failed: %s", qid, ck.topic, ck.queue_id, offset,
                          getattr(result, "putMessageStatus", None))
                self._re_put_ck(ck, offset, qid)

    def _ensure_retry_topic(self, topic: str, group: str) -> None:
        """addRetryTopicIfNotExist + initPopRetryOffset."""
        b = self._b
        if b.topic_config_manager.select_topic_config(topic) is not None:
            return
        b.topic_config_manager.update_topic_config(TopicConfig(
            topicName=topic, readQueueNums=RETRY_QUEUE_NUM, writeQueueNums=RETRY_QUEUE_NUM,
            perm=PERM_READ | PERM_WRITE))
        if b.consumer_offset_manager.query_offset(group, topic, 0) < 0:
            b.consumer_offset_manager.commit_offset("initPopRetryOffset", group, topic, 0, 0)
        register = getattr(b, "register_soon", None)
        if register is not None:
            register()

    def _re_put_ck(self, old: PopCheckPoint, offset: int, qid: int) -> None:
        """rePutCK: a checkpoint of the one message, due again later (rePutTimes counts)."""
        times = old.parse_re_put_times()
        ck = PopCheckPoint(start_offset=offset, pop_time=old.pop_time, invisible_time=old.invisible_time, bit_map=0,
                           num=1, queue_id=old.queue_id, topic=old.topic, cid=old.cid, broker_name=old.broker_name,
                           re_put_times=str(times + 1))
        ck.add_diff(0)
        now = self.service.clock()
        if old.revive_time <= now:
            ck.invisible_time = old.invisible_time + CK_REWRITE_INTERVALS_S[min(times, len(CK_REWRITE_INTERVALS_S) - 1)] * 1000
        b = self._b
        self.service.put_revive_record(build_ck_message(ck, revive_topic=self.service.revive_topic, revive_qid=qid,
                                                        now_ms=now, store_host=b.store_host, store_port=b.store_port))

    async def run(self) -> None:
        """Every reviveInterval, each revive queue (all on the trio thread: store calls are inline)."""
        while True:
            await trio.sleep(max(int(self._b.broker_config.reviveInterval), 100) / 1000)
            if getattr(self._b.store.config, "brokerRole", "") == "SLAVE":
                continue
            n = max(int(self._b.broker_config.reviveQueueNum), 1)
            for qid in range(n):
                try:
                    self.revive_queue(qid, self.service.clock())
                except Exception:  # noqa: BLE001 - keep reviving the other queues and the next rounds
                    log.exception("revive queue %d failed", qid)
                await trio.sleep(0)

    # ---- start-up -----------------------------------------------------------------------------------
    def recover_offsets(self) -> int:
        """Move every POP consumer offset past the messages stored checkpoints handed out; the
        number of offsets moved."""
        popped: dict[tuple[str, str, int], int] = {}

        def note(ck: PopCheckPoint) -> None:
            offsets = ck.message_offsets()
            if not offsets or topic_remark(ck.topic) is not None or group_remark(ck.cid) is not None:
                return
            last = max(o for _, o in offsets)
            key = (ck.cid, ck.topic, ck.queue_id)
            popped[key] = max(popped.get(key, -1), last + 1)

        n = max(int(self._b.broker_config.reviveQueueNum), 1)
        for qid in range(n):
            q = self._queue(qid)
            for _qo, rec in self._read(qid, q.next_read, limit=10 ** 9):
                try:
                    item = decode_revive_body(rec.tags, rec.body)
                except PopRecordError:
                    continue
                if isinstance(item, PopCheckPoint):
                    note(item)
        for rec in self._pending_timer_records():
            if rec.properties.get(MessageConst.PROPERTY_REAL_TOPIC) != self.service.revive_topic or rec.tags != CK_TAG:
                continue
            try:
                item = decode_revive_body(CK_TAG, rec.body)
            except PopRecordError:
                continue
            if isinstance(item, PopCheckPoint):
                note(item)
        com = self._b.consumer_offset_manager
        moved = 0
        store = self._b.store
        for (group, topic, queue_id), upto in popped.items():
            # never past the queue's end (a checkpoint of a deleted and re-created topic)
            cq = store.get_consume_queue(topic, queue_id)
            if cq is None:
                continue
            upto = min(upto, cq.get_max_offset_in_queue())
            if com.query_offset(group, topic, queue_id) < upto:
                com.commit_offset("recoverPopOffset", group, topic, queue_id, upto)
                moved += 1
        if moved:
            log.info("pop: %d consumer offsets moved past their stored checkpoints", moved)
        return moved

    def _pending_timer_records(self) -> Iterator[MessageRecord]:
        """The timer queue's records from its undelivered floor (store/schedule.py)."""
        store = self._b.store
        cq = store.get_consume_queue(TIMER_TOPIC, 0)
        if cq is None:
            return
        start = self.service.timer_floor()
        end = cq.get_max_offset_in_queue()
        for offset in range(max(start, cq.get_min_offset_in_queue()), end):
            unit = cq.get_unit(offset)
            if unit is None or unit[1] == 0x7FFFFFFF:
                continue
            rec = store.look_message_by_offset(unit[0], unit[1])
            if rec is not None and PROPERTY_TIMER_OUT_MS in rec.properties:
                yield rec
