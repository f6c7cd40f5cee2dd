"""The Go driver against a live `rmqd serve`: every role and mode it implements, once.

The compat cases (test_compat_*.py) run the Go client as one column of the matrix once the
harness discovers drivers/go/client.py; this module proves the driver itself — its JSON events,
and that what the official Go client does through it reaches rmqd and comes back intact — with
one server for the module (transaction check-backs every second, SQL92 on, small store files).
"""

from __future__ import annotations

import base64
import importlib.util
import os
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import pytest

import compat_harness as harness
from compat_harness import DriverProc, RmqdServer, body_of, msg_spec, run_driver
from compat_session import Session

pytestmark = pytest.mark.timeout(120)

HERE = Path(__file__).resolve().parent
SERVER_CONF = (
    "mappedFileSizeCommitLog=4194304\nmappedFileSizeConsumeQueue=12000\nenablePropertyFilter=true\n"
    "transactionCheckInterval=1000\ntransactionTimeOut=1000\n"
)


def _load_client() -> Any:
    """drivers/go/client.py under a name no other driver's client.py can shadow."""
    spec = importlib.util.spec_from_file_location("rmqd_compat_go_client", HERE / "client.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


go = _load_client()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RmqdServer]:
    problem = go.problem()
    if problem:
        harness.missing(problem)
    base = tmp_path_factory.mktemp("rmqd-go")
    conf = base / "broker.conf"
    conf.write_text(SERVER_CONF)
    s = RmqdServer(store=base / "store", log_path=base / "rmqd.log", conf=conf).start()
    try:
        yield s
    finally:
        code = s.stop()
    assert code == 0, f"rmqd exited {code} after SIGTERM\n{harness.tail(s.log_path)}"


@pytest.fixture
def ns(server: RmqdServer, monkeypatch: pytest.MonkeyPatch) -> str:
    """The name server; the harness runs client "go" through this driver."""
    assert server.alive(), harness.tail(server.log_path)
    original = harness.driver_command
    monkeypatch.setattr(harness, "driver_command",
                        lambda client, f: go.command(f) if client == "go" else original(client, f))
    return server.namesrv


@pytest.fixture
def g(ns: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Session]:
    s = Session("go", tmp_path, ns, request.node.name.removeprefix("test_")[:20])
    try:
        yield s
    finally:
        s.close()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def starts(m: dict[str, Any], prefix: bytes) -> bool:
    return body_of(m).startswith(prefix)


def wait_stop(d: DriverProc, n: int, prefix: bytes, timeout: float = 30.0, linger: float = 1.0) -> list[dict]:
    d.wait_messages(n, timeout, lambda m: starts(m, prefix))
    d.wait_for(lambda evs: False, linger)
    assert d.stop() == 0, d.diagnostics()
    return [m for m in d.messages() if starts(m, prefix)]


# --------------------------------------------------------------------------------------------


def test_client_module() -> None:
    assert go.NAME == "go"
    assert "v2.1.3-0.20251226070945-2173d070fd1b" in go.LABEL
    assert go.has_api("send oneway") is True and go.has_api("SQL92 filter") is True
    assert "queryMessage" in go.has_api("queryMessage by key")
    assert "viewMessage" in go.has_api("viewMessage by offsetMsgId")
    assert go.command(Path("/x.json")) == [str(HERE / "bin" / "rmqd-go-driver"), "/x.json"]


