"""HA replication across implementations (issue 13), with Apache RocketMQ itself:

(a) an rmqd slave (`rmqd serve`, brokerRole=SLAVE, haMasterAddress = the Apache broker's
    listenPort + 1) of an Apache master: the 4.9.8 Java client sends to Apache before and
    while the slave runs; afterwards the two commit logs are byte-identical file by file;
(b) an Apache slave of an rmqd master, the same way round.
Both sides use the same geometry (1 MiB commit-log files; the messages span two files, so a
file roll with its BLANK record is replicated too). Each slave starts empty after the first
batch, so it reports offset 0 and the master starts it at the beginning of its last file
(HAConnection 4.9.8). That is file 0 only while the second batch has not rolled the master
over, so the second batch is sent once the slave holds the first: then the whole log is
copied. Imports nothing of rmqd: rmqd is its CLI.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Iterator

import pytest

import compat_harness as harness
from apache_rocketmq import ApacheRocketMQ, _free_broker_port
from compat_harness import RmqdServer
from test_apache_cross_store import GEOMETRY, Java, conf_text, java_helper, message_specs  # noqa: F401 (fixture)

pytestmark = pytest.mark.timeout(600)

SYNC_TIMEOUT_S = 120.0


def commit_log(store: Path) -> dict[str, bytes]:
    """The commit-log files holding data. Apache's AllocateMappedFileService creates the file
    after the current one ahead of time (all zeros, nothing written): such a file is not part
    of the log and is left out, on either side."""
    d = store / "commitlog"
    if not d.is_dir():
        return {}
    files = {p.name: p.read_bytes() for p in sorted(d.iterdir())}
    return {n: b for n, b in files.items() if b.count(0) != len(b)}


def wait_identical(master: Path, slave: Path, what: str) -> dict[str, bytes]:
    """Until the slave's commit-log files equal the master's (bounded); returns them."""
    deadline = time.monotonic() + SYNC_TIMEOUT_S
    while True:
        m, s = commit_log(master), commit_log(slave)
        if m and m == s:
            return m
        if time.monotonic() > deadline:
            diff = {n: (len(m.get(n, b"")), len(s.get(n, b"")), m.get(n) == s.get(n)) for n in set(m) | set(s)}
            raise AssertionError(f"{what}: commit logs still differ after {SYNC_TIMEOUT_S} s: {diff}")
        time.sleep(1.0)


class Started:
    """Everything a test starts, killed at the end also on failure."""

    def __init__(self) -> None:
        self.apache: list[ApacheRocketMQ] = []
        self.rmqd: list[RmqdServer] = []

    def close(self) -> None:
        for a in self.apache:
            a.kill()
        for s in self.rmqd:
            s.kill()


@pytest.fixture
def started() -> Iterator[Started]:
    s = Started()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def java(java_helper: Path, tmp_path: Path) -> Java:  # noqa: F811 - java_helper is the imported fixture
    return Java(java_helper, tmp_path)


def rmqd_server(tmp_path: Path, name: str, extra: dict[str, str], started: Started) -> RmqdServer:
    conf = tmp_path / f"{name}.conf"
    conf.write_text(conf_text(extra))
    store = tmp_path / name / "store"
    store.mkdir(parents=True)
    # _free_broker_port keeps listenPort - 2 (fast port) and listenPort + 1 (HA port) free too
    s = RmqdServer(store=store, log_path=tmp_path / f"{name}.log", conf=conf, broker_port=_free_broker_port())
    started.rmqd.append(s)
    return s.start()


def test_rmqd_slave_of_apache_master(tmp_path: Path, java: Java, started: Started) -> None:
    apache = ApacheRocketMQ(tmp_path / "apache", broker_conf={**GEOMETRY, "brokerRole": "ASYNC_MASTER"})
    started.apache.append(apache)
    apache.start()
    java.produce(apache.namesrv_addr, message_specs("a", 1), "first")
    slave = rmqd_server(tmp_path, "rmqd-slave", {
        "brokerRole": "SLAVE", "brokerId": "1", "brokerName": "broker-a",
        "haMasterAddress": f"127.0.0.1:{apache.broker_port + 1}"}, started)
    wait_identical(apache.store_dir, slave.store, "rmqd slave of Apache master, first batch")
    java.produce(apache.namesrv_addr, message_specs("b", 2), "second")  # streamed live
    files = wait_identical(apache.store_dir, slave.store, "rmqd slave of Apache master")
    assert len(files) >= 2  # a file roll (BLANK record) was replicated
    assert slave.stop() == 0, harness.tail(slave.log_path)
    apache.stop()
    assert commit_log(slave.store) == files  # still identical after both stopped cleanly


def test_apache_slave_of_rmqd_master(tmp_path: Path, java: Java, started: Started) -> None:
    master = rmqd_server(tmp_path, "rmqd-master", {"brokerRole": "ASYNC_MASTER", "brokerName": "broker-a"}, started)
    java.produce(master.namesrv, message_specs("a", 1), "first")
    apache = ApacheRocketMQ(tmp_path / "apache", broker_conf={
        **GEOMETRY, "brokerRole": "SLAVE", "brokerId": "1",
        "haMasterAddress": f"127.0.0.1:{master.broker_port + 1}"})
    started.apache.append(apache)
    apache.start()
    wait_identical(master.store, apache.store_dir, "Apache slave of rmqd master, first batch")
    java.produce(master.namesrv, message_specs("b", 2), "second")  # streamed live
    files = wait_identical(master.store, apache.store_dir, "Apache slave of rmqd master")
    assert len(files) >= 2
    apache.stop()
    assert master.stop() == 0, harness.tail(master.log_path)
    assert commit_log(apache.store_dir) == files
