"""Issue 5 semantics through the real clients, where their APIs reach: delay levels, retry after
RECONSUME_LATER, orderly consumption, SQL92 filtering.  The server of this module runs with
enablePropertyFilter=true (SQL92); everything else is the default."""

from __future__ import annotations

from typing import Iterator

import pytest

from compat_harness import RmqdServer, body_of, msg_spec
from compat_session import ExternalServer, Session, body_prefix, module_server

pytestmark = pytest.mark.timeout(240)

SERVER_CONF = "enablePropertyFilter=true\n"


@pytest.fixture(scope="module")
def rmqd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RmqdServer | ExternalServer]:
    yield from module_server(tmp_path_factory, "rmqd-semantics", SERVER_CONF)


def b64(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode()


@pytest.mark.compat_case("delay level 2 (5 s)")
def test_delay_level(session: Session) -> None:
    s = session
    topic, group = s.name("t"), s.name("cg")
    s.create_topic(topic)
    c = s.push(topic, group)
    s.barrier([c], topic)
    spec = msg_spec(b"delayed-" + s.tag.encode(), tags="TagDelay", props={"k": "v"})
    spec["delay_level"] = 2
    sent = s.produce(topic, [spec, msg_spec(b"now-" + s.tag.encode(), tags="TagNow")]).of("sent")
    t_sent = sent[0]["t"]
    got = c.wait_messages(1, 60, lambda m: body_prefix(m, b"delayed-"))
    now = c.wait_messages(1, 10, lambda m: body_prefix(m, b"now-"))
    c.stop()
    assert now, f"the undelayed message did not arrive\n{c.diagnostics()}"
    assert got, f"the level-2 delayed message never arrived\n{c.diagnostics()}"
    m = got[0]
    waited = m["t"] - t_sent
    assert waited >= 4.0, f"delivered after {waited:.1f} s; level 2 is 5 s"
    assert waited < 30, f"delivered only after {waited:.1f} s; level 2 is 5 s"
    assert m["topic"] == topic and m["tags"] == "TagDelay" and m["userProperties"] == {"k": "v"}, m
    assert len([x for x in c.messages() if body_prefix(x, b"delayed-")]) == 1


@pytest.mark.compat_case("retry after RECONSUME_LATER")
def test_retry_redelivers(session: Session) -> None:
    s = session
    topic, group = s.name("t"), s.name("cg")
    s.create_topic(topic)
    body = b"retry-" + s.tag.encode()
    c = s.push(topic, group, fail_prefix_b64=b64(b"retry-"), fail_times=1)
    s.barrier([c], topic)
    sent = s.produce(topic, [msg_spec(body, tags="TagRetry", keys="rk", props={"p": "1"})]).of("sent")
    got = c.wait_messages(2, 90, lambda m: body_of(m) == body)
    c.wait_for(lambda evs: False, 2.0)
    c.stop()
    got = [m for m in c.messages() if body_of(m) == body]
    assert len(got) >= 2, f"message delivered {len(got)} time(s); expected a redelivery after RECONSUME_LATER\n{c.diagnostics()}"
    first, second = got[0], got[1]
    assert not first["acked"] and second["acked"]
    assert first["reconsumeTimes"] == 0 and second["reconsumeTimes"] == 1, (first["reconsumeTimes"], second["reconsumeTimes"])
    assert second["tags"] == "TagRetry" and second["keys"] == "rk" and second["userProperties"] == {"p": "1"}
    assert second["topic"] == topic, "the client restores the original topic from RETRY_TOPIC"
    if s.client != "ons":
        assert second["msgId"] == first["msgId"] == sent[0]["msgId"], "msgId is the UNIQ_KEY, kept by the retry copy"
    else:
        assert second["properties"].get("ORIGIN_MESSAGE_ID") == first["msgId"], second["properties"]
    assert len(got) == 2, f"delivered {len(got)} times"


@pytest.mark.compat_case("orderly consumer")
def test_orderly(session: Session) -> None:
    s = session
    topic, group = s.name("t"), s.name("cg")
    s.create_topic(topic)
    specs = []
    for seq in range(6):
        for shard in range(3):
            spec = msg_spec(f"order-{shard}-{seq}".encode(), tags="TagO")
            spec["shard"] = shard
            specs.append(spec)
    c = s.push(topic, group, orderly=True)
    s.produce(topic, specs, mode="orderly")
    c.wait_messages(len(specs), 60, lambda m: body_prefix(m, b"order-"))
    c.wait_for(lambda evs: False, 1.0)
    c.stop()
    got = [body_of(m).decode() for m in c.messages() if body_prefix(m, b"order-")]
    assert sorted(got) == sorted(body_of(x).decode() for x in specs), c.diagnostics()
    for shard in range(3):
        seqs = [int(b.split("-")[2]) for b in got if b.split("-")[1] == str(shard)]
        assert seqs == sorted(seqs), f"shard {shard} consumed out of order: {seqs}"
    queues = {}
    for m in c.messages():
        if body_prefix(m, b"order-"):
            queues.setdefault(body_of(m).decode().split("-")[1], set()).add(m["queueId"])
    assert all(len(q) == 1 for q in queues.values()), f"a shard spread over queues: {queues}"


@pytest.mark.compat_case("SQL92 filter")
def test_sql92(session: Session) -> None:
    s = session
    topic, group = s.name("t"), s.name("cg")
    specs = [msg_spec(f"sql-{a}".encode(), tags=f"T{a % 2}", props={"a": str(a)}) for a in range(8)]
    s.produce(topic, specs)
    c = s.push(topic, group, expression="a BETWEEN 3 AND 5 AND TAGS = 'T1'", expression_type="SQL92")
    c.wait_messages(2, 60, lambda m: body_prefix(m, b"sql-"))
    c.wait_for(lambda evs: False, 3.0)
    c.stop()
    got = sorted(body_of(m) for m in c.messages() if body_prefix(m, b"sql-"))
    assert got == [b"sql-3", b"sql-5"], f"{got}\n{c.diagnostics()}"
