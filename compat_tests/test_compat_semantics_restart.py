"""Issue 5 across a crash, with the real clients: a message sent with delay level 2 (5 s) is
still pending when rmqd is SIGKILLed; after the restart (same ports, same store) a consumer
receives it exactly once, and not before it is due.

Why exactly once: the schedule copy sits in SCHEDULE_TOPIC_XXXX (acknowledged, so it survives the
kill) and was not yet due, so delayOffset.json cannot be ahead of or behind it; the only window
in which RocketMQ would deliver a delayed message twice (a kill between its delivery and the next
delayOffset persist) is not hit.  The raw-protocol side of the same proof, with SIGTERM, retries,
transactions and offsets, is tests/broker/test_semantics_restart.py.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

import compat_harness as harness
from compat_harness import RmqdServer, body_of, msg_spec
from compat_session import Session, body_prefix

pytestmark = pytest.mark.timeout(180)

LEVEL_2_S = 5.0  # the default messageDelayLevel "1s 5s 10s ..."


def stop_ok(server: RmqdServer) -> None:
    code = server.stop()
    assert code == 0, f"rmqd exited {code} after SIGTERM\n{harness.tail(server.log_path)}"


@pytest.mark.compat_case("delay level 2 across SIGKILL")
def test_delay_survives_sigkill(client: str, rmqd_factory, tmp_path: Path) -> None:
    store = tmp_path / "store"
    server = rmqd_factory(store).start()
    tag = uuid.uuid4().hex[:6]
    s = Session(client, tmp_path, server.namesrv, "delaykill")
    s.tag = tag
    topic, group = s.name("t"), s.name("cg")
    s.create_topic(topic)
    body = b"delayed-kill-" + tag.encode()
    spec = msg_spec(body, tags="TagDelay", keys="dk", props={"k": "v"})
    spec["delay_level"] = 2
    sent = s.produce(topic, [spec]).of("sent")
    assert len(sent) == 1 and sent[0]["status"] == "SEND_OK", sent
    t_sent = sent[0]["t"]
    server.kill()  # SIGKILL while the message waits in SCHEDULE_TOPIC_XXXX
    assert (store / "abort").exists(), "a killed rmqd leaves its abort file"

    restarted = rmqd_factory(store)
    restarted.namesrv_port, restarted.broker_port = server.namesrv_port, server.broker_port
    restarted.start()
    s2 = Session(client, tmp_path, restarted.namesrv, "delaykill")
    s2.tag = tag
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
    if client == "cpp":
        assert m["msgId"] == sent[0]["msgId"], "C++ msgId is the UNIQ_KEY, kept by the schedule copy"
    assert not [x for x in c.messages() if body_prefix(x, b"delayed-kill-") and body_of(x) != body]
    stop_ok(restarted)


@pytest.mark.compat_case("delay + live consumer across SIGKILL")
def test_delay_live_consumer_across_sigkill(client: str, rmqd_factory, tmp_path: Path) -> None:
    """The consumer keeps running while rmqd is killed and restarted on the same ports: the client
    reconnects by itself and receives the pending delayed message once."""
    store = tmp_path / "store"
    server = rmqd_factory(store).start()
    tag = uuid.uuid4().hex[:6]
    s = Session(client, tmp_path, server.namesrv, "delaylive")
    s.tag = tag
    topic, group = s.name("t"), s.name("cg")
    s.create_topic(topic)
    try:
        c = s.push(topic, group, consume_from="CONSUME_FROM_FIRST_OFFSET", deadline=150)
        s.barrier([c], topic)
        body = b"delayed-live-" + tag.encode()
        spec = msg_spec(body, tags="TagDelay")
        spec["delay_level"] = 2
        sent = s.produce(topic, [spec]).of("sent")
        assert len(sent) == 1 and sent[0]["status"] == "SEND_OK", sent
        server.kill()
        restarted = rmqd_factory(store)
        restarted.namesrv_port, restarted.broker_port = server.namesrv_port, server.broker_port
        restarted.start()
        c.wait_messages(1, 90, lambda m: body_of(m) == body)
        c.wait_for(lambda evs: False, 3.0)
        c.stop()
    finally:
        s.close()
    got = [m for m in c.messages() if body_of(m) == body]
    assert len(got) == 1, f"delivered {len(got)} times across the SIGKILL restart\n{c.diagnostics()}"
    assert got[0]["t"] - sent[0]["t"] >= LEVEL_2_S - 1.0
    assert got[0]["topic"] == topic and got[0]["tags"] == "TagDelay"
    stop_ok(restarted)
