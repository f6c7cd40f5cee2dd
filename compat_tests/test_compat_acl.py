"""Issue 13, ACL and TLS with the real clients: an `rmqd serve` with aclEnable=true and a
RocketMQ-format conf/plain_acl.yml, driven by the Java 4.9.8 client (rocketmq-acl's
AclClientRPCHook, case fields accessKey/secretKey) and the Go client (primitive.Credentials);
and a Java client started with -Dtls.enable=true (ClientConfig.useTLS follows
TlsSystemConfig.tlsEnable) against tls.server.mode permissive and disabled.

Imports nothing of rmqd: the broker is started from its CLI (broker.conf keys aclEnable and
rocketmqHome; TLS settings as -D words of JAVA_OPT, the way runbroker.sh passes them).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterator

import pytest

import compat_harness as harness
from compat_harness import DriverProc, RmqdServer, body_of, msg_spec, run_driver

PLAIN_ACL = """\
accounts:
- accessKey: RocketMQ
  secretKey: 12345678
  admin: false
  defaultTopicPerm: PUB|SUB
  defaultGroupPerm: PUB|SUB
- accessKey: readonly1
  secretKey: 12345678
  admin: false
  defaultTopicPerm: SUB
  defaultGroupPerm: SUB
"""
SIGNED = {"accessKey": "RocketMQ", "secretKey": "12345678"}
ACL_CLIENTS = ("java", "go")


def _need(client: str) -> None:
    problem = harness.client_problem(client)
    if problem:
        harness.missing(problem)


@pytest.fixture(scope="module")
def acl_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RmqdServer]:
    base = tmp_path_factory.mktemp("acl")
    home = base / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    conf = base / "broker.conf"
    conf.write_text(f"aclEnable=true\nrocketmqHome={home}\nmappedFileSizeCommitLog=4194304\n")
    server = RmqdServer(store=base / "store", log_path=base / "rmqd.log", conf=conf).start()
    try:
        yield server
    finally:
        server.kill()


def _produce(client: str, server: RmqdServer, workdir: Path, topic: str, body: bytes, name: str,
             **creds: Any) -> DriverProc:
    case = {"role": "produce", "namesrv": server.namesrv, "topic": topic, "group": f"pg_{topic}",
            "mode": "sync", "messages": [msg_spec(body)], **creds}
    return run_driver(client, case, workdir, name, 60)


@pytest.mark.parametrize("client", ACL_CLIENTS)
def test_signed_clients_work_and_the_rest_is_refused(client: str, acl_server: RmqdServer, tmp_path: Path) -> None:
    _need(client)
    tag = f"{client}_{int(time.time() * 1000) % 10**8}"
    topic, group = f"acl_{tag}", f"cg_{tag}"
    ok = _produce(client, acl_server, tmp_path, topic, b"signed-1", "signed", **SIGNED)
    (sent,) = ok.of("sent")
    assert sent["status"] == "SEND_OK", ok.diagnostics()

    refused = {
        "wrong-secret": {"accessKey": "RocketMQ", "secretKey": "not-the-secret"},
        "unsigned": {},
        "read-only": {"accessKey": "readonly1", "secretKey": "12345678"},
        "unknown-key": {"accessKey": "nobody12", "secretKey": "12345678"},
    }
    for name, creds in refused.items():
        d = _produce(client, acl_server, tmp_path, topic, f"refused-{name}".encode(), name, **creds)
        assert not d.of("sent"), f"{name}: the broker accepted it\n{d.diagnostics()}"
        assert d.of("send_error"), f"{name}: no send error\n{d.diagnostics()}"
    ok2 = _produce(client, acl_server, tmp_path, topic, b"signed-2", "signed2", **SIGNED)
    assert [e["status"] for e in ok2.of("sent")] == ["SEND_OK"], ok2.diagnostics()

    # a signed push consumer gets exactly the two signed messages: nothing refused was written
    consumer = DriverProc(client, {"role": "push", "namesrv": acl_server.namesrv, "topic": topic, "group": group,
                                   "model": "clustering", "expression": "*", "deadline_s": 60,
                                   "consume_from": "CONSUME_FROM_FIRST_OFFSET", **SIGNED},
                          tmp_path, "push").start()
    try:
        assert consumer.wait_event("started", 30), consumer.diagnostics()
        got = consumer.wait_messages(2, 45)
        time.sleep(2.0)
        bodies = sorted(body_of(m) for m in consumer.messages())
        assert bodies == [b"signed-1", b"signed-2"], f"{bodies}\n{consumer.diagnostics()}"
        assert len(got) >= 2
    finally:
        consumer.stop()
    assert acl_server.alive()


def _tls_server(base: Path, mode: str, monkeypatch: pytest.MonkeyPatch) -> RmqdServer:
    monkeypatch.setenv("JAVA_OPT", f"-Dtls.server.mode={mode} -Dtls.config.file={base / 'absent.properties'}")
    try:
        return RmqdServer(store=base / f"store-{mode}", log_path=base / f"rmqd-{mode}.log").start()
    finally:
        monkeypatch.delenv("JAVA_OPT")


@pytest.mark.parametrize("mode,connects", [("permissive", True), ("disabled", False)])
def test_java_client_with_tls_enabled(mode: str, connects: bool, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    _need("java")
    server = _tls_server(tmp_path, mode, monkeypatch)
    try:
        # JAVA_TOOL_OPTIONS reaches the driver's JVM unchanged: TlsSystemConfig.tlsEnable -> useTLS
        monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Dtls.enable=true")
        d = _produce("java", server, tmp_path, f"tls_{mode}", b"over-tls", f"tls-{mode}")
        monkeypatch.delenv("JAVA_TOOL_OPTIONS")
        if connects:
            assert [e["status"] for e in d.of("sent")] == ["SEND_OK"], d.diagnostics()
        else:   # a disabled server hangs up on a TLS handshake: the client cannot even get a route
            assert not d.of("sent") and (d.of("send_error") or d.of("driver_error")), d.diagnostics()
        plain = _produce("java", server, tmp_path, f"plain_{mode}", b"plain", f"plain-{mode}")
        assert [e["status"] for e in plain.of("sent")] == ["SEND_OK"], plain.diagnostics()
    finally:
        assert server.stop() == 0
