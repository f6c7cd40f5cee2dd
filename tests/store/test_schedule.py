"""ScheduleMessageService: delay levels and 5.x timers over a real DefaultMessageStore."""

from __future__ import annotations

import gzip
import json
import shutil
import time
from pathlib import Path

import pytest

from fixtures import CLEAN, require
from rmqd.store.commitlog import SCHEDULE_TOPIC, MessageExtBrokerInner
from rmqd.store.config import MessageStoreConfig
from rmqd.store.delay_offset import DelayOffsetManager
from rmqd.store.message_store import DefaultMessageStore
from rmqd.store.schedule import (
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TIMER_OUT_MS,
    TIMER_TOPIC,
    ScheduleMessageService,
    TimerProgress,
    apply_timer,
    parse_delay_levels,
)
from rmqd.wire.message import decode_record, parse_offset_msg_id

FIXTURE = CLEAN


def _manifest() -> list[dict]:
    with open(require(FIXTURE / "manifest.jsonl")) as f:
        return [json.loads(line) for line in f]


def _delivered_copies() -> dict[str, int]:
    """UNIQ_KEY -> physical offset of the FixDelayTopic copy RocketMQ's schedule service wrote."""
    with gzip.open(require(FIXTURE / "dump" / "commitlog-dump.jsonl.gz"), "rt") as f:
        rows = [json.loads(line) for line in f]
    return {r["properties"]["UNIQ_KEY"]: r["physicalOffset"] for r in rows
            if r["record"] == "MESSAGE" and r["topic"] == "FixDelayTopic"}
LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

pytestmark = pytest.mark.timeout(60)


def _config(root: Path) -> MessageStoreConfig:
    return MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=1024 * 1024,
                              mappedFileSizeConsumeQueue=6000, maxHashSlotNum=1000, maxIndexNum=4000)


class Harness:
    def __init__(self, root: Path, levels: str = LEVELS) -> None:
        self.root = root
        self.levels = levels
        self.open()

    def open(self) -> None:
        self.store = DefaultMessageStore(_config(self.root))
        self.store.load()
        self.store.start()
        self.service = ScheduleMessageService(self.store, DelayOffsetManager(self.root), self.levels,
                                              timer_progress=TimerProgress(self.root))
        self.service.load()

    def close(self) -> None:
        self.service.shutdown()
        self.store.shutdown()

    def restart(self) -> None:
        self.close()
        self.open()

    def send(self, topic: str, queue_id: int, body: bytes, **props: str) -> None:
        msg = MessageExtBrokerInner(topic=topic, queue_id=queue_id, body=body,
                                    properties={"UNIQ_KEY": body.hex().upper(), "WAIT": "true", **props},
                                    born_timestamp=int(time.time() * 1000))
        assert apply_timer(msg) is None
        assert self.store.put_message(msg).is_ok()
        assert self.store.wait_dispatched()

    def messages(self, topic: str, queue_id: int) -> list:
        self.store.wait_dispatched()
        r = self.store.get_message("g", topic, queue_id, 0, 1000)
        return [decode_record(b) for b in (r.message_buffers if r else [])]


@pytest.fixture
def harness(tmp_path: Path):
    h = Harness(tmp_path / "store")
    yield h
    h.close()


def test_parse_delay_levels() -> None:
    table = parse_delay_levels(LEVELS)
    assert len(table) == 18 and table[1] == 1000 and table[3] == 10_000 and table[18] == 7_200_000
    assert parse_delay_levels("1d 3s") == {1: 86_400_000, 2: 3000}
    with pytest.raises(ValueError, match="level 2"):
        parse_delay_levels("1s 5x")


