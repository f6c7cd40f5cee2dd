"""RocketMQ 5.x gRPC clients (Java 5.0.8, Python 5.1.2, Node 1.0.8) against rmqd and against
Apache RocketMQ 5.3.3's proxy in the same run: every case with every client that has the API, on
both brokers, the outcomes compared case for case (grpc5_results.py prints both columns).

Both brokers get the same broker.conf keys (enablePropertyFilter for SQL92, a short transaction
check interval); topics are made with their 5.x message.type and groups with their retry policy
through rocketmq-tools 5.3.3 (grpc5_harness.topic_admin), as a user would."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

import compat_harness as harness
import grpc5_results as results
from grpc5_harness import (CLIENTS, ApacheTarget, GrpcSession, RmqdTarget, body_of, message_count, spec,
                           wait_done)

pytestmark = pytest.mark.timeout(420)

#: the same broker.conf keys on both brokers
BROKER_CONF = {"enablePropertyFilter": "true", "transactionCheckInterval": "3000", "transactionTimeOut": "2000"}


@pytest.fixture(scope="module")
def rmqd_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RmqdTarget]:
    t = RmqdTarget(tmp_path_factory.mktemp("grpc5-rmqd"), BROKER_CONF).start()
    try:
        yield t
    finally:
        t.stop()


@pytest.fixture(scope="module")
def apache_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheTarget]:
    t = ApacheTarget(tmp_path_factory.mktemp("grpc5-apache"), broker_conf=BROKER_CONF).start()
    try:
        yield t
    finally:
        t.stop()


@pytest.fixture(params=list(CLIENTS))
def gclient(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def brokers(rmqd_target: RmqdTarget, apache_target: ApacheTarget) -> tuple[RmqdTarget, ApacheTarget]:
    return rmqd_target, apache_target


def run_case(case: str, gclient: str, target: Any, tmp_path: Path, body: Callable[[GrpcSession], None]) -> None:
    """One broker: skip a client without the API (or not installed), record the outcome, clean up."""
    with results.recording(case, gclient, target.kind):
        api = CLIENTS[gclient].has_api(case)
        if api is not True:
            pytest.skip(str(api))
        problem = CLIENTS[gclient].problem()
        if problem:
            harness.missing(problem)
        s = GrpcSession(gclient, target, tmp_path, case.split(" ")[0])
        try:
            body(s)
        finally:
            s.close()


def both(case: str, gclient: str, brokers: tuple[Any, ...], tmp_path: Path,
         body: Callable[[GrpcSession], None]) -> None:
    """The case on rmqd and on Apache RocketMQ 5.3.3 at once (two threads); it passes when it
    passes on both, and fails when it fails on either, naming the broker, and when the two
    outcomes differ without a listed reason."""
    import threading

    outcomes: dict[str, BaseException | None] = {}

    def one(target: Any) -> None:
        workdir = tmp_path / target.kind
        workdir.mkdir()
        try:
            run_case(case, gclient, target, workdir, body)
            outcomes[target.kind] = None
        except BaseException as exc:  # noqa: BLE001 - reported below with the broker's name
            outcomes[target.kind] = exc

    threads = [threading.Thread(target=one, args=(t,)) for t in brokers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(400)
    skips = [e for e in outcomes.values() if isinstance(e, pytest.skip.Exception)]
    if len(skips) == len(brokers):
        raise skips[0]
    failed = {k: e for k, e in outcomes.items() if e is not None}
    if failed:
        lines = [f"{k}: {type(e).__name__}: {str(e)[:1500]}" for k, e in failed.items()]
        pytest.fail(f"{case} / {gclient} failed on {', '.join(failed)}\n" + "\n".join(lines), pytrace=False)


def _consume_ready(d: Any, timeout: float = 60) -> None:
    """The consumer's first receive is on its way: POP starts a new group at the queue's end."""
    assert d.wait_event("polling", timeout), f"consumer did not start\n{d.diagnostics()}"
    time.sleep(1.5)


def _sent_ok(d: Any, n: int) -> list[dict]:
    sent = d.of("sent")
    assert len(sent) == n and not d.of("send_error") and d.first("done"), d.diagnostics()
    return sent


# -- sending and receiving ------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["sync", "async"])
def test_send_and_receive(gclient: str, brokers: Any, tmp_path: Path, mode: str) -> None:
    """send normal sync / async; SimpleConsumer receive + ack; keys, tags, properties, ids, bodies."""
    def body(s: GrpcSession) -> None:
        t = s.topics(t="NORMAL")["t"]
        group = s.name("g")
        consumer = s.simple(t, group, expect=5, invisible_s=15)
        _consume_ready(consumer)
        specs = [spec(f"m{i}".encode() + b"\x00\xff" * i, tag=f"Tag{i % 2}", keys=[f"k{i}", f"kk{i}"],
                      props={"color": "red", "i": str(i), "ünï": "✓"}) for i in range(5)]
        sent = _sent_ok(s.produce(t, specs, mode=mode), 5)
        wait_done(consumer, 60)
        got = consumer.messages()
        assert sorted(body_of(m) for m in got) == sorted(body_of(x) for x in specs), consumer.diagnostics()
        by_body = {body_of(m): m for m in got}
        for i, x in enumerate(specs):
            m = by_body[body_of(x)]
            assert m["tag"] == x["tag"] and sorted(m["keys"]) == sorted(x["keys"])
            assert {k: m["props"].get(k) for k in x["props"]} == x["props"]
            assert m["deliveryAttempt"] == 1
        assert {m["msgId"] for m in got} == {e["msgId"] for e in sent}
        assert len(consumer.of("ack")) == 5 and not consumer.of("ack_error")
    both(f"send {mode} + receive/ack", gclient, brokers, tmp_path, body)


def test_large_bodies(gclient: str, brokers: Any, tmp_path: Path) -> None:
    def body(s: GrpcSession) -> None:
        t = s.topics(t="NORMAL")["t"]
        # a 4 MiB answer takes a while on a loaded box: room for it within each receive's deadline
        consumer = s.simple(t, s.name("g"), expect=3, invisible_s=30, max_count=1, request_timeout_s=15)
        _consume_ready(consumer)
        sizes = [1, 1024 * 1024, 4 * 1024 * 1024 - 8 * 1024]
        specs = [spec(bytes([i % 251]) * n, tag="Big") for i, n in enumerate(sizes)]
        _sent_ok(s.produce(t, specs, timeout=120, request_timeout_s=15), 3)
        wait_done(consumer, 90)
        got = consumer.messages()
        assert sorted(m["body_len"] for m in got) == sizes, consumer.diagnostics()
        import hashlib
        want = {hashlib.sha256(body_of(x)).hexdigest() for x in specs if len(body_of(x)) > 64 * 1024}
        assert {m["body_sha256"] for m in got if "body_sha256" in m} == want
    both("bodies up to 4 MiB", gclient, brokers, tmp_path, body)


def test_fifo_order_per_group(gclient: str, brokers: Any, tmp_path: Path) -> None:
    """Two producers at once, each with its own message groups; the orderly group gets every
    group in send order (the next of a group only after the previous is acknowledged)."""
    def body(s: GrpcSession) -> None:
        t = s.topics(t="FIFO")["t"]
        group = s.name("g")
        s.groups((group, True, 16))
        consumer = s.simple(t, group, expect=24, invisible_s=20)
        _consume_ready(consumer)
        specs = [spec(f"{g}-{i}".encode(), group=f"mg{g}", thread=g % 2) for i in range(6) for g in range(4)]
        _sent_ok(s.produce(t, specs, threads=2), 24)
        wait_done(consumer, 90)
        got = [body_of(m).decode() for m in consumer.messages()]
        assert len(got) == 24, consumer.diagnostics()
        for g in range(4):
            seq = [int(x.split("-")[1]) for x in got if x.startswith(f"{g}-")]
            assert seq == list(range(6)), (g, got)
    both("FIFO order per message group, 2 producers", gclient, brokers, tmp_path, body)


def test_delay(gclient: str, brokers: Any, tmp_path: Path) -> None:
    def body(s: GrpcSession) -> None:
        t = s.topics(t="DELAY")["t"]
        consumer = s.simple(t, s.name("g"), expect=2, invisible_s=15)
        _consume_ready(consumer)
        start = time.time()
        _sent_ok(s.produce(t, [spec(b"d3", delay_ms=3000), spec(b"d6", delay_ms=6000)]), 2)
        wait_done(consumer, 60)
        got = {body_of(m): m["t"] for m in consumer.messages()}
        assert set(got) == {b"d3", b"d6"}, consumer.diagnostics()
        # the timers' precision is a second (timerPrecisionMs): never more than that early
        assert got[b"d3"] >= start + 3 - 1.2 and got[b"d6"] >= start + 6 - 1.2, (start, got)
        assert all("deliveryTimestamp" in m for m in consumer.messages())
    both("delay by delivery timestamp", gclient, brokers, tmp_path, body)


def test_transactions(gclient: str, brokers: Any, tmp_path: Path) -> None:
    """commit, rollback, unknown then committed by the check-back."""
    def body(s: GrpcSession) -> None:
        t = s.topics(t="TRANSACTION")["t"]
        consumer = s.simple(t, s.name("g"), expect=2, min_s=12, invisible_s=15)
        _consume_ready(consumer)
        specs = [spec(b"commit", tx="commit", check="commit"), spec(b"rollback", tx="rollback", check="rollback"),
                 spec(b"unknown", tx="unknown", check="commit")]
        p = s.produce(t, specs, mode="transaction", check_wait_s=25, timeout=60)
        _sent_ok(p, 3)
        assert b"unknown" in {body_of(c) for c in p.of("check")}, p.diagnostics()
        wait_done(consumer, 60)
        bodies = sorted(body_of(m) for m in consumer.messages())
        assert sorted(set(bodies)) == [b"commit", b"unknown"], consumer.diagnostics()
        if s.target.kind == "rmqd":  # Apache may store a second copy when the check-back meets the commit
            assert bodies == [b"commit", b"unknown"], consumer.diagnostics()
    both("transaction commit / rollback / unknown then check", gclient, brokers, tmp_path, body)


# -- consumption semantics -----------------------------------------------------------------------

def test_redelivery_after_invisible_time(gclient: str, brokers: Any, tmp_path: Path) -> None:
    """Not acknowledged: back after the invisible time (10 s, the proxy's minimum), not before."""
    def body(s: GrpcSession) -> None:
        t = s.topics(t="NORMAL")["t"]
        consumer = s.simple(t, s.name("g"), expect=2, min_s=16, invisible_s=10, ack="after:2", max_count=1)
        _consume_ready(consumer)
        _sent_ok(s.produce(t, [spec(b"again")]), 1)
        wait_done(consumer, 80)
        got = consumer.messages()
        assert [m["deliveryAttempt"] for m in got] == [1, 2], consumer.diagnostics()
        gap = got[1]["t"] - got[0]["t"]
        assert 9.0 <= gap <= 25, gap
    both("no ack: redelivered after the invisible time", gclient, brokers, tmp_path, body)


def test_change_invisible_duration(gclient: str, brokers: Any, tmp_path: Path) -> None:
    def body(s: GrpcSession) -> None:
        t = s.topics(t="NORMAL")["t"]
        consumer = s.simple(t, s.name("g"), expect=2, invisible_s=30, ack="change:3", max_count=1)
        _consume_ready(consumer)
        _sent_ok(s.produce(t, [spec(b"soon")]), 1)
        wait_done(consumer, 60)
        got = consumer.messages()
        assert [m["deliveryAttempt"] for m in got] == [1, 2] and consumer.of("changed"), consumer.diagnostics()
        gap = got[1]["t"] - got[0]["t"]
        assert 2.0 <= gap <= 20, gap  # well before the 30 s it was first received with
    both("changeInvisibleDuration", gclient, brokers, tmp_path, body)


def test_push_retries_then_dlq(gclient: str, brokers: Any, tmp_path: Path) -> None:
    """A PushConsumer failing every time: retried with the group's backoff (1 s, 5 s), then the
    message is in %DLQ%<group> after retryMaxTimes + 1 deliveries."""
    def body(s: GrpcSession) -> None:
        t = s.topics(t="NORMAL")["t"]
        group = s.name("g")
        s.groups((group, False, 2))
        consumer = s.push(t, group, fail_times=99)
        assert consumer.wait_event("started", 60), consumer.diagnostics()
        time.sleep(3)
        _sent_ok(s.produce(t, [spec(b"poison")]), 1)
        got = consumer.wait_messages(3, 90)
        assert [m["deliveryAttempt"] for m in got[:3]] == [1, 2, 3], consumer.diagnostics()
        gaps = [got[i + 1]["t"] - got[i]["t"] for i in range(2)]
        if s.client == "node":  # rocketmq-client-nodejs 1.0.8 ignores a customized backoff: it retries at once,
            assert min(gaps) >= 0.5, gaps  # and the broker's revive brings the message back
        else:
            assert gaps[0] >= 0.8 and gaps[1] >= 4.0, gaps
        deadline = time.time() + 60
        while time.time() < deadline and message_count(s.target, f"%DLQ%{group}") < 1:
            time.sleep(2)
        assert message_count(s.target, f"%DLQ%{group}") == 1
        time.sleep(3)
        assert len(consumer.messages()) == 3, consumer.diagnostics()
    both("PushConsumer failures: backoff retries, then DLQ", gclient, brokers, tmp_path, body)


@pytest.mark.parametrize("kind,expression,want", [
    ("TAG", "A||B", [b"a", b"b"]),
    ("SQL92", "n > 5 AND color = 'red'", [b"n9red"]),
])
def test_filters(gclient: str, brokers: Any, tmp_path: Path, kind: str, expression: str, want: list[bytes]) -> None:
    def body(s: GrpcSession) -> None:
        t = s.topics(t="NORMAL")["t"]
        consumer = s.simple(t, s.name("g"), expect=len(want), min_s=6, expression_type=kind, expression=expression)
        _consume_ready(consumer)
        specs = [spec(b"a", tag="A"), spec(b"b", tag="B"), spec(b"c", tag="C"),
                 spec(b"n9red", tag="X", props={"n": "9", "color": "red"}),
                 spec(b"n1red", tag="Y", props={"n": "1", "color": "red"}),
                 spec(b"n9blue", tag="Z", props={"n": "9", "color": "blue"})]
        _sent_ok(s.produce(t, specs), len(specs))
        wait_done(consumer, 60)
        assert sorted(body_of(m) for m in consumer.messages()) == sorted(want), consumer.diagnostics()
    both(f"{kind} filter {expression}", gclient, brokers, tmp_path, body)


# -- errors ---------------------------------------------------------------------------------------

def test_unknown_topic_and_type_mismatch(gclient: str, brokers: Any, tmp_path: Path) -> None:
    def body(s: GrpcSession) -> None:
        t = s.topics(f="FIFO")["f"]
        unknown = s.produce(s.name("nosuch"), [spec(b"x")])
        errors = unknown.of("start_error") + unknown.of("send_error")
        assert errors, unknown.diagnostics()
        mismatch = s.produce(t, [spec(b"plain")])  # a NORMAL message to a FIFO topic
        assert mismatch.of("send_error") and not mismatch.of("sent"), mismatch.diagnostics()
    both("errors: unknown topic, message type mismatch", gclient, brokers, tmp_path, body)


def test_tls(gclient: str, brokers: Any, tmp_path: Path) -> None:
    def body(s: GrpcSession) -> None:
        t = s.topics(t="NORMAL")["t"]
        consumer = s.simple(t, s.name("g"), expect=1, tls=True)
        _consume_ready(consumer)
        _sent_ok(s.produce(t, [spec(b"over tls")], tls=True), 1)
        wait_done(consumer, 60)
        assert [body_of(m) for m in consumer.messages()] == [b"over tls"], consumer.diagnostics()
    both("TLS (and plaintext in every other case)", gclient, brokers, tmp_path, body)


# -- across protocols ---------------------------------------------------------------------------------

def test_remoting_producer_to_grpc_consumer(gclient: str, brokers: Any, tmp_path: Path) -> None:
    """A 4.9.8 Remoting producer and a 5.x gRPC consumer on one topic."""
    def body(s: GrpcSession) -> None:
        if harness.client_problem("java"):
            harness.missing(harness.client_problem("java"))
        t = s.topics(t="NORMAL")["t"]
        consumer = s.simple(t, s.name("g"), expect=3)
        _consume_ready(consumer)
        case = {"role": "produce", "namesrv": s.target.namesrv, "topic": t, "group": s.name("pg"), "mode": "sync",
                "messages": [harness.msg_spec(f"r{i}".encode(), tags="R", keys=f"k{i}", props={"p": str(i)})
                             for i in range(3)]}
        p = harness.run_driver("java", case, s.workdir, "remoting-produce", 90)
        assert len(p.of("sent")) == 3, p.diagnostics()
        wait_done(consumer, 60)
        got = sorted(consumer.messages(), key=lambda m: body_of(m))
        assert [body_of(m) for m in got] == [b"r0", b"r1", b"r2"], consumer.diagnostics()
        assert all(m["tag"] == "R" and m["props"].get("p") == body_of(m)[1:].decode() for m in got)
        assert [m["keys"] for m in got] == [["k0"], ["k1"], ["k2"]]
    both("4.9.8 Remoting producer -> 5.x gRPC consumer", gclient, brokers, tmp_path, body)


def test_grpc_producer_to_remoting_consumer(gclient: str, brokers: Any, tmp_path: Path) -> None:
    """A 5.x gRPC producer and a 4.9.8 Remoting push consumer on one topic."""
    def body(s: GrpcSession) -> None:
        if harness.client_problem("java"):
            harness.missing(harness.client_problem("java"))
        t = s.topics(t="NORMAL")["t"]
        _sent_ok(s.produce(t, [spec(f"g{i}".encode(), tag="G", keys=[f"k{i}"], props={"p": str(i)})
                               for i in range(3)]), 3)
        case = {"role": "push", "namesrv": s.target.namesrv, "topic": t, "group": s.name("rg"), "model": "clustering",
                "expression": "*", "deadline_s": 90, "consume_from": "CONSUME_FROM_FIRST_OFFSET"}
        d = harness.DriverProc("java", case, s.workdir, "remoting-push").start()
        try:
            got = d.wait_messages(3, 60)
        finally:
            d.stop(30)
        got = sorted(got, key=lambda m: harness.body_of(m))
        assert [harness.body_of(m) for m in got] == [b"g0", b"g1", b"g2"], d.diagnostics()
        assert all(m.get("tags") == "G" for m in got), got
        assert all(m["properties"].get("p") == harness.body_of(m)[1:].decode() for m in got), got
        assert [m["keys"] for m in got] == ["k0", "k1", "k2"] and all(m["uniqKey"] for m in got), got
    both("5.x gRPC producer -> 4.9.8 Remoting consumer", gclient, brokers, tmp_path, body)


def test_zz_rmqd_and_apache_agree() -> None:
    """Every case that ran on both brokers came out the same (deliberate differences listed)."""
    assert not results.disagreements(), "\n".join(results.disagreements())
