"""Real RocketMQ clients against a fresh `rmqd serve`: sends, consumers, filtering, round trips.

Each test is one row of the matrix (marker compat_case) and runs once per client (fixture
`client`).  What a client's API cannot do is a SKIP naming the missing API, never a PASS.
"""

from __future__ import annotations

import hashlib
import os
import random
from collections import Counter
from typing import Any

import pytest

from compat_harness import body_of, missing, msg_spec
from compat_session import Session, body_prefix, client_problem

pytestmark = pytest.mark.timeout(180)

# a Java consumer's pulls may be refused until its first scheduled heartbeat, ~31 s after start
# (compat_session.BARRIER_DEADLINE_S says why); only a slow case waits this long
CONSUME_WAIT_S = 60.0
NO_MESSAGE_HINT = (
    "no message reached a new consumer group: a new group asks QUERY_CONSUMER_OFFSET and starts at the "
    "answer (Apache RocketMQ answers 0 for a queue whose first message is still in memory); "
    "see also the broker log"
)


def consume(s: Session, topic: str, n: int, *, group: str | None = None, expression: str = "*",
            where=lambda m: True, linger: float = 1.5) -> list[dict[str, Any]]:
    """Start a push consumer of a new group, wait for `n` matching messages, stop it."""
    d = s.push(topic, group or s.name("cg"), expression=expression)
    got = d.wait_messages(n, CONSUME_WAIT_S, where)
    if len(got) >= n and linger:
        d.wait_for(lambda evs: False, linger)  # anything extra (duplicates, filtered tags) shows up now
    d.stop()
    got = [m for m in d.messages() if where(m)]
    assert got, f"{NO_MESSAGE_HINT}\n{d.diagnostics()}"
    assert len(got) >= n, f"consumed {len(got)} of {n} messages\n{d.diagnostics()}"
    return got


def by_body(msgs: list[dict[str, Any]]) -> dict[bytes, list[dict[str, Any]]]:
    out: dict[bytes, list[dict[str, Any]]] = {}
    for m in msgs:
        out.setdefault(body_of(m), []).append(m)
    return out


def fresh_topic(s: Session) -> str:
    """A new topic, created the way clients create topics: by a first send."""
    topic = s.name("t")
    s.create_topic(topic)
    return topic


def settled_pair(s: Session) -> tuple[str, Any, Any]:
    """A new topic and two push consumers of one new group that own disjoint queues."""
    topic = fresh_topic(s)
    group = s.name("cg")
    c1 = s.push(topic, group)
    c2 = s.push(topic, group)
    s.settle_cluster([c1, c2], topic)
    return topic, c1, c2


def numbered(prefix: str, n: int, **kw: Any) -> list[dict[str, Any]]:
    return [msg_spec(f"{prefix}-{i}".encode(), **kw) for i in range(n)]


# --------------------------------------------------------------------------------------------


@pytest.mark.compat_case("send sync")
def test_send_sync(session: Session) -> None:
    s = session
    topic = s.name("t")
    specs = numbered("sync", 8, tags="TagS", keys="ks")
    sent = s.produce(topic, specs, mode="sync").of("sent")
    assert [e["index"] for e in sent] == list(range(8))
    assert {e["status"] for e in sent} == {"SEND_OK"}, sent
    assert len({e["msgId"] for e in sent}) == 8
    got = by_body(consume(s, topic, 8))
    for e, spec in zip(sent, specs):
        (m,) = got[body_of(spec)]
        # C++, Java, Go: msgId = the client's UNIQ_KEY; ali-ons: msgId = the broker's offset msgId (storeHost+commitLogOffset)
        assert m["msgId"] == e["msgId"], (m["msgId"], e)
        assert m["queueOffset"] == e["queueOffset"], (m, e)
        if s.client == "ons":
            assert m["msgId"] == offset_msg_id_of(m), m
        else:
            assert m["msgId"] == m["properties"].get("UNIQ_KEY"), m
            assert len(m["offsetMsgId"]) == 32, m


