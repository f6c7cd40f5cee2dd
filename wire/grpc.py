"""gRPC over HTTP/2, the parts above the HTTP/2 frames, sans-IO.

Why here: RocketMQ 5.x clients speak gRPC (apache.rocketmq.v2) to the proxy. The HTTP/2
frames are h2's job (broker/grpc_server.py drives it); what gRPC adds on top is small and
pure: every message is a 5-byte prefix (compressed flag, big-endian length) and its bytes,
possibly split over DATA frames at any point; the call's outcome is the ``grpc-status`` /
``grpc-message`` trailers (the message percent-encoded); ``grpc-timeout`` carries the
deadline; ``grpc-encoding`` names the compression of flagged messages. Every decoder here
raises only ``GrpcWireError`` (a WireError) carrying the gRPC status the server answers
with, so bad bytes from a peer become a clear status, never a Python exception.
"""

from __future__ import annotations

import enum
import gzip
import re
import struct
import zlib
from collections.abc import Iterable

from rmqd.wire.errors import WireError

#: the compressed flag and length before every message
PREFIX = struct.Struct(">BI")
PREFIX_SIZE = PREFIX.size
#: grpc-java's default maxInboundMessageSize is 4 MiB; Apache's proxy raises it to 130 MiB
#: (ProxyConfig.grpcMaxInboundMessageSize), which rmqd follows
DEFAULT_MAX_MESSAGE_SIZE = 130 * 1024 * 1024
CONTENT_TYPE = "application/grpc"
SUPPORTED_ENCODINGS = ("identity", "gzip", "deflate")
ACCEPT_ENCODING = ",".join(SUPPORTED_ENCODINGS)


