"""wire/h2_headers.py gives h2's verdict on every received header block, at a fraction of its cost."""

from __future__ import annotations

import h2.exceptions
import h2.utilities
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqd.wire.h2_headers import read_request_headers, request_header_problem

JAVA_CLIENT = [
    (b":method", b"POST"), (b":scheme", b"http"), (b":path", b"/apache.rocketmq.v2.MessagingService/SendMessage"),
    (b":authority", b"127.0.0.1:8081"), (b"content-type", b"application/grpc"), (b"te", b"trailers"),
    (b"user-agent", b"grpc-java-netty/1.50.2"), (b"x-mq-client-id", b"host@123@0@abc"),
    (b"x-mq-language", b"JAVA"), (b"x-mq-protocol", b"v2"), (b"grpc-accept-encoding", b"gzip"),
    (b"grpc-timeout", b"2999907u"),
]


def h2_verdict(headers: list[tuple[bytes, bytes]], trailer: bool = False) -> str | None:
    flags = h2.utilities.HeaderValidationFlags(is_client=False, is_trailer=trailer, is_response_header=False,
                                               is_push_promise=False)
    try:
        list(h2.utilities.validate_headers(headers, flags))
    except h2.exceptions.ProtocolError as exc:
        return str(exc)
    return None


def test_a_real_client_request_is_well_formed() -> None:
    assert request_header_problem(JAVA_CLIENT) is None
    assert h2_verdict(JAVA_CLIENT) is None


def test_each_rule() -> None:
    base = JAVA_CLIENT
    cases = {
        "uppercase": base + [(b"X-Up", b"1")],
        "space in name": base + [(b"a b", b"1")],
        "high byte in name": base + [(b"\xc3\xa9", b"1")],
        "colon inside a name": base + [(b"a:b", b"1")],
        "empty name": base + [(b"", b"1")],
        "NUL in value": base + [(b"a", b"x\x00y")],
        "CR in value": base + [(b"a", b"x\ry")],
        "surrounding space": base + [(b"a", b" x")],
        "trailing tab": base + [(b"a", b"x\t")],
        "te": base[:5] + [(b"te", b"gzip")] + base[6:],
        "connection header": base + [(b"connection", b"close")],
        "duplicate pseudo": [(b":method", b"POST")] + base,
        "pseudo after regular": base + [(b":custom", b"x")],
        "late :path": base[:2] + base[3:] + [(b":path", b"/x")],
        "custom pseudo": [(b":custom", b"x")] + base,
        "no method": base[1:],
        "no path": base[:2] + base[3:],
        "no scheme": base[:1] + base[2:],
        "status in request": [(b":status", b"200")] + base,
        "protocol without CONNECT": [(b":protocol", b"websocket")] + base,
        "empty path": base[:2] + [(b":path", b"")] + base[3:],
        "no authority or host": base[:3] + base[4:],
        "host differs from authority": base + [(b"host", b"elsewhere")],
        "two hosts": base[:3] + base[4:] + [(b"host", b"a"), (b"host", b"a")],
        "ordinary CONNECT with a path": [(b":method", b"CONNECT"), (b":path", b"/"), (b":authority", b"a")],
    }
    for label, headers in cases.items():
        ours, theirs = request_header_problem(headers), h2_verdict(headers)
        assert theirs is not None, label
        assert ours is not None, label
    fine = {
        "host equal to authority": base + [(b"host", b"127.0.0.1:8081")],
        "host instead of authority": base[:3] + base[4:] + [(b"host", b"h")],
        "empty value": base + [(b"a", b"")],
        "ordinary CONNECT": [(b":method", b"CONNECT"), (b":authority", b"a")],
        "extended CONNECT": [(b":method", b"CONNECT"), (b":protocol", b"websocket"), (b":scheme", b"https"),
                             (b":path", b"/"), (b":authority", b"a")],
    }
    for label, headers in fine.items():
        assert h2_verdict(headers) is None, label
        assert request_header_problem(headers) is None, label


def test_trailers() -> None:
    assert request_header_problem([(b"grpc-status", b"0")], trailer=True) is None
    assert request_header_problem([(b":path", b"/x")], trailer=True) is not None
    assert h2_verdict([(b":path", b"/x")], trailer=True) is not None
    assert request_header_problem([(b"X", b"1")], trailer=True) is not None


_names = st.one_of(
    st.sampled_from([b":method", b":scheme", b":path", b":authority", b":status", b":protocol", b":other", b"te",
                     b"host", b"connection", b"content-type", b"x-mq-client-id", b"", b"Upper", b"a:b"]),
    st.binary(max_size=6))
_values = st.one_of(st.sampled_from([b"POST", b"CONNECT", b"http", b"/a/b", b"", b"trailers", b"TRAILERS", b"h",
                                     b" x", b"x\t", b"a\x00"]), st.binary(max_size=6))


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.tuples(_names, _values), max_size=8), st.booleans(), st.booleans())
def test_same_verdict_as_h2(headers: list[tuple[bytes, bytes]], trailer: bool, as_client_sends: bool) -> None:
    if as_client_sends and not trailer:  # mostly well-formed blocks, then one change
        headers = JAVA_CLIENT + headers
    ours, theirs = request_header_problem(headers, trailer=trailer), h2_verdict(headers, trailer=trailer)
    assert (ours is None) == (theirs is None), (headers, ours, theirs)


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.tuples(_names, _values), max_size=8))
def test_request_metadata_and_the_same_verdict_twice(headers: list[tuple[bytes, bytes]]) -> None:
    """read_request_headers: the text of every field (the last of a repeated name) and
    request_header_problem's verdict, the same on a second look (the fields then remembered)."""
    block = JAVA_CLIENT + headers
    first = request_header_problem(block)
    metadata, problem = read_request_headers(block)
    assert problem == first == request_header_problem(block) == read_request_headers(block)[1]
    if problem is None:
        assert metadata == {name.decode("latin-1"): value.decode("latin-1") for name, value in block}
