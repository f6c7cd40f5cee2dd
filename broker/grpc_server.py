"""The gRPC listener for RocketMQ 5.x clients: HTTP/2 through h2's state machine, driven by trio.

Why not grpcio's server: its threads and its own event loop would sit beside trio's, with
every call crossing between them; h2 is sans-IO, so the connection, its streams and the
handlers all run as trio tasks of the broker's one tree, like the Remoting server.

One task per connection reads the socket and feeds h2; each stream (one RPC) gets a task
running its handler with a `GrpcCall`: the request metadata, the deadline from
grpc-timeout, `recv()` for request messages (wire/grpc.py's MessageDecoder) and `send()`
/ `finish()` for responses and the grpc-status trailers. The hot unary methods (SendMessage)
have a second, synchronous handler: when a read brings such a request whole, the read loop
answers it itself and all of the read's answers leave in one write, the way the Remoting
server answers sends inline; a task takes over whenever the answer has to wait. TLS (ALPN h2) and plaintext h2c
share the port: the first byte tells them apart (broker/tls.py's TlsAcceptor), as Apache's
proxy does.

What a peer cannot do: make a handler's exception reach it (it gets INTERNAL and a short
text, the broker log gets the traceback), wedge a task (grpc-timeout deadlines, the idle
timeout of a connection that sends nothing, per-connection stream and buffer limits), or
take the server down (a malformed frame ends its own connection with GOAWAY).
"""

from __future__ import annotations

import collections
import functools
import logging
import ssl
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
import trio
from trio.lowlevel import wait_readable

from rmqd.broker.server import EAGER_READS, format_addr, open_tcp_endpoints, raw_socket, receive_from, receive_now
from rmqd.broker.tls import TlsAcceptor
from rmqd.wire.h2_fast import FastInbound, UnaryRequest
from rmqd.wire.h2_headers import read_request_headers, request_header_problem
from rmqd.wire.hpack import HpackDecoder, StaticHpackEncoder
from rmqd.wire.grpc import (
    DEFAULT_MAX_MESSAGE_SIZE, CallClosedError, GrpcStatus, GrpcWireError, MessageDecoder, encode_message, is_grpc_content_type,
    parse_path, parse_timeout, response_headers, status_trailers, trailers_only,
)

log = logging.getLogger("rmqd.grpc")

RECEIVE_CHUNK = 64 * 1024
#: streams a client may have open at once on one connection
MAX_CONCURRENT_STREAMS = 1000
#: the per-stream receive window we offer (grpc-java's default flow-control window is 1 MiB)
INITIAL_WINDOW_SIZE = 1024 * 1024
#: request bytes a stream may hold unread before we stop opening its window
MAX_QUEUED_BYTES_PER_STREAM = 8 * 1024 * 1024
#: a connection that sends nothing (not even a PING) this long is closed (proxy's grpcClientIdleTimeMills)
DEFAULT_IDLE_SECONDS = 120.0
#: a stopping server lets calls finish this long before it closes their connections
DEFAULT_GRACE_SECONDS = 10.0
#: a new connection must have sent the HTTP/2 preface and its first SETTINGS frame this long after
#: it was accepted (TLS included), else it is closed: grpc-java's handshake timeout
#: (ServerBuilder.handshakeTimeout, 120 s by default). Without it one byte every two minutes kept a
#: connection that never started for ever, since each byte restarts the idle time.
DEFAULT_HANDSHAKE_SECONDS = 120.0
#: the longest status text sent back
_MAX_STATUS_TEXT = 1024

Handler = Callable[["GrpcCall"], Awaitable[None]]
#: a unary method answered on the read loop: (call, request message) -> the response message, or
#: an awaitable of it (then a task finishes the call); GrpcWireError -> a status-only answer
InlineHandler = Callable[["TakenCall", bytes], "bytes | Awaitable[bytes]"]


class TakenCall:
    """A call as an inline method's handler sees it: who calls what, from where, until when, and
    the request's grpc-encoding. The read loop answers a call that wire/h2_fast.py took whole from
    one read with no more than this: no queues, events or decoder, which only a call served by a
    task needs. GrpcCall is this and those; when a taken call's answer has to wait after all, the
    read loop makes it one (`GrpcConnection._answer_taken`)."""

    __slots__ = ("conn", "stream_id", "service", "method", "metadata", "deadline", "encoding", "remote_addr",
                 "local_addr")

    def __init__(self, conn: "GrpcConnection", stream_id: int, service: str, method: str,
                 metadata: dict[str, str], deadline: float | None, encoding: str | None) -> None:
        self.conn = conn
        self.stream_id = stream_id
        self.service = service
        self.method = method
        #: request headers (lower-case names; for a repeated name the last value)
        self.metadata = metadata
        self.deadline = deadline
        self.encoding = encoding
        self.remote_addr = conn.remote_addr
        self.local_addr = conn.local_addr

    def remaining_seconds(self) -> float | None:
        """Time left before the client's deadline (None: no grpc-timeout)."""
        if self.deadline is None:
            return None
        return self.deadline - trio.current_time()


