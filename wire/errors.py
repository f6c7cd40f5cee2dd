"""The one error family every wire decoder raises.

Callers (the trio server, the store, the CLI) catch exactly one type, ``WireError``, to turn
bad bytes from a peer or a file into a RocketMQ response code or a clear message; any other
exception escaping a decoder is a bug in rmqd.
"""
from __future__ import annotations


class WireError(ValueError):
    """Bytes or text that do not follow the RocketMQ wire format; the message says what and where."""


class FrameError(WireError):
    """A Remoting frame (length prefix, serialize type, header length, binary or JSON header) is malformed."""


class FrameTooLargeError(FrameError):
    """The length prefix announces more than the configured maximum frame length."""

    def __init__(self, length: int, maximum: int) -> None:
        super().__init__(f"frame length {length} exceeds the maximum frame length {maximum}")
        self.length = length
        self.maximum = maximum


class JsonError(WireError):
    """Text that is not (fastjson-flavoured) JSON; the message names the character offset."""


class HeaderFieldError(WireError):
    """A custom-header field is missing or cannot be converted to its Java type."""

    def __init__(self, field: str, message: str, header: str | None = None) -> None:
        where = f"{header}.{field}" if header else field
        super().__init__(f"header field {where!r}: {message}")
        self.field = field
        self.header = header


__all__ = ["WireError", "FrameError", "FrameTooLargeError", "JsonError", "HeaderFieldError"]
