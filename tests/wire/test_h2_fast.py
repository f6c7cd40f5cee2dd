"""wire/h2_fast.py without sockets: an h2 client's bytes in, the answers the client decodes out.

The server side here answers the calls FastInbound takes through ``answer``/``finish`` and the
calls h2 gets through h2 itself; the client is plain h2 (its own HPACK), so every frame written
past h2 is judged by an independent HTTP/2 implementation. The property: however the client's
bytes are cut into reads, the client gets the same answers, and h2 keeps the connection open."""

from __future__ import annotations

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from rmqd import _compiled
from rmqd.wire import h2_fast as built
from rmqd.wire.grpc import encode_message, response_headers, status_trailers
from rmqd.wire.hpack import HpackDecoder, StaticHpackEncoder

PURE = _compiled.load_pure("rmqd.wire.h2_fast")
IMPLS = [pytest.param(built, id="imported"), pytest.param(PURE, id="pure")]
FAST = b"/t.S/Fast"
SLOW = b"/t.S/Slow"
OK_HEADERS = response_headers()
OK_TRAILERS = status_trailers(0)  # type: ignore[arg-type]


def _headers(path: bytes, i: int = 0) -> list[tuple[bytes, bytes]]:
    return [(b":method", b"POST"), (b":scheme", b"http"), (b":path", path), (b":authority", b"a"),
            (b"content-type", b"application/grpc"), (b"te", b"trailers"), (b"x-mq-request-id", b"r%d" % i)]


class Server:
    """h2 behind FastInbound, answering every call with its message reversed."""

    def __init__(self, mod, window_ack: int = 1 << 20, max_message: int = 1 << 20) -> None:
        cfg = h2.config.H2Configuration(client_side=False, header_encoding=None, validate_inbound_headers=False,
                                        validate_outbound_headers=False, normalize_outbound_headers=False,
                                        normalize_inbound_headers=False)
        self.h2 = h2.connection.H2Connection(cfg)
        self.h2.decoder = HpackDecoder()  # type: ignore[assignment]
        self.h2.encoder = StaticHpackEncoder()  # type: ignore[assignment]
        self.fast = mod.FastInbound(self.h2, frozenset([FAST]), max_message, 100, window_ack)
        self.mod = mod
        self.taken: list[int] = []
        self.adopt_next = False
        self.bodies: dict[int, bytes] = {}
        self.h2.local_settings = h2.settings.Settings(client=False, initial_values={
            h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 20, h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 100})
        self.h2.initiate_connection()

    def feed(self, data: bytes) -> None:
        for item in self.fast.receive(data):
            if isinstance(item, self.mod.UnaryRequest):
                self.taken.append(item.stream_id)
                answer = encode_message(item.message[::-1])
                if self.adopt_next:
                    self.adopt_next = False
                    assert self.fast.adopt(item)
                    self._send_h2(item.stream_id, item.message)
                elif not self.fast.answer(item, OK_HEADERS, answer, OK_TRAILERS):
                    assert self.fast.adopt(item)
                    self._send_h2(item.stream_id, item.message)
            elif isinstance(item, h2.events.RequestReceived):
                self.bodies[item.stream_id] = b""
            elif isinstance(item, h2.events.DataReceived):
                self.bodies[item.stream_id] += item.data
                self.h2.acknowledge_received_data(item.flow_controlled_length, item.stream_id)
            elif isinstance(item, h2.events.StreamEnded):
                self._send_h2(item.stream_id, self.bodies.pop(item.stream_id)[5:])

    def _send_h2(self, sid: int, message: bytes) -> None:
        self.h2.send_headers(sid, OK_HEADERS)
        data, step = encode_message(message[::-1]), self.h2.max_outbound_frame_size
        for i in range(0, len(data), step):
            self.h2.send_data(sid, data[i:i + step])
        self.h2.send_headers(sid, OK_TRAILERS, end_stream=True)

    def output(self) -> bytes:
        return bytes(self.fast.take_output())


