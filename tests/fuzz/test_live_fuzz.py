"""Issue 11: fuzzing a live `rmqd serve` (a subprocess on free loopback ports, its log in a
file). A bounded run of scripts/fuzz_live.py, and hypothesis-built frames of every code
area, one per example on a connection: the server answers each with a decodable frame or
closes the connection; it never logs a traceback, stays up and stays healthy (a new
connection can send and pull back a message: dispatch is not wedged)."""
from __future__ import annotations

import functools
import importlib.util
import json
import socket
import struct
import sys
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqd.wire.frame import FrameDecoder

pytestmark = pytest.mark.timeout(240)

REPO = Path(__file__).resolve().parents[2]


def _load_fuzz_live():
    spec = importlib.util.spec_from_file_location("fuzz_live", REPO / "scripts" / "fuzz_live.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["fuzz_live"] = mod
    spec.loader.exec_module(mod)
    return mod


fuzz_live = _load_fuzz_live()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = fuzz_live.Server(tmp_path_factory.mktemp("fuzz"))
    s.start()
    try:
        yield s
    finally:
        s.stop()


def _assert_clean(server) -> None:
    assert server.alive(), f"rmqd exited: {server.log_path.read_text()[-3000:]}"
    sigs = fuzz_live.traceback_signatures(server.new_log())
    assert sigs == [], sigs
    problem = trio.run(fuzz_live.health_check, server.namesrv, server.broker, 0)
    assert problem is None, problem


def test_fuzz_live_run_is_clean(server):
    stats = trio.run(fuzz_live.fuzz, server, 2500, 11, 2, 250, 0, lambda _line: None)
    assert stats.frames == 2500
    assert stats.ok(), stats.as_dict()
    assert stats.health_ok == 10 and stats.tracebacks == 0 and stats.wedges == 0
    assert sum(stats.responses.values()) > stats.intact_frames // 3  # frames were really processed
    assert len(stats.by_mutator) == 18  # every mutator ran
    _assert_clean(server)


def test_every_seed_is_answered_unmutated(server):
    """The seeds themselves are valid requests: each gets a response (long-polling pulls are
    built with a short suspend)."""
    for seed in fuzz_live.capture_seeds() + fuzz_live.synthesized_seeds():
        if seed.flag & 2:  # oneway in the capture
            continue
        addr = server.namesrv if seed.target == "namesrv" else server.broker
        resp = _exchange(addr, fuzz_live.seed_frame(seed, 7), timeout=5)
        assert resp not in (None, "closed"), (seed.code, resp)
        assert resp.opaque == 7
    _assert_clean(server)


def _exchange(addr: str, frame: bytes, timeout: float = 3.0, half_close: bool = False):
    """The first response to ``frame`` on a new connection, "closed", or None on timeout.
    ``half_close`` ends the sending side after the frame (the server sees EOF: a frame whose
    length words lie is then not waited for)."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(frame)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        dec = FrameDecoder()
        try:
            while True:
                data = sock.recv(65536)
                if not data:
                    return "closed"
                dec.feed(data)
                for cmd in dec:
                    return cmd
        except socket.timeout:
            return None
        except ConnectionResetError:
            return "closed"


CODES = st.one_of(st.sampled_from([int(c) for c in fuzz_live.SYNTH_CODES]), st.integers(-3, 400))
VALUES = st.one_of(st.text(max_size=40), st.sampled_from([v for v in fuzz_live.NASTY if isinstance(v, str)]),
                   st.integers(-2**64, 2**64).map(str), st.integers(), st.none(), st.booleans(),
                   st.lists(st.integers(), max_size=3))
KEYS = st.sampled_from(["topic", "group", "consumerGroup", "queueId", "offset", "a", "b", "e", "i", "sysFlag",
                        "key", "namespace", "brokerName", "clusterName", "perm", "commitLogOffset", "maxMsgNums",
                        "queueOffset", "producerGroup", "readQueueNums", "writeQueueNums", "delayLevel",
                        "originMsgId", "originTopic", "suspendTimeoutMillis", "timestamp"])
BODIES = st.one_of(st.binary(max_size=200), st.just(b""),
                   st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=10)),
                                lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(st.text(max_size=12), inner, max_size=4)),
                                max_leaves=12).map(lambda v: json.dumps(v).encode()))


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(code=CODES, ext=st.dictionaries(KEYS, VALUES, max_size=8), body=BODIES, to_namesrv=st.booleans())
def test_hypothesis_frames_get_an_answer_or_a_close(server, code, ext, body, to_namesrv):
    if code == 11:  # a pull may be held for its suspend time: keep it short
        ext["suspendTimeoutMillis"] = "100"
    frame = fuzz_live.json_frame(code, ext, body, opaque=5)
    resp = _exchange(server.namesrv if to_namesrv else server.broker, frame, timeout=5)
    assert resp is not None, f"no answer within 5 s to code {code} ext {ext!r}"
    if resp != "closed":
        assert resp.is_response and resp.opaque == 5
    assert server.alive()


SEEDS = fuzz_live.capture_seeds() + fuzz_live.synthesized_seeds()
MUTATORS = [name for name, _ in fuzz_live.Mutator(fuzz_live.random.Random(0), SEEDS).ops]
#: requests the broker may rightly hold or leave unanswered: a pull (long polling), END_TRANSACTION
#: (no response for TRANSACTION_NOT_TYPE, as EndTransactionProcessor)
MAY_HOLD = {11, 37}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(seed_index=st.integers(0, len(SEEDS) - 1), mutator=st.sampled_from(MUTATORS), rng_seed=st.integers(0, 2**32))
def test_hypothesis_mutated_seeds(server, seed_index, mutator, rng_seed):
    """The fuzzer's own mutators driven by hypothesis (so a failure shrinks to one seed, one
    mutator and one random stream): a frame whose framing survived gets an answer with its
    opaque or a close; any frame leaves the server up."""
    seed = SEEDS[seed_index]
    frame, intact = fuzz_live.Mutator(fuzz_live.random.Random(rng_seed), SEEDS).apply(mutator, seed, 9)
    addr = server.namesrv if seed.target == "namesrv" else server.broker
    resp = _exchange(addr, frame, timeout=2, half_close=not intact)
    if intact and resp is None:
        header = fuzz_live.decode_frame(frame)
        assert header.code in MAY_HOLD or header.flag & 2, f"no answer in 2 s: {frame[:300].hex()}"
    if resp not in (None, "closed"):
        assert resp.is_response
    assert server.alive(), frame.hex()


def test_after_hypothesis_no_traceback_and_healthy(server):
    _assert_clean(server)


def test_header_length_word_is_checked(server):
    """A frame whose header length exceeds the frame is refused by closing, not by waiting."""
    frame = fuzz_live.json_frame(105, {"topic": "T"}, b"")
    bad = frame[:4] + struct.pack(">I", 0xFFFFFF) + frame[8:]
    assert _exchange(server.namesrv, bad, timeout=5) == "closed"
    _assert_clean(server)


def _issue_frames():
    """ISSUE_FRAME and TRAVERSAL of tests/processors/test_bad_names.py (one copy of the issue's bytes)."""
    spec = importlib.util.spec_from_file_location("_bad_names_inputs", REPO / "tests" / "processors" / "test_bad_names.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.ISSUE_FRAME, mod.TRAVERSAL


def test_issue_11_inputs_on_a_live_broker_then_sigkill_and_restart(tmp_path):
    """The issue's wire inputs (items 1, 2, 3, 6) against a real `rmqd serve` subprocess: each
    gets a clean error, nothing lands outside the store, no traceback is logged, dispatch
    goes on; then SIGKILL: the store starts again, is healthy, `rmqd store verify` passes and
    the group created after the `{}` body was kept (the table did not stop saving)."""
    issue_frame, traversal = _issue_frames()
    srv = fuzz_live.Server(tmp_path / "w")
    srv.start()
    store = srv.workdir / "store"

    def outside_store() -> set[Path]:
        return {p for p in tmp_path.rglob("*") if store not in p.parents and p.name != "rmqd.log"}

    outside_before = outside_store()
    try:
        async def send_one() -> None:
            async with fuzz_live.Client(srv.broker) as c:
                r = await c.invoke(fuzz_live.RequestCode.SEND_MESSAGE_V2, fuzz_live._send_ext("ReproT"), b"one")
                assert r.code == 0, r.remark

        trio.run(send_one)
        ext = json.loads(issue_frame[8:])["extFields"]
        answers = {
            "item 1 (group NUL)": _exchange(srv.broker, issue_frame),
            "item 2 (traversal)": _exchange(srv.broker, fuzz_live.json_frame(36, {**ext, "group": traversal}, b"", opaque=2)),
            "item 3 (body {})": _exchange(srv.broker, fuzz_live.json_frame(200, {}, b"{}", opaque=2)),
            "item 6 (heartbeat non-UTF-8)": _exchange(srv.broker, fuzz_live.json_frame(34, {}, b'{"clientID":"\xff\xfe"}', opaque=2)),
            "item 6 (code 200 non-UTF-8)": _exchange(srv.broker, fuzz_live.json_frame(200, {}, b'{"groupName":"\xff"}', opaque=2)),
        }
        for what, resp in answers.items():
            assert resp not in (None, "closed"), what
            assert resp.opaque == 2 and resp.code == 1, (what, resp.code, resp.remark)  # SYSTEM_ERROR
            assert resp.remark and "Traceback" not in resp.remark, (what, resp.remark)
        good = _exchange(srv.broker, fuzz_live.json_frame(200, {}, b'{"groupName":"LiveGoodG","retryMaxTimes":3}', opaque=3))
        assert good.code == 0, good.remark
        _assert_clean(srv)
        names = {p.name for p in (store / "consumequeue").iterdir()}
        assert not any("\x00" in n or ".." in n for n in names), names
        assert outside_store() == outside_before
        stats = fuzz_live.Stats()
        fuzz_live.crash_restart_and_verify(srv, stats)  # SIGKILL, start, health check, stop, store verify
        assert (stats.restart, stats.verify, stats.tracebacks) == ("ok", "ok", 0), stats.as_dict()
        assert not srv.alive()  # stopped cleanly before the verify
        groups = json.loads((store / "config" / "subscriptionGroup.json").read_text())
        assert "LiveGoodG" in json.dumps(groups)
    finally:
        srv.stop()


def test_acknowledged_sends_survive_descriptor_exhaustion(tmp_path):
    """rmqd out of file descriptors while sends arrive on an open connection (consume-queue
    files cannot be created): whatever was acknowledged is pullable once descriptors are back
    (a transient OSError in dispatch is retried, never a reason to pass a record over), the
    broker recovers and logs no request traceback."""
    srv = fuzz_live.Server(tmp_path / "w")
    srv.start()
    try:
        assert trio.run(fuzz_live.fd_exhaustion_check, srv) == "ok"
        assert srv.alive()
    finally:
        srv.stop()


#: F1: SEND_BATCH_MESSAGE whose inner message's properties are not UTF-8 (KEYS "\xdc\xd8x"); Java
#: stores the property bytes as sent and reads them back with U+FFFD replacement
F1_FRAME = bytes.fromhex(
    "00000194000001627b22636f6465223a203332302c20226578744669656c6473223a207b2261223a202246757a7a50726f"
    "64756365725a3971222c202262223a202250726f626554222c202263223a2022544257313032222c202264223a202234222c"
    "202265223a202230222c202266223a202230222c202267223a202231373935303030303030303030222c202268223a202230"
    "222c202269223a2022544147535c7530303031546167415c75303030324b4559535c75303030316b315c7530303032574149"
    "545c753030303174727565222c20226a223a202230222c20226b223a202266616c7365222c20226d223a202274727565222c"
    "20226e223a202262726f6b65722d61227d2c2022666c6167223a20302c20226c616e6775616765223a20224a415641222c20"
    "226f7061717565223a20312c202273657269616c697a655479706543757272656e74525043223a20224a534f4e222c202276"
    "657273696f6e223a203339357d0000002e00000000000000000000000000000002623100164b45595301dcd87802554e4951"
    "5f4b45590141424302")


def test_batch_message_with_non_utf8_properties_is_readable_everywhere(tmp_path):
    """The stored record is valid for 4.9.8: send-back works, `rmqd store verify` and `dump` pass."""
    import subprocess
    srv = fuzz_live.Server(tmp_path / "w")
    srv.start()
    try:
        resp = _exchange(srv.broker, F1_FRAME)
        assert resp.code == 0, resp.remark
        offset = int(resp.ext_fields["msgId"][16:], 16)
        back = _exchange(srv.broker, fuzz_live.json_frame(36, {
            "offset": str(offset), "group": "ProbeG", "delayLevel": "0", "originMsgId": resp.ext_fields["msgId"],
            "originTopic": "ProbeT", "unitMode": "false", "maxReconsumeTimes": "16"}, b"", opaque=3))
        assert back.code == 0, back.remark
        _assert_clean(srv)
    finally:
        srv.stop()
    for cmd in (["verify", "-c", str(srv.workdir / "broker.conf")], ["dump"]):
        p = subprocess.run([sys.executable, "-m", "rmqd", "store", *cmd, str(srv.workdir / "store")],
                           cwd=REPO, capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, (cmd, p.stdout[-500:], p.stderr[-500:])


def test_fuzz_live_acl_mode_is_clean(tmp_path):
    """Issue 22: --acl (signed, badly signed, tampered and unsigned frames, the ACL codes 50-54)
    against an aclEnable=true `rmqd serve`, with a graceful restart mid-run and at the end:
    no traceback, every health check ok, every acl file parses and loads, every restart starts."""
    srv = fuzz_live.Server(tmp_path / "w", acl=True)
    srv.start()
    try:
        stats = trio.run(functools.partial(fuzz_live.fuzz, srv, 2400, 22, 2, 300, 0, lambda _line: None,
                                           restart_every=1200))
        assert stats.frames == 2400 and stats.ok(), stats.as_dict()
        assert stats.restarts_ok == 1 and stats.restarts_failed == 0
        assert set(stats.by_credentials) == {k for k, _ in fuzz_live.Credentials.KINDS}
        codes = {int(k) for k in stats.as_dict()["responses"]}
        assert {0, 1} <= codes                                       # accepted and refused frames alike
        fuzz_live.crash_restart_and_verify(srv, stats)               # graceful restart with the acl check, SIGKILL
        assert (stats.acl_files, stats.restart, stats.verify, stats.tracebacks) == ("ok", "ok", "ok", 0), \
            stats.as_dict()
        assert fuzz_live.acl_files_problem(srv) is None
    finally:
        srv.stop()