def test_delayed_message_is_delivered_when_due_and_only_once(harness: Harness) -> None:
    harness.send("RealTopic", 2, b"d1", DELAY="2", TAGS="TagD")
    sched = harness.messages(SCHEDULE_TOPIC, 1)
    assert len(sched) == 1 and sched[0].properties["REAL_TOPIC"] == "RealTopic"
    unit = harness.store.get_consume_queue(SCHEDULE_TOPIC, 1).get_unit(0)
    deliver_at = unit[2]
    assert deliver_at == sched[0].store_timestamp + 5000  # tag code = delivery time
    harness.service.tick(deliver_at - 1)
    assert harness.messages("RealTopic", 2) == []
    harness.service.tick(deliver_at)
    out = harness.messages("RealTopic", 2)
    assert len(out) == 1
    rec = out[0]
    assert rec.body == b"d1" and rec.topic == "RealTopic" and rec.queue_id == 2
    # messageTimeup keeps the schedule copy's property string (DELAY/REAL_* stay, WAIT unchanged)
    assert rec.properties["DELAY"] == "2" and rec.properties["REAL_QID"] == "2"
    assert rec.properties["WAIT"] == "true" and rec.properties["TAGS"] == "TagD"
    assert rec.born_timestamp == sched[0].born_timestamp
    assert harness.service.offsets.get_offset(2) == 1
    harness.service.tick(deliver_at + 10_000)
    assert len(harness.messages("RealTopic", 2)) == 1


def test_levels_are_independent_and_ordered(harness: Harness) -> None:
    harness.send("T", 0, b"a", DELAY="1")
    harness.send("T", 0, b"b", DELAY="3")
    harness.send("T", 0, b"c", DELAY="1")
    now = int(time.time() * 1000)
    harness.service.tick(now + 2000)
    assert [m.body for m in harness.messages("T", 0)] == [b"a", b"c"]
    harness.service.tick(now + 11_000)
    assert [m.body for m in harness.messages("T", 0)] == [b"a", b"c", b"b"]


def test_level_queue_is_read_in_runs_across_its_files(harness: Harness, monkeypatch) -> None:
    """A delay level's queue is read a run of units at a time (capped; 7 units here) from its
    mapping: units over three consume-queue files (300 each here), some written after a round and
    not yet due, are each delivered once, in queue order, and none before its time."""
    import rmqd.store.schedule as schedule

    monkeypatch.setattr(schedule, "_LEVEL_RUN_BYTES", 7 * 20)

    def delivered() -> list[bytes]:
        harness.store.wait_dispatched()
        out: list[bytes] = []
        while (r := harness.store.get_message("g", "T", 3, len(out), 32)) and r.message_buffers:
            out += [decode_record(b).body for b in r.message_buffers]
        return out

    bodies = [f"{i:04d}".encode() for i in range(700)]
    for body in bodies[:400]:
        harness.send("T", 3, body, DELAY="1")
    harness.service.tick(int(time.time() * 1000) + 2000)
    assert delivered() == bodies[:400]
    assert harness.service.offsets.get_offset(1) == 400
    for body in bodies[400:]:
        harness.send("T", 3, body, DELAY="2")
    assert len(harness.store.get_consume_queue(SCHEDULE_TOPIC, 1).files) == 1
    for body in bodies[400:]:
        harness.send("T", 3, body, DELAY="1")
    assert len(harness.store.get_consume_queue(SCHEDULE_TOPIC, 0).files) == 3
    first_due = harness.store.get_consume_queue(SCHEDULE_TOPIC, 0).get_unit(400)[2]
    assert harness.service.tick(first_due - 1) == first_due
    assert len(delivered()) == 400
    harness.service.tick(first_due + 1500)
    assert delivered() == bodies[:400] + bodies[400:]
    assert harness.service.offsets.get_offset(1) == 700
    harness.service.tick(first_due + 10_000)
    assert delivered() == bodies + bodies[400:]
    assert harness.service.offsets.get_offset(2) == 300


def test_level_above_max_is_clamped_and_far_future_corrected(harness: Harness) -> None:
    harness.send("T", 1, b"x", DELAY="99")
    assert len(harness.messages(SCHEDULE_TOPIC, 17)) == 1