class Client:
    def __init__(self) -> None:
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
        self.h2.initiate_connection()
        self.answers: dict[int, list] = {}
        self.pings: list[bytes] = []
        self.events: list = []

    def call(self, path: bytes, message: bytes, i: int = 0, split: int | None = None, priority: bool = False,
             update: int = 0) -> int:
        sid = self.h2.get_next_available_stream_id()
        if priority:  # as grpc-java sends every request: HEADERS with the PRIORITY flag
            self.h2.send_headers(sid, _headers(path, i), priority_weight=16, priority_depends_on=0)
        else:
            self.h2.send_headers(sid, _headers(path, i))
        if update:  # as grpc's C core does: the stream's receive window opened before its DATA
            self.h2.increment_flow_control_window(update, stream_id=sid)
        data = encode_message(message)
        if split:
            self.h2.send_data(sid, data[:split])
            self.h2.send_data(sid, data[split:], end_stream=True)
        else:
            self.h2.send_data(sid, data, end_stream=True)
        return sid

    def receive(self, data: bytes) -> None:
        for e in self.h2.receive_data(data):
            self.events.append(e)
            if isinstance(e, h2.events.ResponseReceived):
                self.answers[e.stream_id] = [dict(e.headers), b"", None]
            elif isinstance(e, h2.events.DataReceived):
                self.answers[e.stream_id][1] += e.data
                self.h2.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
            elif isinstance(e, h2.events.TrailersReceived):
                self.answers[e.stream_id][2] = dict(e.headers)
            elif isinstance(e, h2.events.PingAckReceived):
                self.pings.append(e.ping_data)


def _frames(data: bytes) -> list[tuple[int, int, int, bytes]]:
    """(type, flags, stream id, payload) of each frame in ``data``."""
    out, pos = [], 0
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 3], "big")
        out.append((data[pos + 3], data[pos + 4], int.from_bytes(data[pos + 5:pos + 9], "big"), data[pos + 9:pos + 9 + n]))
        pos += 9 + n
    return out


def _handshake(mod, **kw) -> tuple[Server, Client]:
    server, client = Server(mod, **kw), Client()
    server.feed(client.h2.data_to_send())
    client.receive(server.output())
    server.feed(client.h2.data_to_send())
    return server, client


def _answered(client: Client, sid: int, message: bytes) -> bool:
    headers, data, trailers = client.answers[sid]
    return headers[b":status"] == b"200" and data == encode_message(message[::-1]) and trailers[b"grpc-status"] == b"0"


@pytest.mark.parametrize("mod", IMPLS)
def test_whole_unary_calls_are_taken_and_answered_past_h2(mod) -> None:
    server, client = _handshake(mod)
    sid0 = client.call(FAST, b"first")  # the connection's first request opens h2's state machine
    server.feed(client.h2.data_to_send())
    sids = [client.call(FAST, b"m%d" % i, i, priority=i % 2 == 1) for i in range(5)]
    client.h2.ping(b"12345678")
    server.feed(client.h2.data_to_send())
    assert server.taken == sids and not set(sids) & set(server.h2.streams)
    assert server.h2.highest_inbound_stream_id == sids[-1]
    client.receive(server.output())
    assert all(_answered(client, sid, b"m%d" % i) for i, sid in enumerate(sids))
    assert _answered(client, sid0, b"first")
    assert client.pings == [b"12345678"]
    assert all(isinstance(client.h2.streams[s].closed, bool) for s in client.h2.streams)
    # the client may go on: the connection's windows and state agree on both sides
    sid = client.call(FAST, b"again")
    server.feed(client.h2.data_to_send())
    client.receive(server.output())
    assert _answered(client, sid, b"again")
    assert client.h2.outbound_flow_control_window >= 65535 - 6 * 20


