"""A unary gRPC call's HTTP/2 frames, read and answered past h2's per-frame machinery.

Why: for every frame h2 builds a frame object (and its repr, for a trace logger that is off), runs
the connection's and the stream's state machines, makes an event, and for every answer builds
a stream object and frame objects again: about 40 % of the broker's CPU per gRPC send, more than
the send itself. A unary call whose HEADERS and DATA arrive whole in one read and whose answer
leaves in the write after it needs none of that: its stream opens and closes within the read.
So the connection's inbound bytes pass through `FastInbound` first. It cuts them into whole
frames and takes such calls (for the paths it is given) and PINGs itself; every other byte goes
on to h2, in order, and h2 stays the authority for all else: the preface, SETTINGS, WINDOW_UPDATE,
RST_STREAM, GOAWAY, streaming calls, requests split over reads, any frame that is not plainly
well-formed (h2 then raises the protocol error it always did), and a taken call whose answer has
to wait (`adopt` hands its stream to h2).

What keeps h2's view of the connection true:
- a taken stream's id becomes h2's ``highest_inbound_stream_id`` and never enters ``h2.streams``:
  exactly how h2 sees a stream it closed and pruned, so a late RST_STREAM, WINDOW_UPDATE or DATA
  for one gets h2's own answer;
- inbound flow control: the bytes of taken calls are counted here and handed back to the peer by
  WINDOW_UPDATE; h2's window (``inbound_flow_control_window``) less the bytes not yet handed back
  is the peer's real window, which a taken call must fit (else h2 takes it, and judges it);
- outbound flow control: an answer must fit the connection's window, a new stream's window and
  the peer's frame size (else h2 sends it), and ``h2.outbound_flow_control_window`` is charged;
- HPACK: requests are decoded by h2's own decoder (one dynamic table); answers are encoded by its
  encoder, which never indexes (wire/hpack.StaticHpackEncoder), so blocks may leave in any order;
- output order: h2's queued bytes are taken before any frame written here (``out``).

Sans-IO: bytes in (``receive``), h2 events and `UnaryRequest`s out in wire order; frames out in
``out``. broker/grpc_server.py drives it.
"""

from __future__ import annotations

import struct
from bisect import bisect_left
from collections.abc import Container, Sequence
from typing import Any

import h2.connection
import h2.exceptions
from h2.connection import ConnectionState
from h2.stream import StreamClosedBy
from hpack.exceptions import HPACKError, OversizedHeaderListError

from rmqd.wire.hpack import encode_block

PREFACE_SIZE = 24
FRAME_HEADER = 9
DATA, HEADERS, RST_STREAM, PING, CONTINUATION = 0x0, 0x1, 0x3, 0x6, 0x9
WINDOW_UPDATE = 0x8
REFUSED_STREAM = 0x7
END_STREAM = ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY = 0x20
MAX_WINDOW = 2**31 - 1
#: the gRPC message prefix: compressed flag, length
_PREFIX = struct.Struct(">BI")
_HEAD = struct.Struct(">HBBBI")  # a frame header: length (24 bits as 16 + 8), type, flags, stream id
_WORD = struct.Struct(">I")  # a WINDOW_UPDATE's increment, a RST_STREAM's error code


def frame(ftype: int, flags: int, stream_id: int, payload: bytes) -> bytes:
    """One frame (the caller keeps the payload within the peer's frame size)."""
    n = len(payload)
    return _HEAD.pack(n >> 8, n & 0xFF, ftype, flags, stream_id) + payload


def header_frames(stream_id: int, block: bytes, end_stream: bool, max_frame: int) -> bytes:
    """A header block as HEADERS (and CONTINUATION frames when it is larger than ``max_frame``)."""
    flags = END_STREAM if end_stream else 0
    if len(block) <= max_frame:
        return frame(HEADERS, flags | END_HEADERS, stream_id, block)
    parts = [block[i:i + max_frame] for i in range(0, len(block), max_frame)]
    out = [frame(HEADERS, flags, stream_id, parts[0])]
    for part in parts[1:-1]:
        out.append(frame(CONTINUATION, 0, stream_id, part))
    out.append(frame(CONTINUATION, END_HEADERS, stream_id, parts[-1]))
    return b"".join(out)


