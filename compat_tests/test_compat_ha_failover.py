"""Issue 13: a real client reads from the slave when the master is down.

A name server, an rmqd master and an rmqd slave of the same broker name run as separate
processes (the slave finds its master through the name server's registration answer). The
official Java client (4.9.8) sends to the master; once the slave's commit log equals the
master's and the slave has synchronized the topic's config (SlaveSynchronize, every 10 s), the
master is SIGKILLed and a new push consumer group of the same client consumes every message -
from the slave, the only broker left in the route. Imports nothing of rmqd.
"""
from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

import compat_harness as harness
from compat_harness import msg_spec
from compat_session import Session

pytestmark = pytest.mark.timeout(300)

CLIENT = "java"
FILE = 1024 * 1024
N = 40


def _start(args: list[str], log: Path) -> harness.compat_runner.BrokerProc:
    """`rmqd ARGS` (a process or a container, as the harness runs every broker), once ready."""
    proc, _, _ = harness.spawn_ready(args, log.parent, log, timeout=30)
    return proc


def _commit_log(store: Path) -> dict[str, bytes]:
    d = store / "commitlog"
    files = {p.name: p.read_bytes() for p in sorted(d.iterdir())} if d.is_dir() else {}
    return {n: b for n, b in files.items() if b.count(0) != len(b)}


def _conf(path: Path, **keys: str) -> Path:
    base = {"brokerClusterName": "DefaultCluster", "brokerName": "ha-failover", "brokerIP1": "127.0.0.1",
            "brokerIP2": "127.0.0.1", "mappedFileSizeCommitLog": str(FILE), "flushIntervalCommitLog": "50"}
    path.write_text("".join(f"{k}={v}\n" for k, v in {**base, **keys}.items()))
    return path


def test_consumer_reads_from_the_slave_when_the_master_is_down(tmp_path):
    problem = harness.client_problem(CLIENT)
    if problem:
        harness.missing(problem)
    ns_port, mport, sport = harness.free_port(), harness.free_broker_port(), harness.free_broker_port()
    namesrv = f"127.0.0.1:{ns_port}"
    procs: list[harness.compat_runner.BrokerProc] = []
    try:
        procs.append(_start(["namesrv", "--port", str(ns_port), "--host", "127.0.0.1", "--kv-config",
                             str(tmp_path / "kv.json")], tmp_path / "ns.log"))
        master = _start(["broker", "-n", namesrv, "-c", str(_conf(tmp_path / "m.conf", brokerRole="ASYNC_MASTER")),
                         "--store", str(tmp_path / "m"), "--port", str(mport), "--host", "127.0.0.1"],
                        tmp_path / "master.log")
        procs.append(master)
        procs.append(_start(["broker", "-n", namesrv, "-c", str(_conf(tmp_path / "s.conf", brokerRole="SLAVE",
                                                                      brokerId="1")),
                             "--store", str(tmp_path / "s"), "--port", str(sport), "--host", "127.0.0.1"],
                            tmp_path / "slave.log"))
        s = Session(CLIENT, tmp_path, namesrv, "hafo")
        topic = s.name("t")
        bodies = [f"ha-failover-{i:03d}".encode() * 10 for i in range(N)]
        s.produce(topic, [msg_spec(b, tags="Fo", keys=f"k{i}") for i, b in enumerate(bodies)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if _commit_log(tmp_path / "m") and _commit_log(tmp_path / "s") == _commit_log(tmp_path / "m"):
                break
            time.sleep(0.2)
        else:
            raise AssertionError("the slave did not catch up with the master within 60 s")
        # the slave serves a topic only once SlaveSynchronize copied its config (every 10 s), as 4.9.8
        topics = tmp_path / "s" / "config" / "topics.json"
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and not (topics.exists() and topic in topics.read_text(errors="replace")):
            time.sleep(0.5)
        assert topic in topics.read_text(errors="replace"), "the slave never synchronized the topic config"
        master.send_signal(signal.SIGKILL)
        master.wait(10)
        time.sleep(1.0)  # the name server drops the master's address when its connection closes
        consumer = s.push(topic, s.name("g"), consume_from="CONSUME_FROM_FIRST_OFFSET")
        got = consumer.wait_messages(N, 90, where=lambda m: harness.body_of(m).startswith(b"ha-failover-"))
        received = sorted({harness.body_of(m) for m in got if harness.body_of(m).startswith(b"ha-failover-")})
        assert received == sorted(bodies), consumer.diagnostics()
        s.close()
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()
