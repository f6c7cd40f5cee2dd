"""The HTTP/2 rules for a header block a server receives (RFC 9113 sections 8.2 and 8.3), in one pass.

Why not h2's own check: h2 validates inbound headers through a chain of seven generators that
look at every byte of every name in Python, about an eighth of the broker's CPU per gRPC send.
The gRPC transport turns that check off (``validate_inbound_headers=False``) and calls this one
instead, which applies the same rules (the tests hold it to h2's verdict on generated blocks) with
the byte scans done by ``re``, each distinct field scanned once (a client repeats its fields on
every call). Sans-IO: a header list in, the first broken rule's text out (and, for a request, its
metadata as text).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

#: a name may not hold controls, space, upper case or bytes above 0x7e (section 8.2.1)
_BAD_NAME_BYTE = re.compile(rb"[\x00-\x20\x41-\x5a\x7f-\xff]")
#: nor may a value hold NUL, LF or CR
_BAD_VALUE_BYTE = re.compile(rb"[\x00\n\r]")
_CONNECTION_HEADERS = frozenset((b"connection", b"proxy-connection", b"keep-alive", b"transfer-encoding", b"upgrade"))
_PSEUDO = frozenset((b":method", b":scheme", b":authority", b":path", b":status", b":protocol"))
_WHITESPACE = (0x20, 0x09)


#: per-field verdicts already reached: a field (name, value) that broke no per-field rule -> its
#: lower-case latin-1 text and whether it is a pseudo-header. A client sends the same fields on
#: every call (h2's decoder hands back the very tuples of its dynamic table), so the byte scans run
#: once per distinct field; the per-call ones (request ids) come and go with the bound.
_CLEAN: dict[tuple[bytes, bytes], tuple[str, str, bool]] = {}
_MAX_CLEAN = 4096
#: only a field this short (name and value) is kept: the cache lives as long as the process, and
#: a client sending distinct 63 KB values (up to 64 KiB each, the header list limit) pinned ~490
#: MiB in it for good (issue 46). Bounded so, it holds at most _MAX_CLEAN_BYTES of header bytes
#: (about as much again as their text); gRPC's and RocketMQ's own fields (ids, dates, the
#: authorization signature) are all far shorter, and a long field is scanned once per call anyway.
_MAX_CLEAN_FIELD = 512
_MAX_CLEAN_BYTES = _MAX_CLEAN * _MAX_CLEAN_FIELD


def _field_problem(name: bytes, value: bytes) -> str | None:
    """The rules one field keeps whatever the block around it: None when it keeps them."""
    if not name:
        return "Received header name with zero length."
    bad = _BAD_NAME_BYTE.search(name)
    if bad is not None:
        if 0x41 <= name[bad.start()] <= 0x5A:
            return f"Received uppercase header name {name!r}."
        return f"Illegal character '{chr(name[bad.start()])}' in header name: {name!r}"
    if name.find(b":", 1) != -1:
        return f"Illegal character ':' in header name: {name!r}"
    if value:
        bad = _BAD_VALUE_BYTE.search(value)
        if bad is not None:
            return f"Illegal character '{chr(value[bad.start()])}' in header value: {value!r}"
        if value[0] in _WHITESPACE or value[-1] in _WHITESPACE:
            return f"Received header value surrounded by whitespace {value!r}"
    if name[0] != 0x3A:  # ':'
        if name == b"te" and value.lower() != b"trailers":
            return f"Invalid value for TE header: {value!r}"
        if name in _CONNECTION_HEADERS:
            return f"Connection-specific header field present: {name!r}."
    return None


def request_header_problem(headers: Sequence[tuple[bytes, bytes]], trailer: bool = False) -> str | None:
    """Why a received request header block (or, with ``trailer``, trailer block) is malformed,
    or None when it is well-formed."""
    return _scan(headers, trailer, None)


def read_request_headers(headers: Sequence[tuple[bytes, bytes]]) -> tuple[dict[str, str], str | None]:
    """A request header block's metadata (latin-1 text by name, the last value of a repeated
    name) and, as ``request_header_problem`` says it, why the block is malformed (else None)."""
    metadata: dict[str, str] = {}
    return metadata, _scan(headers, False, metadata)


def _scan(headers: Sequence[tuple[bytes, bytes]], trailer: bool, metadata: dict[str, str] | None) -> str | None:
    seen_pseudo: set[bytes] = set()
    regular = False
    method = authority = host = None
    clean = _CLEAN
    for field in headers:
        known = clean.get(field)
        if known is None:
            problem = _field_problem(field[0], field[1])
            if problem is not None:
                return problem
            known = (field[0].decode("latin-1"), field[1].decode("latin-1"), field[0][0] == 0x3A)
            if len(field[0]) + len(field[1]) <= _MAX_CLEAN_FIELD:
                if len(clean) >= _MAX_CLEAN:
                    clean.clear()
                clean[field] = known
        if metadata is not None:
            metadata[known[0]] = known[1]
        name, value = field
        if known[2]:  # a pseudo-header
            if name in seen_pseudo:
                return f"Received duplicate pseudo-header field {name!r}"
            seen_pseudo.add(name)
            if regular:
                return f"Received pseudo-header field out of sequence: {name!r}"
            if name not in _PSEUDO:
                return f"Received custom pseudo-header field {name!r}"
            if name == b":method":
                method = value
            elif name == b":authority":
                authority = value
            elif name == b":path" and not value and not trailer:
                return "An empty :path header is forbidden"
            continue
        regular = True
        if name == b"host" and not trailer:
            if host is not None:
                return "Request header block has multiple Host headers."
            host = value
    if trailer:
        return f"Received pseudo-header in trailer {seen_pseudo}" if seen_pseudo else None
    if b":method" not in seen_pseudo:
        return "Header block missing mandatory b':method' header"
    connect = method == b"CONNECT"
    if connect and b":protocol" not in seen_pseudo:
        if b":scheme" in seen_pseudo or b":path" in seen_pseudo:
            return "Ordinary CONNECT MUST NOT include :scheme or :path"
    else:
        for required in (b":scheme", b":path"):
            if required not in seen_pseudo:
                return f"Header block missing mandatory {required!r} header"
    if b":status" in seen_pseudo:
        return "Encountered response-only headers {b':status'}"
    if not connect and b":protocol" in seen_pseudo:
        return "Encountered connect-request-only headers {b':protocol'}"
    if authority is None and host is None:
        return "Request header block does not have an :authority or Host header."
    if authority is not None and host is not None and authority != host:
        return f"Request header block has mismatched :authority and Host headers: {authority!r} / {host!r}"
    return None


__all__ = ["read_request_headers", "request_header_problem"]