class UnaryRequest:
    """A unary call taken whole from one read: its stream, its decoded header list, its one
    request message (uncompressed), and what the peer added to the stream's send window
    meanwhile (the WINDOW_UPDATE frames themselves, for ``adopt``)."""

    __slots__ = ("stream_id", "headers", "message", "window", "updates")

    def __init__(self, stream_id: int, headers: list[tuple[bytes, bytes]], message: bytes,
                 window: int = 0, updates: bytes = b"") -> None:
        self.stream_id = stream_id
        self.headers = headers
        self.message = message
        self.window = window
        self.updates = updates


def decode_block(h2conn: h2.connection.H2Connection, block: bytes) -> list[tuple[bytes, bytes]]:
    """A header block through h2's decoder, its errors turned into h2's, as h2 turns them."""
    try:
        return h2conn.decoder.decode(block, raw=True)  # type: ignore[return-value]
    except OversizedHeaderListError as e:
        raise h2.exceptions.DenialOfServiceError(f"Oversized header block: {e}") from e
    except (HPACKError, IndexError, TypeError, UnicodeDecodeError) as e:
        raise h2.exceptions.ProtocolError(f"Error decoding header block: {e}") from e


def _path_of(headers: Sequence[tuple[bytes, bytes]]) -> bytes | None:
    for name, value in headers:
        if name == b":path":
            return value
    return None


def _later_frame(buf: bytes, q: int) -> int:
    """What the whole frame at ``q``, of a request's stream after its HEADERS, makes of the
    request: 2 its last DATA (END_STREAM), 1 a DATA or a well-formed WINDOW_UPDATE before that,
    -1 anything else (h2 judges the request)."""
    ftype = buf[q + 3]
    flags = buf[q + 4]
    if ftype == DATA:
        if flags & ~END_STREAM:
            return -1
        return 2 if flags else 1
    if ftype == WINDOW_UPDATE:
        length = (buf[q] << 16) | (buf[q + 1] << 8) | buf[q + 2]
        if length != 4 or flags or not int.from_bytes(buf[q + 9:q + 13], "big") & 0x7FFFFFFF:
            return -1  # h2 judges it
        return 1
    return -1


