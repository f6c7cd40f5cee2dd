"""Bad input on the gRPC port of a live `rmqd serve`: a bounded run of scripts/fuzz_live.py's gRPC
mode, and one test per kind of damage with the answer it must get (a gRPC status, a RocketMQ
status, or GOAWAY and a closed connection); never a traceback in the log, never a wedge."""
from __future__ import annotations

import importlib.util
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h2.config
import h2.connection
import h2.events
import hpack
import pytest
import trio

from rmqd.wire.grpc import encode_message
from rmqd.wire.rocketmq_v2 import Code, pb

pytestmark = pytest.mark.timeout(240)

REPO = Path(__file__).resolve().parents[2]


def _load(name: str) -> Any:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


fuzz_live = _load("fuzz_live")
fuzz_grpc = _load("fuzz_grpc")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from support import free_port
    port = free_port()
    s = fuzz_live.Server(tmp_path_factory.mktemp("fuzz-grpc"), conf=f"grpcServerPort={port}\n")
    s.grpc_port = port
    s.start()
    assert trio.run(fuzz_live.health_check, s.namesrv, s.broker, 0) is None  # creates the health topic
    try:
        yield s
    finally:
        s.stop()


def _assert_clean(server) -> None:
    assert server.alive(), f"rmqd exited: {server.log_path.read_text()[-3000:]}"
    sigs = fuzz_live.traceback_signatures(server.new_log())
    assert sigs == [], sigs
    assert trio.run(fuzz_grpc.grpc_health, server.grpc_port, fuzz_live.HEALTH_TOPIC) is None


def test_grpc_fuzz_run_is_clean(server) -> None:
    async def remote(n: int) -> str | None:
        return await fuzz_live.health_check(server.namesrv, server.broker, n)

    stats = trio.run(lambda: fuzz_grpc.fuzz(server.grpc_port, 4000, 7, fuzz_live.HEALTH_TOPIC,
                                            fuzz_live.HEALTH_GROUP, connections=3, health_every=1000,
                                            remote_health=remote))
    assert stats.frames >= 4000
    assert stats.health_failed == 0 and stats.health_ok >= 4, stats.failures
    assert not stats.failures, stats.failures
    _assert_clean(server)


@dataclass
class Answer:
    """What the server sent back on one connection, decoded frame by frame (no client state
    machine: the request frames were written raw)."""

    headers: list[dict[str, str]] = field(default_factory=list)
    data: bytes = b""
    goaway: bool = False
    closed: bool = False
    ended: set[int] = field(default_factory=set)

    @property
    def status(self) -> str | None:
        for h in self.headers:
            if "grpc-status" in h:
                return h["grpc-status"]
        return None


async def _exchange(port: int, send: list[bytes], *, read_s: float = 5.0) -> Answer:
    """The preface and `send` as raw bytes; the answer until the stream or connection ends."""
    answer = Answer()
    decoder = hpack.Decoder()
    buf = bytearray()
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(fuzz_grpc.PREFACE + fuzz_grpc.settings_frame() + b"".join(send))
        with trio.move_on_after(read_s):
            while not answer.ended and not answer.goaway:
                try:
                    data = await stream.receive_some(65536)
                except (trio.BrokenResourceError, OSError):
                    data = b""
                if not data:
                    answer.closed = True
                    break
                buf += data
                while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[:3], "big"):
                    length, kind, flags = int.from_bytes(buf[:3], "big"), buf[3], buf[4]
                    sid = int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
                    payload = bytes(buf[9:9 + length])
                    del buf[:9 + length]
                    if kind == fuzz_grpc.HEADERS:
                        answer.headers.append({k.decode(): v.decode() for k, v in decoder.decode(payload, raw=True)})
                    elif kind == fuzz_grpc.DATA:
                        answer.data += payload
                    elif kind == fuzz_grpc.GOAWAY:
                        answer.goaway = True
                    if kind in (fuzz_grpc.HEADERS, fuzz_grpc.DATA) and flags & fuzz_grpc.END_STREAM:
                        answer.ended.add(sid)
    return answer


def _call_frames(method: str, payload: bytes, *, end: bool = True, headers: list[tuple[str, str]] | None = None,
                 stream_id: int = 1) -> list[bytes]:
    hdr = headers if headers is not None else fuzz_grpc.request_headers(method, timeout_s=3.0)
    block = fuzz_grpc.hpack.Encoder().encode(hdr)
    return [fuzz_grpc.frame(fuzz_grpc.HEADERS, fuzz_grpc.END_HEADERS, stream_id, block),
            fuzz_grpc.frame(fuzz_grpc.DATA, fuzz_grpc.END_STREAM if end else 0, stream_id, payload)]


def _status(events: list[Any]) -> str | None:
    for e in events:
        if isinstance(e, (h2.events.TrailersReceived, h2.events.ResponseReceived)):
            status = dict(e.headers).get("grpc-status")
            if status is not None:
                return status
    return None