def test_progress_survives_restart_without_duplicates(harness: Harness) -> None:
    for i in range(5):
        harness.send("T", 0, f"m{i}".encode(), DELAY="1")
    now = int(time.time() * 1000)
    harness.service.tick(now + 1500)
    assert len(harness.messages("T", 0)) == 5
    harness.restart()
    assert harness.service.offsets.get_offset(1) == 5
    harness.service.tick(now + 100_000)
    assert len(harness.messages("T", 0)) == 5
    harness.send("T", 0, b"late", DELAY="1")
    harness.service.tick(int(time.time() * 1000) + 1500)
    assert [m.body for m in harness.messages("T", 0)][-1] == b"late"
    text = (harness.root / "config" / "delayOffset.json").read_text()
    assert "1:6" in text.replace(" ", "").replace("\n", "").replace("\t", "")


def test_offset_moves_only_after_a_successful_put(harness: Harness, monkeypatch) -> None:
    harness.send("T", 0, b"x", DELAY="1")
    real_put = harness.store.put_message

    class Failed:
        putMessageStatus = "SERVICE_NOT_AVAILABLE"

        def is_ok(self) -> bool:
            return False

    monkeypatch.setattr(harness.store, "put_message", lambda msg: Failed())
    now = int(time.time() * 1000) + 2000
    harness.service.tick(now)
    assert harness.service.offsets.get_offset(1) in (None, 0)
    monkeypatch.setattr(harness.store, "put_message", real_put)
    harness.service.tick(now)
    assert len(harness.messages("T", 0)) == 1


def test_retry_style_message_goes_to_its_retry_topic(harness: Harness) -> None:
    harness.send("%RETRY%g", 0, b"r", DELAY="3", RETRY_TOPIC="Orig", ORIGIN_MESSAGE_ID="AA")
    harness.service.tick(int(time.time() * 1000) + 11_000)
    out = harness.messages("%RETRY%g", 0)
    assert len(out) == 1 and out[0].properties["RETRY_TOPIC"] == "Orig"


def test_threaded_service_delivers(harness: Harness) -> None:
    svc = ScheduleMessageService(harness.store, DelayOffsetManager(harness.root), "1s")
    harness.send("T", 3, b"threaded", DELAY="1")
    svc.start()
    try:
        deadline = time.time() + 10
        while time.time() < deadline and not harness.messages("T", 3):
            time.sleep(0.05)
    finally:
        svc.shutdown()
    assert [m.body for m in harness.messages("T", 3)] == [b"threaded"]


# ---- 5.x timer properties ------------------------------------------------------------------

def test_apply_timer_rules() -> None:
    now = 1_000_000
    m = MessageExtBrokerInner(topic="T", queue_id=3, body=b"x", properties={PROPERTY_TIMER_DELAY_SEC: "10"})
    assert apply_timer(m, now) is None
    assert m.topic == TIMER_TOPIC and m.queue_id == 0
    assert m.properties[PROPERTY_TIMER_OUT_MS] == str(now + 10_000 - 1000)  # exact multiple: one tick earlier
    assert m.properties["REAL_TOPIC"] == "T" and m.properties["REAL_QID"] == "3"

    m = MessageExtBrokerInner(topic="T", queue_id=0, body=b"x", properties={PROPERTY_TIMER_DELAY_MS: "1500"})
    apply_timer(m, now)
    assert m.properties[PROPERTY_TIMER_OUT_MS] == str(1_001_000)  # rounded down to timerPrecisionMs

    m = MessageExtBrokerInner(topic="T", queue_id=0, body=b"x", properties={PROPERTY_TIMER_DELIVER_MS: "5"})
    assert apply_timer(m, now) is None and m.topic == "T"  # in the past: delivered at once

    m = MessageExtBrokerInner(topic="T", queue_id=0, body=b"x", properties={PROPERTY_TIMER_DELIVER_MS: "soon"})
    assert "timer message illegal" in apply_timer(m, now)
    m = MessageExtBrokerInner(topic="T", queue_id=0, body=b"x", properties={PROPERTY_TIMER_DELAY_SEC: "999999"})
    assert "timer message illegal" in apply_timer(m, now)

    m = MessageExtBrokerInner(topic="T", queue_id=0, body=b"x",
                              properties={"DELAY": "2", PROPERTY_TIMER_DELAY_SEC: "10"})
    assert apply_timer(m, now) is None
    assert m.topic == "T" and PROPERTY_TIMER_DELAY_SEC not in m.properties  # the delay level wins


