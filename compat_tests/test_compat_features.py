"""The issue-12 cases beyond sends and consumers, for every client whose API has them:
transactions with check-back, retry into the DLQ, queryMessage by key, viewMessage by
offsetMsgId and by unique id, topic auto-create through TBW102.

The module's server checks half messages every 2 s (transactionTimeOut and
transactionCheckInterval, RocketMQ's broker.conf names), runs 1 s delay levels (so a retry comes
back after ~1 s and the DLQ case stays short) and enables SQL92 filtering."""

from __future__ import annotations

import os
import time
from typing import Any, Iterator

import pytest

from compat_harness import RmqdServer, body_of, client_has_api, msg_spec, run_driver
from compat_session import ExternalServer, Session, body_prefix, module_server

pytestmark = pytest.mark.timeout(240)

SERVER_CONF = {
    "enablePropertyFilter": "true",
    "transactionTimeOut": "2000",
    "transactionCheckInterval": "2000",
    "messageDelayLevel": " ".join(["1s"] * 18),
}


@pytest.fixture(scope="module")
def rmqd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RmqdServer | ExternalServer]:
    yield from module_server(tmp_path_factory, "rmqd-features",
                             "".join(f"{k}={v}\n" for k, v in SERVER_CONF.items()))


def query(s: Session, topic: str, timeout: float = 60.0, **fields: Any):
    """Run the driver's query role (queryMessage / viewMessage through the client's API)."""
    case = {"role": "query", "namesrv": s.namesrv, "topic": topic, "group": s.name("qg"), **fields}
    d = run_driver(s.client, case, s.workdir, s._next(f"{s.client}-query"), timeout)
    assert d.first("done") and not d.of("driver_error"), d.diagnostics()
    return d


@pytest.mark.compat_case("transaction: commit/rollback/check-back")
def test_transaction_check_back(session: Session) -> None:
    """Committed and rolled-back half messages, and two left UNKNOWN: the broker checks back
    (CHECK_TRANSACTION_STATE), the first check is answered UNKNOWN again, the second settles
    one with commit and one with rollback. Only the committed two are ever consumed."""
    s = session
    topic = s.name("t")
    s.create_topic(topic)
    c = s.push(topic, s.name("cg"))
    s.barrier([c], topic)
    specs = [msg_spec(b"tx-commit", tags="TagTx", keys="txc"), msg_spec(b"tx-rollback", tags="TagTx"),
             msg_spec(b"tx-check-commit", tags="TagTx", keys="txcc"), msg_spec(b"tx-check-rollback", tags="TagTx")]
    for spec, (tx, check) in zip(specs, [("commit", None), ("rollback", None), ("unknown", "commit"),
                                         ("unknown", "rollback")]):
        spec["tx"] = tx
        if check:
            spec["check"] = check
            spec["check_unknown_times"] = 1
    p = s.produce(topic, specs, mode="transaction", check_wait_s=60, timeout=90)
    sent = {e["index"]: e for e in p.of("sent")}
    assert [sent[i]["localState"] for i in range(4)] == ["COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW", "UNKNOW"], sent
    assert not p.of("check_timeout"), f"the broker did not check back every UNKNOWN half message\n{p.diagnostics()}"
    checks = p.of("check")
    for idx, final in ((2, "COMMIT_MESSAGE"), (3, "ROLLBACK_MESSAGE")):
        mine = [e for e in checks if e["index"] == idx]
        assert [e["answer"] for e in mine][:2] == ["UNKNOW", final], mine
        # the check carries the half message as stored: the original topic and body
        assert mine[0]["properties"].get("REAL_TOPIC", mine[0]["topic"]) == topic, mine[0]
        assert body_of(mine[0]) == body_of(specs[idx])
    assert not [e for e in checks if e["index"] in (0, 1)], "a settled transaction was checked back"
    c.wait_messages(2, 30, lambda m: body_prefix(m, b"tx-"))
    c.wait_for(lambda evs: False, 3.0)
    c.stop()
    got = sorted(body_of(m) for m in c.messages() if body_prefix(m, b"tx-"))
    assert got == [b"tx-check-commit", b"tx-commit"], f"{got}\n{c.diagnostics()}"


@pytest.mark.compat_case("retry -> DLQ (maxReconsumeTimes)")
def test_retry_to_dlq(session: Session) -> None:
    """A message that always fails is delivered 1 + maxReconsumeTimes times and then stored in
    %DLQ%<group> (write-only: no consumer reads it), where the client's
    viewMessage(topic, uniqueId) finds it if the client has that API."""
    s = session
    topic, group = s.name("t"), s.name("cg")
    s.create_topic(topic)
    c = s.push(topic, group, fail_prefix_b64=msg_spec(b"dlq-")["body_b64"], fail_times=99, max_reconsume_times=1)
    s.barrier([c], topic)
    body = b"dlq-" + s.tag.encode()
    sent = s.produce(topic, [msg_spec(body, tags="TagDlq", keys="dk")]).of("sent")
    c.wait_messages(2, 60, lambda m: body_of(m) == body)
    c.wait_for(lambda evs: False, 4.0)
    c.stop()
    got = [m for m in c.messages() if body_of(m) == body]
    assert [m["reconsumeTimes"] for m in got] == [0, 1], f"{[m['reconsumeTimes'] for m in got]}\n{c.diagnostics()}"
    if client_has_api(s.client, "viewMessage") is not True:
        return
    uniq = sent[0].get("uniqKey") or sent[0]["msgId"]
    dlq = f"%DLQ%{group}"
    deadline = time.monotonic() + 30
    while True:
        q = query(s, dlq, uniqIds=[uniq])
        found = q.of("view_result")
        if found or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert found, f"the message is not in {dlq}: {q.of('view_error')}"
    m = found[0]["message"]
    assert m["topic"] == dlq and body_of(m) == body, m
    # SendMessageProcessor.asyncConsumerSendMsgBack: the DLQ copy counts the failed retry too
    assert m["reconsumeTimes"] == 2 and m["tags"] == "TagDlq" and m["keys"] == "dk", m