def offset_msg_id_of(m: dict[str, Any]) -> str:
    host, port = m["storeHost"].rsplit(":", 1)
    ip = bytes(int(x) for x in host.split("."))
    return (ip + int(port).to_bytes(4, "big") + int(m["commitLogOffset"]).to_bytes(8, "big")).hex().upper()


@pytest.mark.compat_case("send async")
def test_send_async(session: Session) -> None:
    s = session
    topic = fresh_topic(s)
    specs = numbered("async", 20, tags="TagAsync")
    sent = s.produce(topic, specs, mode="async").of("sent")
    assert sorted(e["index"] for e in sent) == list(range(20)), sent
    assert {e["status"] for e in sent} == {"SEND_OK"}
    got = by_body(consume(s, topic, 20, where=lambda m: body_prefix(m, b"async-")))
    assert sorted(got) == sorted(body_of(x) for x in specs)
    assert all(len(v) == 1 for v in got.values()), {k: len(v) for k, v in got.items() if len(v) > 1}


@pytest.mark.compat_case("send oneway")
def test_send_oneway(session: Session) -> None:
    s = session
    topic = fresh_topic(s)
    specs = numbered("oneway", 10, tags="TagOne")
    sent = s.produce(topic, specs, mode="oneway").of("sent")
    assert len(sent) == 10
    got = by_body(consume(s, topic, 10, where=lambda m: body_prefix(m, b"oneway-")))
    assert sorted(got) == sorted(body_of(x) for x in specs)
    ids = {e["msgId"] for e in sent}
    assert {v[0]["msgId"] for v in got.values()} == ids


@pytest.mark.compat_case("send batch")
def test_send_batch(session: Session) -> None:
    s = session
    topic = fresh_topic(s)
    specs = numbered("batch", 3, tags="TagBatch")
    d = s.produce(topic, specs, mode="batch")
    (sent,) = d.of("sent")
    assert sent["status"] == "SEND_OK", sent
    real = lambda m: not body_prefix(m, b"create")  # noqa: E731
    if s.client != "cpp":
        # Java and Go send SEND_BATCH_MESSAGE (code 320): the broker stores one message per entry,
        # at consecutive offsets of one queue
        got = consume(s, topic, 3, where=real, linger=3.0)
        assert sorted(body_of(m) for m in got) == sorted(body_of(x) for x in specs), [body_of(m) for m in got]
        assert len({m["queueId"] for m in got}) == 1, got
        offsets = sorted(m["queueOffset"] for m in got)
        assert offsets == list(range(offsets[0], offsets[0] + 3)), offsets
        return
    # The C++ client marks the batch with batch="1" on SEND_MESSAGE (code 10); Apache RocketMQ reads
    # that with Boolean.parseBoolean -> false and stores the encoded batch as ONE message.
    got = consume(s, topic, 1, where=real, linger=3.0)
    assert len(got) == 1, (
        f"Apache RocketMQ 4.9 stores a C++ batch (batch=\"1\") as one message; rmqd delivered {len(got)}: "
        f"{[body_of(m)[:40] for m in got]}"
    )
    body = body_of(got[0])
    for spec in specs:
        assert body_of(spec) in body, "the stored message should carry the encoded batch"


ROUNDTRIP_PROPS = {"p1": "v1", "unicode": "ünïcødé ✓", "num": "42", "spaces": "a b  c"}


def roundtrip_specs() -> list[dict[str, Any]]:
    rnd = random.Random(1234)
    return [
        msg_spec(b"x", tags="TagA", keys="key-1"),
        msg_spec("héllo wörld ✓ 中文".encode(), tags="TagUnicode", keys="k1 k2 k3", props=ROUNDTRIP_PROPS),
        msg_spec(bytes(range(256)) * 4, tags="TagBin", keys="bin", props={"kind": "binary"}),
        msg_spec(bytes(rnd.getrandbits(8) for _ in range(4095)), tags="Tag4095"),
        msg_spec(b"z" * 4096, tags="Tag4096", props={"kind": "compressible"}),
        msg_spec(os.urandom(100 * 1024 + 7), tags="TagRandom100k"),
        msg_spec(("line of text %d\n" * 1).encode() * 7000, tags="TagText", keys="text"),
        msg_spec(b"no tags and no keys"),
    ]