@pytest.mark.parametrize("mod", IMPLS)
def test_other_paths_and_incomplete_requests_go_to_h2(mod) -> None:
    server, client = _handshake(mod)
    server.feed(client.h2.data_to_send())
    slow = client.call(SLOW, b"slow")
    split = client.call(FAST, b"split-over-two-frames", split=7)
    server.feed(client.h2.data_to_send())
    assert server.taken == [split]  # two DATA frames of one request in one read: still whole
    data_first = client.call(FAST, b"cut")
    raw = client.h2.data_to_send()
    server.feed(raw[:-3])  # the DATA frame is not whole: h2 gets the HEADERS (held, a large request could
    assert data_first in server.h2.streams  # stall on flow control), the frame's rest follows it to h2
    server.feed(raw[-3:])
    assert data_first not in server.taken
    client.receive(server.output())
    assert _answered(client, slow, b"slow") and _answered(client, split, b"split-over-two-frames")
    assert _answered(client, data_first, b"cut")


@pytest.mark.parametrize("mod", IMPLS)
def test_connection_window_is_handed_back(mod) -> None:
    server, client = _handshake(mod, window_ack=4096)
    body = b"x" * 1000
    for i in range(40):
        sid = client.call(FAST, body, i)
        server.feed(client.h2.data_to_send())
        client.receive(server.output())
        assert _answered(client, sid, body)
    updates = [e for e in client.events if isinstance(e, h2.events.WindowUpdated) and e.stream_id == 0]
    assert len(updates) >= 5 and all(u.delta >= 4096 for u in updates)
    # what the client may still send is what the server believes it may, less what waits for a WINDOW_UPDATE
    assert client.h2.outbound_flow_control_window == server.h2.inbound_flow_control_window - server.fast._unacked


@pytest.mark.parametrize("mod", IMPLS)
def test_an_answer_that_does_not_fit_goes_through_h2_after_adopt(mod) -> None:
    server, client = _handshake(mod)
    client.call(FAST, b"first")  # through h2: it opens the connection's state machine
    server.feed(client.h2.data_to_send())
    server.h2.max_outbound_frame_size = 64  # the answer below needs more than one frame
    sid = client.call(FAST, b"y" * 200)
    server.feed(client.h2.data_to_send())
    assert server.taken == [sid]  # taken, then adopted: h2 split the answer into frames
    client.receive(server.output())
    assert _answered(client, sid, b"y" * 200)
    server.adopt_next = True
    sid = client.call(FAST, b"waits", update=1 << 20)  # h2 gets the stream's WINDOW_UPDATE after adopting it
    server.feed(client.h2.data_to_send())
    client.receive(server.output())
    assert _answered(client, sid, b"waits")
    later = client.call(FAST, b"after")  # ids go on above the adopted one
    server.feed(client.h2.data_to_send())
    client.receive(server.output())
    assert _answered(client, later, b"after") and server.taken[-1] == later


@pytest.mark.parametrize("mod", IMPLS)
def test_late_frames_for_a_taken_stream_get_h2s_own_answer(mod) -> None:
    server, client = _handshake(mod)
    client.call(FAST, b"first")
    server.feed(client.h2.data_to_send())
    sid = client.call(FAST, b"one")
    server.feed(client.h2.data_to_send())
    # the peer resets it and opens its window after the answer: h2 ignores both, as for any closed stream
    server.feed(mod.frame(0x3, 0, sid, b"\x00\x00\x00\x08") + mod.frame(0x8, 0, sid, b"\x00\x00\x01\x00"))
    # DATA on it: a stream error (RST_STREAM STREAM_CLOSED), the connection goes on
    server.feed(mod.frame(0x0, 0, sid, b"late"))
    out = server.output()
    client.receive(out)
    resets = [(f[2], f[3]) for f in _frames(out) if f[0] == 0x3]
    assert resets == [(sid, b"\x00\x00\x00\x05")]  # STREAM_CLOSED
    nxt = client.call(FAST, b"two")
    server.feed(client.h2.data_to_send())
    client.receive(server.output())
    assert _answered(client, nxt, b"two")


@pytest.mark.parametrize("mod", IMPLS)
@pytest.mark.parametrize("bad", ["even id", "id reused", "headers on a taken stream", "frame too large", "ping on a stream",
                                 "depends on itself", "priority too short"])
