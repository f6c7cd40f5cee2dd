"""What the compat cases share besides fixtures: the per-case Session (names, driver runners,
warm-up barriers), the server of a module, client availability.  Kept out of conftest.py so test
modules can import it by a name no other conftest.py in the repository shadows."""

from __future__ import annotations

import os
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

import compat_harness as harness
from compat_harness import DriverProc, RmqdServer, msg_spec, run_driver

# How long barrier() keeps sending. The Java clients (4.9.x and 5.x alike) raise a subscription's
# version whenever a rebalance changes its queues and send it in a heartbeat at once, unless the
# heartbeat lock is taken, as it is when the rebalance meets the scheduled heartbeat (1 s after
# start). The broker then answers every pull with the newer version SUBSCRIPTION_NOT_LATEST, as
# Apache RocketMQ's PullMessageProcessor does, until the next heartbeat (heartbeatBrokerInterval,
# 30 s). Seen in CI: a broadcast consumer refused for 29 s. 60 s covers one interval and its retries.
BARRIER_DEADLINE_S = 60.0


def client_problem(client: str) -> str | None:
    """Why `client` cannot run here, or None (the registry module's problem(), asked once)."""
    return harness.client_problem(client)


# test_compat_apache.py: case -> (result against Apache RocketMQ, result against rmqd)
APACHE_RESULTS: dict[str, tuple[str, str]] = {}


# COMPAT_NAMESRV=host:port runs the client cases against a broker that is already running (e.g. an
# Apache RocketMQ 4.9 to compare with); the cases that start their own rmqd are then skipped.
EXTERNAL_NAMESRV = os.environ.get("COMPAT_NAMESRV") or None


@dataclass
class ExternalServer:
    namesrv: str


def module_server(tmp_path_factory: pytest.TempPathFactory, name: str,
                  conf_text: str | None = None) -> Iterator[RmqdServer | ExternalServer]:
    """Body of a module-scoped server fixture: a fresh rmqd (empty store, optional broker.conf)
    stopped with SIGTERM, which must exit 0; or the external broker of COMPAT_NAMESRV."""
    if EXTERNAL_NAMESRV:
        yield ExternalServer(EXTERNAL_NAMESRV)
        return
    base = tmp_path_factory.mktemp(name)
    conf = None
    if conf_text is not None:
        conf = base / "broker.conf"
        conf.write_text(conf_text)
    server = RmqdServer(store=base / "store", log_path=base / "rmqd.log", conf=conf).start()
    try:
        yield server
    finally:
        code = server.stop()
    assert code == 0, f"rmqd exited with {code} after SIGTERM; log {server.log_path}:\n{harness.tail(server.log_path)}"