@pytest.mark.compat_case("round trip: body/tags/keys/props")
def test_roundtrip(session: Session) -> None:
    s = session
    topic = s.name("t")
    specs = roundtrip_specs()
    s.produce(topic, specs, mode="sync")
    got = by_body(consume(s, topic, len(specs)))
    for spec in specs:
        body = body_of(spec)
        digest = hashlib.sha256(body).hexdigest()[:12]
        assert body in got, f"body {digest} ({len(body)} B) not received intact; got lengths {sorted(len(b) for b in got)}"
        (m,) = got[body]
        assert m["topic"] == topic
        assert m["tags"] == spec.get("tags", ""), (digest, m["tags"])
        assert m["keys"] == spec.get("keys", ""), (digest, m["keys"])
        assert m["userProperties"] == spec.get("props", {}), (digest, m["userProperties"])
        assert m["reconsumeTimes"] == 0


@pytest.mark.compat_case("tag filter TagA || TagB")
def test_tag_subscription(session: Session) -> None:
    s = session
    topic = s.name("t")
    tags = ["TagA", "TagB", "TagC", "TagA", "TagD", "TagB", "TagC", "TagA"]
    specs = [msg_spec(f"tag-{i}-{t}".encode(), tags=t) for i, t in enumerate(tags)]
    s.produce(topic, specs)
    want = [body_of(x) for x, t in zip(specs, tags) if t in ("TagA", "TagB")]
    got = consume(s, topic, len(want), expression="TagA || TagB", linger=3.0)
    bodies = Counter(body_of(m) for m in got)
    assert sorted(bodies) == sorted(want), f"expected only TagA/TagB: {sorted(bodies)}"
    assert max(bodies.values()) == 1, bodies
    assert {m["tags"] for m in got} <= {"TagA", "TagB"}


@pytest.mark.compat_case("push cluster: 2 consumers share")
def test_cluster_two_consumers(session: Session) -> None:
    s = session
    topic, c1, c2 = settled_pair(s)
    specs = numbered("cluster", 40, tags="TagCl")
    s.produce(topic, specs)
    want = {body_of(x) for x in specs}
    real = lambda m: body_prefix(m, b"cluster-")  # noqa: E731
    both = lambda: c1.messages() + c2.messages()  # noqa: E731
    c1.wait_for(lambda evs: len({body_of(m) for m in both() if real(m)}) >= len(want), CONSUME_WAIT_S)
    c1.wait_for(lambda evs: False, 2.0)
    c1.stop()
    c2.stop()
    m1 = [body_of(m) for m in c1.messages() if real(m)]
    m2 = [body_of(m) for m in c2.messages() if real(m)]
    counts = Counter(m1 + m2)
    assert set(counts) == want, f"missing {len(want - set(counts))} of {len(want)}\n{c1.diagnostics()}\n{c2.diagnostics()}"
    dups = {k: v for k, v in counts.items() if v > 1}
    assert not dups, f"{len(dups)} messages consumed more than once in one cluster group"
    assert m1 and m2, f"queues not shared: consumer1 got {len(m1)}, consumer2 got {len(m2)}"
    q1 = {m["queueId"] for m in c1.messages() if real(m)}
    q2 = {m["queueId"] for m in c2.messages() if real(m)}
    assert not (q1 & q2), f"both consumers read queues {q1 & q2}"


@pytest.mark.compat_case("push broadcast")
def test_broadcast(session: Session) -> None:
    s = session
    topic = s.name("t")
    group = s.name("cg")
    s.create_topic(topic)
    c1 = s.push(topic, group, model="broadcasting")
    c2 = s.push(topic, group, model="broadcasting")
    s.barrier([c1, c2], topic)
    specs = numbered("bcast", 12, tags="TagBc")
    s.produce(topic, specs)
    want = sorted(body_of(x) for x in specs)
    for c in (c1, c2):
        c.wait_messages(len(want), CONSUME_WAIT_S, lambda m: body_prefix(m, b"bcast-"))
    c1.wait_for(lambda evs: False, 1.0)
    c1.stop()
    c2.stop()
    for c in (c1, c2):
        got = sorted(body_of(m) for m in c.messages() if body_prefix(m, b"bcast-"))
        assert got == want, f"broadcast consumer got {len(got)} of {len(want)} (duplicates counted)\n{c.diagnostics()}"


