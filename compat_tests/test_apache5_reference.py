"""The Apache RocketMQ 5.3.3 reference itself (apache5_rocketmq.py): the name server and the proxy
in local mode start on free ports, the 5.3.3 Remoting Java client sends and receives through the
hosted broker, the gRPC port listens, and a SIGTERM leaves a store the broker wrote in 5.x's
layout (config/consumerOffset.json, consumerOrderInfo.json)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Iterator

import pytest

import compat_harness as harness
from apache5_rocketmq import ApacheRocketMQ5, apache5_problem, mqadmin5
from compat_harness import body_of, msg_spec
from compat_session import Session

pytestmark = pytest.mark.timeout(300)

CLIENT = "java5"


@pytest.fixture(scope="module")
def apache5(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheRocketMQ5]:
    for problem in (apache5_problem(), harness.client_problem(CLIENT)):
        if problem:
            harness.missing(problem)
    a = ApacheRocketMQ5(tmp_path_factory.mktemp("apache5"))
    a.start()
    try:
        yield a
    finally:
        a.stop()


def test_starts_with_grpc_and_proxy_ports(apache5: ApacheRocketMQ5) -> None:
    for port in (apache5.grpc_port, apache5.proxy_remoting_port, apache5.broker_port, apache5.namesrv_port):
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
    r = mqadmin5(apache5.namesrv_addr, "clusterList", workdir=apache5.workdir)
    assert apache5.broker_addr in r.stdout, r.stdout + r.stderr


def test_remoting_client_sends_and_receives(apache5: ApacheRocketMQ5, tmp_path: Path) -> None:
    s = Session(CLIENT, tmp_path, apache5.namesrv_addr, "apache5smoke")
    try:
        topic, group = s.name("t"), s.name("cg")
        bodies = [f"apache5-{i}".encode() for i in range(5)]
        sent = s.produce(topic, [msg_spec(b, tags="A", keys=f"k{i}") for i, b in enumerate(bodies)])
        assert len(sent.of("sent")) == len(bodies), sent.diagnostics()
        d = s.push(topic, group, consume_from="CONSUME_FROM_FIRST_OFFSET")
        got = d.wait_messages(len(bodies), 60)
        assert sorted(body_of(m) for m in got) == sorted(bodies), d.diagnostics()
        assert all(m.get("tags") == "A" for m in got), d.diagnostics()
    finally:
        s.close()


def test_sigterm_leaves_a_5x_store(tmp_path: Path) -> None:
    """A separate instance: SIGTERM runs the broker's shutdown (config files persisted)."""
    for problem in (apache5_problem(), harness.client_problem(CLIENT)):
        if problem:
            harness.missing(problem)
    a = ApacheRocketMQ5(tmp_path / "apache5")
    a.start()
    try:
        s = Session(CLIENT, tmp_path / "case", a.namesrv_addr, "apache5store")
        (tmp_path / "case").mkdir()
        s.produce(s.name("t"), [msg_spec(b"x")])
    finally:
        a.stop()
    assert a.broker is not None and a.broker.returncode is not None
    config = a.store_dir / "config"
    for name in ("consumerOffset.json", "consumerOrderInfo.json", "topics.json"):
        assert (config / name).is_file(), sorted(p.name for p in config.iterdir())
    assert any((a.store_dir / "commitlog").iterdir())
