"""Issue 46 item 4: a stream past MAX_CONCURRENT_STREAMS is refused, the connection goes on (sans-IO).

h2 raises TooManyStreamsError for the HEADERS of the 1,001st concurrent stream, and the gRPC
listener then ended the whole connection with GOAWAY: every call on it failed. grpc-java's Netty
refuses that one stream (RST_STREAM REFUSED_STREAM, a stream error), which a client may retry.
wire/h2_fast.py now does so; the refused HEADERS's block still goes through HPACK (a later block
that names its dynamic-table entry decodes right), and frames the client sent after it get h2's
answer to a stream it reset.
"""

from __future__ import annotations

from types import ModuleType

import h2.events
import hpack
import pytest

from rmqd import _compiled
from rmqd.wire import h2_fast as imported
from rmqd.wire.grpc import encode_message

from test_h2_fast_attack import FAST, RST_STREAM, STREAMS, _frame, _server, _taken

PURE = _compiled.load_pure("rmqd.wire.h2_fast")
IMPLS = [pytest.param(imported, id="imported"), pytest.param(PURE, id="pure")]
HEADERS, DATA, GOAWAY, WINDOW_UPDATE = 0x1, 0x0, 0x7, 0x8
END_STREAM, END_HEADERS, PADDED, PRIORITY = 0x1, 0x4, 0x8, 0x20
REFUSED_STREAM, STREAM_CLOSED = 0x7, 0x5


def _out_frames(data: bytes | bytearray) -> list[tuple[int, int, int, bytes]]:
    out, pos = [], 0
    while pos + 9 <= len(data):
        n = int.from_bytes(data[pos:pos + 3], "big")
        out.append((data[pos + 3], data[pos + 4], int.from_bytes(data[pos + 5:pos + 9], "big"),
                    bytes(data[pos + 9:pos + 9 + n])))
        pos += 9 + n
    return out


def _request(encoder: hpack.Encoder, i: int) -> bytes:
    """A request block that indexes a new field (the dynamic table changes with every block)."""
    return encoder.encode([(b":method", b"POST"), (b":scheme", b"http"), (b":path", FAST), (b":authority", b"a"),
                           (b"content-type", b"application/grpc"), (b"te", b"trailers"),
                           (b"x-mq-request-id", b"req-%d" % i)], huffman=False)


def _fill(fast: object, encoder: hpack.Encoder, first: int) -> list[int]:
    """STREAMS streams opened and left open (HEADERS without END_STREAM), in one read."""
    sids = list(range(first, first + 2 * STREAMS, 2))
    fast.receive(b"".join(_frame(HEADERS, END_HEADERS, s, _request(encoder, s)) for s in sids))  # type: ignore[attr-defined]
    fast.take_output()  # type: ignore[attr-defined]
    return sids


@pytest.mark.parametrize("mod", IMPLS)
@pytest.mark.parametrize("flags", [END_HEADERS, END_HEADERS | PRIORITY, END_HEADERS | PADDED | PRIORITY])
def test_the_stream_past_the_limit_is_refused_and_the_connection_serves_on(mod: ModuleType, flags: int) -> None:
    fast = _server(mod)
    encoder = hpack.Encoder()
    sids = _fill(fast, encoder, 3)
    assert fast.h2.open_inbound_streams == STREAMS
    over = sids[-1] + 2
    payload = _request(encoder, over)
    if flags & PRIORITY:
        payload = (0).to_bytes(4, "big") + b"\x0f" + payload
    if flags & PADDED:
        payload = b"\x03" + payload + b"\x00" * 3
    # the refused call's HEADERS, its DATA and a WINDOW_UPDATE the client sent before it knew
    items = fast.receive(_frame(HEADERS, flags, over, payload) + _frame(WINDOW_UPDATE, 0, over, (100).to_bytes(4, "big"))
                         + _frame(DATA, END_STREAM, over, encode_message(b"refused")))
    assert not any(isinstance(e, (h2.events.RequestReceived, h2.events.ConnectionTerminated)) for e in items)
    out = _out_frames(fast.take_output())
    assert (RST_STREAM, 0, over, REFUSED_STREAM.to_bytes(4, "big")) in out
    assert not any(f[0] == GOAWAY for f in out), out
    assert all(f[2] != over or f[0] == RST_STREAM for f in out)  # the rest: h2's answers to a reset stream
    # one stream ends: the next call is taken, its block decoded against the table the refused one changed
    fast.receive(_frame(RST_STREAM, 0, sids[0], (8).to_bytes(4, "big")))
    nxt = over + 2
    items = fast.receive(_frame(HEADERS, END_HEADERS, nxt, _request(encoder, nxt))
                         + _frame(DATA, END_STREAM, nxt, encode_message(b"after")))
    assert _taken(mod, items) == [nxt]
    request = next(i for i in items if isinstance(i, mod.UnaryRequest))
    assert (b"x-mq-request-id", b"req-%d" % nxt) in request.headers and request.message == b"after"
    assert not any(f[0] == GOAWAY for f in _out_frames(fast.take_output()))


@pytest.mark.parametrize("mod", IMPLS)
def test_streams_opened_earlier_in_the_same_read_count(mod: ModuleType) -> None:
    """The limit is reached within one read: h2 has not seen the HEADERS before it yet."""
    fast = _server(mod)
    encoder = hpack.Encoder()
    sids = list(range(3, 3 + 2 * (STREAMS + 2), 2))
    items = fast.receive(b"".join(_frame(HEADERS, END_HEADERS, s, _request(encoder, s)) for s in sids))
    opened = [e.stream_id for e in items if isinstance(e, h2.events.RequestReceived)]
    assert opened == sids[:STREAMS]
    out = _out_frames(fast.take_output())
    assert [f[2] for f in out if f[0] == RST_STREAM] == sids[STREAMS:]
    assert all(f[3] == REFUSED_STREAM.to_bytes(4, "big") for f in out if f[0] == RST_STREAM)
    assert not any(f[0] == GOAWAY for f in out)
