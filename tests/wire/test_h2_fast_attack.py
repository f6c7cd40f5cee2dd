"""Issue 46 item 1: one slow HTTP/2 connection may not stall the event loop (wire/h2_fast.py, sans-IO).

The attack, measured on 2026-12-01: 999 tiny HEADERS frames without END_STREAM, 5,000 9-byte
frames of an unknown type, 999 RST_STREAMs, repeated on one connection at ~218 KB/s. The fast
path looked ahead from every such HEADERS for its request's last DATA frame, to the end of the
read each time: ~1.0 s of the event loop per 64 KiB read (h2 alone: 73 ms), and the whole broker
stopped answering. Now a look-ahead goes on where the ones before it in the read stopped:
``FastInbound.walked`` (the frames all look-aheads walked) may grow by at most the frames read.
And the calls that come whole in those reads, and after them, still take the fast path.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import h2.config
import h2.connection
import h2.events
import h2.settings
import pytest

from rmqd import _compiled
from rmqd.wire import h2_fast as imported
from rmqd.wire.grpc import encode_message
from rmqd.wire.hpack import HpackDecoder, StaticHpackEncoder

PURE = _compiled.load_pure("rmqd.wire.h2_fast")
IMPLS = [pytest.param(imported, id="imported"), pytest.param(PURE, id="pure")]
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
FAST = b"/t.S/Fast"
HEADERS, RST_STREAM, SETTINGS, UNKNOWN = 0x1, 0x3, 0x4, 0xFA
END_STREAM, END_HEADERS = 0x1, 0x4
STREAMS = 1000  # the gRPC listener's MAX_CONCURRENT_STREAMS


def _frame(ftype: int, flags: int, sid: int, payload: bytes = b"") -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + sid.to_bytes(4, "big") + payload


_REQUEST = [(b":method", b"POST"), (b":scheme", b"http"), (b":path", FAST), (b":authority", b"a"),
            (b"content-type", b"application/grpc"), (b"te", b"trailers")]


def _call(sid: int, message: bytes) -> bytes:
    """A whole unary call: HEADERS, then one DATA frame ending the stream."""
    block = StaticHpackEncoder().encode(_REQUEST)
    return _frame(HEADERS, END_HEADERS, sid, block) + _frame(0x0, END_STREAM, sid, encode_message(message))


def _server(mod: ModuleType) -> Any:
    cfg = h2.config.H2Configuration(client_side=False, header_encoding=None, validate_inbound_headers=False,
                                    validate_outbound_headers=False, normalize_outbound_headers=False,
                                    normalize_inbound_headers=False)
    conn = h2.connection.H2Connection(cfg)
    conn.decoder = HpackDecoder()  # type: ignore[assignment]
    conn.encoder = StaticHpackEncoder()  # type: ignore[assignment]
    conn.local_settings = h2.settings.Settings(client=False, initial_values={
        h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 20,
        h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: STREAMS})
    conn.initiate_connection()
    fast = mod.FastInbound(conn, frozenset([FAST]), 1 << 20, STREAMS, 1 << 16)
    # h2 leaves IDLE with the first stream: that call is h2's, as a connection's first always is
    # (reset here: it would take one of the STREAMS)
    fast.receive(PREFACE + _frame(SETTINGS, 0, 0) + _call(1, b"open") + _frame(RST_STREAM, 0, 1, (8).to_bytes(4, "big")))
    fast.take_output()
    return fast


def _attack(first_sid: int, legit: int | None = None) -> bytes:
    """One round: 999 HEADERS without END_STREAM (:method POST, :scheme http, :path / from the
    static table), 5,000 empty frames of an unknown type, a RST_STREAM for each stream; with
    ``legit``, a whole call on that stream among the unknown frames."""
    sids = range(first_sid, first_sid + 2 * 999, 2)
    out = [_frame(HEADERS, END_HEADERS, sid, b"\x83\x86\x84") for sid in sids]
    out += [_frame(UNKNOWN, 0, 0)] * 2500
    if legit is not None:
        out.append(_call(legit, b"legit"))
    out += [_frame(UNKNOWN, 0, 0)] * 2500
    out += [_frame(RST_STREAM, 0, sid, (8).to_bytes(4, "big")) for sid in sids]
    return b"".join(out)


def _frames_in(data: bytes) -> int:
    n = pos = 0
    while pos + 9 <= len(data):
        pos += 9 + int.from_bytes(data[pos:pos + 3], "big")
        n += 1
    return n


def _taken(mod: ModuleType, items: list[Any]) -> list[int]:
    return [item.stream_id for item in items if isinstance(item, mod.UnaryRequest)]


@pytest.mark.parametrize("mod", IMPLS)
def test_the_attack_in_one_read_walks_each_frame_at_most_once(mod: ModuleType) -> None:
    fast = _server(mod)
    data = _attack(3, legit=2003)
    frames = _frames_in(data)
    items = fast.receive(data)
    assert fast.walked <= frames, (fast.walked, frames)  # was ~999 x 7,000 (one walk to the end per HEADERS)
    assert _taken(mod, items) == [2003]  # the whole call among the junk still taken
    assert sum(isinstance(e, h2.events.StreamReset) for e in items) == 999
    fast.take_output()


@pytest.mark.parametrize("mod", IMPLS)
def test_the_attack_in_64k_reads_costs_each_read_its_own_frames(mod: ModuleType) -> None:
    """As it came from the socket: 64 KiB reads, frames cut anywhere; ten rounds, each with a
    whole call inside; then ordinary calls, which still take the fast path."""
    fast = _server(mod)
    stream = b"".join(_attack(3 + r * 4000, legit=2003 + r * 4000) for r in range(10))
    taken: list[int] = []
    for at in range(0, len(stream), 65536):
        chunk = stream[at:at + 65536]
        before = fast.walked
        items = fast.receive(chunk)
        # a read is its bytes plus the part of a frame carried from the last one
        assert fast.walked - before <= len(chunk) // 9 + 1
        taken += _taken(mod, items)
        fast.take_output()
    assert fast.walked <= _frames_in(stream)
    assert taken == [2003 + r * 4000 for r in range(10)]
    sid = 40001
    for i in range(20):  # after the attack: one call a read, then four in one read
        assert _taken(mod, fast.receive(_call(sid + 2 * i, b"m%d" % i))) == [sid + 2 * i]
    four = [sid + 40 + 2 * i for i in range(4)]
    assert _taken(mod, fast.receive(b"".join(_call(s, b"x") for s in four))) == four


@pytest.mark.parametrize("mod", IMPLS)
def test_headers_first_calls_with_junk_between_are_found_without_walking_twice(mod: ModuleType) -> None:
    """The HEADERS of many calls first, junk, then their DATA in reverse order: every call is
    taken, and the look-aheads together walk each frame once (a walk from each HEADERS to its
    own DATA would pass over all the others' and the junk: quadratic)."""
    fast = _server(mod)
    sids = list(range(3, 3 + 2 * 500, 2))
    block = StaticHpackEncoder().encode(_REQUEST)
    data = b"".join(_frame(HEADERS, END_HEADERS, s, block) for s in sids)
    data += _frame(UNKNOWN, 0, 0) * 3000
    data += b"".join(_frame(0x0, END_STREAM, s, encode_message(b"%d" % s)) for s in reversed(sids))
    items = fast.receive(data)
    assert sorted(_taken(mod, items)) == sids
    assert {item.stream_id: item.message for item in items if isinstance(item, mod.UnaryRequest)} == {
        s: b"%d" % s for s in sids}
    assert fast.walked <= _frames_in(data)
