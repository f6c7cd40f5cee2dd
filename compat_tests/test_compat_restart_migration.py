"""Cases that own their server: consumer offsets across a broker restart, and the drop-in
migration (rmqd serving a copy of a store written by Apache RocketMQ 4.9.8)."""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

import compat_harness as harness
from fixtures import CLEAN
from compat_harness import RmqdServer, body_of, msg_spec
from compat_session import Session, body_prefix, copy_fixture_store

pytestmark = pytest.mark.timeout(300)

FIXTURE = CLEAN  # made by Apache RocketMQ itself (scripts/fixtures, tests/fixtures.py)

# the settings the fixture broker wrote its files with (its broker.conf), minus addresses and paths
FIXTURE_CONF = """\
brokerClusterName=FixtureCluster
brokerName=broker-fix
brokerId=0
autoCreateTopicEnable=true
mappedFileSizeCommitLog=1048576
mappedFileSizeConsumeQueue=6000
maxHashSlotNum=1000
maxIndexNum=4000
"""


@pytest.fixture
def own_server(rmqd_factory, tmp_path: Path):
    def start(store: Path, conf: Path | None = None, same_ports_as: RmqdServer | None = None) -> RmqdServer:
        server = rmqd_factory(store, conf)
        if same_ports_as is not None:
            server.namesrv_port, server.broker_port = same_ports_as.namesrv_port, same_ports_as.broker_port
        return server.start()

    return start


def stop_ok(server: RmqdServer) -> None:
    code = server.stop()
    assert code == 0, f"rmqd exited {code} after SIGTERM\n{harness.tail(server.log_path)}"


def new_session(client: str, tmp_path: Path, server: RmqdServer, case: str, tag: str) -> Session:
    s = Session(client, tmp_path, server.namesrv, case)
    s.tag = tag
    return s


@pytest.mark.compat_case("offsets survive broker restart")
def test_offsets_survive_restart(client: str, own_server, tmp_path: Path) -> None:
    store = tmp_path / "store"
    server = own_server(store)
    tag = uuid.uuid4().hex[:6]
    s = new_session(client, tmp_path, server, "restart", tag)
    topic, group = s.name("t"), s.name("cg")
    try:
        before = [msg_spec(f"before-{i}".encode(), tags="TagR") for i in range(10)]
        s.produce(topic, before)
        c = s.push(topic, group)
        got = c.wait_messages(10, 60, lambda m: body_prefix(m, b"before-"))
        assert len(got) >= 10, f"first consumer got {len(got)} of 10\n{c.diagnostics()}"
        c.wait_for(lambda evs: False, 1.0)
        assert c.stop() == 0, c.diagnostics()  # shutdown pushes the consumed offsets to the broker
    finally:
        s.close()
    stop_ok(server)

    server2 = own_server(store, same_ports_as=server)
    s2 = new_session(client, tmp_path, server2, "restart", tag)
    try:
        after = [msg_spec(f"after-{i}".encode(), tags="TagR") for i in range(5)]
        s2.produce(topic, after)
        c2 = s2.push(topic, group)
        c2.wait_messages(5, 60, lambda m: body_prefix(m, b"after-"))
        c2.wait_for(lambda evs: False, 3.0)
        c2.stop()
        bodies = [body_of(m) for m in c2.messages()]
        redelivered = [b for b in bodies if b.startswith(b"before-")]
        assert not redelivered, f"{len(redelivered)} messages consumed before the restart were delivered again"
        assert sorted(b for b in bodies if b.startswith(b"after-")) == sorted(body_of(x) for x in after), \
            c2.diagnostics()
        # and nothing stored before the restart was lost: a new group reads all 15
        c3 = s2.push(topic, s2.name("cg2"))
        c3.wait_messages(15, 60)
        c3.stop()
        assert sorted(body_of(m) for m in c3.messages()) == sorted(body_of(x) for x in before + after), \
            c3.diagnostics()
    finally:
        s2.close()
    stop_ok(server2)


@pytest.mark.compat_case("acked sends survive SIGKILL")
def test_acked_sends_survive_sigkill(client: str, own_server, tmp_path: Path) -> None:
    """Every send the broker acknowledged is readable after the broker is killed (abort file left,
    abnormal recovery), and the queues continue after them instead of overwriting them."""
    store = tmp_path / "store"
    server = own_server(store)
    tag = uuid.uuid4().hex[:6]
    s = new_session(client, tmp_path, server, "sigkill", tag)
    topic = s.name("t")
    before = [msg_spec(f"acked-{i}".encode() * 20, tags="TagK", keys=f"k{i}") for i in range(30)]
    sent = s.produce(topic, before).of("sent")
    assert len(sent) == 30 and {e["status"] for e in sent} == {"SEND_OK"}
    server.kill()  # SIGKILL: no flush, no shutdown hook

    server2 = own_server(store, same_ports_as=server)
    s2 = new_session(client, tmp_path, server2, "sigkill", tag)
    try:
        after = [msg_spec(b"after-kill-" + tag.encode(), tags="TagK")]
        s2.produce(topic, after)
        c = s2.push(topic, s2.name("cg"))
        c.wait_messages(31, 60)
        c.wait_for(lambda evs: False, 1.5)
        c.stop()
    finally:
        s2.close()
    bodies = [body_of(m) for m in c.messages()]
    missing = [b for b in (body_of(x) for x in before) if b not in bodies]
    assert not missing, f"{len(missing)} of 30 acknowledged messages lost after SIGKILL\n{c.diagnostics()}"
    assert sorted(bodies) == sorted(body_of(x) for x in before + after), \
        f"duplicates or strays after recovery: {len(bodies)} messages for 31 sent"
    positions = [(m["queueId"], m["queueOffset"]) for m in c.messages()]
    assert len(set(positions)) == len(positions), "two messages share a queue offset after recovery"
    stop_ok(server2)


