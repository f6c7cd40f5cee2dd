"""POP consumption with the 5.x Remoting Java client (rocketmq-client 5.3.3), against rmqd and
against Apache RocketMQ 5.3.3 (compat_tests/apache5_rocketmq.py) in the same run: every case runs
on both brokers at once and the results must agree case for case (POP_DIFFERENCES lists a
deliberate difference with its reason; none today). The two columns are printed at the end of
the module and written to compat_tests/last-pop-matrix.md.

The client is driven through its own POP calls (drivers/java/src/Pop5.java: popMessageAsync,
ackMessageAsync, batchAckMessageAsync, changeInvisibleTimeAsync, the proxy's dead-lettering) and,
for the push consumer, as an application would: ``setMessageRequestMode(POP)`` (mqadmin
setConsumeMode) and ``setClientRebalance(false)``.

rmqd alone (they start and kill their own brokers): the POP state across SIGTERM and SIGKILL of
``rmqd serve``, and a store popped on Apache RocketMQ 5.3.3 served by rmqd.
"""

from __future__ import annotations

import json
import re
import threading
import time
import traceback
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

import compat_harness as harness
from apache5_rocketmq import LABEL5, ApacheRocketMQ5, apache5_problem
from compat_harness import DriverProc, RmqdServer, body_of, msg_spec, run_driver
from compat_session import EXTERNAL_NAMESRV

pytestmark = pytest.mark.timeout(900)

CLIENT = "java5"
BROKER_NAME = "broker-a"
GEOMETRY = {
    "brokerClusterName": "DefaultCluster", "brokerName": BROKER_NAME,
    "mappedFileSizeCommitLog": str(4 * 1024 * 1024), "mappedFileSizeConsumeQueue": str(6000 * 20),
}
#: a message must be back at most this long after its invisible time ran out (5.3 takes ~2-5 s)
REVIVE_SLACK_S = 30.0
#: case -> why rmqd's result deliberately differs from Apache 5.3.3's (none today)
POP_DIFFERENCES: dict[str, str] = {}
RESULTS: dict[str, dict[str, str]] = {}
MATRIX_FILE = harness.HERE / "last-pop-matrix.md"


# --------------------------------------------------------------------------------------------
# driving the client


class Popper:
    """A Pop5 driver: one command line in, its event out."""

    def __init__(self, namesrv: str, topic: str, group: str, workdir: Path, name: str) -> None:
        self.topic, self.group = topic, group
        self.d = DriverProc(CLIENT, {"role": "pop", "namesrv": namesrv, "topic": topic, "group": group,
                                     "deadline_s": 600}, workdir, name).start()
        assert self.d.wait_event("started", 60), f"pop driver did not start\n{self.d.diagnostics()}"
        self._n = 0

    def cmd(self, **c: Any) -> dict[str, Any]:
        self._n += 1
        cid = f"c{self._n}"
        c["id"] = cid
        final = {"dlq": ("dlq_done", "cmd_error")}.get(c["cmd"])
        self.d.proc.stdin.write(json.dumps(c) + "\n")
        self.d.proc.stdin.flush()
        timeout = 60 + c.get("poll_ms", 0) / 1000

        def done(evs: list[dict[str, Any]]) -> bool:
            return any(e.get("id") == cid and (final is None or e["event"] in final) for e in evs)

        assert self.d.wait_for(done, timeout), f"no answer to {c}\n{self.d.diagnostics()}"
        ev = [e for e in self.d.events if e.get("id") == cid and (final is None or e["event"] in final)][-1]
        return ev

    def pop(self, **kw: Any) -> dict[str, Any]:
        ev = self.cmd(cmd="pop", **kw)
        assert ev["event"] == "popped", f"pop failed: {ev}"
        return ev

    def ack(self, m: dict[str, Any]) -> None:
        ev = self.cmd(cmd="ack", extra_info=m["extraInfo"])
        assert ev["event"] == "acked" and ev["status"] == "OK", f"ack failed: {ev}"

    def pop_until(self, n: int, bound_s: float, **kw: Any) -> list[tuple[float, dict[str, Any]]]:
        """Pop (long polling 1 s) until n messages came or bound_s passed: (event time, message)."""
        got: list[tuple[float, dict[str, Any]]] = []
        deadline = time.monotonic() + bound_s
        while len(got) < n and time.monotonic() < deadline:
            ev = self.pop(poll_ms=1000, **kw)
            got += [(ev["t"], m) for m in ev["messages"]]
        return got

    def close(self) -> None:
        self.d.stop(30)


