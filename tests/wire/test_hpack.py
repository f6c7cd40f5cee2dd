"""wire/hpack.py against hpack itself: the same header lists from the same blocks (sequences of
blocks sharing one dynamic table, Huffman or not, table size updates, evictions), an error where
hpack has one, and blocks from the static encoder that hpack (and h2 on the other side) reads
back unchanged. Run for the module as imported (the build under scripts/dev test) and for its
plain-Python source."""

from __future__ import annotations

from types import ModuleType

import h2.config
import h2.connection
import h2.events
import hpack
import pytest
from hpack.exceptions import HPACKDecodingError, HPACKError, InvalidTableIndex, InvalidTableSizeError, OversizedHeaderListError
from hypothesis import HealthCheck, given, settings, strategies as st

from rmqd import _compiled
from rmqd.wire import hpack as built

PURE = _compiled.load_pure("rmqd.wire.hpack")
IMPLS = [pytest.param(built, id="imported"), pytest.param(PURE, id="pure")]

_STATIC_NAMES = sorted({name for name, _ in built.STATIC_TABLE})
names = st.sampled_from(_STATIC_NAMES) | st.binary(min_size=1, max_size=20) | st.sampled_from(
    [b"x-mq-client-id", b"x-mq-request-id", b"grpc-timeout", b"authorization"])
values = st.binary(max_size=40) | st.sampled_from([b"", b"200", b"gzip", b"application/grpc", b"a" * 300])
header_lists = st.lists(st.tuples(names, values), max_size=12)


def _reference(table_size: int = 4096) -> hpack.Decoder:
    d = hpack.Decoder()
    d.max_header_list_size = 1 << 16
    d.max_allowed_table_size = table_size
    return d


def _ours(mod: ModuleType, table_size: int = 4096) -> "built.HpackDecoder":
    d = mod.HpackDecoder()
    d.max_header_list_size = 1 << 16
    d.max_allowed_table_size = table_size
    return d


def _outcome(decoder: object, block: bytes) -> tuple:
    try:
        return ("ok", [tuple(h) for h in decoder.decode(block, raw=True)])  # type: ignore[attr-defined]
    except (HPACKError, IndexError, TypeError, UnicodeDecodeError) as exc:  # what h2 turns into PROTOCOL_ERROR
        return ("error", type(exc))


@pytest.mark.parametrize("mod", IMPLS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blocks=st.lists(st.tuples(header_lists, st.booleans(), st.none() | st.integers(0, 4096)), min_size=1, max_size=8))
def test_blocks_decode_as_hpack_decodes_them(mod: ModuleType, blocks: list) -> None:
    """One encoder, one reference decoder, ours: every block in turn gives the same list and both
    tables hold the same entries after it (sizes updated, entries evicted alike)."""
    encoder, reference, ours = hpack.Encoder(), _reference(), _ours(mod)
    for headers, huffman, new_size in blocks:
        if new_size is not None:
            encoder.header_table_size = new_size
        block = encoder.encode(headers, huffman=huffman)
        expected = [tuple(h) for h in reference.decode(block, raw=True)]
        assert ours.decode(block, raw=True) == expected == [tuple(h) for h in headers]
        assert ours.header_table_size == reference.header_table_size
        assert ours._entries[::-1] == list(reference.header_table.dynamic_entries)
        assert ours._size == reference.header_table._current_size


@pytest.mark.parametrize("mod", IMPLS)
@settings(max_examples=300, deadline=None)
@given(prefix=header_lists, junk=st.binary(max_size=60))
def test_any_bytes_give_what_hpack_gives(mod: ModuleType, prefix: list, junk: bytes) -> None:
    """Bytes after a valid start: the same list, or an error for both (only HPACK's own errors
    from ours, which h2 answers with a connection error)."""
    block = hpack.Encoder().encode(prefix) + junk
    expected = _outcome(_reference(), block)
    got = _outcome(_ours(mod), block)
    if got[0] == "error":
        assert issubclass(got[1], HPACKDecodingError)
    assert got[0] == expected[0]
    if got[0] == "ok":
        assert got == expected


@pytest.mark.parametrize("mod", IMPLS)
def test_limits_and_rules(mod: ModuleType) -> None:
    big = [(b"x-big", b"v" * 4000)]
    block = hpack.Encoder().encode(big * 20, huffman=False)
    small = _ours(mod)
    small.max_header_list_size = 8000
    with pytest.raises(OversizedHeaderListError):
        small.decode(block, raw=True)
    with pytest.raises(InvalidTableSizeError):  # a size update above SETTINGS_HEADER_TABLE_SIZE
        _ours(mod, table_size=100).decode(b"\x3f\xe1\x1f", raw=True)  # update to 4096
    with pytest.raises(HPACKDecodingError):  # a size update after a field
        _ours(mod).decode(b"\x82\x20", raw=True)
    with pytest.raises(InvalidTableIndex):
        _ours(mod).decode(b"\x80", raw=True)  # index 0
    with pytest.raises(InvalidTableIndex):
        _ours(mod).decode(b"\xbe", raw=True)  # index 62, the dynamic table empty
    with pytest.raises(HPACKDecodingError):  # a length beyond the block
        _ours(mod).decode(b"\x00\x05ab", raw=True)
    with pytest.raises(HPACKDecodingError):  # an integer of more than 28 bits
        _ours(mod).decode(b"\xff\xff\xff\xff\xff\x0f", raw=True)
    # overlong zero continuation bytes are still the small number they spell (name index 15)
    overlong = b"\x0f\x80\x80\x00\x01x"
    assert _ours(mod).decode(overlong, raw=True) == [(b"accept-charset", b"x")] == _outcome(_reference(), overlong)[1]
    shrunk = _ours(mod)  # the peer's limit shrunk, the encoder never said so
    shrunk.max_allowed_table_size = 100
    with pytest.raises(InvalidTableSizeError):
        shrunk.decode(b"\x82", raw=True)
    assert shrunk.decode(b"\x3f\x45\x82", raw=True) == [(b":method", b"GET")]  # update to 100 first
    assert _ours(mod).decode(b"\x82", raw=False) == [(":method", "GET")]
    with pytest.raises(HPACKDecodingError):
        _ours(mod).decode(b"\x00\x01a\x01\xff", raw=False)  # not UTF-8
    assert _ours(mod).decode(memoryview(b"\x82\x84"), raw=True) == [(b":method", b"GET"), (b":path", b"/")]