class CallCancelled(CallClosedError):
    """The peer reset the stream or the connection went away: nobody reads the answer."""


@dataclass(slots=True)
class _Inbound:
    payload: bytes
    size: int  # flow-controlled bytes it stood for (acknowledged when read)


class GrpcCall(TakenCall):
    """One RPC as its handler sees it."""

    def __init__(self, conn: "GrpcConnection", stream_id: int, service: str, method: str,
                 metadata: dict[str, str], deadline: float | None, encoding: str | None) -> None:
        TakenCall.__init__(self, conn, stream_id, service, method, metadata, deadline, encoding)
        self._decoder = MessageDecoder(conn.server.max_message_size, encoding)
        self._inbound: collections.deque[_Inbound] = collections.deque()
        self._queued = 0
        self._unacked = 0  # flow-controlled bytes held back while the queue is full
        self._input_ended = False
        self._input_error: GrpcWireError | None = None
        self._readable = trio.Event()
        self._window = trio.Event()
        self.headers_sent = False
        self.finished = False
        self.cancelled = False
        self.cancel_scope: trio.CancelScope | None = None

    # -- inbound (called by the connection's read loop) ------------------------------------------
    def _on_data(self, data: bytes, flow_size: int) -> None:
        if self._input_error is not None or self._input_ended:
            self.conn.ack(flow_size, self.stream_id)
            return
        try:
            messages = self._decoder.feed(data)
        except GrpcWireError as exc:
            self._input_error = exc.with_traceback(None)  # kept: its traceback would hold this frame, this call
            self.conn.ack(flow_size, self.stream_id)
            self._readable.set()
            return
        if not messages:  # part of a message: bounded by the decoder's maximum size
            self.conn.ack(flow_size, self.stream_id)
            return
        share = flow_size // len(messages)
        for i, payload in enumerate(messages):
            size = share if i else flow_size - share * (len(messages) - 1)
            self._inbound.append(_Inbound(payload, size))
            self._queued += len(payload)
        if self._queued <= MAX_QUEUED_BYTES_PER_STREAM:
            self.conn.ack(flow_size, self.stream_id)
            for item in self._inbound:
                item.size = 0
        self._readable.set()

    def _on_end(self) -> None:
        self._input_ended = True
        if self._input_error is None:
            try:
                self._decoder.end()
            except GrpcWireError as exc:
                self._input_error = exc.with_traceback(None)
        self._readable.set()

    def _on_reset(self) -> None:
        self.cancelled = True
        self.finished = True
        self._readable.set()
        self._window.set()
        if self.cancel_scope is not None:
            self.cancel_scope.cancel()

    def _on_window(self) -> None:
        self._window.set()

    # -- the handler's side ---------------------------------------------------------------------------
    @property
    def input_ended(self) -> bool:
        return self._input_ended and not self._inbound

    async def recv(self) -> bytes | None:
        """The next request message, or None once the client half-closed the stream.
        A framing error in the request raises GrpcWireError (its status is the answer)."""
        while True:
            if self._inbound:
                item = self._inbound.popleft()
                self._queued -= len(item.payload)
                if item.size:
                    self.conn.ack(item.size, self.stream_id)
                    await self.conn.flush()
                return item.payload
            if self._input_error is not None:
                # a copy: the one kept here never gets a traceback (call -> error -> frames -> call)
                raise GrpcWireError(self._input_error.status, str(self._input_error))
            if self.cancelled:
                raise CallCancelled()
            if self._input_ended:
                return None
            self._readable = trio.Event()
            await self._readable.wait()

    def _open_response(self) -> None:
        """Before a response message: a finished call is gone (CallCancelled); the response
        headers go first, once."""
        if self.finished:
            raise CallCancelled()
        if not self.headers_sent:
            self.headers_sent = True
            self.conn.h2_send_headers(self.stream_id, response_headers())

    async def send(self, payload: bytes, flush: bool = True) -> None:
        """One response message (the response headers go first). ``flush`` False leaves it
        queued for the next write (a later send's, or the trailers'): a stream of messages
        answered at once leaves in one write."""
        self._open_response()
        await self.conn.send_data(self, encode_message(payload), flush=flush)

    async def send_many(self, payloads: list[bytes], flush: bool = True) -> None:
        """Several response messages as one run of DATA frames (gRPC frames its messages by
        their length prefixes, not by DATA frames): a receive's batch costs h2 a frame per
        16 KiB instead of a frame per message."""
        self._open_response()
        await self.conn.send_data(self, b"".join([encode_message(p) for p in payloads]), flush=flush)

    async def send_last(self, payload: bytes) -> None:
        """One response message and the OK trailers, written together (a unary answer: one
        write to the socket instead of two)."""
        self._open_response()
        await self.conn.send_data(self, encode_message(payload), flush=False)
        self.finished = True
        self.conn.h2_send_headers(self.stream_id, status_trailers(GrpcStatus.OK), end_stream=True)
        await self.conn.flush()

    def send_last_nowait(self, payload: bytes) -> bool:
        """``send_last`` without waiting: headers, the message and the OK trailers queued in h2
        for the read loop's next write. False (nothing queued) when flow control would not take
        the whole message now."""
        data = encode_message(payload)
        conn = self.conn
        try:
            window = min(conn.h2.local_flow_control_window(self.stream_id), conn.h2.max_outbound_frame_size)
        except h2.exceptions.H2Error as exc:
            raise CallCancelled() from exc
        if len(data) > window or self.finished or self.headers_sent:
            return False
        self.headers_sent = True
        conn.h2_send_headers(self.stream_id, response_headers())
        try:
            conn.h2.send_data(self.stream_id, data)
        except h2.exceptions.H2Error as exc:
            raise CallCancelled() from exc
        self.finished = True
        conn.h2_send_headers(self.stream_id, status_trailers(GrpcStatus.OK), end_stream=True)
        return True

    def finish_nowait(self, status: GrpcStatus, message: str | None = None) -> None:
        """``finish`` with the trailers left for the read loop's next write."""
        if self.finished:
            return
        self.finished = True
        text = (message or "")[:_MAX_STATUS_TEXT] or None
        if self.headers_sent:
            self.conn.h2_send_headers(self.stream_id, status_trailers(status, text), end_stream=True)
        else:
            self.headers_sent = True
            self.conn.h2_send_headers(self.stream_id, trailers_only(status, text), end_stream=True)

    async def finish(self, status: GrpcStatus = GrpcStatus.OK, message: str | None = None) -> None:
        """The grpc-status trailers; a call with no message yet gets a trailers-only answer."""
        if self.finished:
            return
        self.finish_nowait(status, message)
        await self.conn.flush()