def _route() -> bytes:
    return pb.QueryRouteRequest(topic=pb.Resource(name=fuzz_live.HEALTH_TOPIC)).SerializeToString()


@pytest.mark.parametrize("what,frames,want", [
    ("unknown method", lambda: _call_frames("Nope", encode_message(b"")), "12"),
    ("pull (not served, as Apache's proxy)", lambda: _call_frames("PullMessage", encode_message(b"")), "12"),
    ("invalid protobuf", lambda: _call_frames("QueryRoute", encode_message(b"\xff\xff\xff\xff")), "13"),
    ("truncated message", lambda: _call_frames("QueryRoute", encode_message(_route())[:-2]), "13"),
    ("oversized message", lambda: _call_frames("QueryRoute", b"\x00" + struct.pack(">I", 2**31 - 1) + b"x"), "8"),
    ("compressed without an encoding", lambda: _call_frames("QueryRoute", b"\x01" + encode_message(_route())[1:]), "13"),
    ("bad grpc-timeout", lambda: _call_frames("QueryRoute", encode_message(_route()), headers=[
        *fuzz_grpc.request_headers("QueryRoute", timeout_s=None), ("grpc-timeout", "soon")]), "13"),
    ("no request message", lambda: _call_frames("QueryRoute", b""), "13"),
])
def test_bad_calls_get_a_grpc_status(server, what: str, frames: Any, want: str) -> None:
    answer = trio.run(_exchange, server.grpc_port, frames())
    assert answer.status == want, (what, answer)
    _assert_clean(server)


def test_rocketmq_status_for_bad_requests(server) -> None:
    """Well-formed gRPC, wrong content: an OK call whose response carries the RocketMQ code."""
    answer = trio.run(_exchange, server.grpc_port, _call_frames("QueryRoute", encode_message(
        pb.QueryRouteRequest(topic=pb.Resource(name="")).SerializeToString())))
    assert answer.status == "0"
    assert pb.QueryRouteResponse.FromString(answer.data[5:]).status.code == Code.ILLEGAL_TOPIC


@pytest.mark.parametrize("what,raw", [
    ("frame of an unknown length", fuzz_grpc.frame(fuzz_grpc.SETTINGS, 0, 0, b"\x00" * 5)),
    ("DATA on stream 0", fuzz_grpc.frame(fuzz_grpc.DATA, 0, 0, b"x")),
    ("HPACK garbage", fuzz_grpc.frame(fuzz_grpc.HEADERS, fuzz_grpc.END_HEADERS, 1, b"\xff\xff\xff\xff\x0f")),
    ("window overflow", fuzz_grpc.frame(fuzz_grpc.WINDOW_UPDATE, 0, 0, struct.pack(">I", 2**31 - 1)) * 2),
    ("PUSH_PROMISE from a client", fuzz_grpc.frame(fuzz_grpc.PUSH_PROMISE, 4, 1, b"\x00\x00\x00\x02\x82")),
])
def test_malformed_http2_ends_the_connection(server, what: str, raw: bytes) -> None:
    answer = trio.run(_exchange, server.grpc_port, [raw])
    assert answer.goaway or answer.closed, (what, answer)
    _assert_clean(server)


def test_half_open_streams_do_not_wedge(server) -> None:
    """Streams left open (headers only, or a message without END_STREAM) end at their deadline;
    other calls on the same connection are answered meanwhile."""
    async def main() -> tuple[list[Any], list[Any]]:
        client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        client.initiate_connection()
        client.send_headers(1, fuzz_grpc.request_headers("QueryRoute", timeout_s=1.0))
        client.send_headers(3, fuzz_grpc.request_headers("SendMessage", timeout_s=1.0))
        client.send_data(3, encode_message(b"\x0a"))  # half a message, no END_STREAM
        client.send_headers(5, fuzz_grpc.request_headers("QueryRoute", timeout_s=5.0))
        client.send_data(5, encode_message(_route()), end_stream=True)
        ended: dict[int, list[Any]] = {1: [], 3: [], 5: []}
        stream = await trio.open_tcp_stream("127.0.0.1", server.grpc_port)
        async with stream:
            await stream.send_all(client.data_to_send())
            with trio.fail_after(20):
                while not all(any(isinstance(e, h2.events.StreamEnded) for e in v) for v in ended.values()):
                    data = await stream.receive_some(65536)
                    assert data, "the server closed the connection"
                    for e in client.receive_data(data):
                        if getattr(e, "stream_id", None) in ended:
                            ended[e.stream_id].append(e)
                    await stream.send_all(client.data_to_send())
        return ended[1] + ended[3], ended[5]

    stuck, answered = trio.run(main)
    assert _status(answered) == "0"
    assert _status(stuck) == "4"  # DEADLINE_EXCEEDED for both half-open streams
    _assert_clean(server)