def test_every_send_mode_round_trips(g: Session) -> None:
    topic = g.name("t")
    g.create_topic(topic)
    props = {"p1": "v1", "unicode": "ünïcødé ✓", "spaces": "a b  c"}
    sync = [msg_spec(b"sync-0", tags="TagA", keys="k1 k2", props=props),
            msg_spec(b"sync-1" + bytes(range(256)) * 4, tags="TagBin"),
            msg_spec(b"sync-2" + b"z" * 5000, tags="TagZ"),  # > 4 KiB: the client compresses it
            msg_spec(b"sync-3" + os.urandom(300 * 1024)),
            msg_spec(b"sync-4")]
    sync[4]["flag"] = 7
    sent = {m: g.produce(topic, specs, mode=m).of("sent") for m, specs in (
        ("sync", sync),
        ("async", [msg_spec(f"async-{i}".encode(), tags="TagAs") for i in range(6)]),
        ("oneway", [msg_spec(f"oneway-{i}".encode()) for i in range(3)]),
        ("batch", [msg_spec(f"batch-{i}".encode(), tags="TagBatch") for i in range(3)]),
        ("orderly", [dict(msg_spec(f"orderly-{i}".encode()), shard=i % 3) for i in range(6)]),
    )}
    assert [e["index"] for e in sent["sync"]] == list(range(5))
    assert {e["status"] for e in sent["sync"] + sent["async"] + sent["batch"]} == {"SEND_OK"}
    assert sorted(e["index"] for e in sent["async"]) == list(range(6))
    assert {e["status"] for e in sent["oneway"]} == {"ONEWAY"}
    (batch,) = sent["batch"]
    assert batch["count"] == 3 and len(batch["offsetMsgId"].split(",")) == 3, batch
    for e in sent["orderly"]:
        assert e["queueId"] == e["shard"] % 4, e  # shard % queue count, like SelectMessageQueueByHash
    c = g.push(topic, g.name("cg"))
    want = 5 + 6 + 3 + 3 + 6
    got = [m for m in wait_stop(c, want, b"", linger=2.0) if body_of(m) != b"create"]
    counts = Counter(body_of(m) for m in got)
    assert len(counts) == want and max(counts.values()) == 1, sorted(counts)
    by = {body_of(m): m for m in got}
    for spec, e in zip(sync, sent["sync"]):
        m = by[body_of(spec)]
        assert (m["tags"], m["keys"], m["userProperties"]) == (spec.get("tags", ""), spec.get("keys", ""),
                                                              spec.get("props", {}))
        assert m["msgId"] == e["msgId"] == m["uniqKey"] and m["offsetMsgId"] == e["offsetMsgId"], (m, e)
        assert (m["queueId"], m["queueOffset"]) == (e["queueId"], e["queueOffset"])
        assert m["reconsumeTimes"] == 0 and m["acked"]
    assert by[body_of(sync[2])]["sysFlag"] & 1 and by[body_of(sync[3])]["sysFlag"] & 1, "compressed flag"
    assert by[body_of(sync[4])]["flag"] == 7
    assert {by[f"oneway-{i}".encode()]["msgId"] for i in range(3)} == {e["msgId"] for e in sent["oneway"]}
    assert {by[f"batch-{i}".encode()]["offsetMsgId"] for i in range(3)} == set(batch["offsetMsgId"].split(","))


def test_pull_with_stored_offsets(g: Session) -> None:
    topic, group = g.name("t"), g.name("pullg")
    specs = [msg_spec(f"pull-{i}".encode()) for i in range(20)]
    g.produce(topic, specs)
    first = g.pull(topic, group, start="stored", limit=8)
    assert [q["queueId"] for q in first.first("queues")["queues"]] == [0, 1, 2, 3]
    assert all(q["storedOffset"] in (-1, 0) for q in first.of("queue_start")), first.of("queue_start")
    got1 = [body_of(m) for m in first.messages()]
    assert len(got1) == 8, first.diagnostics()
    committed = {e["queueId"]: e["offset"] for e in first.of("committed")}
    second = g.pull(topic, group, start="stored")
    stored = {e["queueId"]: e["storedOffset"] for e in second.of("queue_start")}
    assert stored == committed, (stored, committed)
    got2 = [body_of(m) for m in second.messages()]
    assert not set(got1) & set(got2)
    assert sorted(got1 + got2) == sorted(body_of(s) for s in specs)
    again = g.pull(topic, g.name("pullg2"), start="zero", commit=False)
    assert sorted(body_of(m) for m in again.messages()) == sorted(body_of(s) for s in specs)
    assert not again.of("committed")
    for d in (first, second, again):
        assert not d.of("pull_error"), d.diagnostics()


def test_filters_tag_and_sql92(g: Session) -> None:
    topic = g.name("t")
    specs = [msg_spec(f"f-{a}".encode(), tags=f"T{a % 3}", props={"a": str(a)}) for a in range(9)]
    g.produce(topic, specs)
    tag = g.push(topic, g.name("cgtag"), expression="T0 || T2")
    sql = g.push(topic, g.name("cgsql"), expression="a BETWEEN 3 AND 7 AND TAGS <> 'T1'", expression_type="SQL92")
    got_tag = sorted(body_of(m) for m in wait_stop(tag, 6, b"f-", linger=2.0))
    got_sql = sorted(body_of(m) for m in wait_stop(sql, 3, b"f-", linger=2.0))
    assert got_tag == sorted(f"f-{a}".encode() for a in range(9) if a % 3 != 1)
    assert got_sql == [b"f-3", b"f-5", b"f-6"]


def test_broadcast_and_orderly(g: Session) -> None:
    topic = g.name("t")
    g.create_topic(topic)
    group = g.name("cgb")
    b1, b2 = g.push(topic, group, model="broadcasting"), g.push(topic, group, model="broadcasting")
    orderly = g.push(topic, g.name("cgo"), orderly=True)
    for r in range(10):  # a broadcast consumer starts at the queues' end: warm up until both read
        if all(any(starts(m, b"warm-") for m in c.messages()) for c in (b1, b2)):
            break
        g.produce(topic, [msg_spec(f"warm-{r}-{i}".encode()) for i in range(4)])
        b2.wait_for(lambda evs: False, 1.0)
    specs = [dict(msg_spec(f"ord-{shard}-{seq}".encode()), shard=shard) for seq in range(5) for shard in range(3)]
    g.produce(topic, specs, mode="orderly")
    want = sorted(body_of(s) for s in specs)
    for c in (b1, b2):
        assert sorted(body_of(m) for m in wait_stop(c, len(want), b"ord-")) == want, c.diagnostics()
    got = [body_of(m).decode() for m in wait_stop(orderly, len(want), b"ord-")]
    assert sorted(got) == [w.decode() for w in want]
    for shard in range(3):
        seqs = [int(b.split("-")[2]) for b in got if b.split("-")[1] == str(shard)]
        assert seqs == list(range(5)), (shard, seqs)