class Ctx:
    """One case on one broker: unique names, a work directory, the drivers it started."""

    def __init__(self, namesrv: str, workdir: Path, case: str) -> None:
        self.namesrv = namesrv
        self.workdir = workdir
        self.tag = uuid.uuid4().hex[:6]
        self.case = case
        self.poppers: list[Popper] = []
        self.running: list[DriverProc] = []

    def name(self, kind: str) -> str:
        return f"{self.case}_{kind}_{self.tag}"

    def produce(self, topic: str, bodies: list[bytes], shard: int | None = None) -> None:
        specs = []
        for b in bodies:
            s = msg_spec(b, tags="A")
            if shard is not None:
                s["shard"] = shard
            specs.append(s)
        for attempt in range(3):
            d = run_driver(CLIENT, {"role": "produce", "namesrv": self.namesrv, "topic": topic,
                                    "group": self.name("pg"), "mode": "orderly" if shard is not None else "sync",
                                    "messages": specs}, self.workdir, f"produce-{uuid.uuid4().hex[:4]}", 90)
            # a first send to a new topic on this loaded box may time out on its route lookup:
            # not what these cases test, so the producer tries again (nothing was sent)
            timed_out = d.of("send_error") and not d.of("sent") and all(
                "Timeout" in e.get("error", "") for e in d.of("send_error"))
            if not timed_out or attempt == 2:
                break
        assert len(d.of("sent")) == len(bodies) and not d.of("send_error"), d.diagnostics()

    def popper(self, topic: str, group: str) -> Popper:
        p = Popper(self.namesrv, topic, group, self.workdir, f"pop-{len(self.poppers)}")
        self.poppers.append(p)
        return p

    def close(self) -> None:
        for p in self.poppers:
            try:
                p.close()
            except Exception:  # noqa: BLE001 - a driver that will not stop is killed by its deadline
                p.d.kill()
        for d in self.running:
            d.stop(30)


def bodies(msgs: list[dict[str, Any]]) -> list[bytes]:
    return sorted(body_of(m) for m in msgs)


# --------------------------------------------------------------------------------------------
# the cases (each raises AssertionError when the broker does not do what 5.x promises)


def case_receive_and_ack(c: Ctx) -> None:
    topic, group = c.name("t"), c.name("g")
    want = [f"ra-{i}".encode() for i in range(6)]
    c.produce(topic, want)
    p = c.popper(topic, group)
    got = p.pop_until(6, 60, invisible_ms=30_000, init_mode=0)
    assert bodies([m for _, m in got]) == sorted(want), f"popped {bodies([m for _, m in got])}"
    assert all(m["extraInfo"] and m["reconsumeTimes"] == 0 for _, m in got)
    for _, m in got:
        p.ack(m)
    later = p.pop_until(1, 6, invisible_ms=30_000)
    assert later == [], f"acked messages came back: {later}"


def case_redelivered_after_invisible_time(c: Ctx) -> None:
    topic, group = c.name("t"), c.name("g")
    want = [f"rd-{i}".encode() for i in range(3)]
    c.produce(topic, want)
    p = c.popper(topic, group)
    first = p.pop_until(3, 60, invisible_ms=6000, init_mode=0)
    assert bodies([m for _, m in first]) == sorted(want)
    popped_at = max(t for t, _ in first)
    again = p.pop_until(3, 6 + REVIVE_SLACK_S, invisible_ms=60_000)
    assert bodies([m for _, m in again]) == sorted(want), f"came back: {bodies([m for _, m in again])}"
    earliest = min(t for t, _ in again)
    assert earliest - popped_at >= 6.0 - 0.5, f"back after {earliest - popped_at:.1f} s, before the 6 s"
    assert all(m["reconsumeTimes"] == 1 for _, m in again), [m["reconsumeTimes"] for _, m in again]
    for _, m in again:
        p.ack(m)