class GrpcStatus(enum.IntEnum):
    """The gRPC status codes (grpc/doc/statuscodes.md)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class GrpcWireError(WireError):
    """Bytes or headers that break gRPC's rules; ``status`` is what the server answers."""

    def __init__(self, status: GrpcStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


class CallClosedError(Exception):
    """The peer reset the stream or the connection went away: nobody reads this call's answer
    (raised by the transport's send/recv; handlers let it pass, after giving back what the
    answer held)."""


# -- messages ---------------------------------------------------------------------------------

def _compress(payload: bytes, encoding: str) -> bytes:
    if encoding == "gzip":
        return gzip.compress(payload, compresslevel=6, mtime=0)
    if encoding == "deflate":
        return zlib.compress(payload)
    raise ValueError(f"unsupported grpc-encoding {encoding!r}")


def encode_message(payload: bytes, encoding: str | None = None) -> bytes:
    """One length-prefixed message; compressed (flag 1) when ``encoding`` is gzip/deflate."""
    if encoding and encoding != "identity":
        body = _compress(payload, encoding)
        return PREFIX.pack(1, len(body)) + body
    return PREFIX.pack(0, len(payload)) + payload


def _decompress(data: bytes, encoding: str, limit: int) -> bytes:
    """Inflate at most ``limit`` bytes: a small compressed message must not expand into gigabytes."""
    if encoding == "gzip":
        wbits = 16 + zlib.MAX_WBITS
    elif encoding == "deflate":
        wbits = zlib.MAX_WBITS
    else:
        raise GrpcWireError(GrpcStatus.INTERNAL, f"compressed message with grpc-encoding {encoding!r}")
    inflater = zlib.decompressobj(wbits)
    try:
        out = inflater.decompress(data, limit + 1)
    except zlib.error as exc:
        raise GrpcWireError(GrpcStatus.INTERNAL, f"cannot decompress the message ({encoding}): {exc}") from None
    if len(out) > limit:
        raise GrpcWireError(GrpcStatus.RESOURCE_EXHAUSTED,
                            f"decompressed gRPC message exceeds maximum size {limit}")
    if not inflater.eof:
        raise GrpcWireError(GrpcStatus.INTERNAL, f"truncated {encoding} stream in a compressed message")
    return out


class MessageDecoder:
    """Length-prefixed messages out of a stream's DATA bytes, fed in any pieces.

    ``encoding`` is the request's grpc-encoding (None / identity: a flagged message is an
    error, as gRPC says). A message longer than ``max_message_size`` is refused as soon as
    its prefix arrives, before its bytes are buffered.
    """

    def __init__(self, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE, encoding: str | None = None) -> None:
        self.max_message_size = max_message_size
        self.encoding = (encoding or "identity").strip().lower()
        self._buf = bytearray()
        self._need: int | None = None  # body length of the message being read
        self._compressed = False

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Every message completed by ``data``."""
        self._buf += data
        out: list[bytes] = []
        buf = self._buf
        while True:
            if self._need is None:
                if len(buf) < PREFIX_SIZE:
                    break
                flag, length = PREFIX.unpack_from(buf, 0)
                if flag not in (0, 1):
                    raise GrpcWireError(GrpcStatus.INTERNAL, f"invalid gRPC message flag {flag}")
                if length > self.max_message_size:
                    raise GrpcWireError(GrpcStatus.RESOURCE_EXHAUSTED,
                                        f"gRPC message exceeds maximum size {self.max_message_size}: {length}")
                if flag and self.encoding == "identity":
                    raise GrpcWireError(GrpcStatus.INTERNAL,
                                        "compressed gRPC message without a grpc-encoding")
                del buf[:PREFIX_SIZE]
                self._need = length
                self._compressed = bool(flag)
            if len(buf) < self._need:
                break
            body = bytes(buf[:self._need])
            del buf[:self._need]
            self._need = None
            if self._compressed:
                body = _decompress(body, self.encoding, self.max_message_size)
            out.append(body)
        return out

    def end(self) -> None:
        """The stream ended: a message cut short is an error."""
        if self._need is not None or self._buf:
            raise GrpcWireError(GrpcStatus.INTERNAL, "the request stream ended in the middle of a gRPC message")


# -- headers ----------------------------------------------------------------------------------

_TIMEOUT = re.compile(r"^([0-9]{1,8})([HMSmun])$")
_UNIT_SECONDS = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}


def parse_timeout(value: str) -> float:
    """grpc-timeout ("100m", "5S", at most 8 digits) in seconds."""
    match = _TIMEOUT.match(value.strip())
    if match is None:
        raise GrpcWireError(GrpcStatus.INTERNAL, f"malformed grpc-timeout {value[:40]!r}")
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def encode_timeout(seconds: float) -> str:
    """The shortest exact-enough grpc-timeout for ``seconds`` (8 digits at most)."""
    seconds = max(seconds, 0.0)
    for unit, scale in (("n", 1e-9), ("u", 1e-6), ("m", 1e-3), ("S", 1.0), ("M", 60.0), ("H", 3600.0)):
        amount = int(-(-seconds // scale))  # round up: never earlier than asked
        if amount < 100_000_000:
            return f"{amount}{unit}"
    return "99999999H"


def encode_grpc_message(text: str) -> str:
    """grpc-message's percent-encoding: UTF-8, bytes outside printable ASCII and '%' escaped."""
    out = []
    for byte in text.encode("utf-8", "replace"):
        if 0x20 <= byte <= 0x7E and byte != 0x25:
            out.append(chr(byte))
        else:
            out.append(f"%{byte:02X}")
    return "".join(out)


def decode_grpc_message(value: str) -> str:
    """The inverse; malformed escapes are kept as they are (as gRPC implementations do)."""
    raw = bytearray()
    i = 0
    data = value.encode("latin-1", "replace")
    while i < len(data):
        c = data[i]
        if c == 0x25 and _is_hex(data[i + 1:i + 3]):
            raw.append(int(data[i + 1:i + 3], 16))
            i += 3
            continue
        raw.append(c)
        i += 1
    return raw.decode("utf-8", "replace")


def _is_hex(two: bytes) -> bool:
    return len(two) == 2 and all(chr(b) in "0123456789abcdefABCDEF" for b in two)


def parse_path(path: str) -> tuple[str, str]:
    """``/package.Service/Method`` -> (service, method)."""
    if not path.startswith("/"):
        raise GrpcWireError(GrpcStatus.UNIMPLEMENTED, f"malformed method name {path[:200]!r}")
    service, sep, method = path[1:].partition("/")
    if not sep or not service or not method or "/" in method:
        raise GrpcWireError(GrpcStatus.UNIMPLEMENTED, f"malformed method name {path[:200]!r}")
    return service, method


def is_grpc_content_type(value: str | None) -> bool:
    """application/grpc, application/grpc+proto, application/grpc;charset=... (any suffix)."""
    if not value:
        return False
    value = value.strip().lower()
    return value == CONTENT_TYPE or value.startswith(CONTENT_TYPE + "+") or value.startswith(CONTENT_TYPE + ";")


Headers = list[tuple[bytes, bytes]]


def response_headers(encoding: str | None = None) -> Headers:
    headers = [(b":status", b"200"), (b"content-type", CONTENT_TYPE.encode()),
               (b"grpc-accept-encoding", ACCEPT_ENCODING.encode())]
    if encoding and encoding != "identity":
        headers.append((b"grpc-encoding", encoding.encode()))
    return headers


def status_trailers(status: GrpcStatus, message: str | None = None,
                    extra: Iterable[tuple[bytes, bytes]] = ()) -> Headers:
    trailers = [(b"grpc-status", str(int(status)).encode())]
    if message:
        trailers.append((b"grpc-message", encode_grpc_message(message).encode("ascii")))
    trailers.extend(extra)
    return trailers


def trailers_only(status: GrpcStatus, message: str | None = None) -> Headers:
    """A call answered with only a status: headers and trailers in one HEADERS frame."""
    return [(b":status", b"200"), (b"content-type", CONTENT_TYPE.encode())] + status_trailers(status, message)


__all__ = [
    "ACCEPT_ENCODING", "CONTENT_TYPE", "CallClosedError", "DEFAULT_MAX_MESSAGE_SIZE", "GrpcStatus", "GrpcWireError", "Headers",
    "MessageDecoder", "PREFIX_SIZE", "SUPPORTED_ENCODINGS", "decode_grpc_message", "encode_grpc_message",
    "encode_message", "encode_timeout", "is_grpc_content_type", "parse_path", "parse_timeout", "response_headers",
    "status_trailers", "trailers_only",
]