def query_until(s: Session, topic: str, want: int, event: str, **fields: Any):
    """The index is written by dispatch after the send's answer: ask again for up to 15 s."""
    deadline = time.monotonic() + 15
    while True:
        d = query(s, topic, **fields)
        if len(d.of(event)) >= want and all(e.get("messages", [1]) for e in d.of(event)) or time.monotonic() > deadline:
            return d
        time.sleep(1)


@pytest.mark.compat_case("queryMessage by key")
def test_query_by_key(session: Session) -> None:
    s = session
    topic = s.name("t")
    specs = [msg_spec(f"qk-{i}".encode(), tags="TagQ", keys=f"key{i}_{s.tag} shared_{s.tag}") for i in range(3)]
    s.produce(topic, specs)
    d = query_until(s, topic, 2, "query_result", keys=[f"key1_{s.tag}", f"shared_{s.tag}"])
    res = {e["key"]: e for e in d.of("query_result")}
    assert set(res) == {f"key1_{s.tag}", f"shared_{s.tag}"}, d.diagnostics()
    assert [body_of(m) for m in res[f"key1_{s.tag}"]["messages"]] == [b"qk-1"]
    assert sorted(body_of(m) for m in res[f"shared_{s.tag}"]["messages"]) == [b"qk-0", b"qk-1", b"qk-2"]
    assert all(m["topic"] == topic for m in res[f"shared_{s.tag}"]["messages"])


@pytest.mark.compat_case("viewMessage by offsetMsgId / unique id")
def test_view_message(session: Session) -> None:
    s = session
    topic = s.name("t")
    specs = [msg_spec(f"view-{i}".encode(), tags="TagV", keys="vk", props={"n": str(i)}) for i in range(2)]
    sent = s.produce(topic, specs).of("sent")
    offset_ids = [e["offsetMsgId"] for e in sent]
    uniq_ids = [e.get("uniqKey") or e["msgId"] for e in sent]
    d = query_until(s, topic, 4, "view_result", offsetMsgIds=offset_ids, uniqIds=uniq_ids)
    views = d.of("view_result")
    assert len(views) == 4, f"{d.of('view_error')}\n{d.diagnostics()}"
    for e in views:
        i = (offset_ids + uniq_ids).index(e["id"]) % 2
        m = e["message"]
        assert body_of(m) == f"view-{i}".encode() and m["topic"] == topic, (e["by"], m)
        assert m["userProperties"] == {"n": str(i)} and m["tags"] == "TagV" and m["keys"] == "vk", m
        assert m["offsetMsgId"] == offset_ids[i] and m["properties"].get("UNIQ_KEY") == uniq_ids[i], m
        assert m["queueOffset"] == sent[i]["queueOffset"], (m["queueOffset"], sent[i])


@pytest.mark.compat_case("topic auto-create (TBW102)")
def test_topic_auto_create(session: Session) -> None:
    """A first send to an unknown topic goes out on TBW102's route and creates the topic with
    defaultTopicQueueNums (4) queues; its route then lists them."""
    s = session
    topic = s.name("t")
    sent = s.produce(topic, [msg_spec(b"auto-0", tags="TagAuto")]).of("sent")
    assert sent and sent[0]["status"] == "SEND_OK", sent
    s.produce(topic, [msg_spec(f"auto-{i}".encode(), tags="TagAuto") for i in range(1, 9)])
    d = s.pull(topic, s.name("pullg"), start="zero", commit=False) if s.client not in ("ons",) else None
    if d is not None:
        assert len(d.of("queues")[0]["queues"]) == 4, d.of("queues")
        assert sorted(body_of(m) for m in d.messages()) == sorted(f"auto-{i}".encode() for i in range(9))
    else:
        c = s.push(topic, s.name("cg"), consume_from="CONSUME_FROM_FIRST_OFFSET")
        c.wait_messages(9, 30, lambda m: body_prefix(m, b"auto-"))
        c.stop()
        assert sorted(body_of(m) for m in c.messages()) == sorted(f"auto-{i}".encode() for i in range(9))


@pytest.mark.compat_case("large bodies (to ~3.75 MiB)")
def test_large_bodies(session: Session) -> None:
    """Bodies near the 4 MiB maxMessageSize: an incompressible one and a compressible one (the
    client compresses bodies over 4 KiB and sets the compressed sysFlag); both come back intact."""
    from test_compat_clients import consume

    s = session
    topic = s.name("t")
    big = os.urandom(3 * 1024 * 1024 + 768 * 1024)
    text = (b"large compressible body line\n" * 80000)[: 2 * 1024 * 1024]
    specs = [msg_spec(b"large-r" + big, tags="TagL", keys="lk"), msg_spec(b"large-t" + text, tags="TagL")]
    # 4 MiB is the broker's maxMessageSize and the Java client's default; the C++ client's is 128 KiB
    sent = s.produce(topic, specs, timeout=120, max_message_size=4 * 1024 * 1024).of("sent")
    assert [e["status"] for e in sent] == ["SEND_OK", "SEND_OK"], sent
    got = consume(s, topic, 2, where=lambda m: body_prefix(m, b"large-"))
    bodies = sorted(body_of(m) for m in got)
    assert len(bodies) == 2, [len(b) for b in bodies]
    assert bodies == sorted(body_of(x) for x in specs), [len(b) for b in bodies]