def case_change_invisible_time(c: Ctx) -> None:
    topic, group = c.name("t"), c.name("g")
    c.produce(topic, [b"ci-0", b"ci-1"])
    p = c.popper(topic, group)
    first = [m for _, m in p.pop_until(2, 60, invisible_ms=120_000, init_mode=0)]
    assert bodies(first) == [b"ci-0", b"ci-1"]
    shortened = next(m for m in first if body_of(m) == b"ci-0")
    ev = p.cmd(cmd="change", extra_info=shortened["extraInfo"], invisible_ms=2000)
    assert ev["event"] == "changed" and ev["status"] == "OK", ev
    back = p.pop_until(1, 2 + REVIVE_SLACK_S, invisible_ms=120_000)
    assert bodies([m for _, m in back]) == [b"ci-0"], f"came back: {bodies([m for _, m in back])}"
    assert p.pop_until(1, 5, invisible_ms=120_000) == []  # ci-1 stays invisible


def case_retry_then_dlq(c: Ctx) -> None:
    """Every delivery fails; at its 3rd (reconsumeTimes 2) the message goes to the DLQ the way the
    5.x proxy sends it (CONSUMER_SEND_MSG_BACK, delay level -1, then an ack) and never returns."""
    topic, group = c.name("t"), c.name("g")
    c.produce(topic, [b"dlq-0"])
    p = c.popper(topic, group)
    seen = []
    deadline = time.monotonic() + 3 * (2 + REVIVE_SLACK_S)
    while time.monotonic() < deadline:
        ev = p.pop(poll_ms=1000, invisible_ms=2000, init_mode=0)
        for m in ev["messages"]:
            seen.append(m["reconsumeTimes"])
            if m["reconsumeTimes"] >= 2:
                done = p.cmd(cmd="dlq", extra_info=m["extraInfo"], commit_log_offset=m["commitLogOffset"],
                             msg_id=m["msgId"])
                assert done["event"] == "dlq_done", done
                deadline = 0
    assert seen[:3] == [0, 1, 2], f"deliveries (reconsumeTimes): {seen}"
    assert p.pop_until(1, 8, invisible_ms=2000) == []
    d = run_driver(CLIENT, {"role": "pull", "namesrv": c.namesrv, "topic": f"%DLQ%{group}", "group": c.name("dlqg"),
                            "start": "zero"}, c.workdir, "pull-dlq", 90)
    assert [body_of(m) for m in d.messages()] == [b"dlq-0"], d.diagnostics()


def case_orderly_pop(c: Ctx) -> None:
    topic, group = c.name("t"), c.name("g")
    want = [f"o-{i}".encode() for i in range(6)]
    c.produce(topic, want, shard=0)
    p = c.popper(topic, group)
    a = p.pop(order=True, max=3, invisible_ms=4000, init_mode=0, attempt_id="a1")["messages"]
    assert [body_of(m) for m in a] == want[:3], [body_of(m) for m in a]
    blocked = p.pop(order=True, max=3, invisible_ms=4000, attempt_id="a2")["messages"]
    assert blocked == [], "an orderly queue handed out more while earlier messages were invisible"
    for m in a:
        p.ack(m)
    b = p.pop(order=True, max=3, invisible_ms=4000, attempt_id="a3", poll_ms=3000)["messages"]
    assert [body_of(m) for m in b] == want[3:], [body_of(m) for m in b]
    # not acked: the same three come back, in order, once their invisible time ran out
    again = [m for _, m in p.pop_until(3, 4 + REVIVE_SLACK_S, order=True, max=3, invisible_ms=60_000,
                                        attempt_id="a4")]
    assert [body_of(m) for m in again] == want[3:], [body_of(m) for m in again]
    assert all(m["reconsumeTimes"] == 1 for m in again), [m["reconsumeTimes"] for m in again]


