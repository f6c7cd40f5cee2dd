"""Issue 5 across a crash, with the real clients: a message sent with delay level 2 (5 s) is
still pending when rmqd is SIGKILLed; after the restart (same ports, same store) a consumer —
a new one, or one that kept running through the crash — receives it exactly once, and not
before it is due. Likewise a retry (send-back after RECONSUME_LATER) pending at the kill.

Why exactly once: the schedule copy sits in SCHEDULE_TOPIC_XXXX (acknowledged, so it survives the
kill) and was not yet due, so delayOffset.json cannot be ahead of or behind it; the only window
in which RocketMQ would deliver a delayed message twice (a kill between its delivery and the next
delayOffset persist) is not hit.  The raw-protocol side of the same proof, with SIGTERM, retries,
transactions and offsets, is tests/broker/test_semantics_restart.py.
"""

from __future__ import annotations

import base64
import uuid
from pathlib import Path
from typing import Callable

import pytest

import compat_harness as harness
from compat_harness import RmqdServer, body_of, msg_spec
from compat_session import Session, body_prefix

pytestmark = pytest.mark.timeout(180)

LEVEL_2_S = 5.0  # the default messageDelayLevel "1s 5s 10s ..."
# small commit-log files: the 1 GiB default is allocated in full for every store
SMALL_FILES_CONF = "mappedFileSizeCommitLog=4194304\nmappedFileSizeConsumeQueue=12000\n"


class Crashable:
    """One store served by rmqd, killed with SIGKILL and restarted on the same ports, and the
    client sessions of a case (one per server run; the names stay the same across runs)."""

    def __init__(self, client: str, rmqd_factory: Callable[..., RmqdServer], tmp_path: Path, case: str) -> None:
        self.client, self.factory, self.tmp_path, self.case = client, rmqd_factory, tmp_path, case
        self.store = tmp_path / "store"
        self.conf = tmp_path / "broker.conf"
        self.conf.write_text(SMALL_FILES_CONF)
        self.tag = uuid.uuid4().hex[:6]
        self.server = rmqd_factory(self.store, self.conf).start()

    def session(self) -> Session:
        s = Session(self.client, self.tmp_path, self.server.namesrv, self.case)
        s.tag = self.tag
        return s

    def kill(self) -> None:
        self.server.kill()
        assert (self.store / "abort").exists(), "a killed rmqd leaves its abort file"

    def restart(self) -> None:
        old = self.server
        self.server = self.factory(self.store, self.conf)
        self.server.namesrv_port, self.server.broker_port = old.namesrv_port, old.broker_port
        self.server.start()

    def stop_ok(self) -> None:
        code = self.server.stop()
        assert code == 0, f"rmqd exited {code} after SIGTERM\n{harness.tail(self.server.log_path)}"


@pytest.mark.compat_case("delay level 2 across SIGKILL")
def test_delay_survives_sigkill(client: str, rmqd_factory, tmp_path: Path) -> None:
    run = Crashable(client, rmqd_factory, tmp_path, "delaykill")
    s = run.session()
    topic, group = s.name("t"), s.name("cg")
    s.create_topic(topic)
    body = b"delayed-kill-" + run.tag.encode()
    spec = msg_spec(body, tags="TagDelay", keys="dk", props={"k": "v"})
    spec["delay_level"] = 2
    sent = s.produce(topic, [spec]).of("sent")
    assert len(sent) == 1 and sent[0]["status"] == "SEND_OK", sent
    t_sent = sent[0]["t"]
    run.kill()  # SIGKILL while the message waits in SCHEDULE_TOPIC_XXXX
    run.restart()
    s2 = run.session()
    try:
        c = s2.push(topic, group, consume_from="CONSUME_FROM_FIRST_OFFSET")
        got = c.wait_messages(1, 60, lambda m: body_of(m) == body)
        c.wait_for(lambda evs: False, 3.0)  # room for a duplicate
        c.stop()
    finally:
        s2.close()
    got = [m for m in c.messages() if body_of(m) == body]
    assert len(got) == 1, f"delivered {len(got)} times after the SIGKILL restart\n{c.diagnostics()}"
    m = got[0]
    waited = m["t"] - t_sent
    assert waited >= LEVEL_2_S - 1.0, f"delivered after {waited:.1f} s; level 2 is 5 s"
    assert m["topic"] == topic and m["tags"] == "TagDelay" and m["keys"] == "dk", m
    assert m["userProperties"] == {"k": "v"}, m["userProperties"]
    if client != "ons":
        assert m["msgId"] == sent[0]["msgId"], "msgId is the UNIQ_KEY, kept by the schedule copy"
    assert not [x for x in c.messages() if body_prefix(x, b"delayed-kill-") and body_of(x) != body]
    run.stop_ok()


