"""Issue 13, ACL and TLS with the real clients: an `rmqd serve` with aclEnable=true and a
RocketMQ-format conf/plain_acl.yml, driven by the Java 4.9.8 client (rocketmq-acl's
AclClientRPCHook, case fields accessKey/secretKey) and the Go client (primitive.Credentials);
and the Java client started with -Dtls.enable=true (ClientConfig.useTLS follows
TlsSystemConfig.tlsEnable) and the Go client with WithTls(true) against tls.server.mode
permissive, disabled and enforcing.

Imports nothing of rmqd: the broker is started from its CLI (broker.conf keys aclEnable and
rocketmqHome; TLS settings as -D words of JAVA_OPT, the way runbroker.sh passes them).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import socket
import struct
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
- accessKey: nogroup1
  secretKey: 12345678
  defaultTopicPerm: DENY
  defaultGroupPerm: SUB
  topicPerms:
  - aclcmp=SUB
  groupPerms:
  - cg_cmp=DENY
- accessKey: acladmin1
  secretKey: 12345678
  whiteRemoteAddress: 192.168.1.*
  admin: true
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
    # enforcing: the broker's own connection to the name server must speak TLS too (tls.enable)
    client = " -Dtls.enable=true" if mode == "enforcing" else ""
    monkeypatch.setenv("JAVA_OPT", f"-Dtls.server.mode={mode} -Dtls.config.file={base / 'absent.properties'}{client}")
    try:
        return RmqdServer(store=base / f"store-{mode}", log_path=base / f"rmqd-{mode}.log").start()
    finally:
        monkeypatch.delenv("JAVA_OPT")


TLS_CLIENTS = ("java", "go")


def _tls_produce(client: str, server: RmqdServer, workdir: Path, topic: str, body: bytes, name: str,
                 monkeypatch: pytest.MonkeyPatch) -> DriverProc:
    """A send with the client's TLS switch on: Java's is the system property tls.enable
    (TlsSystemConfig.tlsEnable -> ClientConfig.useTLS), passed through JAVA_TOOL_OPTIONS, which
    reaches the driver's JVM unchanged; Go's is producer.WithTls (the driver's case field tls)."""
    if client == "java":
        with monkeypatch.context() as m:
            m.setenv("JAVA_TOOL_OPTIONS", "-Dtls.enable=true")
            return _produce(client, server, workdir, topic, body, name)
    return _produce(client, server, workdir, topic, body, name, tls=True)


@pytest.mark.parametrize("client", TLS_CLIENTS)
@pytest.mark.parametrize("mode,tls_connects,plain_connects",
                         [("permissive", True, True), ("disabled", False, True), ("enforcing", True, False)])
def test_client_with_tls_enabled(client: str, mode: str, tls_connects: bool, plain_connects: bool, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _need(client)
    server = _tls_server(tmp_path, mode, monkeypatch)
    try:
        d = _tls_produce(client, server, tmp_path, f"tls_{mode}", b"over-tls", f"tls-{mode}", monkeypatch)
        for connects, proc in ((tls_connects, d),
                               (plain_connects, _produce(client, server, tmp_path, f"plain_{mode}", b"plain",
                                                         f"plain-{mode}"))):
            if connects:
                assert [e["status"] for e in proc.of("sent")] == ["SEND_OK"], proc.diagnostics()
            else:   # the server hangs up on the handshake/first request: not even a route is got
                assert not proc.of("sent") and (proc.of("send_error") or proc.of("driver_error")), \
                    proc.diagnostics()
        if client == "go" and tls_connects:
            # and a push consumer over TLS gets the message back
            consumer = DriverProc(client, {"role": "push", "namesrv": server.namesrv, "topic": f"tls_{mode}",
                                           "group": f"cg_tls_{mode}", "model": "clustering", "expression": "*",
                                           "deadline_s": 60, "consume_from": "CONSUME_FROM_FIRST_OFFSET",
                                           "tls": True}, tmp_path, f"push-{mode}").start()
            try:
                assert consumer.wait_event("started", 30), consumer.diagnostics()
                consumer.wait_messages(1, 45)
                assert [body_of(m) for m in consumer.messages()] == [b"over-tls"], consumer.diagnostics()
            finally:
                consumer.stop()
    finally:
        assert server.stop() == 0


# -- the same refusals from Apache RocketMQ ---------------------------------------------------------
#
# Raw frames (a few lines of RocketMQ's JSON framing; this directory imports nothing of rmqd) so
# the whole answer is compared: the Java client would hide the remark behind its retry exception.

def _frame(code: int, ext: dict[str, str], body: bytes, opaque: int) -> bytes:
    header = json.dumps({"code": code, "extFields": ext, "flag": 0, "language": "JAVA", "opaque": opaque,
                         "serializeTypeCurrentRPC": "JSON", "version": 409}).encode()
    return struct.pack(">II", 4 + len(header) + len(body), len(header)) + header + body


def _sign(ext: dict[str, str], body: bytes, ak: str, sk: str) -> dict[str, str]:
    """AclClientRPCHook: AccessKey added, values in key order + body, HmacSHA1, base64."""
    fields = dict(ext, AccessKey=ak)
    content = "".join(fields[k] for k in sorted(fields)).encode() + body
    fields["Signature"] = base64.b64encode(hmac.new(sk.encode(), content, hashlib.sha1).digest()).decode()
    return fields


def _ask(port: int, code: int, ext: dict[str, str], body: bytes = b"") -> tuple[int, str | None]:
    """The response (frames the broker pushes first, e.g. NOTIFY_CONSUMER_IDS_CHANGED, skipped)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(_frame(code, ext, body, 7))
        data = b""
        while True:
            while len(data) < 4 or len(data) < 4 + struct.unpack(">I", data[:4])[0]:
                chunk = s.recv(65536)
                assert chunk, "connection closed without an answer"
                data += chunk
            total = 4 + struct.unpack(">I", data[:4])[0]
            header_len = struct.unpack(">I", data[4:8])[0] & 0xFFFFFF
            header = json.loads(data[8:8 + header_len])
            data = data[total:]
            if header.get("flag", 0) & 1:
                return header["code"], header.get("remark")


def _as_4_9_8(remark: str | None) -> str | None:
    """4.9.7's PlainPermissionManager has one import line fewer than 4.9.8's: its line numbers
    are 4.9.8's minus one (the acl module is otherwise unchanged between the two)."""
    if remark is None:
        return None
    return re.sub(r"\(PlainPermissionManager\.java:(\d+)\)",
                  lambda m: f"(PlainPermissionManager.java:{int(m.group(1)) + 1})", remark)


def _refusal_cases() -> dict[str, tuple[int, dict[str, str], bytes]]:
    send = {"a": "pg_cmp", "b": "aclcmp", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1700000000000",
            "h": "0", "i": "WAIT\u0001true\u0002", "j": "0", "k": "false", "m": "false"}
    pull = {"consumerGroup": "cg_cmp", "topic": "aclcmp", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
            "sysFlag": "2", "commitOffset": "0", "suspendTimeoutMillis": "0", "subVersion": "0"}
    topic = {"topic": "aclnew", "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4",
             "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
    hb = json.dumps({"clientID": "c1", "producerDataSet": [], "consumerDataSet": [
        {"groupName": "cg_cmp", "subscriptionDataSet": [{"topic": t} for t in ("T1", "T2", "topicX")]}]}).encode()
    return {
        "wrong-secret": (310, _sign(send, b"r", "RocketMQ", "not-the-secret"), b"r"),
        "changed-after-signing": (310, dict(_sign(send, b"r", "RocketMQ", "12345678"), e="1"), b"r"),
        "unsigned": (310, send, b"r"),
        "read-only-send": (310, _sign(send, b"r", "readonly1", "12345678"), b"r"),
        "unknown-key": (310, _sign(send, b"r", "nobody12", "12345678"), b"r"),
        "non-admin-create-topic": (17, _sign(topic, b"", "RocketMQ", "12345678"), b""),
        "read-only-heartbeat-ok": (34, _sign({}, hb, "readonly1", "12345678"), hb),
        "denied-group-pull": (11, _sign(pull, b"", "nogroup1", "12345678"), b""),
        "denied-topics-heartbeat": (34, _sign({}, hb, "nogroup1", "12345678"), hb),
        "heartbeat-without-body": (34, _sign({}, b"", "RocketMQ", "12345678"), b""),
        # ACL admin codes, signed by an admin account (rmqd refuses other accounts, 4.9.8 does not:
        # test_acl_administration_needs_an_admin_account): their refusals
        "acl-update-bad-perm": (50, _sign({"accessKey": "newuser1", "secretKey": "newsecret1", "admin": "false",
                                           "topicPerms": "tA=WRITE"}, b"", "acladmin1", "12345678"), b""),
        "acl-update-short-secret": (50, _sign({"accessKey": "newuser1", "secretKey": "abc"}, b"",
                                              "acladmin1", "12345678"), b""),
        "acl-delete-unknown": (51, _sign({"accessKey": "nobody99"}, b"", "acladmin1", "12345678"), b""),
        "acl-white-without-addrs": (53, _sign({}, b"", "acladmin1", "12345678"), b""),
        "denied-group-offset": (15, _sign({"consumerGroup": "cg_cmp", "topic": "aclcmp", "queueId": "0",
                                           "commitOffset": "1"}, b"", "nogroup1", "12345678"), b""),
    }


def test_refusal_answers_match_apache(acl_server: RmqdServer, tmp_path: Path) -> None:
    """The same signed/unsigned frames to Apache RocketMQ 4.9.7 (aclEnable, the same yml) and to
    rmqd: the same response code and remark (exception, message, the frame that threw)."""
    from apache_rocketmq import ApacheRocketMQ, apache_problem
    problem = apache_problem()
    if problem:
        harness.missing(problem)
    apache_dir = tmp_path / "apache"
    (apache_dir / "home" / "conf").mkdir(parents=True)
    (apache_dir / "home" / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    cases = _refusal_cases()
    apache = ApacheRocketMQ(apache_dir, broker_conf={"aclEnable": "true"})
    apache.start()
    try:
        port = int(apache.broker_addr.rsplit(":", 1)[1])
        want = {name: _ask(port, *case) for name, case in cases.items()}
    finally:
        apache.stop()
    want = {name: (code, _as_4_9_8(remark)) for name, (code, remark) in want.items()}
    got = {name: _ask(acl_server.broker_port, *case) for name, case in cases.items()}
    assert got == want
    assert got["wrong-secret"][0] == 1 and "Check signature failed" in str(got["wrong-secret"][1])


def test_acl_administration_needs_an_admin_account(acl_server: RmqdServer) -> None:
    """Different from 4.9.8 on purpose (issue 22): an ordinary signed account cannot send the
    ACL administration codes, so it cannot make itself admin nor open the white list."""
    grant = {"accessKey": "RocketMQ", "secretKey": "12345678", "admin": "true"}
    for code, ext in ((50, grant), (51, {"accessKey": "readonly1"}), (52, {}), (53, {"globalWhiteAddrs": "*"})):
        got = _ask(acl_server.broker_port, code, _sign(ext, b"", "RocketMQ", "12345678"))
        assert got[0] == 1 and got[1] is not None, got
        assert got[1].startswith("org.apache.rocketmq.acl.common.AclException: Need admin permission for request "
                                 f"code={code}, but accessKey=RocketMQ is not"), got
    # the same account still sends; the admin account may administer
    got = _ask(acl_server.broker_port, 52, _sign({}, b"", "acladmin1", "12345678"))
    assert got == (0, None)