class Session:
    """What a case needs: unique names, the driver runners, cleanup of consumers it started."""

    def __init__(self, client: str, workdir: Path, namesrv: str, case: str) -> None:
        self.client = client
        self.workdir = workdir
        self.namesrv = namesrv
        self.case = case
        self.tag = uuid.uuid4().hex[:6]
        self.running: list[DriverProc] = []
        self.n = 0

    def name(self, kind: str) -> str:
        """A topic/group name unique to this case (RocketMQ allows only [A-Za-z0-9_%|-])."""
        raw = f"{self.case}_{self.client}_{kind}_{self.tag}"
        return "".join(ch if ch.isascii() and (ch.isalnum() or ch in "_-") else "_" for ch in raw)

    def _next(self, role: str) -> str:
        self.n += 1
        return f"{self.n:02d}-{role}"

    def produce(self, topic: str, specs: list[dict[str, Any]], mode: str = "sync", client: str | None = None,
                timeout: float = 60.0, expect_ok: bool = True, **extra: Any) -> DriverProc:
        c = client or self.client
        case = {"role": "produce", "namesrv": self.namesrv, "topic": topic, "group": self.name("pg"),
                "mode": mode, "messages": specs, **extra}
        d = run_driver(c, case, self.workdir, self._next(f"{c}-produce-{mode}"), timeout)
        if expect_ok:
            errors = d.of("send_error") + d.of("driver_error") + d.of("timeout")
            assert not errors and d.first("done"), f"{c} producer did not send cleanly\n{d.diagnostics()}"
        return d

    def push(self, topic: str, group: str, model: str = "clustering", expression: str = "*",
             client: str | None = None, deadline: float = 120.0, **extra: Any) -> DriverProc:
        c = client or self.client
        case = {"role": "push", "namesrv": self.namesrv, "topic": topic, "group": group, "model": model,
                "expression": expression, "deadline_s": deadline, **extra}
        d = DriverProc(c, case, self.workdir, self._next(f"{c}-push")).start()
        self.running.append(d)
        assert d.wait_event("started", 30), f"{c} push consumer did not start\n{d.diagnostics()}"
        return d

    def pull(self, topic: str, group: str, timeout: float = 60.0, **extra: Any) -> DriverProc:
        case = {"role": "pull", "namesrv": self.namesrv, "topic": topic, "group": group, **extra}
        d = run_driver(self.client, case, self.workdir, self._next(f"{self.client}-pull"), timeout)
        assert not d.of("driver_error") and not d.of("timeout") and d.first("done"), \
            f"pull consumer failed\n{d.diagnostics()}"
        return d

    def create_topic(self, topic: str) -> None:
        """Topics come into being through a send (defaultTopic TBW102, autoCreateTopicEnable)."""
        self.produce(topic, [msg_spec(b"create", tags="Create")])

    def barrier(self, consumers: list[DriverProc], topic: str, tags: str = "Warm",
                deadline_s: float = BARRIER_DEADLINE_S) -> None:
        """Send rounds of warm-up messages until every consumer has received at least one.

        Consumers start asynchronously (route lookup, rebalance, first pull); a broadcast
        consumer starts at the queue's max offset, so anything sent before it pulls is not its.
        Bounded by time, not rounds: a Java client may need one heartbeat interval (see
        BARRIER_DEADLINE_S) before its pulls are answered.
        """
        start = time.monotonic()
        r = 0
        while True:
            if all(any(body_prefix(m, b"warm-") for m in c.messages()) for c in consumers):
                return
            if time.monotonic() - start > deadline_s:
                break
            self.produce(topic, [msg_spec(f"warm-{r}-{i}".encode(), tags=tags) for i in range(4)])
            for c in consumers:
                c.wait_for(lambda evs: any(e["event"] == "message" and body_prefix(e, b"warm-") for e in evs), 2.0)
            r += 1
        missing = [c.name for c in consumers if not any(body_prefix(m, b"warm-") for m in c.messages())]
        raise AssertionError(f"consumers {missing} received no warm-up message in {r} rounds "
                             f"({time.monotonic() - start:.0f} s)\n"
                             + "\n".join(c.diagnostics() for c in consumers))

    def settle_cluster(self, consumers: list[DriverProc], topic: str, rounds: int = 12) -> None:
        """Send rounds of warm-up messages until one round is consumed exactly once and by all.

        Consumers of one group own disjoint queues only after every one of them has rebalanced:
        the C++ client rebalances when the broker sends NOTIFY_CONSUMER_IDS_CHANGED, ali-ons
        ignores that notice and rebalances every 10 s.
        """
        for r in range(rounds):
            bodies = [f"warm-{r}-{i}".encode() for i in range(8)]
            self.produce(topic, [msg_spec(b, tags="Warm") for b in bodies])

            def seen() -> list[list[bytes]]:
                return [[harness.body_of(m) for m in c.messages() if harness.body_of(m) in bodies] for c in consumers]

            consumers[0].wait_for(lambda evs: len({b for got in seen() for b in got}) >= len(bodies), 10.0)
            for c in consumers:
                c.wait_for(lambda evs: False, 0.3)
            per = seen()
            total = [b for got in per for b in got]
            if all(per) and len(total) == len(bodies) == len(set(total)):
                return
            consumers[0].wait_for(lambda evs: False, 1.0)
        raise AssertionError(f"the group's consumers did not settle on disjoint queues in {rounds} rounds\n"
                             + "\n".join(c.diagnostics() for c in consumers))

    def close(self) -> None:
        for d in self.running:
            if d.proc is not None and d.proc.poll() is None:
                d.stop(30)


def body_prefix(m: dict[str, Any], prefix: bytes) -> bool:
    return harness.body_of(m).startswith(prefix)


def copy_fixture_store(src: Path, dst: Path) -> Path:
    """A private copy of a fixture store (the fixture itself is never touched)."""
    shutil.copytree(src, dst)
    return dst