def test_timer_messages_deliver_in_time_order_across_restart(harness: Harness) -> None:
    now = int(time.time() * 1000)
    harness.send("TT", 1, b"late", **{PROPERTY_TIMER_DELIVER_MS: str(now + 60_000)})
    harness.send("TT", 1, b"early", **{PROPERTY_TIMER_DELIVER_MS: str(now + 20_000)})
    harness.send("TT", 1, b"middle", **{PROPERTY_TIMER_DELAY_SEC: "40"})
    assert len(harness.messages(TIMER_TOPIC, 0)) == 3
    assert harness.service.tick(now + 1000) <= now + 20_000
    assert harness.messages("TT", 1) == []
    harness.service.tick(now + 45_000)
    assert [m.body for m in harness.messages("TT", 1)] == [b"early", b"middle"]
    harness.restart()  # "late" pending, "early"/"middle" delivered above the floor
    harness.service.tick(now + 45_000)
    assert [m.body for m in harness.messages("TT", 1)] == [b"early", b"middle"]
    harness.service.tick(now + 61_000)
    out = harness.messages("TT", 1)
    assert [m.body for m in out] == [b"early", b"middle", b"late"]
    assert out[2].properties["REAL_TOPIC"] == "TT"
    harness.restart()
    harness.service.tick(now + 100_000)
    assert len(harness.messages("TT", 1)) == 3


def test_timer_queue_is_read_in_runs_across_its_files(harness: Harness) -> None:
    """The timer queue is read a run of units at a time from its mapping (a POP ack passes through
    it): units over three consume-queue files (300 each here), some written after a round, are
    each delivered once and in time order."""
    now = int(time.time() * 1000)
    bodies = [f"{i:04d}".encode() for i in range(700)]
    for i, body in enumerate(bodies[:400]):
        harness.send("TT", 0, body, **{PROPERTY_TIMER_DELIVER_MS: str(now + 10_000 + (i * 7919) % 9000)})
    harness.service.tick(now + 1000)
    assert harness.messages("TT", 0) == []
    assert len(harness.service._timer_heap) == 400
    for i, body in enumerate(bodies[400:], 400):
        harness.send("TT", 0, body, **{PROPERTY_TIMER_DELIVER_MS: str(now + 10_000 + (i * 7919) % 9000)})
    assert len(harness.store.get_consume_queue(TIMER_TOPIC, 0).files) == 3
    harness.service.tick(now + 30_000)
    harness.store.wait_dispatched()
    out = []
    while r := harness.store.get_message("g", "TT", 0, len(out), 32):
        if not r.message_buffers:
            break
        out += [decode_record(b) for b in r.message_buffers]
    assert sorted(m.body for m in out) == bodies
    times = [int(m.properties["TIMER_OUT_MS"]) for m in out]
    assert times == sorted(times)
    harness.service.tick(now + 60_000)
    harness.store.wait_dispatched()
    assert harness.store.get_max_offset_in_queue("TT", 0) == 700

# ---- the real 4.9.8 store: the pending level-18 message ------------------------------------