@pytest.mark.compat_case("pull consumer, stored offsets")
def test_pull_stored_offsets(session: Session) -> None:
    s = session
    topic = s.name("t")
    group = s.name("pullg")
    specs = numbered("pull", 20, tags="TagP")
    s.produce(topic, specs)
    first = s.pull(topic, group, start="stored", limit=8, commit=True)
    starts = first.of("queue_start")
    assert starts and all(q["storedOffset"] in (-1, 0) for q in starts), starts
    got1 = [body_of(m) for m in first.messages()]
    assert len(got1) == 8, first.diagnostics()
    committed = {e["queueId"]: e["offset"] for e in first.of("committed")}
    # a second pull consumer of the same group starts where the broker says the group stopped
    second = s.pull(topic, group, start="stored", commit=True)
    stored = {e["queueId"]: e["storedOffset"] for e in second.of("queue_start")}
    for qid, off in committed.items():
        assert stored.get(qid) == off, f"queue {qid}: committed {off}, broker returned {stored.get(qid)}"
    got2 = [body_of(m) for m in second.messages()]
    assert not set(got1) & set(got2), "messages delivered again after their offsets were committed"
    assert sorted(got1 + got2) == sorted(body_of(x) for x in specs)
    # and from offset 0 everything is still there
    again = s.pull(topic, s.name("pullg2"), start="zero", commit=False)
    assert sorted(body_of(m) for m in again.messages()) == sorted(body_of(x) for x in specs)


@pytest.mark.compat_case("consume what the other client sent")
def test_cross_client(session: Session) -> None:
    """Interop through rmqd: bodies (incl. client-compressed ones), tags, keys and properties sent
    by the other client reach this one intact."""
    s = session
    other = "ons" if s.client == "cpp" else "cpp"  # the C++ wheel compresses bodies > 4 KiB itself
    problem = client_problem(other)
    if problem:
        missing(f"the other client is missing: {problem}")
    topic = s.name("t")
    specs = roundtrip_specs()
    s.produce(topic, specs, client=other)
    got = by_body(consume(s, topic, len(specs)))
    for spec in specs:
        body = body_of(spec)
        assert body in got, f"{len(body)} B body sent by {other} not received intact"
        (m,) = got[body]
        assert (m["tags"], m["keys"], m["userProperties"]) == (
            spec.get("tags", ""), spec.get("keys", ""), spec.get("props", {})), m


@pytest.mark.compat_case("cluster: survivor takes over")
def test_cluster_survivor_takes_over(session: Session) -> None:
    """One of two consumers of a group shuts down (UNREGISTER_CLIENT): the other one rebalances and
    consumes everything sent afterwards, from every queue, exactly once."""
    s = session
    topic, c1, c2 = settled_pair(s)
    assert c2.stop() == 0, c2.diagnostics()
    specs = numbered("after", 24, tags="TagSv")
    s.produce(topic, specs)
    got = c1.wait_messages(len(specs), 60, lambda m: body_prefix(m, b"after-"))
    c1.wait_for(lambda evs: False, 1.5)
    c1.stop()
    got = [m for m in c1.messages() if body_prefix(m, b"after-")]
    counts = Counter(body_of(m) for m in got)
    assert set(counts) == {body_of(x) for x in specs}, \
        f"the surviving consumer got {len(counts)} of {len(specs)}\n{c1.diagnostics()}"
    assert max(counts.values()) == 1, {k: v for k, v in counts.items() if v > 1}
    assert len({m["queueId"] for m in got}) == 4, "the survivor should read all 4 queues"