def case_push_consumer_pops(c: Ctx) -> None:
    """The 5.x push consumer with setClientRebalance(false) on a group switched to POP."""
    topic, group = c.name("t"), c.name("g")
    c.produce(topic, [b"warm"])
    p = c.popper(topic, group)
    ev = p.cmd(cmd="set_mode", mode="POP")
    assert ev["event"] == "mode_set", ev
    d = DriverProc(CLIENT, {"role": "push", "namesrv": c.namesrv, "topic": topic, "group": group,
                            "client_rebalance": False, "deadline_s": 240}, c.workdir, "push").start()
    c.running.append(d)
    assert d.wait_event("started", 60), d.diagnostics()
    want = [f"pp-{i}".encode() for i in range(5)]
    c.produce(topic, want)
    got = d.wait_messages(5, 60, where=lambda m: body_of(m).startswith(b"pp-"))
    assert sorted(body_of(m) for m in got) == sorted(want), d.diagnostics()
    assert all("POP_CK" in (m.get("properties") or {}) for m in got), "the push consumer did not pop"
    d.wait_for(lambda evs: False, 5)  # acked: nothing comes again
    again = [m for m in d.messages() if body_of(m).startswith(b"pp-")]
    assert len(again) == len(want), f"{len(again)} deliveries of {len(want)} messages"


CASES: dict[str, Callable[[Ctx], None]] = {
    "POP receive + ack": case_receive_and_ack,
    "no ack: back after the invisible time, not before": case_redelivered_after_invisible_time,
    "change invisible time": case_change_invisible_time,
    "retry -> DLQ after max attempts": case_retry_then_dlq,
    "orderly POP": case_orderly_pop,
    "push consumer in POP mode": case_push_consumer_pops,
}


# --------------------------------------------------------------------------------------------
# both brokers, case by case


def _client_ready() -> None:
    problem = harness.client_problem(CLIENT)
    if problem:
        harness.missing(problem)


def _conf(base: Path) -> Path:
    conf = base / "rmqd-broker.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in GEOMETRY.items()))
    return conf


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    if EXTERNAL_NAMESRV:
        pytest.skip("COMPAT_NAMESRV is set: this module starts its own brokers")
    _client_ready()
    problem = apache5_problem()
    if problem:
        harness.missing(problem)
    base = tmp_path_factory.mktemp("pop-apache5-vs-rmqd")
    apache = ApacheRocketMQ5(base / "apache", broker_conf=dict(GEOMETRY))
    rmqd = RmqdServer(store=base / "rmqd" / "store", log_path=base / "rmqd.log", conf=_conf(base))
    (base / "rmqd").mkdir()
    try:
        with harness.side_by_side(apache, rmqd):
            yield {LABEL5: apache.namesrv_addr, "rmqd": rmqd.namesrv}
    finally:
        _report(request)
    code = rmqd.stop_code
    assert code == 0, f"rmqd exited with {code} after SIGTERM; log {rmqd.log_path}:\n{harness.tail(rmqd.log_path)}"


def _report(request: pytest.FixtureRequest) -> None:
    if not RESULTS:
        return
    lines = [f"| POP case | {LABEL5} | rmqd |", "| --- | --- | --- |"]
    for case, cols in RESULTS.items():
        lines.append(f"| {case} | {cols.get(LABEL5, '-')} | {cols.get('rmqd', '-')} |")
    text = "\n".join(lines)
    try:
        MATRIX_FILE.write_text(text + "\n")
    except OSError:
        pass
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():  # to the terminal, not into the test's capture
            reporter.write_line("")
            reporter.write_line("POP, Java 5.3.3 Remoting client: Apache RocketMQ 5.3.3 vs rmqd")
            for line in lines:
                reporter.write_line(line)


def _run(fn: Callable[[Ctx], None], namesrv: str, workdir: Path, case: str) -> str:
    workdir.mkdir(parents=True, exist_ok=True)
    ctx = Ctx(namesrv, workdir, fn.__name__.removeprefix("case_")[:16])
    try:
        fn(ctx)
        return "PASS"
    except BaseException as e:  # noqa: BLE001 - every failure of the case is its result
        (workdir / "failure.txt").write_text(traceback.format_exc())
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        return f"FAIL: {type(e).__name__}: {first[:200]}"
    finally:
        ctx.close()