def test_fixture_pending_level_18_message(tmp_path: Path) -> None:
    root = tmp_path / "store"
    shutil.copytree(require(FIXTURE / "store"), root)
    delayed = [m for m in _manifest() if m["kind"].startswith("delayed-level-")]
    pending = next(m for m in delayed if m["delayTimeLevel"] == 18)
    h = Harness(root)
    try:
        assert h.service.offsets.get_offset(2) == 1 and h.service.offsets.get_offset(3) == 4
        before = h.messages("FixDelayTopic", pending["queueId"])
        unit = h.store.get_consume_queue(SCHEDULE_TOPIC, 17).get_unit(0)
        h.service.tick(unit[2] - 1)
        assert h.messages("FixDelayTopic", pending["queueId"]) == before
        # levels 2 and 3 were fully delivered by RocketMQ: nothing is delivered twice
        for q in {m["queueId"] for m in delayed if m is not pending}:
            want = sum(1 for m in delayed if m is not pending and m["queueId"] == q)
            assert len(h.messages("FixDelayTopic", q)) == want, q
        h.service.tick(unit[2])
        after = h.messages("FixDelayTopic", pending["queueId"])
        assert len(after) == len(before) + 1
        rec = after[-1]
        assert rec.body == b"delayed message level 18"
        assert rec.properties["UNIQ_KEY"] == pending["msgId"]
        assert rec.properties["DELAY"] == "18" and rec.properties["REAL_TOPIC"] == "FixDelayTopic"
        assert h.service.offsets.get_offset(18) == 1
    finally:
        h.close()


def test_timeup_copy_has_the_bytes_rocketmq_wrote(tmp_path: Path) -> None:
    from rmqd.store.schedule import message_timeup

    root = tmp_path / "store"
    shutil.copytree(require(FIXTURE / "store"), root)
    copies = _delivered_copies()
    pairs = [(parse_offset_msg_id(m["offsetMsgId"])[2], copies[m["msgId"]]) for m in _manifest()
             if m["kind"] in ("delayed-level-2", "delayed-level-3")]  # (schedule copy, delivered copy)
    assert len(pairs) == 3
    h = Harness(root)
    try:
        for sched_off, delivered_off in pairs:
            inner = message_timeup(h.store.look_message_by_offset(sched_off))
            real = h.store.look_message_by_offset(delivered_off)
            assert inner.properties_string.encode() == bytes(real.properties_raw)
            assert (inner.topic, inner.queue_id, inner.body) == (real.topic, real.queue_id, real.body)
            assert (inner.born_timestamp, inner.sys_flag, inner.flag) == (real.born_timestamp, real.sys_flag, real.flag)
            assert "DELAY" not in inner.properties  # so the commit log does not schedule it again
    finally:
        h.close()


def test_sigkill_snapshot_mid_flow_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    """Copy the store directory while the broker runs (what a SIGKILL leaves: abort file present,
    page cache contents), then recover from the copy and keep delivering."""
    h = Harness(tmp_path / "live")
    try:
        for i in range(6):
            h.send("K", 0, f"m{i}".encode(), DELAY="1" if i % 2 == 0 else "2")
        now = int(time.time() * 1000)
        h.service.tick(now + 1500)  # level 1 delivered, level 2 still pending
        assert [m.body for m in h.messages("K", 0)] == [b"m0", b"m2", b"m4"]
        h.store.wait_dispatched()
        snapshot = tmp_path / "crashed"
        shutil.copytree(h.root, snapshot, ignore=shutil.ignore_patterns("lock"))
    finally:
        h.close()
    assert (snapshot / "abort").exists()
    c = Harness(snapshot)
    try:
        assert c.store.last_exit_ok is False
        c.service.tick(int(time.time() * 1000) + 6000)
        bodies = sorted(m.body for m in c.messages("K", 0))
        assert bodies == [b"m0", b"m1", b"m2", b"m3", b"m4", b"m5"]
    finally:
        c.close()