class FastInbound:
    """The connection's inbound frames: unary calls of ``paths`` and PINGs answered here, the
    rest handed to ``h2conn`` in order. ``window_ack`` is how many bytes of taken calls may wait
    before a connection WINDOW_UPDATE hands them back (half the window we offer is h2's rule)."""

    def __init__(self, h2conn: h2.connection.H2Connection, paths: Container[bytes], max_message: int,
                 max_streams: int, window_ack: int) -> None:
        self.h2 = h2conn
        self.paths = paths
        self.max_message = max_message
        self.max_streams = max_streams
        self.window_ack = window_ack
        #: frames written here, after whatever h2 had queued before them
        self.out = bytearray()
        self._rest = b""  # a frame not yet whole
        self._preface = PREFACE_SIZE
        self._in_block = False  # h2 holds a header block that CONTINUATION frames complete
        self._h2_only = False  # a frame too large to buffer went to h2: everything does from then on
        self._unacked = 0  # flow-controlled bytes of taken calls not yet handed back
        #: streams taken from the buffer being read whose later frames (DATA, WINDOW_UPDATE) are
        #: still ahead of the read position: passed over, h2 never sees them
        self._taking: set[int] = set()
        # The look-ahead of one read (`_request_frames`), so that no frame is walked twice: the
        # walks of the read so far reached `_walked_to` (past its last whole frame when
        # `_walked_all`), and `_passed` holds, by stream, where the frames they passed over
        # start (in order). Reset by every read.
        self._walked_to = 0
        self._walked_all = False
        self._passed: dict[int, list[int]] | None = None
        #: frames walked by look-aheads, all reads together: at most one walk per frame of a read
        #: (issue 46: a scan to the end of the read from every incomplete HEADERS cost ~1 s of the
        #: event loop per 64 KiB read); kept for the tests, which hold it to that
        self.walked = 0

    # -- inbound ------------------------------------------------------------------------------------
    def receive(self, data: bytes | bytearray) -> list[Any]:
        """h2's events and the `UnaryRequest`s taken, in the order their frames came. h2's
        ProtocolError (and whatever else h2 raises on bad input) propagates, as from h2."""
        conn = self.h2
        if self._h2_only:
            return conn.receive_data(data)
        buf = self._rest + data if self._rest else bytes(data)
        n = len(buf)
        pos = raw = heads = 0
        if self._walked_to:
            self._walked_to = 0
            self._walked_all = False
            self._passed = None
        items: list[Any] = []
        if self._preface:
            pos = min(self._preface, n)
            self._preface -= pos
        max_frame = conn.max_inbound_frame_size
        taking = self._taking
        while n - pos >= FRAME_HEADER:
            length = (buf[pos] << 16) | (buf[pos + 1] << 8) | buf[pos + 2]
            if length > max_frame:
                self._h2_only = True  # h2 raises FRAME_SIZE_ERROR on it
                break
            end = pos + FRAME_HEADER + length
            if end > n:
                break
            ftype = buf[pos + 3]
            flags = buf[pos + 4]
            if taking and int.from_bytes(buf[pos + 5:pos + 9], "big") & 0x7FFFFFFF in taking:
                # a later frame of a request taken whole already (read in _take)
                if raw < pos:
                    items.extend(conn.receive_data(buf[raw:pos]))
                if ftype == DATA and flags & END_STREAM:
                    taking.discard(int.from_bytes(buf[pos + 5:pos + 9], "big") & 0x7FFFFFFF)
                pos = raw = end
                continue
            if self._in_block:
                if ftype == CONTINUATION and flags & END_HEADERS:
                    self._in_block = False
            elif ftype == HEADERS:
                heads += 1  # (streams this read may open: h2's count lags until it gets the bytes)
                if len(conn.streams) + heads > self.max_streams and flags & END_HEADERS:
                    if raw < pos:
                        items.extend(conn.receive_data(buf[raw:pos]))
                        raw = pos
                    if self._refuse(buf, pos, end):
                        pos = raw = end
                        continue
                if not flags & END_HEADERS:
                    self._in_block = True
                elif not flags & (END_STREAM | PADDED):
                    later = self._request_frames(buf, pos, end, n)
                    if later is not None:
                        if raw < pos:
                            items.extend(conn.receive_data(buf[raw:pos]))
                        pos = raw = self._take(buf, pos, end, later, items)
                        continue
            elif ftype == PING and flags == 0 and length == 8 and self._open():
                if buf[pos + 5] | buf[pos + 6] | buf[pos + 7] | buf[pos + 8] == 0:  # stream 0
                    if raw < pos:
                        items.extend(conn.receive_data(buf[raw:pos]))
                    if self._open():
                        self.drain()
                        self.out += frame(PING, ACK, 0, buf[pos + FRAME_HEADER:end])
                        pos = raw = end
                        continue
                    raw = pos  # h2 answers it (and raises, as it does on a closed connection)
            pos = end
        if self._h2_only:
            self._rest = b""
            if raw < n:
                items.extend(conn.receive_data(buf[raw:]))
            return items
        self._rest = buf[pos:]
        if raw < pos:
            items.extend(conn.receive_data(buf[raw:pos]))
        return items

    def _refuse(self, buf: bytes, pos: int, end: int) -> bool:
        """The HEADERS buf[pos:end] (h2 has every byte before it) refused with RST_STREAM
        REFUSED_STREAM when it opens a stream past our MAX_CONCURRENT_STREAMS, as grpc-java's
        Netty refuses it (a stream error): h2 would raise TooManyStreamsError and end the whole
        connection with GOAWAY. Its header block is still decoded (HPACK's dynamic table is the
        connection's), and h2 then sees the stream as one it reset itself, so the frames the
        peer sent after it get h2's answer to a reset stream. False: h2 judges the frame."""
        conn = self.h2
        sid = int.from_bytes(buf[pos + 5:pos + 9], "big") & 0x7FFFFFFF
        if (sid & 1 == 0 or sid <= conn.highest_inbound_stream_id or not self._open()
                or conn.open_inbound_streams < conn.local_settings.max_concurrent_streams):
            return False
        flags = buf[pos + 4]
        block = pos + FRAME_HEADER
        stop = end
        if flags & PADDED:
            stop -= buf[block]
            block += 1
        if flags & PRIORITY:
            block += 5
        if block > stop:
            return False  # h2's protocol error
        decode_block(conn, buf[block:stop])
        conn.highest_inbound_stream_id = sid
        conn._closed_streams[sid] = StreamClosedBy.SEND_RST_STREAM
        self.drain()
        self.out += frame(RST_STREAM, 0, sid, _WORD.pack(REFUSED_STREAM))
        return True

    def _open(self) -> bool:
        return self.h2.state_machine.state is ConnectionState.SERVER_OPEN

    def _request_frames(self, buf: bytes, pos: int, end: int, n: int) -> list[int] | None:
        """Where the later frames of the request whose HEADERS ends at ``end`` start: its DATA
        frames, the last with END_STREAM, and any WINDOW_UPDATE of the same stream (grpc's C
        core sends one right after its HEADERS), all whole in ``buf``; frames of other streams
        may come between them (grpc-java writes the HEADERS of concurrent calls before their
        DATA). None when the request is not all there, or has any other frame of its stream.

        Linear in the read, however many HEADERS it holds: a walk goes on from where the walks
        before it in this read stopped (remembering, by stream, the frames it passed over), so
        each frame is walked once; what an earlier walk passed over is looked up. A walk that
        reached the end of the read's whole frames answers every later one (None)."""
        sid = int.from_bytes(buf[pos + 5:pos + 9], "big") & 0x7FFFFFFF
        frames: list[int] = []
        q = end
        if end < self._walked_to:  # passed over by earlier walks of this read: found, not walked
            passed = self._passed
            mine = passed.get(sid) if passed is not None else None
            if mine is not None:
                for i in range(bisect_left(mine, end), len(mine)):
                    verdict = _later_frame(buf, mine[i])
                    if verdict < 0:
                        return None
                    frames.append(mine[i])
                    if verdict == 2:
                        return frames
            if self._walked_all:
                return None
            q = self._walked_to
        max_frame = self.h2.max_inbound_frame_size
        walked = 0
        try:
            while n - q >= FRAME_HEADER:
                length = (buf[q] << 16) | (buf[q + 1] << 8) | buf[q + 2]
                stop = q + FRAME_HEADER + length
                if length > max_frame or stop > n:
                    break
                walked += 1
                fsid = int.from_bytes(buf[q + 5:q + 9], "big") & 0x7FFFFFFF
                if fsid == sid:
                    verdict = _later_frame(buf, q)
                    if verdict < 0:
                        self._walked_to = stop
                        return None
                    frames.append(q)
                    if verdict == 2:
                        self._walked_to = stop
                        return frames
                else:  # another stream's: its own walk, later in this read, looks it up
                    passed = self._passed
                    if passed is None:
                        passed = self._passed = {}
                    other = passed.get(fsid)
                    if other is None:
                        passed[fsid] = [q]
                    else:
                        other.append(q)
                q = stop
            self._walked_to = q
            self._walked_all = True
            return None
        finally:
            self.walked += walked

    def _take(self, buf: bytes, pos: int, end: int, later: list[int], items: list[Any]) -> int:
        """The request whose HEADERS is buf[pos:end] and whose later frames start at ``later``: taken
        here when it can be (its later frames are then passed over as the read comes to them),
        else its HEADERS handed to h2 (the block decoded here already goes again as literals
        that leave the table alone), its later frames following as the read comes to them.
        Where reading goes on: ``end``."""
        conn = self.h2
        sid = int.from_bytes(buf[pos + 5:pos + 9], "big") & 0x7FFFFFFF
        block = pos + FRAME_HEADER
        if buf[pos + 4] & PRIORITY:  # grpc-java's HEADERS carry a priority (ignored, as h2's events are here)
            block += 5
            if block > end or int.from_bytes(buf[pos + 9:pos + 13], "big") & 0x7FFFFFFF == sid:
                block = 0  # too short, or the stream depends on itself: h2's protocol error
        if (not block or not self._open() or sid & 1 == 0 or sid <= conn.highest_inbound_stream_id
                or len(conn.streams) >= self.max_streams):
            items.extend(conn.receive_data(buf[pos:end]))  # h2 judges it: usually a protocol error
            return end
        headers = decode_block(conn, buf[block:end])
        parts: list[bytes] = []
        updates: list[bytes] = []
        window = 0
        for q in later:
            nxt = q + FRAME_HEADER + ((buf[q] << 16) | (buf[q + 1] << 8) | buf[q + 2])
            if buf[q + 3] == DATA:
                parts.append(buf[q + FRAME_HEADER:nxt])
            else:
                updates.append(buf[q:nxt])
                window += int.from_bytes(buf[q + 9:nxt], "big") & 0x7FFFFFFF
        body = parts[0] if len(parts) == 1 else b"".join(parts)
        flow = len(body)  # no padding: a padded DATA frame never gets here
        message = None
        if (_path_of(headers) in self.paths and len(body) >= 5 and body[0] == 0
                and flow <= conn.local_settings.initial_window_size
                and flow <= conn.inbound_flow_control_window - self._unacked
                and conn.remote_settings.initial_window_size + window <= MAX_WINDOW):
            size = int.from_bytes(body[1:5], "big")
            if size == len(body) - 5 and size <= self.max_message:
                message = body[5:]
        if message is None:  # h2's: its later frames reach h2 as the read comes to them
            items.extend(conn.receive_data(header_frames(sid, encode_block(headers), False, conn.max_inbound_frame_size)))
            return end
        conn.highest_inbound_stream_id = sid
        self._taking.add(sid)
        self._unacked += flow
        if self._unacked >= self.window_ack:
            self.drain()
            self.out += frame(WINDOW_UPDATE, 0, 0, _WORD.pack(self._unacked))
            self._unacked = 0
        items.append(UnaryRequest(sid, headers, message, window, b"".join(updates)))
        return end

    # -- outbound ------------------------------------------------------------------------------------
    def drain(self) -> None:
        """h2's queued bytes into ``out``, so that what is written here follows them."""
        data = self.h2.data_to_send()
        if data:
            self.out += data

    def take_output(self) -> bytes | bytearray:
        """Everything to write, in order (h2's last)."""
        self.drain()
        out = self.out
        if not out:
            return b""
        self.out = bytearray()
        return out

    def answer(self, request: UnaryRequest, headers: list[tuple[bytes, bytes]], data: bytes,
               trailers: list[tuple[bytes, bytes]]) -> bool:
        """A taken call's answer: response headers, one DATA frame, trailers ending the stream.
        False (nothing written) when flow control or the peer's frame size would not take
        ``data`` whole now: then the call must be adopted (``adopt``) and answered through h2."""
        conn = self.h2
        n = len(data)
        max_frame = conn.max_outbound_frame_size
        stream_id = request.stream_id
        if (n > max_frame or n > conn.outbound_flow_control_window
                or n > conn.remote_settings.initial_window_size + request.window or not self._open()):
            return False
        encode = conn.encoder.encode
        self.drain()
        self.out += header_frames(stream_id, encode(headers), False, max_frame)
        self.out += _HEAD.pack(n >> 8, n & 0xFF, DATA, 0, stream_id)
        self.out += data
        self.out += header_frames(stream_id, encode(trailers), True, max_frame)
        conn.outbound_flow_control_window -= n
        return True

    def finish(self, stream_id: int, trailers: list[tuple[bytes, bytes]]) -> None:
        """A taken call's status-only answer (one HEADERS frame ending the stream)."""
        conn = self.h2
        if not self._open():
            return
        self.drain()
        self.out += header_frames(stream_id, conn.encoder.encode(trailers), True, conn.max_outbound_frame_size)

    def adopt(self, request: UnaryRequest) -> bool:
        """Hand a taken call's stream to h2, its request already read (half-closed by the peer):
        for an answer that has to wait or does not fit now. h2 sees the request's headers again
        as literals (its dynamic table untouched) and none of its DATA (counted here already),
        then the stream's WINDOW_UPDATEs. False when h2 will not open the stream (the
        connection is closing)."""
        conn = self.h2
        if not self._open() or len(conn.streams) >= self.max_streams:
            return False
        sid = request.stream_id
        top = conn.highest_inbound_stream_id
        conn.highest_inbound_stream_id = sid - 1  # below it: h2 opens the stream as new
        try:
            conn.receive_data(header_frames(sid, encode_block(request.headers), True, conn.max_inbound_frame_size)
                              + request.updates)
        except h2.exceptions.ProtocolError:
            return False
        finally:
            conn.highest_inbound_stream_id = max(top, sid)
        return sid in conn.streams


__all__ = ["FastInbound", "UnaryRequest", "decode_block", "frame", "header_frames"]
