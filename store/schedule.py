"""ScheduleMessageService: delivers delayed messages (4.9.8 delay levels) and 5.x timer messages.

Delay levels (RocketMQ 4.9.8, byte for byte): the commit log (``CommitLog._apply_delay``) stores a
message with ``DELAY=n`` in ``SCHEDULE_TOPIC_XXXX`` queue ``n-1`` with ``REAL_TOPIC`` /
``REAL_QID``; the dispatcher writes the delivery time (store time + level delay) as the consume
queue tag code. Each level's queue is therefore ordered by delivery time, and the service only
keeps one offset per level: it re-puts the due messages to their real topic/queue in queue
order and records ``level -> next offset`` in ``delayOffset.json`` (``store/delay_offset.py``).
The re-put record keeps the schedule copy's property string (``DELAY``, ``REAL_TOPIC`` and
``REAL_QID`` stay, as in the fixture store) while ``DELAY`` is removed from the property map
so the commit log does not schedule it again — exactly what ``messageTimeup`` does.

No loss / no duplicate across restarts: the offset of a level only moves after the put of
that message succeeded, and the table is persisted after every tick that moved it (RocketMQ
persists every ``flushDelayOffsetInterval``; persisting sooner narrows the window in which a
SIGKILL can cause a re-delivery — at-least-once, never a loss).

5.x timer messages (``TIMER_DELIVER_MS`` absolute ms, ``TIMER_DELAY_SEC``, ``TIMER_DELAY_MS``):
``apply_timer`` (called by the send path before ``put_message``, as 5.x's
``HookUtils.handleScheduleMessage``) moves a message that is due in the future to topic
``rmq_sys_wheel_timer`` queue 0 with ``TIMER_OUT_MS`` (rounded down to ``timerPrecisionMs``),
``REAL_TOPIC`` and ``REAL_QID``; a ``DELAY`` level wins over timer properties and a time in the
past is delivered at once, as in 5.x. Instead of 5.x's timer wheel files the service keeps the
not-yet-due timer messages in a heap loaded from that queue, delivers them in time order, and
persists its progress (the lowest undelivered queue offset plus the offsets above it already
delivered) in ``config/rmqdTimerOffset.json`` — so arbitrary delays survive restarts the same way.

The service is plain calls: ``tick(now_ms)`` does one round and returns when it wants to be
called next; ``start()`` runs ticks on a daemon thread (no trio in store/).
"""

from __future__ import annotations

import heapq
import logging
import os
import struct
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from rmqd.store.commitlog import SCHEDULE_TOPIC, MessageExtBrokerInner
from rmqd.store.config_files import ConfigManager, config_path
from rmqd.store.consumequeue import CQ_STORE_UNIT_SIZE, ConsumeQueue
from rmqd.store.delay_offset import DelayOffsetManager
from rmqd.wire.message import MessageConst, MessageRecord, MessageSysFlag, encode_properties, encode_properties_java

log = logging.getLogger("rmqd.schedule")

__all__ = [
    "ScheduleMessageService",
    "TimerProgress",
    "parse_delay_levels",
    "apply_timer",
    "timer_illegal_remark",
    "TIMER_TOPIC",
    "PROPERTY_TIMER_DELIVER_MS",
    "PROPERTY_TIMER_DELAY_SEC",
    "PROPERTY_TIMER_DELAY_MS",
    "PROPERTY_TIMER_OUT_MS",
]

TIMER_TOPIC = "rmq_sys_wheel_timer"  # TimerMessageStore.TIMER_TOPIC (5.x)
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
PROPERTY_TIMER_DELAY_MS = "TIMER_DELAY_MS"
PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"
RMQ_SYS_TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TIMER_PROGRESS_JSON = "rmqdTimerOffset.json"

_LEVEL_RUN_BYTES = 1024 * CQ_STORE_UNIT_SIZE  # at most this much of a level's queue copied per read
DELAY_FOR_A_WHILE = 100  # ms between rounds when something is pending (RocketMQ's value)
IDLE_WAIT = 100  # ms: new delayed messages are looked at this often (RocketMQ polls every 100 ms)
_TRAN_MASK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE  # MessageSysFlag.getTransactionValue's mask
_TIMED_TRAN_TYPES = (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE)
_TIME_UNITS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(message_delay_level: str) -> dict[int, int]:
    """``parseDelayLevel``: "1s 5s ... 2h" -> {1: 1000, 2: 5000, ...}; ValueError names the bad item."""
    table: dict[int, int] = {}
    for i, item in enumerate(message_delay_level.split(" "), 1):
        unit = item[-1:]
        if unit not in _TIME_UNITS or not item[:-1].lstrip("+-").isdigit():
            raise ValueError(f"messageDelayLevel: cannot parse level {i} {item!r}")
        table[i] = int(item[:-1]) * _TIME_UNITS[unit]
    return table


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class ScheduleStore(Protocol):
    """What the service needs from DefaultMessageStore."""

    def get_consume_queue(self, topic: str, queue_id: int) -> Any: ...

    def look_message_by_offset(self, commit_log_offset: int, size: int | None = None) -> MessageRecord | None: ...

    def put_message(self, msg: MessageExtBrokerInner) -> Any: ...