@pytest.mark.parametrize("case", list(CASES))
def test_pop_agrees_with_apache(case: str, brokers: dict[str, str], tmp_path: Path) -> None:
    results: dict[str, str] = {}

    def run(column: str, namesrv: str) -> None:
        results[column] = _run(CASES[case], namesrv, tmp_path / ("rmqd" if column == "rmqd" else "apache"), case)

    threads = [threading.Thread(target=run, args=item) for item in brokers.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(800)
    RESULTS[case] = results
    apache, ours = results.get(LABEL5, "FAIL: no result"), results.get("rmqd", "FAIL: no result")
    if case in POP_DIFFERENCES:
        return
    assert apache == ours, f"{case}: Apache {apache!r} vs rmqd {ours!r} (see {tmp_path}/*/failure.txt)"
    assert ours == "PASS", f"{case}: both fail: {ours} (see {tmp_path}/*/failure.txt)"


# --------------------------------------------------------------------------------------------
# rmqd alone: restarts and a store from Apache 5.3.3


def _unacked_come_back(namesrv: str, topic: str, group: str, workdir: Path, unacked: list[bytes], acked: list[bytes],
                       invisible_s: float) -> None:
    c = Ctx(namesrv, workdir, "after")
    try:
        p = c.popper(topic, group)
        back = [m for _, m in p.pop_until(len(unacked), invisible_s + REVIVE_SLACK_S, invisible_ms=60_000)]
        got = bodies(back)
        assert not set(got) & set(acked), f"acknowledged messages came back: {got}"
        assert got == sorted(unacked), f"came back {got}, expected {sorted(unacked)}"
        for m in back:
            p.ack(m)
        later = p.pop_until(1, 6, invisible_ms=60_000)
        assert later == [], f"more came back: {bodies([m for _, m in later])}"
    finally:
        c.close()


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_pop_state_survives_restart(how: str, tmp_path: Path) -> None:
    """Popped, half acknowledged, then rmqd stops (SIGTERM) or is killed (SIGKILL, right after the
    acks: before consumerOffset.json is written again): on the same store, the unacknowledged come
    back after their invisible time, the acknowledged never; an orderly ack holds too."""
    _client_ready()
    store = tmp_path / "store"
    conf = _conf(tmp_path)
    server = RmqdServer(store=store, log_path=tmp_path / "rmqd-1.log", conf=conf).start()
    c = Ctx(server.namesrv, tmp_path / "before", "rs")
    try:
        topic, group = c.name("t"), c.name("g")
        want = [f"rs-{i}".encode() for i in range(6)]
        c.produce(topic, want)
        otopic, ogroup = c.name("ot"), c.name("og")
        c.produce(otopic, [b"o-0", b"o-1", b"o-2"], shard=0)
        p = c.popper(topic, group)
        got = [m for _, m in p.pop_until(6, 60, invisible_ms=8000, init_mode=0)]
        assert bodies(got) == sorted(want)
        acked = [m for m in got if body_of(m) in want[:3]]
        for m in acked:
            p.ack(m)
        op = c.popper(otopic, ogroup)
        first = op.pop(order=True, max=1, invisible_ms=3000, init_mode=0, attempt_id="x1")["messages"]
        assert [body_of(m) for m in first] == [b"o-0"]
        op.ack(first[0])
    finally:
        c.close()
    if how == "SIGTERM":
        assert server.stop() == 0
    else:
        server.kill()
    server = RmqdServer(store=store, log_path=tmp_path / "rmqd-2.log", conf=conf).start()
    try:
        _unacked_come_back(server.namesrv, topic, group, tmp_path / "after", want[3:], want[:3], 8)
        c = Ctx(server.namesrv, tmp_path / "after-o", "ro")
        try:
            op = c.popper(otopic, ogroup)
            nxt = [m for _, m in op.pop_until(1, 30, order=True, max=1, invisible_ms=3000, attempt_id="x2")]
            assert [body_of(m) for m in nxt] == [b"o-1"], f"orderly after {how}: {bodies(nxt)}"
        finally:
            c.close()
    finally:
        code = server.stop()
    assert code == 0, harness.tail(server.log_path)


def _pop_six_ack_three(namesrv: str, workdir: Path, tag: str) -> tuple[str, str, list[bytes]]:
    """Six messages popped invisible for 20 s, the first three acknowledged: (topic, group, bodies)."""
    c = Ctx(namesrv, workdir, tag)
    try:
        topic, group = c.name("t"), c.name("g")
        want = [f"{tag}-{i}".encode() for i in range(6)]
        c.produce(topic, want)
        p = c.popper(topic, group)
        got = [m for _, m in p.pop_until(6, 60, invisible_ms=20_000, init_mode=0)]
        assert bodies(got) == sorted(want)
        for m in got:
            if body_of(m) in want[:3]:
                p.ack(m)
        return topic, group, want
    finally:
        c.close()


def _offsets_on_disk(store: Path, topic: str, group: str) -> dict[int, int]:
    """config/consumerOffset.json's queue -> offset for topic@group as on disk (fastjson writes
    the queue ids unquoted, so the entry is read with a pattern, not json)."""
    try:
        text = (store / "config" / "consumerOffset.json").read_text()
    except OSError:
        return {}
    entry = re.search(re.escape(json.dumps(f"{topic}@{group}")) + r"\s*:\s*\{([^}]*)\}", text)
    return {int(q): int(o) for q, o in re.findall(r'"?(\d+)"?\s*:\s*(-?\d+)', entry.group(1))} if entry else {}


def test_store_popped_on_apache_5_3_3_served_by_rmqd(tmp_path: Path) -> None:
    """Apache RocketMQ 5.3.3 pops six messages (invisible 20 s) and three are acknowledged; it
    stops; rmqd serves its store: the three others come back after their invisible time (the
    checkpoints were still in 5.3's timer), the acknowledged never."""
    _client_ready()
    problem = apache5_problem()
    if problem:
        harness.missing(problem)
    store = tmp_path / "store"
    apache = ApacheRocketMQ5(tmp_path / "apache", broker_conf={**GEOMETRY, "storePathRootDir": str(store)})
    apache.start()
    try:
        topic, group, want = _pop_six_ack_three(apache.namesrv_addr, tmp_path / "before", "xs")
        # 5.3 writes consumerOffset.json every 5 s (its shutdown hook writes it too): wait for the
        # periodic write to hold the six pops, not a fixed 6 s
        harness.wait_until(lambda: sum(_offsets_on_disk(store, topic, group).values()) >= 6, 15,
                           f"Apache 5.3.3 to persist {topic}@{group}'s offsets past the six pops")
    finally:
        apache.stop()
    server = RmqdServer(store=store, log_path=tmp_path / "rmqd.log", conf=_conf(tmp_path)).start()
    try:
        _unacked_come_back(server.namesrv, topic, group, tmp_path / "after", want[3:], want[:3], 20)
    finally:
        code = server.stop()
    assert code == 0, harness.tail(server.log_path)


def test_store_popped_on_rmqd_served_by_apache_5_3_3(tmp_path: Path) -> None:
    """The other direction: rmqd pops six (invisible 20 s), three are acknowledged, rmqd stops;
    Apache RocketMQ 5.3.3 serves the store: its timer takes the pending checkpoints from the
    timercheck rmqd wrote, and the three others come back, the acknowledged never."""
    _client_ready()
    problem = apache5_problem()
    if problem:
        harness.missing(problem)
    store = tmp_path / "store"
    server = RmqdServer(store=store, log_path=tmp_path / "rmqd.log", conf=_conf(tmp_path)).start()
    try:
        topic, group, want = _pop_six_ack_three(server.namesrv, tmp_path / "before", "ys")
    finally:
        code = server.stop()
    assert code == 0, harness.tail(server.log_path)
    apache = ApacheRocketMQ5(tmp_path / "apache", broker_conf={**GEOMETRY, "storePathRootDir": str(store)})
    apache.start()
    try:
        _unacked_come_back(apache.namesrv_addr, topic, group, tmp_path / "after", want[3:], want[:3], 20)
    finally:
        apache.stop()