@pytest.mark.parametrize("mod", IMPLS)
def test_an_entry_larger_than_the_table_empties_it(mod: ModuleType) -> None:
    ours = _ours(mod)
    ours.decode(b"\x40\x01a\x01b", raw=True)
    assert ours._entries == [(b"a", b"b")]
    block = b"\x40\x01c\x7f\x81\x20" + b"v" * 4224  # a literal with indexing, its value 4224 bytes
    assert ours.decode(block, raw=True) == [(b"c", b"v" * 4224)]
    assert ours._entries == [] and ours._size == 0


@pytest.mark.parametrize("mod", IMPLS)
@settings(max_examples=200, deadline=None)
@given(blocks=st.lists(header_lists, min_size=1, max_size=6), sizes=st.lists(st.integers(0, 8192), max_size=3))
def test_the_static_encoder_leaves_the_table_alone(mod: ModuleType, blocks: list, sizes: list) -> None:
    encoder, reference = mod.StaticHpackEncoder(), _reference(8192)
    changed, limit = False, 4096
    for size in sizes:
        encoder.header_table_size = size
        changed, limit = changed or size != limit, size
    for i, headers in enumerate(blocks):
        block = encoder.encode(headers)
        assert block.startswith(b"\x20") == (i == 0 and changed)  # a size update to 0, once
        assert [tuple(h) for h in reference.decode(block, raw=True)] == [tuple(h) for h in headers]
        assert not reference.header_table.dynamic_entries
        assert encoder.encode(headers) == block.removeprefix(b"\x20")  # the cached block, same bytes


@pytest.mark.parametrize("mod", IMPLS)
def test_static_encoding_uses_the_static_table(mod: ModuleType) -> None:
    assert mod.encode_block([(b":status", b"200")]) == b"\x88"
    assert mod.encode_block([(b"content-type", b"application/grpc")]) == b"\x0f\x10\x10application/grpc"
    assert mod.encode_block([(b"grpc-status", b"0")]) == b"\x00\x0bgrpc-status\x010"
    assert mod.encode_integer(1337, 5, 0) == bytes([31, 154, 10])  # RFC 7541 C.1.2


def test_h2_client_and_our_server_codecs_talk() -> None:
    """An h2 client against an h2 server whose HPACK is ours: requests and answers, both ways."""
    client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
    server = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding=None,
                                                                  validate_inbound_headers=False))
    server.decoder = built.HpackDecoder()  # type: ignore[assignment]
    server.encoder = built.StaticHpackEncoder()  # type: ignore[assignment]
    client.initiate_connection()
    server.initiate_connection()
    server.receive_data(client.data_to_send())
    client.receive_data(server.data_to_send())
    server.receive_data(client.data_to_send())
    for i in range(5):
        sid = client.get_next_available_stream_id()
        request = [(b":method", b"POST"), (b":scheme", b"http"), (b":path", b"/svc/M"), (b":authority", b"a"),
                   (b"content-type", b"application/grpc"), (b"x-mq-request-id", str(i).encode() * 8)]
        client.send_headers(sid, request, end_stream=True)
        events = server.receive_data(client.data_to_send())
        received = [e for e in events if isinstance(e, h2.events.RequestReceived)]
        assert [tuple(h) for h in received[0].headers] == request
        server.send_headers(sid, [(b":status", b"200"), (b"content-type", b"application/grpc")])
        server.send_headers(sid, [(b"grpc-status", b"0")], end_stream=True)
        answers = client.receive_data(server.data_to_send())
        got = [[tuple(h) for h in e.headers] for e in answers
               if isinstance(e, (h2.events.ResponseReceived, h2.events.TrailersReceived))]
        assert got == [[(b":status", b"200"), (b"content-type", b"application/grpc")], [(b"grpc-status", b"0")]]


@pytest.mark.parametrize("mod", IMPLS)
@settings(max_examples=300, deadline=None)
@given(text=st.binary(max_size=80), noise=st.binary(max_size=12))
def test_huffman_decode_is_hpacks(mod: ModuleType, text: bytes, noise: bytes) -> None:
    """Strings hpack's encoder made decode to themselves; any other bytes give hpack's verdict."""
    from hpack.huffman import HuffmanEncoder
    from hpack.huffman_constants import REQUEST_CODES, REQUEST_CODES_LENGTH
    from hpack.huffman_table import decode_huffman

    encoded = HuffmanEncoder(REQUEST_CODES, REQUEST_CODES_LENGTH).encode(text)
    assert mod.huffman_decode(b"ab" + encoded + b"cd", 2, 2 + len(encoded)) == text
    try:
        expected: bytes | str = decode_huffman(noise)
    except HPACKDecodingError as e:
        expected = str(e)
    try:
        got: bytes | str = mod.huffman_decode(noise, 0, len(noise))
    except HPACKDecodingError as e:
        got = str(e)
    assert got == expected