class GrpcConnection:
    """One HTTP/2 connection: its h2 state machine, its read loop and its calls."""

    def __init__(self, server: "GrpcServer", stream: trio.abc.Stream, remote_addr: str, local_addr: str,
                 accepted: float | None = None) -> None:
        self.server = server
        self.stream = stream
        #: the socket itself when nothing sits between it and h2 (h2c): read and written without
        #: trio's stream wrappers, as the Remoting channels are (broker/server.py)
        self._sock = raw_socket(stream)
        self.remote_addr = remote_addr
        self.local_addr = local_addr
        # our own headers are well-formed by construction: h2's checks of them cost ~0.1 ms a call;
        # received ones are checked by wire/h2_headers.py (the same rules, a fraction of the cost)
        # (no inbound normalizing either: it only joins cookie crumbs, which gRPC does not send)
        config = h2.config.H2Configuration(client_side=False, header_encoding=None, validate_inbound_headers=False,
                                           validate_outbound_headers=False, normalize_outbound_headers=False,
                                           normalize_inbound_headers=False)
        self.h2 = h2.connection.H2Connection(config=config)
        # HPACK by wire/hpack.py: the same rules at a fraction of hpack's cost per call
        decoder = HpackDecoder()
        decoder.max_header_list_size = self.h2.decoder.max_header_list_size
        decoder.max_allowed_table_size = self.h2.decoder.max_allowed_table_size
        self.h2.decoder = decoder  # type: ignore[assignment]
        self.h2.encoder = StaticHpackEncoder()  # type: ignore[assignment]
        #: the inbound bytes' first reader: whole unary calls of the inline methods and PINGs are
        #: answered past h2's per-frame work (wire/h2_fast.py), everything else goes on to h2
        self._fast = FastInbound(self.h2, server.fast_paths, server.max_message_size, MAX_CONCURRENT_STREAMS,
                                 window_ack=INITIAL_WINDOW_SIZE)
        self.calls: dict[int, GrpcCall] = {}
        #: one writer at a time (a Semaphore, not a Lock: trio's Lock checks its owner task's
        #: coroutine with inspect.getcoroutinestate, which a Cython-compiled coroutine fails)
        self._send_lock = trio.Semaphore(1)
        self.closed = False
        self.last_activity = trio.current_time()
        #: the client's preface and SETTINGS came (h2's first RemoteSettingsChanged); until then
        #: the connection lives until `handshake_deadline` at most
        self.handshaken = False
        self.handshake_deadline = (self.last_activity if accepted is None else accepted) + server.handshake_seconds
        self._conn_window = trio.Event()
        #: calls of inline methods started by this read, answered once its events are handled
        #: (with the request when wire/h2_fast.py took it whole: h2 has no stream for it)
        self._pending_inline: list[tuple[GrpcCall, Handler, InlineHandler]] = []
        #: and those wire/h2_fast.py took whole (with their requests: h2 has no stream for them)
        self._pending_taken: list[tuple[TakenCall, InlineHandler, UnaryRequest]] = []
        #: why the last read's header block was malformed (the connection ends, as h2 would end it)
        self._malformed: str | None = None

    # -- h2 calls that only queue bytes --------------------------------------------------------------
    def ack(self, size: int, stream_id: int) -> None:
        if size <= 0 or self.closed:
            return
        try:
            self.h2.acknowledge_received_data(size, stream_id)
        except (h2.exceptions.H2Error, KeyError):
            pass  # the stream is gone: nothing to open

    def h2_send_headers(self, stream_id: int, headers: list[tuple[bytes, bytes]], end_stream: bool = False) -> None:
        if self.closed:
            raise CallCancelled()
        try:
            self.h2.send_headers(stream_id, headers, end_stream=end_stream)
        except h2.exceptions.H2Error as exc:  # the peer reset the stream in the meantime
            raise CallCancelled() from exc

    async def flush(self) -> None:
        """Write whatever h2 has queued (one writer at a time, in order). With nobody writing
        and a socket that takes it all, no scheduling point: the read loop's answers go out
        in one send."""
        lock = self._send_lock
        if not lock.value:
            await lock.acquire()
        else:
            lock.acquire_nowait()
        try:
            data = self._fast.take_output()
            if not data or self.closed:
                return
            rest: bytes | bytearray | memoryview = data
            if self._sock is not None:
                try:
                    sent = self._sock.send(data)
                except BlockingIOError:
                    sent = 0
                if sent == len(data):
                    return
                rest = memoryview(data)[sent:]
            await self.stream.send_all(rest)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            self._mark_closed(f"write failed: {exc}")
        finally:
            lock.release()

    async def send_data(self, call: GrpcCall, data: bytes, flush: bool = True) -> None:
        """DATA frames as h2's flow-control windows allow, waiting for WINDOW_UPDATEs (`flush`
        False: the last frames stay queued for the caller's next flush)."""
        view = memoryview(data)
        while view:
            if call.finished or self.closed:
                raise CallCancelled()
            try:
                window = min(self.h2.local_flow_control_window(call.stream_id), self.h2.max_outbound_frame_size)
            except h2.exceptions.H2Error as exc:
                raise CallCancelled() from exc
            if window <= 0:
                call._window = trio.Event()
                self._conn_window = trio.Event()
                await self.flush()
                with trio.CancelScope() as scope:
                    async with trio.open_nursery() as waits:
                        async def on(event: trio.Event) -> None:
                            await event.wait()
                            scope.cancel()
                        waits.start_soon(on, call._window)
                        waits.start_soon(on, self._conn_window)
                continue
            chunk, view = view[:window], view[window:]
            try:
                self.h2.send_data(call.stream_id, bytes(chunk))
            except h2.exceptions.H2Error as exc:
                raise CallCancelled() from exc
        if flush:
            await self.flush()

    def _mark_closed(self, reason: str) -> None:
        if self.closed:
            return
        self.closed = True
        log.debug("grpc connection %s closed: %s", self.remote_addr, reason)
        for call in list(self.calls.values()):
            call._on_reset()
        self._conn_window.set()

    # -- the read loop --------------------------------------------------------------------------------
    async def serve(self, handlers_nursery: trio.Nursery) -> None:
        settings = {
            h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: MAX_CONCURRENT_STREAMS,
            h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: INITIAL_WINDOW_SIZE,
            h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: 64 * 1024,
        }
        self.h2.local_settings = h2.settings.Settings(client=False, initial_values=settings)
        self.h2.initiate_connection()
        self.h2.increment_flow_control_window(16 * INITIAL_WINDOW_SIZE)
        await self.flush()
        idle, watch = trio.CancelScope(), trio.CancelScope()
        handlers_nursery.start_soon(self._watch_idle, idle, watch)
        try:
            with idle:
                await self._read_loop(handlers_nursery)
            if idle.cancelled_caught and not self.closed:
                if self.handshaken:
                    log.info("grpc: closing idle connection %s", self.remote_addr)
                else:
                    log.info("grpc: closing connection %s: no HTTP/2 preface and SETTINGS within %.0f s of accepting it",
                             self.remote_addr, self.server.handshake_seconds)
                self._goaway(h2.errors.ErrorCodes.NO_ERROR)
                await self.flush()
                self._mark_closed("idle" if self.handshaken else "handshake timeout")
        finally:
            watch.cancel()
            self._mark_closed("connection finished")

    async def _read_loop(self, handlers_nursery: trio.Nursery) -> None:
        sock = self._sock
        data: bytes | bytearray | None
        eager = 0  # reads left before the next scheduling point (server.EAGER_READS)
        while not self.closed:
            try:
                data = None
                if eager and sock is not None:
                    eager -= 1
                    data = receive_now(sock, RECEIVE_CHUNK)
                if data is None:
                    if sock is not None:  # receive_from's raw-socket read, one coroutine call less
                        await wait_readable(sock)
                        data = receive_now(sock, RECEIVE_CHUNK)
                    else:
                        data = await receive_from(sock, self.stream, RECEIVE_CHUNK)
                    if data is None:
                        continue
                    eager = EAGER_READS
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError, ssl.SSLError) as exc:
                self._mark_closed(f"read failed: {exc}")
                return
            if not data:
                self._mark_closed("peer closed the connection")
                return
            self.last_activity = trio.current_time()
            try:
                events = self._fast.receive(data)
            except h2.exceptions.ProtocolError as exc:
                await self._protocol_error(str(exc), getattr(exc, "error_code", None))
                return
            except Exception as exc:  # noqa: BLE001 - bytes h2 itself cannot digest end this connection only
                log.warning("grpc: undecodable HTTP/2 input from %s, closing the connection: %s: %s",
                            self.remote_addr, type(exc).__name__, exc)
                self._goaway(h2.errors.ErrorCodes.PROTOCOL_ERROR)
                await self.flush()
                self._mark_closed(f"undecodable input: {exc}")
                return
            for event in events:
                if type(event) is UnaryRequest:
                    self._start_call(event.stream_id, event.headers, True, handlers_nursery, event)
                else:
                    self._handle(event, handlers_nursery)
                if self._malformed is not None:
                    await self._protocol_error(self._malformed, None)
                    return
            if self.closed:
                return
            if self._pending_taken or self._pending_inline:
                self._answer_inline(handlers_nursery)
            await self.flush()

    async def _protocol_error(self, text: str, code: int | None) -> None:
        log.warning("grpc: HTTP/2 protocol error from %s, closing the connection: %s", self.remote_addr, text)
        self._goaway(code or h2.errors.ErrorCodes.PROTOCOL_ERROR)
        await self.flush()
        self._mark_closed(f"protocol error: {text}")

    async def _watch_idle(self, reader: trio.CancelScope, watch: trio.CancelScope) -> None:
        """A connection that sends nothing (not even a PING) for idle_seconds is closed, and so
        is one that has not sent its preface and SETTINGS by its handshake deadline: one
        sleeping task instead of a deadline set again on every read."""
        idle_seconds = self.server.idle_seconds
        with watch:
            while not self.closed:
                deadline = self.last_activity + idle_seconds
                if not self.handshaken and self.handshake_deadline < deadline:
                    deadline = self.handshake_deadline
                if trio.current_time() >= deadline:
                    reader.cancel()
                    return
                await trio.sleep_until(deadline)

    def _goaway(self, code: int) -> None:
        try:
            self.h2.close_connection(error_code=code)
        except Exception:  # noqa: BLE001 - the state machine may already be closed
            pass

    def _handle(self, event: h2.events.Event, nursery: trio.Nursery) -> None:
        if isinstance(event, h2.events.RequestReceived):
            self._start_call(event.stream_id, event.headers, event.stream_ended is not None, nursery)
        elif isinstance(event, h2.events.DataReceived):
            call = self.calls.get(event.stream_id)
            if call is None:
                self.ack(event.flow_controlled_length, event.stream_id)
            else:
                call._on_data(event.data, event.flow_controlled_length)
        elif isinstance(event, (h2.events.StreamEnded, h2.events.TrailersReceived)):
            if isinstance(event, h2.events.TrailersReceived):
                self._malformed = request_header_problem(event.headers, trailer=True)
                if self._malformed is not None:
                    return
            call = self.calls.get(event.stream_id)
            if call is not None:
                call._on_end()
        elif isinstance(event, h2.events.StreamReset):
            call = self.calls.pop(event.stream_id, None)
            if call is not None:
                call._on_reset()
        elif isinstance(event, h2.events.WindowUpdated):
            if event.stream_id == 0:
                self._conn_window.set()
                for call in self.calls.values():
                    call._on_window()
            else:
                call = self.calls.get(event.stream_id)
                if call is not None:
                    call._on_window()
        elif isinstance(event, h2.events.RemoteSettingsChanged):
            self.handshaken = True
            self._conn_window.set()
            for call in self.calls.values():
                call._on_window()
        elif isinstance(event, h2.events.ConnectionTerminated):
            self._mark_closed(f"GOAWAY from the peer (error code {event.error_code})")

    def _refuse(self, stream_id: int, headers: list[tuple[bytes, bytes]], taken: bool) -> None:
        """A status-only answer ending the stream (through h2 unless wire/h2_fast.py took the call)."""
        if taken:
            self._fast.finish(stream_id, headers)
            return
        try:
            self.h2.send_headers(stream_id, headers, end_stream=True)
        except h2.exceptions.H2Error:
            pass

    def _start_call(self, sid: int, raw_headers: list[tuple[bytes, bytes]], stream_ended: bool, nursery: trio.Nursery,
                    taken: UnaryRequest | None = None) -> None:
        """A new stream's call: refused, or queued for the read loop's answers (an inline method),
        or started as a task. ``taken``: the whole request as wire/h2_fast.py took it past h2."""
        # names are lower case here (a block with any other is malformed)
        headers, self._malformed = read_request_headers(raw_headers)
        if self._malformed is not None:
            return
        fast = taken is not None
        if headers.get(":method") != "POST":
            self._refuse(sid, [(b":status", b"405")], fast)
            return
        if not is_grpc_content_type(headers.get("content-type")):
            self._refuse(sid, [(b":status", b"415"), (b"content-type", b"text/plain")], fast)
            return
        try:
            service, method = parse_path(headers.get(":path", ""))
            deadline = None
            if "grpc-timeout" in headers:
                deadline = trio.current_time() + parse_timeout(headers["grpc-timeout"])
        except GrpcWireError as exc:
            self._refuse(sid, trailers_only(exc.status, str(exc)[:_MAX_STATUS_TEXT]), fast)
            return
        handler = self.server.handlers.get((service, method))
        if handler is None:
            text = f"Method not found: {service}/{method}"[:_MAX_STATUS_TEXT]
            self._refuse(sid, trailers_only(GrpcStatus.UNIMPLEMENTED, text), fast)
            return
        encoding = headers.get("grpc-encoding")
        if encoding and encoding.strip().lower() not in ("identity", "gzip", "deflate"):
            self._refuse(sid, trailers_only(GrpcStatus.UNIMPLEMENTED, f"Unsupported grpc-encoding {encoding[:40]}"), fast)
            return
        inline = self.server.inline_handlers.get((service, method))
        if taken is not None and inline is not None:
            self._pending_taken.append((TakenCall(self, sid, service, method, headers, deadline, encoding), inline, taken))
            return
        call = GrpcCall(self, sid, service, method, headers, deadline, encoding)
        if taken is not None:
            # taken for a path that names no inline method (fast_paths is built from them): h2
            # opens the stream, the call gets its request as a task's call does
            if not self._fast.adopt(taken):
                return
            call._inbound.append(_Inbound(taken.message, 0))
            call._queued = len(taken.message)
        self.calls[sid] = call
        if stream_ended:
            call._on_end()
        if inline is not None:
            self._pending_inline.append((call, handler, inline))
            return
        nursery.start_soon(self._run_call, call, handler)

    def _answer_inline(self, nursery: trio.Nursery) -> None:
        """Answer the inline calls whose whole request came with this read, on the read loop:
        no task, no lock, and all their answers leave in the one write after it. Any other
        (a request still arriving, a reset, a bad frame) and any answer that has to wait runs
        as a task, as every other call does."""
        taken, self._pending_taken = self._pending_taken, []
        for light, inline, request in taken:
            self._answer_taken(light, inline, request, nursery)
        pending, self._pending_inline = self._pending_inline, []
        for call, handler, inline in pending:
            if (call.cancelled or call.finished or call._input_error is not None
                    or not call._input_ended or len(call._inbound) != 1):
                nursery.start_soon(self._run_call, call, handler)
                continue
            item = call._inbound.popleft()
            call._queued -= len(item.payload)
            self.ack(item.size, call.stream_id)
            try:
                answer = inline(call, item.payload)
                if not isinstance(answer, bytes) or not call.send_last_nowait(answer):
                    nursery.start_soon(self._run_call, call, functools.partial(_send_later, answer))
                    continue
            except CallCancelled:
                pass
            except GrpcWireError as exc:
                self._finish_inline(call, exc.status, str(exc))
            except Exception as exc:  # noqa: BLE001 - the handler's bug is ours: log it, answer INTERNAL
                log.error("grpc %s/%s from %s failed", call.service, call.method, call.remote_addr, exc_info=exc)
                self._finish_inline(call, GrpcStatus.INTERNAL, f"internal error: {type(exc).__name__}")
            if self.calls.get(call.stream_id) is call:
                del self.calls[call.stream_id]
            call.finished = True

    def _answer_taken(self, call: TakenCall, inline: InlineHandler, taken: UnaryRequest, nursery: trio.Nursery) -> None:
        """An inline call wire/h2_fast.py took whole: answered straight into the write after this
        read; an answer that has to wait or does not fit the windows now makes h2 adopt the
        stream, and a task sends it as any other call's."""
        if self.closed:
            return
        sid = call.stream_id
        try:
            answer = inline(call, taken.message)
            if isinstance(answer, bytes) and self._fast.answer(taken, _OK_HEADERS, encode_message(answer), _OK_TRAILERS):
                return
        except CallCancelled:
            return
        except GrpcWireError as exc:
            self._fast.finish(sid, trailers_only(exc.status, str(exc)[:_MAX_STATUS_TEXT] or None))
            return
        except Exception as exc:  # noqa: BLE001 - the handler's bug is ours: log it, answer INTERNAL
            log.error("grpc %s/%s from %s failed", call.service, call.method, call.remote_addr, exc_info=exc)
            self._fast.finish(sid, trailers_only(GrpcStatus.INTERNAL, f"internal error: {type(exc).__name__}"))
            return
        if not self._fast.adopt(taken):
            return  # the connection is closing: nobody reads the answer
        full = GrpcCall(self, sid, call.service, call.method, call.metadata, call.deadline, call.encoding)
        full._input_ended = True
        self.calls[sid] = full
        nursery.start_soon(self._run_call, full, functools.partial(_send_later, answer))

    def _finish_inline(self, call: GrpcCall, status: GrpcStatus, text: str) -> None:
        if self.closed:
            return
        try:
            call.finish_nowait(status, text)
        except CallCancelled:
            pass

    async def _run_call(self, call: GrpcCall, handler: Handler) -> None:
        status, text = GrpcStatus.OK, None
        try:
            with trio.CancelScope() as scope:
                call.cancel_scope = scope
                if call.deadline is not None:
                    scope.deadline = call.deadline
                try:
                    await handler(call)
                except Exception as raised:  # noqa: BLE001 - the handler's bug is ours: log it, answer INTERNAL
                    # judged in a function of its own: no name here but `raised` (which Python
                    # unbinds after the clause) may hold the exception, else this frame holds
                    # it, its traceback holds this frame and the handler's, and with them the
                    # call and its buffers, until a full GC pass (issue 46: a reset call's 100
                    # MiB partial message held for minutes)
                    answer = _failure_answer(call, raised)
                    if answer is None:
                        return
                    status, text = answer
            if scope.cancelled_caught and not call.cancelled:
                status, text = GrpcStatus.DEADLINE_EXCEEDED, "deadline exceeded"
            if not call.finished and not self.closed:
                try:
                    await call.finish(status, text)
                except CallCancelled:
                    pass
        finally:
            if self.calls.get(call.stream_id) is call:
                del self.calls[call.stream_id]
            call.finished = True

    def goaway_soon(self) -> None:
        """Graceful stop: no new streams (GOAWAY), the open ones go on."""
        self._goaway(h2.errors.ErrorCodes.NO_ERROR)


