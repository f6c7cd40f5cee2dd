"""The HA replication protocol of RocketMQ 4.9 (store/ha/HAService + HAConnection), sans-IO.

It is not a remoting protocol: no frames, no codes. Two raw byte streams on the master's
haListenPort:

* slave -> master: an 8-byte big-endian long, the slave's max commit-log offset, sent
  every haSendHeartbeatInterval and after each append. The master reads only whole
  multiples of 8 bytes and takes the LAST complete long of what has arrived (older
  reports are superseded), as HAConnection.ReadSocketService does.
* master -> slave: a 12-byte header (8-byte physical offset the bytes start at, 4-byte
  body size) followed by that many commit-log bytes. A header with size 0 is the master's
  heartbeat. The slave refuses a transfer whose offset differs from its own max offset
  (unless that is 0): HAClient.dispatchReadRequest closes the connection then.

The parsers below are h11-style: feed bytes in, take complete events out; they never touch
a socket, so both sides are testable byte by byte.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

#: HAConnection / HAClient: 8-byte phy offset + 4-byte body size.
TRANSFER_HEADER_SIZE = 12
#: the slave's report: one long.
REPORT_SIZE = 8

_HEADER = struct.Struct(">qi")
_REPORT = struct.Struct(">q")


class HAProtocolError(ValueError):
    """A stream that cannot be RocketMQ HA traffic (negative size or offset)."""


def encode_report(offset: int) -> bytes:
    """The slave's 8-byte max-offset report (HAClient.reportSlaveMaxOffset)."""
    return _REPORT.pack(offset)


def encode_transfer_header(offset: int, size: int) -> bytes:
    """The master's 12-byte transfer header (WriteSocketService); size 0 = heartbeat."""
    return _HEADER.pack(offset, size)


def encode_transfer(offset: int, body: bytes | memoryview) -> bytes:
    return _HEADER.pack(offset, len(body)) + bytes(body)


class ReportReader:
    """Master side: the slave's offset reports.

    ``feed`` returns the newest complete report in the new bytes or None: RocketMQ takes the
    last whole long of its read buffer and ignores earlier ones (ReadSocketService).
    """

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes | memoryview) -> int | None:
        self._buf += data
        whole = len(self._buf) - len(self._buf) % REPORT_SIZE
        if whole == 0:
            return None
        (offset,) = _REPORT.unpack_from(self._buf, whole - REPORT_SIZE)
        del self._buf[:whole]
        if offset < 0:
            raise HAProtocolError(f"slave reported a negative offset {offset}")
        return offset

    @property
    def pending(self) -> int:
        return len(self._buf)


@dataclass(frozen=True)
class Transfer:
    """One master -> slave transfer: ``body`` starts at commit-log offset ``offset``."""
    offset: int
    body: bytes

    @property
    def is_heartbeat(self) -> bool:
        return not self.body


class TransferReader:
    """Slave side: the master's header + body transfers, in order, as they complete."""

    def __init__(self, max_body: int = 1 << 30) -> None:
        self._buf = bytearray()
        self._max_body = max_body

    def feed(self, data: bytes | memoryview) -> list[Transfer]:
        self._buf += data
        out: list[Transfer] = []
        pos = 0
        buf = self._buf
        while len(buf) - pos >= TRANSFER_HEADER_SIZE:
            offset, size = _HEADER.unpack_from(buf, pos)
            if offset < 0 or size < 0 or size > self._max_body:
                raise HAProtocolError(f"bad HA transfer header: offset {offset}, size {size}")
            end = pos + TRANSFER_HEADER_SIZE + size
            if len(buf) < end:
                break
            out.append(Transfer(offset, bytes(buf[pos + TRANSFER_HEADER_SIZE:end])))
            pos = end
        if pos:
            del buf[:pos]
        return out

    @property
    def pending(self) -> int:
        return len(self._buf)


__all__ = ["HAProtocolError", "REPORT_SIZE", "ReportReader", "TRANSFER_HEADER_SIZE", "Transfer", "TransferReader",
           "encode_report", "encode_transfer", "encode_transfer_header"]