# ------------------------------------------------------------------------------------------------
# 5.x timer properties
# ------------------------------------------------------------------------------------------------

def timer_illegal_remark(timer_max_delay_sec: int) -> str:
    """The send response remark (code MESSAGE_ILLEGAL) for WHEEL_TIMER_MSG_ILLEGAL in 5.x."""
    return (f"timer message illegal, the delay time should not be bigger than the max delay "
            f"{timer_max_delay_sec * 1000}ms; or if set del msg, the delay time should be bigger than "
            f"the current time")


def _parse_java_long(text: str) -> int:
    body = text[1:] if text[:1] in "+-" else text
    if not body.isdigit() or not body.isascii():
        raise ValueError(text)
    value = int(text)
    if not -(2**63) <= value < 2**63:
        raise ValueError(text)
    return value


def apply_timer(msg: MessageExtBrokerInner, now_ms: int | None = None, *, timer_max_delay_sec: int = 259200,
                timer_precision_ms: int = 1000) -> str | None:
    """Map 5.x timer properties onto delivery (``HookUtils.handleScheduleMessage``'s timer part).

    Returns None when the message may be put (possibly moved to TIMER_TOPIC), or the remark of
    the MESSAGE_ILLEGAL answer. Call it on client sends before ``put_message``."""
    if msg.sys_flag & _TRAN_MASK not in _TIMED_TRAN_TYPES:
        return None
    props = msg.properties
    # the usual send has none of the three: decided by three dict lookups, before the delay
    # level's parse (this runs on every send)
    if not (PROPERTY_TIMER_DELIVER_MS in props or PROPERTY_TIMER_DELAY_SEC in props
            or PROPERTY_TIMER_DELAY_MS in props):
        return None
    timer_keys = (PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELAY_MS)
    if msg.delay_time_level > 0:
        # a delay level wins: the timer properties are dropped
        for k in timer_keys:
            props.pop(k, None)
        msg.properties_string = encode_properties_java(props)
        return None
    if msg.topic == TIMER_TOPIC or PROPERTY_TIMER_OUT_MS in props:
        return None
    now = _now_ms() if now_ms is None else now_ms
    try:
        if PROPERTY_TIMER_DELAY_SEC in props:
            deliver_ms = now + _parse_java_long(props[PROPERTY_TIMER_DELAY_SEC]) * 1000
        elif PROPERTY_TIMER_DELAY_MS in props:
            deliver_ms = now + _parse_java_long(props[PROPERTY_TIMER_DELAY_MS])
        else:
            deliver_ms = _parse_java_long(props[PROPERTY_TIMER_DELIVER_MS])
    except ValueError:
        return timer_illegal_remark(timer_max_delay_sec)
    if deliver_ms <= now:
        return None  # due already: stored in its own topic like any message
    if deliver_ms - now > timer_max_delay_sec * 1000:
        return timer_illegal_remark(timer_max_delay_sec)
    if deliver_ms % timer_precision_ms == 0:
        deliver_ms -= timer_precision_ms
    else:
        deliver_ms = deliver_ms // timer_precision_ms * timer_precision_ms
    props[PROPERTY_TIMER_OUT_MS] = str(deliver_ms)
    props[MessageConst.PROPERTY_REAL_TOPIC] = msg.topic
    props[MessageConst.PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    msg.properties_string = encode_properties_java(props)  # HookUtils: the HashMap re-encoded
    msg.topic = TIMER_TOPIC
    msg.queue_id = 0
    return None


class TimerProgress(ConfigManager):
    """``config/rmqdTimerOffset.json``: ``{"floorOffset": n, "delivered": [offsets >= n]}``.

    5.x's own progress file, ``config/timercheck`` (TimerCheckpoint: big-endian longs
    lastReadTimeMs, lastTimerLogFlushPos, lastTimerQueueOffset, masterTimerQueueOffset and the
    data version, in a 4 KiB page), is read when rmqd's is missing - a store written by Apache
    RocketMQ 5.x: what it enqueued below lastTimerQueueOffset is delivered up to lastReadTimeMs,
    the rest is pending - and written beside rmqd's on every persist, with the undelivered floor
    as its queue offsets, so a 5.x broker on this store resumes from there (re-delivering what
    rmqd delivered above the floor: at least once)."""

    def __init__(self, store_path_root_dir: Any) -> None:
        super().__init__(config_path(store_path_root_dir, TIMER_PROGRESS_JSON))
        self.floor_offset = 0
        self.delivered: set[int] = set()
        self.timercheck_path = config_path(store_path_root_dir, TIMER_CHECKPOINT)
        # from a 5.x timercheck (rmqd's own file missing): (lastReadTimeMs, lastTimerQueueOffset)
        self.imported: tuple[int, int] | None = None
        self.read_time_ms = 0  # what the next timercheck says as lastReadTimeMs

    def load(self) -> bool:
        fresh = not self.path.exists() and not self.path.with_name(self.path.name + ".bak").exists()
        ok = super().load()
        if ok and fresh:
            check = read_timercheck(self.timercheck_path)
            if check is not None:
                last_read, _flush_pos, last_queue_offset, master = check[:4]
                self.imported = (last_read, min(last_queue_offset, master))
        return ok

    def persist(self) -> None:
        super().persist()
        write_timercheck(self.timercheck_path, self.read_time_ms, self.floor_offset)

    def encode_obj(self) -> Any:
        return {"delivered": sorted(self.delivered), "floorOffset": self.floor_offset}

    def decode_obj(self, obj: Any) -> None:
        self.floor_offset = int(obj.get("floorOffset", 0))
        self.delivered = {int(x) for x in obj.get("delivered") or ()}


TIMER_CHECKPOINT = "timercheck"
_TIMERCHECK = struct.Struct(">7q")
_OS_PAGE_SIZE = 4096


def read_timercheck(path: Any) -> tuple[int, ...] | None:
    """config/timercheck's seven longs, or None when there is no such file (or it is short)."""
    try:
        with open(path, "rb") as f:
            data = f.read(_TIMERCHECK.size)
    except OSError:
        return None
    if len(data) < 32:
        return None
    return _TIMERCHECK.unpack(data.ljust(_TIMERCHECK.size, b"\0"))


def write_timercheck(path: Any, last_read_time_ms: int, queue_offset: int) -> None:
    """TimerCheckpoint.flush's layout: no timer log (flush position 0), lastTimerQueueOffset =
    masterTimerQueueOffset = ``queue_offset``, data version (0, now, 0); a 4 KiB page like 5.x's."""
    data = _TIMERCHECK.pack(last_read_time_ms, 0, queue_offset, queue_offset, 0, _now_ms(), 0)
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        f.write(data.ljust(_OS_PAGE_SIZE, b"\0"))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# ------------------------------------------------------------------------------------------------
# the service
# ------------------------------------------------------------------------------------------------

def _units_from(cq: ConsumeQueue, offset: int, limit: int | None = None) -> bytes | None:
    """The written units from queue offset ``offset`` to the end of its file (at most ``limit``
    bytes), copied out of the mapping at once (a unit at a time reads an unmapped file with four
    system calls, each a GIL wait for the broker's loop); None below the min offset or past the end."""
    view = cq.get_index_buffer(offset)
    if view is None:
        return None
    with view:
        return bytes(view[:limit])


def message_timeup(rec: MessageRecord) -> MessageExtBrokerInner:
    """The real-topic copy of a due schedule/timer message (``messageTimeup``).

    The written property string is the stored one re-encoded (DELAY included); the map loses
    DELAY so the commit log does not schedule the copy again, and gains WAIT=false."""
    props = dict(rec.properties)
    props_string = _properties_string_of(rec)
    props.pop(MessageConst.PROPERTY_DELAY_TIME_LEVEL, None)
    props[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = "false"
    topic = props.get(MessageConst.PROPERTY_REAL_TOPIC) or ""
    try:
        queue_id = int(props.get(MessageConst.PROPERTY_REAL_QUEUE_ID, ""))
    except ValueError:
        queue_id = 0
    return MessageExtBrokerInner(
        topic=topic, queue_id=queue_id, body=bytes(rec.body), properties=props, flag=rec.flag,
        sys_flag=rec.sys_flag, born_timestamp=rec.born_timestamp, born_host=rec.born_ip,
        born_port=rec.born_port, store_host=rec.store_ip, store_port=rec.store_port,
        reconsume_times=rec.reconsume_times, properties_string=props_string,
    )


def _properties_string_of(rec: MessageRecord) -> str:
    raw = rec.properties_raw
    if raw:
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            pass
    return encode_properties(rec.properties)


class ScheduleMessageService:
    """Delay levels from SCHEDULE_TOPIC_XXXX and 5.x timers from rmq_sys_wheel_timer."""

    def __init__(self, store: Any, delay_offsets: DelayOffsetManager, message_delay_level: str | Mapping[int, int],
                 *, timer_progress: TimerProgress | None = None, clock: Callable[[], int] = _now_ms,
                 persist_interval_ms: int = 0) -> None:
        self.store = store
        self.offsets = delay_offsets
        self.delay_level_table = (parse_delay_levels(message_delay_level)
                                  if isinstance(message_delay_level, str) else dict(message_delay_level))
        self.max_delay_level = max(self.delay_level_table, default=0)
        self.timer = timer_progress
        self.clock = clock
        self.persist_interval_ms = persist_interval_ms
        self._dirty = False
        self._last_persist = 0
        self._timer_heap: list[tuple[int, int, int, int]] = []  # (deliver_ms, cq offset, phy, size)
        self._timer_scan = 0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._started = False
        #: on_delivered(level, topic, msg_num, wrote_bytes) after a delayed message reached its
        #: topic (the broker's statistics); called on the service's thread
        self.on_delivered: Callable[[int, str, int, int], None] | None = None

    # ---- lifecycle -------------------------------------------------------------------------
    def load(self) -> bool:
        """Load delayOffset.json (and timer progress) and clamp offsets into each queue's range."""
        ok = self.offsets.load()
        self.correct_delay_offset()
        if self.timer is not None:
            ok = self.timer.load() and ok
            self._timer_scan = self.timer.floor_offset
        return ok

    def correct_delay_offset(self) -> None:
        for level in self.delay_level_table:
            cq = self.store.get_consume_queue(SCHEDULE_TOPIC, level - 1)
            if cq is not None:
                self.offsets.correct_delay_offset(level, cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue())

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="ScheduleMessageTimerThread", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        if self._started:
            self._started = False
            self._stop.set()
            if self._thread is not None:
                self._thread.join(timeout=5)
        self.persist()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                wake = self.tick()
                wait = max(min(wake - self.clock(), IDLE_WAIT), 1)
            except Exception:  # keep delivering after a bad round, like DELAY_FOR_A_PERIOD
                log.exception("schedule tick failed")
                wait = 10_000
            self._stop.wait(wait / 1000.0)

    def persist(self) -> None:
        with self._lock:
            self._persist_locked()

    def _persist_locked(self) -> None:
        self.offsets.persist()
        if self.timer is not None:
            self._update_timer_floor()
            self.timer.persist()
        self._dirty = False
        self._last_persist = self.clock()

    # ---- one round ---------------------------------------------------------------------------
    def compute_deliver_timestamp(self, level: int, store_timestamp: int) -> int:
        delay = self.delay_level_table.get(level)
        return store_timestamp + (delay if delay is not None else 1000)

    def tick(self, now_ms: int | None = None) -> int:
        """Deliver everything due at ``now_ms``; return the time (ms) of the next useful call."""
        with self._lock:
            now = self.clock() if now_ms is None else now_ms
            wake = now + IDLE_WAIT
            for level in sorted(self.delay_level_table):
                wake = min(wake, self._deliver_level(level, now))
            if self.timer is not None:
                wake = min(wake, self._deliver_timers(now))
            if self._dirty and now - self._last_persist >= self.persist_interval_ms:
                self._persist_locked()
            return wake

    def _deliver_level(self, level: int, now: int) -> int:
        cq = self.store.get_consume_queue(SCHEDULE_TOPIC, level - 1)
        if cq is None:
            return now + IDLE_WAIT
        offset = self.offsets.get_offset(level) or 0
        start = offset
        delay = self.delay_level_table[level]
        wake = now + IDLE_WAIT
        while True:
            units = _units_from(cq, offset, _LEVEL_RUN_BYTES)
            if units is None:
                lo, hi = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()
                if lo > offset:
                    offset = lo
                    continue
                if hi < offset:
                    offset = hi
                break
            if len(units) < CQ_STORE_UNIT_SIZE:  # a unit still being written
                break
            stop = False
            for phy, size, tags_code in ConsumeQueue.iter_buffer(units):
                if size == 0x7FFFFFFF:  # pre-blank unit of a queue that starts mid-file
                    offset += 1
                    continue
                deliver = tags_code if tags_code <= now + delay else now  # correctDeliverTimestamp
                if deliver > now:
                    wake = min(wake, deliver)
                    stop = True
                    break
                rec = self.store.look_message_by_offset(phy, size)
                if rec is not None:
                    inner = message_timeup(rec)
                    if inner.topic != RMQ_SYS_TRANS_HALF_TOPIC:
                        result = self.store.put_message(inner)
                        if result is None or not result.is_ok():
                            log.warning("schedule: delivering level %d offset %d failed: %s", level, offset,
                                        getattr(result, "putMessageStatus", None))
                            wake = now + DELAY_FOR_A_WHILE
                            stop = True
                            break
                        if self.on_delivered is not None and result.appendMessageResult is not None:
                            a = result.appendMessageResult
                            self.on_delivered(level, inner.topic, a.msgNum, a.wroteBytes)
                offset += 1
            if stop:
                break
        if offset != start:
            self.offsets.update_offset(level, offset)
            self._dirty = True
        return wake

    def _deliver_timers(self, now: int) -> int:
        assert self.timer is not None
        cq = self.store.get_consume_queue(TIMER_TOPIC, 0)
        if cq is not None:
            while True:
                # the units written since the last round (every POP ack passes through here)
                units = _units_from(cq, self._timer_scan)
                if units is None:
                    lo = cq.get_min_offset_in_queue()
                    if lo > self._timer_scan:
                        self._timer_scan = lo
                        continue
                    break
                if len(units) < CQ_STORE_UNIT_SIZE:  # a unit still being written
                    break
                for phy, size, _tags in ConsumeQueue.iter_buffer(units):
                    off = self._timer_scan
                    self._timer_scan += 1
                    if size == 0x7FFFFFFF or off in self.timer.delivered:
                        continue
                    rec = self.store.look_message_by_offset(phy, size)
                    if rec is None:
                        continue
                    try:
                        deliver = int(rec.properties.get(PROPERTY_TIMER_OUT_MS, "0"))
                    except ValueError:
                        deliver = 0
                    imported = self.timer.imported
                    if imported is not None and off < imported[1] and deliver < imported[0]:
                        continue  # a 5.x broker's timer delivered it already (its timercheck)
                    heapq.heappush(self._timer_heap, (deliver, off, phy, size))
        heap = self._timer_heap
        while heap and heap[0][0] <= now:
            deliver, off, phy, size = heap[0]
            rec = self.store.look_message_by_offset(phy, size)
            if rec is not None:
                inner = message_timeup(rec)
                result = self.store.put_message(inner)
                if result is None or not result.is_ok():
                    return now + DELAY_FOR_A_WHILE
            heapq.heappop(heap)
            self.timer.delivered.add(off)
            self._dirty = True
        return heap[0][0] if heap else now + IDLE_WAIT

    def timer_horizon(self, now_ms: int) -> int:
        """The time up to which every timer message is delivered: ``now_ms``, or the earliest
        undelivered deliver time when the service is behind (PopReviveService waits for it)."""
        try:
            earliest = self._timer_heap[0][0] if self.timer is not None else now_ms
        except IndexError:  # empty (or emptied by the delivering thread just now)
            return now_ms
        return min(now_ms, earliest)

    def timer_floor(self) -> int:
        """The timer-queue offset below which every timer message has been delivered."""
        return 0 if self.timer is None else self.timer.floor_offset

    def _update_timer_floor(self) -> None:
        assert self.timer is not None
        floor = min((e[1] for e in self._timer_heap), default=self._timer_scan)
        self.timer.floor_offset = floor
        self.timer.delivered = {o for o in self.timer.delivered if o >= floor}
        self.timer.read_time_ms = self.timer_horizon(self.clock()) // 1000 * 1000

    # ---- stats -------------------------------------------------------------------------------
    def running_stats(self) -> dict[str, str]:
        """``scheduleMessageOffset_<level>`` -> "delivered,max" (GET_BROKER_RUNTIME_INFO)."""
        out = {}
        for level, offset in self.offsets.offset_table.items():
            cq = self.store.get_consume_queue(SCHEDULE_TOPIC, level - 1)
            out[f"scheduleMessageOffset_{level}"] = f"{offset},{0 if cq is None else cq.get_max_offset_in_queue()}"
        return out