# --------------------------------------------------------------------------------------------


def manifest(kind: str | None = None, topic: str | None = None) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (FIXTURE / "manifest.jsonl").read_text().splitlines() if line.strip()]
    return [r for r in rows if (kind is None or r["kind"] == kind) and (topic is None or r["topic"] == topic)]


@pytest.fixture
def fixture_server(own_server, tmp_path: Path) -> RmqdServer:
    if not (FIXTURE / "store" / "commitlog").is_dir():
        harness.missing(f"fixture store not found at {FIXTURE}: run scripts/fixtures/setup.sh")
    store = copy_fixture_store(FIXTURE / "store", tmp_path / "store")
    conf = tmp_path / "broker.conf"
    conf.write_text(FIXTURE_CONF)
    server = own_server(store, conf)
    yield server
    stop_ok(server)


def consume_fixture_topic(client: str, server: RmqdServer, tmp_path: Path, topic: str,
                          expected: dict[str, dict[str, Any]]) -> None:
    """Read `topic` from offset 0 with the real client and compare every message with the
    manifest written when Apache RocketMQ 4.9.8 stored it."""
    s = new_session(client, tmp_path, server, "migrate", uuid.uuid4().hex[:6])
    try:
        if client == "cpp":
            d = s.pull(topic, s.name("pull"), start="zero", commit=False, max_num=32, timeout=120)
        else:
            d = s.push(topic, s.name("cg"), consume_from="CONSUME_FROM_FIRST_OFFSET", deadline=180)
            d.wait_messages(len(expected), 150)
            d.wait_for(lambda evs: False, 1.0)
            d.stop()
    finally:
        s.close()
    msgs = d.messages()
    assert len(msgs) >= len(expected), f"consumed {len(msgs)} of {len(expected)}\n{d.diagnostics()}"
    seen: set[str] = set()
    for m in msgs:
        uniq = m["properties"].get("UNIQ_KEY")
        row = expected.get(uniq)
        assert row is not None, f"unexpected message {uniq} {m['properties']}"
        assert uniq not in seen, f"{uniq} delivered twice"
        seen.add(uniq)
        assert hashlib.sha256(body_of(m)).hexdigest() == row["bodySha256"], f"body of {row['kind']} {uniq} differs"
        assert m["tags"] == (row.get("tags") or "") and m["keys"] == (row.get("keys") or ""), (m["tags"], m["keys"], row)
        assert m["userProperties"] == row["userProperties"], (m["userProperties"], row["userProperties"])
        assert m["flag"] == row["flag"], (row["kind"], m["flag"], row["flag"])
        if "offsetMsgId" not in row:  # a oneway send: the client never learnt where it went
            continue
        assert (m["queueId"], m["queueOffset"]) == (row["queueId"], row["queueOffset"]), uniq
        # the record sits where Apache RocketMQ wrote it: offsetMsgId = storeHost + commitLogOffset
        assert m["commitLogOffset"] == int(row["offsetMsgId"][16:], 16), (m["commitLogOffset"], row["offsetMsgId"])
        if client == "ons":  # ali-ons' msgId IS the offset msgId, computed from storeHost + commitLogOffset
            assert m["msgId"] == row["offsetMsgId"], (m["msgId"], row["offsetMsgId"])
    assert seen == set(expected)


@pytest.mark.compat_case("migration: consume 4.9.8 store")
def test_migration_consume_fixture_bulk(client: str, fixture_server: RmqdServer, tmp_path: Path) -> None:
    """FixBulkTopic: 2000 messages over 4 queues and two consume-queue files per queue."""
    expected = {r["msgId"]: r for r in manifest(kind="bulk")}
    assert len(expected) == 2000
    consume_fixture_topic(client, fixture_server, tmp_path, "FixBulkTopic", expected)


@pytest.mark.compat_case("migration: 4.9.8 compressed/props")
def test_migration_consume_fixture_kinds(client: str, fixture_server: RmqdServer, tmp_path: Path) -> None:
    """FixTopicA: Java-compressed bodies (4096 B, 150 KiB, incompressible 100 KiB), multiple keys,
    user properties, no tags, a flag, oneway and async sends."""
    expected = {r["msgId"]: r for r in manifest(topic="FixTopicA")}
    assert len(expected) == 13
    consume_fixture_topic(client, fixture_server, tmp_path, "FixTopicA", expected)


@pytest.mark.compat_case("migration: group offsets kept")
def test_migration_existing_group_offsets(client: str, fixture_server: RmqdServer, tmp_path: Path) -> None:
    """FixConsumerGroup had consumed all of FixTopicA (consumerOffset.json 4/3/3/3): it must not
    get those 13 messages again, only one sent after the migration."""
    s = new_session(client, tmp_path, fixture_server, "migoff", uuid.uuid4().hex[:6])
    old_ids = {r["msgId"] for r in manifest(topic="FixTopicA")}
    try:
        c = s.push("FixTopicA", "FixConsumerGroup", deadline=120)
        c.wait_for(lambda evs: False, 3.0)
        s.produce("FixTopicA", [msg_spec(b"after-migration-" + s.tag.encode(), tags="TagA")])
        c.wait_messages(1, 60, lambda m: body_prefix(m, b"after-migration-"))
        c.wait_for(lambda evs: False, 2.0)
        c.stop()
    finally:
        s.close()
    msgs = c.messages()
    again = [m for m in msgs if m["properties"].get("UNIQ_KEY") in old_ids]
    assert not again, f"{len(again)} already-consumed fixture messages were delivered again (consumerOffset.json ignored?)"
    assert [body_of(m) for m in msgs] == [b"after-migration-" + s.tag.encode()], c.diagnostics()