def test_frames_against_the_rules_get_h2s_protocol_error(mod, bad: str) -> None:
    server, client = _handshake(mod)
    sid = client.call(FAST, b"one")
    server.feed(client.h2.data_to_send())
    block = StaticHpackEncoder().encode(_headers(FAST))
    msg = encode_message(b"x")
    raw = {
        "even id": mod.frame(0x1, 0x4, sid + 1, block) + mod.frame(0x0, 0x1, sid + 1, msg),
        "id reused": mod.frame(0x1, 0x4, sid, block) + mod.frame(0x0, 0x1, sid, msg),
        "headers on a taken stream": mod.frame(0x1, 0x5, sid, block),
            "frame too large": b"\x00\x40\x01\x00\x00\x00\x00\x00\x01" + b"z" * 0x4001,  # h2 judges it whole
        "ping on a stream": mod.frame(0x6, 0, 1, b"12345678"),
        "depends on itself": mod.frame(0x1, 0x24, sid + 2, (sid + 2).to_bytes(4, "big") + b"\x10" + block)
        + mod.frame(0x0, 0x1, sid + 2, msg),
        "priority too short": mod.frame(0x1, 0x24, sid + 2, b"\x00\x00") + mod.frame(0x0, 0x1, sid + 2, msg),
    }[bad]
    with pytest.raises(h2.exceptions.ProtocolError):
        server.feed(raw)


@pytest.mark.parametrize("mod", IMPLS)
def test_messages_the_fast_path_does_not_read_go_to_h2(mod) -> None:
    server, client = _handshake(mod, max_message=100)
    client.call(FAST, b"first")
    server.feed(client.h2.data_to_send())
    sid_big = client.call(FAST, b"b" * 200)  # above the maximum: h2's path reports it
    server.feed(client.h2.data_to_send())
    assert server.taken == [] and server.h2.streams[sid_big].closed  # answered through h2
    # compressed flag set: not taken either
    sid = client.h2.get_next_available_stream_id()
    client.h2.send_headers(sid, _headers(FAST))
    client.h2.send_data(sid, b"\x01\x00\x00\x00\x01z", end_stream=True)
    server.feed(client.h2.data_to_send())
    assert server.taken == []


def _script(client: Client, kinds: list[int]) -> tuple[bytes, list[tuple[int, bytes]]]:
    expected = []
    for i, kind in enumerate(kinds):
        if kind == 3:
            client.h2.ping(b"%08d" % i)
            continue
        if kind >= 4:  # as grpc-java writes concurrent calls: both HEADERS, then both DATA
            sids = []
            for j, path in enumerate((FAST, SLOW if kind == 5 else FAST)):
                sid = client.h2.get_next_available_stream_id()
                client.h2.send_headers(sid, _headers(path, i), priority_weight=16, priority_depends_on=0)
                sids.append((sid, b"i%d-%d" % (i, j)))
            client.h2.ping(b"%08d" % i) if i % 2 else None
            for sid, msg in sids:
                client.h2.send_data(sid, encode_message(msg), end_stream=True)
                expected.append((sid, msg))
            continue
        msg = b"m%d-" % i + b"p" * (i * 37 % 300)
        sid = client.call(FAST if kind != 1 else SLOW, msg, i, split=3 if kind == 2 else None, priority=i % 2 == 0,
                          update=4096 * (i % 3))
        expected.append((sid, msg))
    return client.h2.data_to_send(), expected


@pytest.mark.parametrize("mod", IMPLS)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=st.lists(st.integers(0, 5), min_size=1, max_size=12), cuts=st.lists(st.integers(1, 400), max_size=8))
def test_any_cut_of_the_bytes_gets_the_same_answers(mod, kinds: list[int], cuts: list[int]) -> None:
    server, client = _handshake(mod)
    raw, expected = _script(client, kinds)
    pos = 0
    for cut in cuts:
        server.feed(raw[pos:pos + cut])
        pos += cut
    server.feed(raw[pos:])
    client.receive(server.output())
    assert all(_answered(client, sid, msg) for sid, msg in expected)
    assert len(client.pings) == kinds.count(3) + sum(1 for i, k in enumerate(kinds) if k >= 4 and i % 2)
    assert not any(isinstance(e, (h2.events.StreamReset, h2.events.ConnectionTerminated)) for e in client.events)