_OK_HEADERS = response_headers()
_OK_TRAILERS = status_trailers(GrpcStatus.OK)


async def _send_later(answer: bytes | Awaitable[bytes], call: GrpcCall) -> None:
    """An inline call finished by its own task: its answer has to wait, or did not fit the
    flow-control window."""
    await call.send_last(answer if isinstance(answer, bytes) else await answer)


def _failure_answer(call: GrpcCall, raised: Exception) -> tuple[GrpcStatus, str] | None:
    """The status a handler's exception answers its call with (None: the call was cancelled,
    nobody reads an answer); a bug (anything but GrpcWireError) is logged."""
    exc = _leaf(raised)
    if isinstance(exc, CallCancelled):
        return None
    if isinstance(exc, GrpcWireError):
        return exc.status, str(exc)
    log.error("grpc %s/%s from %s failed", call.service, call.method, call.remote_addr, exc_info=raised)
    return GrpcStatus.INTERNAL, f"internal error: {type(exc).__name__}"


def _leaf(exc: BaseException) -> BaseException:
    """What a handler's exception group stands for: its first leaf that is not CallCancelled
    (a nursery inside a handler wraps whatever its tasks raised), else CallCancelled."""
    if not isinstance(exc, BaseExceptionGroup):
        return exc
    leaves: list[BaseException] = []

    def walk(e: BaseException) -> None:
        if isinstance(e, BaseExceptionGroup):
            for inner in e.exceptions:
                walk(inner)
        else:
            leaves.append(e)
    walk(exc)
    return next((e for e in leaves if not isinstance(e, CallCancelled)), leaves[0] if leaves else exc)