def test_delay_retry_and_dlq(g: Session) -> None:
    topic, group = g.name("t"), g.name("cg")
    g.create_topic(topic)
    c = g.push(topic, group, fail_prefix_b64=b64(b"retry-"), fail_times=1, max_reconsume_times=1)
    dlq = g.push(topic, g.name("cgdlq"), fail_prefix_b64=b64(b"dlq-"), fail_times=99, max_reconsume_times=1)
    delayed = dict(msg_spec(b"delay-x", props={"k": "v"}), delay_level=2)
    sent = g.produce(topic, [delayed, msg_spec(b"retry-x", tags="TR", keys="rk"), msg_spec(b"dlq-x")]).of("sent")
    got = c.wait_messages(3, 40, lambda m: body_of(m) in (b"delay-x", b"retry-x"))
    fails = dlq.wait_messages(2, 40, lambda m: body_of(m) == b"dlq-x")
    c.wait_for(lambda evs: False, 1.0)
    c.stop()
    dlq.stop()
    (d,) = [m for m in c.messages() if body_of(m) == b"delay-x"]
    assert 4.0 <= d["t"] - sent[0]["t"] < 30 and d["userProperties"] == {"k": "v"}, d
    first, second = [m for m in got if body_of(m) == b"retry-x"]
    assert (first["acked"], first["reconsumeTimes"]) == (False, 0)
    assert (second["acked"], second["reconsumeTimes"]) == (True, 1)
    assert second["topic"] == topic and second["msgId"] == first["msgId"] == sent[1]["msgId"]
    assert (second["tags"], second["keys"]) == ("TR", "rk")
    assert [m["reconsumeTimes"] for m in fails if body_of(m) == b"dlq-x"] == [0, 1]
    dead = g.pull("%DLQ%" + g.name("cgdlq"), g.name("dlqreader"), start="zero", commit=False)
    assert not dead.of("pull_error"), dead.diagnostics()
    (m,) = dead.messages()
    assert body_of(m) == b"dlq-x" and m["properties"]["RETRY_TOPIC"] == topic, m


def test_transactions_with_check_back(g: Session) -> None:
    topic = g.name("t")
    g.create_topic(topic)
    c = g.push(topic, g.name("cg"))
    specs = [dict(msg_spec(b"tx-commit"), tx="commit"), dict(msg_spec(b"tx-rollback"), tx="rollback"),
             dict(msg_spec(b"tx-check-commit"), tx="unknown", check="commit"),
             dict(msg_spec(b"tx-check-rollback"), tx="unknown", check="rollback", check_unknown_times=1)]
    d = g.produce(topic, specs, mode="transaction", check_wait_s=40)
    assert [e["localState"] for e in d.of("sent")] == ["COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW", "UNKNOW"]
    checks = [(e["index"], e["answer"]) for e in d.of("check")]
    assert (2, "COMMIT_MESSAGE") in checks and (3, "UNKNOW") in checks and (3, "ROLLBACK_MESSAGE") in checks, checks
    assert not {i for i, _ in checks} & {0, 1}, f"settled transactions were checked: {checks}"
    got = wait_stop(c, 2, b"tx-", linger=3.0)
    assert sorted(body_of(m) for m in got) == [b"tx-check-commit", b"tx-commit"]
    sent_ids = {e["index"]: e["msgId"] for e in d.of("sent")}
    assert {m["msgId"] for m in got} == {sent_ids[0], sent_ids[2]}


def test_errors_and_credentials(g: Session) -> None:
    # a topic the name server does not know, and its default topic TBW102 is there: auto-create
    topic = g.name("auto")
    (e,) = g.produce(topic, [msg_spec(b"auto")]).of("sent")
    assert e["status"] == "SEND_OK"
    # credentials are passed to the client (rmqd without ACL accepts signed requests)
    (e,) = g.produce(topic, [msg_spec(b"signed")], accessKey="RocketMQ", secretKey="12345678").of("sent")
    assert e["status"] == "SEND_OK"
    # a consumer of a topic that does not exist: the Go client refuses to start (Java only warns)
    d = run_driver("go", {"role": "pull", "namesrv": g.namesrv, "topic": g.name("nosuch"), "group": g.name("pg")},
                   g.workdir, "nosuch-pull", 30)
    (err,) = d.of("pull_error")
    assert "route info not found" in err["error"] and d.first("done"), d.diagnostics()
    bad = run_driver("go", {"role": "query", "namesrv": g.namesrv, "topic": topic}, g.workdir, "query", 30)
    assert bad.proc.returncode == 2 and "no query/view message API" in bad.first("driver_error")["error"]