@pytest.mark.compat_case("delay + live consumer across SIGKILL")
def test_delay_live_consumer_across_sigkill(client: str, rmqd_factory, tmp_path: Path) -> None:
    """The consumer keeps running while rmqd is killed and restarted on the same ports: the client
    reconnects by itself and receives the pending delayed message once."""
    run = Crashable(client, rmqd_factory, tmp_path, "delaylive")
    s = run.session()
    topic, group = s.name("t"), s.name("cg")
    s.create_topic(topic)
    try:
        c = s.push(topic, group, consume_from="CONSUME_FROM_FIRST_OFFSET", deadline=150)
        s.barrier([c], topic)
        body = b"delayed-live-" + run.tag.encode()
        spec = msg_spec(body, tags="TagDelay")
        spec["delay_level"] = 2
        sent = s.produce(topic, [spec]).of("sent")
        assert len(sent) == 1 and sent[0]["status"] == "SEND_OK", sent
        run.kill()
        run.restart()
        c.wait_messages(1, 90, lambda m: body_of(m) == body)
        c.wait_for(lambda evs: False, 3.0)
        c.stop()
    finally:
        s.close()
    got = [m for m in c.messages() if body_of(m) == body]
    assert len(got) == 1, f"delivered {len(got)} times across the SIGKILL restart\n{c.diagnostics()}"
    assert got[0]["t"] - sent[0]["t"] >= LEVEL_2_S - 1.0
    assert got[0]["topic"] == topic and got[0]["tags"] == "TagDelay"
    run.stop_ok()


@pytest.mark.compat_case("retry across SIGKILL")
def test_retry_survives_sigkill(client: str, rmqd_factory, tmp_path: Path) -> None:
    """A consumer answers RECONSUME_LATER; rmqd is SIGKILLed after the send-back and before the
    retry is due (level 3 = 10 s); after the restart a consumer of the group gets the retry once,
    with reconsumeTimes 1. The original may come again too: its consumed offset is committed by
    the client every 5 s and persisted by the broker every 5 s, so a kill loses it as with
    RocketMQ (at-least-once) — that redelivery is allowed, a second retry copy is not."""
    run = Crashable(client, rmqd_factory, tmp_path, "retrykill")
    s = run.session()
    topic, group = s.name("t"), s.name("cg")
    s.create_topic(topic)
    body = b"retry-kill-" + run.tag.encode()
    try:
        c1 = s.push(topic, group, consume_from="CONSUME_FROM_FIRST_OFFSET",
                    fail_prefix_b64=base64.b64encode(b"retry-kill-").decode(), fail_times=1)
        sent = s.produce(topic, [msg_spec(body, tags="TagRetry", keys="rk", props={"p": "1"})]).of("sent")
        first = c1.wait_messages(1, 60, lambda m: body_of(m) == body)
        assert first and not first[0]["acked"], c1.diagnostics()
        c1.wait_for(lambda evs: False, 2.0)  # the client sends the message back after the listener returns
        run.kill()
        c1.kill()  # the application dies with the broker (no offset push on shutdown)
    finally:
        s.close()

    run.restart()
    s2 = run.session()
    try:
        c2 = s2.push(topic, group, consume_from="CONSUME_FROM_FIRST_OFFSET")
        c2.wait_messages(1, 60, lambda m: body_of(m) == body and m["reconsumeTimes"] == 1)
        c2.wait_for(lambda evs: False, 3.0)
        c2.stop()
    finally:
        s2.close()
    got = [m for m in c2.messages() if body_of(m) == body]
    retries = [m for m in got if m["reconsumeTimes"] >= 1]
    assert len(retries) == 1, f"retry delivered {len(retries)} times after the restart\n{c2.diagnostics()}"
    r = retries[0]
    assert r["reconsumeTimes"] == 1 and r["topic"] == topic and r["tags"] == "TagRetry" and r["keys"] == "rk", r
    assert r["userProperties"] == {"p": "1"}, r["userProperties"]
    if client != "ons":
        assert r["msgId"] == sent[0]["msgId"], "msgId is the UNIQ_KEY, kept by the retry copy"
    else:
        assert r["properties"].get("ORIGIN_MESSAGE_ID") == first[0]["msgId"], r["properties"]
    assert len(got) - len(retries) <= 1, "the original came back more than once"
    run.stop_ok()