class GrpcServer:
    """Listens on one port for TLS and h2c alike; `handlers` maps (service, method) to a handler."""

    def __init__(self, handlers: Mapping[tuple[str, str], Handler], *,
                 inline_handlers: Mapping[tuple[str, str], InlineHandler] | None = None, tls: TlsAcceptor | None = None,
                 idle_seconds: float = DEFAULT_IDLE_SECONDS, grace_seconds: float = DEFAULT_GRACE_SECONDS,
                 max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
                 handshake_seconds: float = DEFAULT_HANDSHAKE_SECONDS) -> None:
        self.handlers = dict(handlers)
        #: unary methods answered on the read loop when their request is whole (the hot ones);
        #: each also has its task handler in `handlers`, used whenever the read loop cannot answer
        self.inline_handlers = dict(inline_handlers or {})
        #: their :path values: the calls wire/h2_fast.py may take past h2 when they arrive whole
        self.fast_paths = frozenset(f"/{service}/{method}".encode() for service, method in self.inline_handlers)
        self.tls = tls
        if tls is not None and tls.cfg.mode.value != "disabled":
            tls.context.set_alpn_protocols(["h2"])
        self.idle_seconds = idle_seconds
        self.handshake_seconds = handshake_seconds
        self.grace_seconds = grace_seconds
        self.max_message_size = max_message_size
        self.connections: set[GrpcConnection] = set()
        self.listen_addrs: list[tuple[str, int]] = []
        self._listeners: list[trio.SocketListener] = []
        self.stopping = trio.Event()
        self._stopped = trio.Event()

    async def open_listeners(self, endpoints: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
        self.listen_addrs = await open_tcp_endpoints(endpoints, self._listeners)
        return self.listen_addrs

    async def serve(self, *, task_status: trio.TaskStatus[list[tuple[str, int]]] = trio.TASK_STATUS_IGNORED) -> None:
        if not self._listeners:
            raise ValueError("GrpcServer.serve needs open_listeners first")
        try:
            async with trio.open_nursery() as connections:
                async with trio.open_nursery() as acceptors:
                    for listener in self._listeners:
                        acceptors.start_soon(self._accept_loop, listener, connections)
                    task_status.started(self.listen_addrs)
                    await self.stopping.wait()
                    acceptors.cancel_scope.cancel()
                for listener in self._listeners:
                    await listener.aclose()
                for conn in list(self.connections):
                    conn.goaway_soon()
                    await conn.flush()
                connections.cancel_scope.deadline = trio.current_time() + self.grace_seconds
                with trio.move_on_after(self.grace_seconds):
                    while any(c.calls for c in self.connections):
                        await trio.sleep(0.05)
                connections.cancel_scope.cancel()
        finally:
            self._stopped.set()

    async def _accept_loop(self, listener: trio.SocketListener, connections: trio.Nursery) -> None:
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:
                log.warning("grpc accept failed: %s", exc)
                await trio.sleep(0.1)
                continue
            connections.start_soon(self._serve_connection, stream)

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        accepted = trio.current_time()
        try:
            remote = format_addr(stream.socket.getpeername())
            local = format_addr(stream.socket.getsockname())
        except OSError:
            remote = local = ""
        served: trio.abc.Stream | None = stream
        try:
            if self.tls is not None:
                served = await self.tls.wrap(stream)
            if served is None:
                await trio.aclose_forcefully(stream)
                return
            conn = GrpcConnection(self, served, remote, local, accepted)
            self.connections.add(conn)
            try:
                async with trio.open_nursery() as handlers:
                    await conn.serve(handlers)
                    handlers.cancel_scope.cancel()
            finally:
                self.connections.discard(conn)
        except Exception:  # noqa: BLE001 - one broken connection never stops the server
            log.exception("grpc connection %s failed", remote)
        finally:
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(served if served is not None else stream)

    async def stop(self) -> None:
        self.stopping.set()
        await self._stopped.wait()


__all__ = ["CallCancelled", "GrpcCall", "GrpcConnection", "GrpcServer", "Handler", "InlineHandler", "TakenCall"]
