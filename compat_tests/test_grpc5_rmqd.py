"""5.x gRPC cases that start their own rmqd: ACL (plain_acl.yml, accepted and refused) and a
restart / a SIGKILL while a consumer holds messages (nothing acknowledged comes back, nothing
unacknowledged is lost). No Apache column: Apache RocketMQ 5.3 has no plain ACL any more (its
ACL 2.0 takes users and policies instead of plain_acl.yml), and the reference launcher's
restarts are not part of the matrix (as for the 4.x Apache column); grpc5_results lists both."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterator

import pytest

import grpc5_results as results
from grpc5_harness import CLIENTS, GrpcSession, RmqdTarget, body_of, spec, wait_done

pytestmark = pytest.mark.timeout(420)

results.DIFFERENCES.setdefault(
    "ACL accepted / refused",
    "rmqd only: Apache RocketMQ 5.3 removed plain ACL (plain_acl.yml); its ACL 2.0 is configured as users and "
    "policies")
results.DIFFERENCES.setdefault(
    "restart and SIGKILL while messages are held",
    "rmqd only: the reference launcher's restarts are not in the matrix (as for the 4.x Apache column)")

PLAIN_ACL = """\
accounts:
- accessKey: RocketMQAdmin
  secretKey: 87654321
  admin: true
- accessKey: RocketMQ5
  secretKey: 12345678
  admin: false
  defaultTopicPerm: PUB|SUB
  defaultGroupPerm: SUB
"""


@pytest.fixture(params=list(CLIENTS))
def gclient(request: pytest.FixtureRequest) -> str:
    return request.param


def _run(case: str, gclient: str, target: Any, tmp_path: Path, body: Any) -> None:
    from test_grpc5_clients import run_case
    run_case(case, gclient, target, tmp_path, body)


@pytest.fixture
def acl_target(tmp_path: Path) -> Iterator[RmqdTarget]:
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    t = RmqdTarget(tmp_path / "rmqd", {"aclEnable": "true", "rocketmqHome": str(home)},
                   admin_credentials={"TOPIC_ADMIN_AK": "RocketMQAdmin", "TOPIC_ADMIN_SK": "87654321"}).start()
    try:
        yield t
    finally:
        t.stop()


def test_acl_accepted_and_refused(gclient: str, acl_target: RmqdTarget, tmp_path: Path) -> None:
    def body(s: GrpcSession) -> None:
        s.target.admin(f"topic:{s.name('t')}:NORMAL:4")
        t = s.name("t")
        good = {"access_key": "RocketMQ5", "secret_key": "12345678"}
        consumer = s.simple(t, s.name("g"), expect=1, **good)
        assert consumer.wait_event("polling", 60), consumer.diagnostics()
        time.sleep(1.5)
        ok = s.produce(t, [spec(b"signed")], **good)
        assert ok.of("sent") and not ok.of("send_error"), ok.diagnostics()
        wait_done(consumer, 60)
        assert [body_of(m) for m in consumer.messages()] == [b"signed"], consumer.diagnostics()
        bad = s.produce(t, [spec(b"forged")], access_key="RocketMQ5", secret_key="wrong-secret")
        errors = bad.of("start_error") + bad.of("send_error")
        assert errors and not bad.of("sent"), bad.diagnostics()
        # the Java client names UNAUTHORIZED (40100); Python and Node report a route they could not
        # fetch: the broker's log says why
        log = Path(s.target.server.log_path).read_text()
        assert any(e.get("code") == 40100 for e in errors) or "Check signature failed for accessKey=RocketMQ5" in log, \
            errors
    _run("ACL accepted / refused", gclient, acl_target, tmp_path, body)


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
def test_restart_while_messages_are_held(gclient: str, tmp_path: Path, kill: bool) -> None:
    """10 messages received with a 10 s invisible time, every other one acknowledged; the broker
    is restarted (SIGTERM or SIGKILL); the same group then gets back exactly the 5 unacknowledged
    ones, none before its invisible time and none of the acknowledged."""
    target = RmqdTarget(tmp_path / "rmqd").start()
    try:
        def body(s: GrpcSession) -> None:
            t = s.name("t")
            group = s.name("g")
            s.target.admin(f"topic:{t}:NORMAL:4")
            first = s.simple(t, group, expect=10, invisible_s=10, ack="half", max_count=4)
            assert first.wait_event("polling", 60), first.diagnostics()
            time.sleep(1.5)
            s.produce(t, [spec(f"h{i}".encode()) for i in range(10)])
            wait_done(first, 60)
            held = first.messages()
            assert len(held) == 10 and len(first.of("ack")) == 5, first.diagnostics()
            acked = {a["msgId"] for a in first.of("ack")}
            received_at = min(m["t"] for m in held)
            target.restart(kill=kill)
            second = s.simple(t, group, expect=5, min_s=20, invisible_s=30)
            wait_done(second, 90)
            again = second.messages()
            assert sorted(m["msgId"] for m in again) == sorted(m["msgId"] for m in held if m["msgId"] not in acked), \
                second.diagnostics()
            assert all(m["t"] >= received_at + 9 for m in again), (received_at, [m["t"] for m in again])
            assert all(m["deliveryAttempt"] == 2 for m in again), again
        from test_grpc5_clients import run_case
        run_case("restart and SIGKILL while messages are held", gclient, target, tmp_path, body)
    finally:
        target.stop()