@pytest.mark.parametrize("mod", IMPLS)
def test_frame_builders(mod) -> None:
    assert mod.frame(0x6, 0x1, 0, b"abcdefgh") == b"\x00\x00\x08\x06\x01\x00\x00\x00\x00abcdefgh"
    block = bytes(range(40))
    out = mod.header_frames(3, block, True, 16)
    # HEADERS (END_STREAM, no END_HEADERS) + CONTINUATION + CONTINUATION (END_HEADERS)
    assert out[:9] == b"\x00\x00\x10\x01\x01\x00\x00\x00\x03" and out[25:34] == b"\x00\x00\x10\x09\x00\x00\x00\x00\x03"
    assert out[50:59] == b"\x00\x00\x08\x09\x04\x00\x00\x00\x03" and len(out) == 40 + 27


@pytest.mark.parametrize("mod", IMPLS)
def test_a_header_block_in_continuation_frames_goes_to_h2_whole(mod) -> None:
    server, client = _handshake(mod)
    client.call(FAST, b"first")
    server.feed(client.h2.data_to_send())
    sid = client.h2.get_next_available_stream_id()
    client.h2.send_headers(sid, _headers(FAST) + [(b"x-big", b"v" * 40000)])  # > 16 KiB: CONTINUATION frames
    client.h2.send_data(sid, encode_message(b"big headers"), end_stream=True)
    after = client.call(FAST, b"after")
    raw = client.h2.data_to_send()
    assert any(f[0] == 0x9 for f in _frames(raw))
    for i in range(0, len(raw), 5000):  # in reads that cut the block's frames
        server.feed(raw[i:i + 5000])
    assert sid not in server.taken and after in server.taken
    client.receive(server.output())
    assert _answered(client, sid, b"big headers") and _answered(client, after, b"after")


@pytest.mark.parametrize("mod", IMPLS)
def test_the_streams_own_window_updates_may_come_between_headers_and_data(mod) -> None:
    """grpc's C core opens the stream's receive window right after its HEADERS: still taken, and
    the answer may use the added window (the initial one here is too small for it)."""
    server, client = _handshake(mod)
    client.call(FAST, b"first")
    server.feed(client.h2.data_to_send())
    client.h2.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 10})
    server.feed(client.h2.data_to_send())
    client.receive(server.output())
    sid = client.call(FAST, b"w" * 100, update=1000)
    server.feed(client.h2.data_to_send())
    assert server.taken[-1] == sid
    client.receive(server.output())
    assert _answered(client, sid, b"w" * 100)
    # a zero increment is h2's to judge (a protocol error)
    sid = client.call(FAST, b"z")
    raw = client.h2.data_to_send()
    n = int.from_bytes(raw[:3], "big") + 9
    with pytest.raises(h2.exceptions.ProtocolError):
        server.feed(raw[:n] + mod.frame(0x8, 0, sid, b"\x00\x00\x00\x00") + raw[n:])


@pytest.mark.parametrize("mod", IMPLS)
def test_concurrent_calls_written_headers_first_are_all_taken(mod) -> None:
    """grpc-java writes the HEADERS of concurrent calls, then their DATA, with the connection's
    WINDOW_UPDATEs among them: each whole call is taken, the frames between go to h2 in order."""
    server, client = _handshake(mod)
    client.call(FAST, b"first")
    server.feed(client.h2.data_to_send())
    sids = []
    for i in range(3):
        sid = client.h2.get_next_available_stream_id()
        client.h2.send_headers(sid, _headers(FAST, i), priority_weight=16, priority_depends_on=0)
        sids.append(sid)
    slow = client.h2.get_next_available_stream_id()
    client.h2.send_headers(slow, _headers(SLOW))
    client.h2.increment_flow_control_window(1000)
    for i, sid in enumerate(sids + [slow]):
        client.h2.send_data(sid, encode_message(b"c%d" % i), end_stream=True)
    server.feed(client.h2.data_to_send())
    assert server.taken[-3:] == sids and slow not in server.taken
    client.receive(server.output())
    assert all(_answered(client, sid, b"c%d" % i) for i, sid in enumerate(sids + [slow]))
    assert not server.fast._taking
