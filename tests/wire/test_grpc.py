"""wire/grpc.py: gRPC message framing, timeouts, status text and paths, without sockets."""

from __future__ import annotations

import gzip
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqd.wire.errors import WireError
from rmqd.wire.grpc import (
    PREFIX_SIZE, GrpcStatus, GrpcWireError, MessageDecoder, decode_grpc_message, encode_grpc_message, encode_message,
    encode_timeout, is_grpc_content_type, parse_path, parse_timeout, status_trailers, trailers_only,
)

payloads = st.lists(st.binary(max_size=3000), max_size=8)
encodings = st.sampled_from([None, "identity", "gzip", "deflate"])


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, last = [], 0
    for p in points:
        pieces.append(data[last:p])
        last = p
    pieces.append(data[last:])
    return pieces


@given(payloads, encodings, st.lists(st.integers(min_value=0), max_size=20))
def test_messages_survive_any_split(messages: list[bytes], encoding: str | None, cuts: list[int]) -> None:
    stream = b"".join(encode_message(m, encoding) for m in messages)
    decoder = MessageDecoder(encoding=encoding)
    out: list[bytes] = []
    for piece in _split(stream, cuts):
        out += decoder.feed(piece)
    decoder.end()
    assert out == messages


@given(st.binary(max_size=400), encodings, st.integers(min_value=0, max_value=2000))
@settings(max_examples=400)
def test_random_bytes_raise_only_grpc_errors(data: bytes, encoding: str | None, limit: int) -> None:
    decoder = MessageDecoder(max_message_size=limit, encoding=encoding)
    try:
        for m in decoder.feed(data):
            assert len(m) <= limit
        decoder.end()
    except GrpcWireError as exc:
        assert isinstance(exc, WireError)
        assert exc.status in (GrpcStatus.INTERNAL, GrpcStatus.RESOURCE_EXHAUSTED)


def test_oversized_prefix_is_refused_before_its_bytes() -> None:
    decoder = MessageDecoder(max_message_size=1024)
    with pytest.raises(GrpcWireError) as info:
        decoder.feed(b"\x00" + (1025).to_bytes(4, "big"))
    assert info.value.status is GrpcStatus.RESOURCE_EXHAUSTED
    assert decoder.buffered <= PREFIX_SIZE


def test_truncated_message_at_end_of_stream() -> None:
    decoder = MessageDecoder()
    assert decoder.feed(encode_message(b"hello")[:-1]) == []
    with pytest.raises(GrpcWireError) as info:
        decoder.end()
    assert info.value.status is GrpcStatus.INTERNAL


def test_flag_without_encoding_and_bad_flag() -> None:
    with pytest.raises(GrpcWireError, match="without a grpc-encoding"):
        MessageDecoder().feed(encode_message(b"x", "gzip"))
    with pytest.raises(GrpcWireError, match="flag 2"):
        MessageDecoder().feed(b"\x02\x00\x00\x00\x00")


def test_decompression_is_bounded() -> None:
    bomb = gzip.compress(b"\x00" * 1_000_000)
    frame = b"\x01" + len(bomb).to_bytes(4, "big") + bomb
    with pytest.raises(GrpcWireError) as info:
        MessageDecoder(max_message_size=10_000, encoding="gzip").feed(frame)
    assert info.value.status is GrpcStatus.RESOURCE_EXHAUSTED
    broken = zlib.compress(b"abc" * 100)[:-3]
    with pytest.raises(GrpcWireError, match="truncated|decompress"):
        MessageDecoder(encoding="deflate").feed(b"\x01" + len(broken).to_bytes(4, "big") + broken)


@given(st.floats(min_value=0, max_value=3600 * 24 * 365, allow_nan=False))
def test_timeout_round_trip_never_earlier(seconds: float) -> None:
    text = encode_timeout(seconds)
    back = parse_timeout(text)
    assert back >= seconds - 1e-9
    assert back - seconds <= max(seconds * 1e-6, 1e-8) + 60  # the unit chosen keeps 8 digits


@pytest.mark.parametrize("text,seconds", [("1H", 3600), ("2M", 120), ("5S", 5), ("100m", 0.1), ("7u", 7e-6),
                                          ("99999999n", 0.099999999)])
def test_timeout_units(text: str, seconds: float) -> None:
    assert parse_timeout(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "1", "S", "123456789S", "-1S", "1.5S", "1s", "1 S"])
def test_malformed_timeouts(text: str) -> None:
    with pytest.raises(GrpcWireError):
        parse_timeout(text)


@given(st.text())
def test_grpc_message_round_trip(text: str) -> None:
    encoded = encode_grpc_message(text)
    assert all(0x20 <= ord(c) <= 0x7E for c in encoded)
    assert decode_grpc_message(encoded) == text.encode("utf-8", "replace").decode("utf-8", "replace")


def test_grpc_message_malformed_escapes_kept() -> None:
    assert decode_grpc_message("100%") == "100%"
    assert decode_grpc_message("%zz%4") == "%zz%4"
    assert decode_grpc_message("a%20b") == "a b"


def test_paths() -> None:
    assert parse_path("/apache.rocketmq.v2.MessagingService/SendMessage") == (
        "apache.rocketmq.v2.MessagingService", "SendMessage")
    for bad in ["", "/", "SendMessage", "/svc", "/svc/", "//m", "/a/b/c"]:
        with pytest.raises(GrpcWireError) as info:
            parse_path(bad)
        assert info.value.status is GrpcStatus.UNIMPLEMENTED


def test_content_types() -> None:
    assert is_grpc_content_type("application/grpc")
    assert is_grpc_content_type("application/grpc+proto")
    assert is_grpc_content_type("Application/GRPC; charset=utf-8")
    assert not is_grpc_content_type("application/json")
    assert not is_grpc_content_type("application/grpcx")
    assert not is_grpc_content_type(None)


def test_trailers() -> None:
    assert status_trailers(GrpcStatus.OK) == [(b"grpc-status", b"0")]
    t = dict(trailers_only(GrpcStatus.UNIMPLEMENTED, "no method ü"))
    assert t[b":status"] == b"200" and t[b"grpc-status"] == b"12"
    assert t[b"grpc-message"] == b"no method %C3%BC"
