"""trio Remoting server: the socket side of the name server and the broker.

One task per connection reads frames through wire/'s FrameDecoder; every request runs in
its own task so a long-polling pull never holds up a send on the same connection (RocketMQ
gets the same effect from its executor pools). Responses get the request's opaque and
serialize type; oneway requests (flag bit 1) get none. Clients that never set the oneway
flag (C++, Go, ali-ons) get a response they ignore — exactly what a Java broker does.

The same `Channel` class carries outgoing connections (broker/remoting_client.py), so a
connection is symmetric: either side may send requests and receive responses on it. That
is how the broker calls clients (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE)
over the connection the client opened.
"""

from __future__ import annotations

import collections
import inspect
import itertools
import logging
import socket
import traceback
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable, Mapping, Sequence

import trio

from rmqd.broker.listen import bind_tcp
from rmqd.wire.codes import ResponseCode
from rmqd.wire.errors import WireError
from rmqd.wire.frame import (RPC_ONEWAY, RPC_TYPE_RESPONSE, FrameDecoder, RemotingCommand, encode_frame,
                        encode_frame_parts, make_response)

log = logging.getLogger("rmqd.server")

Handler = Callable[["RequestContext", RemotingCommand], Awaitable[RemotingCommand | None]]
#: A handler run synchronously on the connection's read loop (no task per request). It answers
#: at once (a command, or None for no answer) or hands back an awaitable when it must wait
#: (a long-polling pull, a SYNC_FLUSH send): that part then runs in a task of its own, so
#: slow requests still never hold up the connection.
InlineHandler = Callable[["RequestContext", RemotingCommand],
                         "RemotingCommand | None | Awaitable[RemotingCommand | None]"]
CloseListener = Callable[["Channel"], Any]
#: Runs before every request's handler (RocketMQ's server RPCHook.doBeforeRequest, e.g. the ACL
#: check): None lets the request through, a command is the refusal answered instead.
RequestHook = Callable[["RequestContext", RemotingCommand], "RemotingCommand | None"]

# Above 128 KiB every recv() buffer is an mmap/munmap pair in glibc (~12 us a call).
RECEIVE_CHUNK = 64 * 1024
#: Reads a connection takes straight after answering a chunk (``receive_now``: no wait for
#: readiness through trio's run loop) before it passes a scheduling point again. While a client
#: keeps requests in flight the next ones are usually buffered already, and the wait costs as
#: much as a send's own work (~100k instructions: epoll_ctl, epoll_wait, the run loop's round);
#: the bound keeps every other task's turn at most this many chunks away.
EAGER_READS = 8
# RocketMQ NettyServerConfig.serverChannelMaxIdleTimeSeconds: idle connections are closed.
DEFAULT_IDLE_SECONDS = 120.0
# Bounded per-connection concurrency: beyond this many in-flight requests we stop reading
# (TCP back-pressure) instead of queueing without limit.
MAX_IN_FLIGHT_PER_CONNECTION = 1024
# Answers the peer does not read yet are queued up to this many bytes before the connection
# stops reading requests (TCP back-pressure again, instead of buffering without limit).
MAX_QUEUED_RESPONSE_BYTES = 4 * 1024 * 1024
# A bad request's remark (and its log line) quotes at most this much of the decoder's message.
_MAX_REMARK = 1024
# sendmsg() takes at most IOV_MAX (1024 on Linux) buffers per call.
_MAX_IOV = 512


class RemotingError(Exception):
    """Base of errors raised by broker->peer calls (invoke / oneway)."""


class RemotingTimeoutError(RemotingError):
    """No response arrived within the timeout (RocketMQ RemotingTimeoutException)."""


class RemotingConnectError(RemotingError):
    """The peer could not be reached (RocketMQ RemotingConnectException)."""


class RemotingSendRequestError(RemotingError):
    """The connection failed or closed before the response (RemotingSendRequestException).

    ``peer_gone``: the connection was closed (by the peer, or already marked closed) rather than
    failing otherwise: a client that shuts down with a response in flight (a pull, a
    heartbeat's answer) is normal and worth a debug line only."""

    def __init__(self, message: str, *, peer_gone: bool = False) -> None:
        super().__init__(message)
        self.peer_gone = peer_gone


#: what a write to a connection the peer closed raises (EPIPE, ECONNRESET, trio's wrappers)
_PEER_GONE = (BrokenPipeError, ConnectionResetError, trio.BrokenResourceError, trio.ClosedResourceError)


def _log_response_failed(exc: RemotingSendRequestError) -> None:
    if exc.peer_gone:
        log.debug("response not sent, the peer has closed the connection: %s", exc)
    else:
        log.warning("process request over, but response failed: %s", exc)


def exception_simple_desc(exc: BaseException) -> str:
    """Remark for SYSTEM_ERROR, shaped like RocketMQ's RemotingHelper.exceptionSimpleDesc:
    the exception text, then where it was raised."""
    text = f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}"
    tb = traceback.extract_tb(exc.__traceback__)
    if tb:
        frame = tb[-1]
        text += f", {frame.name}({frame.filename.rsplit('/', 1)[-1]}:{frame.lineno})"
    return text


def format_addr(sockaddr: Any) -> str:
    if isinstance(sockaddr, tuple) and len(sockaddr) >= 2:
        host = sockaddr[0]
        return f"[{host}]:{sockaddr[1]}" if ":" in host else f"{host}:{sockaddr[1]}"
    return str(sockaddr)


async def open_tcp_endpoints(endpoints: Iterable[tuple[str, int]],
                             listeners: list[trio.SocketListener]) -> list[tuple[str, int]]:
    """Bind every endpoint, appending to `listeners`; the bound (host, port) of each. All or
    nothing: when one cannot be bound, those bound so far are closed again."""
    bound: list[tuple[str, int]] = []
    try:
        for host, port in endpoints:
            opened = await bind_tcp(host, port)  # (a failure names the address: ListenError)
            listeners.extend(opened)
            sockname = opened[0].socket.getsockname()
            bound.append((host or sockname[0], sockname[1]))
    except BaseException:
        for listener in listeners:
            await listener.aclose()
        listeners.clear()
        raise
    return bound


@dataclass(slots=True)
class _Pending:
    event: trio.Event = field(default_factory=trio.Event)
    response: RemotingCommand | None = None


def raw_socket(stream: Any) -> socket.socket | None:
    """The connected stdlib socket under a trio SocketStream, for the non-blocking fast path
    (read when epoll says readable, write straight away; no scheduler round trip per call).
    None for any other stream: those go through the portable trio Stream calls."""
    if isinstance(stream, trio.SocketStream):
        sock = getattr(stream.socket, "_sock", None)
        if isinstance(sock, socket.socket):
            return sock
    return None


async def receive_from(sock: socket.socket | None, stream: Any, size: int) -> bytes | bytearray | None:
    """One read: from the raw socket (``raw_socket``) readable first, a scheduling point, then
    one recv that gets the data (None when the wake-up found nothing to read); from any other
    stream its receive_some."""
    if sock is None:
        return await stream.receive_some(size)
    await trio.lowlevel.wait_readable(sock)
    try:
        return sock.recv(size)
    except (BlockingIOError, InterruptedError):
        return None


def receive_now(sock: socket.socket, size: int) -> bytes | None:
    """One read without waiting and without a scheduling point: what the socket holds already
    (b"" at EOF), None when it holds nothing. The caller passes a scheduling point often
    enough (EAGER_READS)."""
    try:
        return sock.recv(size)
    except (BlockingIOError, InterruptedError):
        return None


def _frame_parts(cmd: RemotingCommand) -> list[bytes | bytearray | memoryview]:
    """The frame's buffers. A body given as a list/tuple of buffers is not joined (pull
    responses hand over memoryviews of the commit log)."""
    body = cmd.body
    if isinstance(body, (list, tuple)):
        cmd.body = None
        try:
            return encode_frame_parts(cmd, body)
        finally:
            cmd.body = body
    return [encode_frame(cmd)]


class Channel:
    """One TCP connection. Processors keep it (e.g. in a client table) to call the peer later.

    `remote_addr` is "ip:port" as RocketMQ's RemotingHelper.parseChannelRemoteAddr gives it.
    `attrs` is free for processors (client id, language, version, ...).

    Writes never interleave frames: every frame goes into one ordered queue of buffers that
    is written as far as the socket takes it at once; what is left is written by one flusher
    (the writer that waits, or a background task for the read loop).
    """

    _ids = itertools.count(1)

    def __init__(self, stream: trio.abc.Stream, *, local_addr: str = "", remote_addr: str = "") -> None:
        self.id = next(Channel._ids)
        self.stream = stream
        self.local_addr = local_addr
        self.remote_addr = remote_addr
        self.attrs: dict[str, Any] = {}
        self.closed = False
        self.close_reason: str | None = None
        #: the run's clock, read straight on every read and write (trio.current_time() is three
        #: interpreted calls deep); last_activity stays in trio's time, whatever the clock
        self._clock = trio.lowlevel.current_clock()
        self.last_activity = self._clock.current_time()
        self._sock = raw_socket(stream)
        self._out: collections.deque[bytes | bytearray | memoryview] = collections.deque()
        self._out_bytes = 0
        self._flushing = False
        self._drained: trio.Event | None = None
        self._nursery: trio.Nursery | None = None
        self._opaque = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._closed_event = trio.Event()
        self._cancel_connection: Callable[[], None] | None = None

    @classmethod
    def from_socket_stream(cls, stream: trio.SocketStream) -> "Channel":
        try:
            local = format_addr(stream.socket.getsockname())
            remote = format_addr(stream.socket.getpeername())
        except OSError:
            local = remote = ""
        return cls(stream, local_addr=local, remote_addr=remote)

    def __repr__(self) -> str:
        return f"<Channel #{self.id} {self.remote_addr}{' closed' if self.closed else ''}>"

    # -- writing ---------------------------------------------------------------------------
    async def send(self, cmd: RemotingCommand) -> None:
        """Write one frame (waits while earlier output is still queued: back-pressure)."""
        if self.closed:
            raise RemotingSendRequestError(f"channel to {self.remote_addr} is closed", peer_gone=True)
        self.write_nowait(_frame_parts(cmd))
        if self._out:
            await self.drain()

    def write_nowait(self, parts: Sequence[bytes | bytearray | memoryview]) -> None:
        """Queue frame buffers and write as much as the socket takes now (no waiting)."""
        if self.closed:
            raise RemotingSendRequestError(f"channel to {self.remote_addr} is closed", peer_gone=True)
        out = self._out
        for part in parts:
            n = len(part)
            if n:
                out.append(part)
                self._out_bytes += n
        if self._sock is not None and out:
            self._send_some()

    @property
    def queued_bytes(self) -> int:
        """Bytes accepted for writing that the socket has not taken yet."""
        return self._out_bytes

    def _send_some(self) -> None:
        """One non-blocking write of the queue's head buffers (the socket path only)."""
        out = self._out
        sock = self._sock
        assert sock is not None
        try:
            while out:
                if len(out) == 1:
                    n = sock.send(out[0])
                else:
                    n = sock.sendmsg(list(itertools.islice(out, 0, _MAX_IOV)))
                self._out_bytes -= n
                while n:
                    head = out[0]
                    size = len(head)
                    if n >= size:
                        out.popleft()
                        n -= size
                    else:
                        out[0] = memoryview(head)[n:]
                        n = 0
                if out:  # a short write: the socket buffer is full
                    break
        except BlockingIOError:
            pass
        except OSError as exc:
            self._write_failed(exc)
        self.last_activity = self._clock.current_time()

    def _write_failed(self, exc: BaseException) -> None:
        self._out.clear()
        self._out_bytes = 0
        self._mark_closed(f"write failed: {exc}")
        raise RemotingSendRequestError(f"send to {self.remote_addr} failed: {exc}",
                                       peer_gone=isinstance(exc, _PEER_GONE)) from exc

    async def drain(self) -> None:
        """Wait until everything queued is written (one task writes, the others wait)."""
        while self._out:
            if self.closed:
                raise RemotingSendRequestError(f"channel to {self.remote_addr} is closed", peer_gone=True)
            if self._flushing:
                if self._drained is None:
                    self._drained = trio.Event()
                await self._drained.wait()
                continue
            self._flushing = True
            try:
                await self._flush()
            finally:
                self._flushing = False
                drained, self._drained = self._drained, None
                if drained is not None:
                    drained.set()

    async def _flush(self) -> None:
        out = self._out
        sock = self._sock
        try:
            while out:
                if sock is None:
                    part = out[0]
                    await self.stream.send_all(part)
                    out.popleft()
                    self._out_bytes -= len(part)
                    self.last_activity = trio.current_time()
                else:
                    await trio.lowlevel.wait_writable(sock)
                    self._send_some()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            self._write_failed(exc)

    async def _background_drain(self) -> None:
        try:
            await self.drain()
        except RemotingSendRequestError as exc:
            _log_response_failed(exc)

    def _drain_soon(self) -> None:
        """Have the queued output written by a background task (the read loop goes on)."""
        if not self._flushing and self._nursery is not None:
            self._flushing = True  # reserved for the task: nobody else starts flushing

            async def run() -> None:
                self._flushing = False
                await self._background_drain()

            self._nursery.start_soon(run)

    async def send_request_oneway(self, cmd: RemotingCommand) -> None:
        """Send a request that expects no answer (sets the oneway flag, like Java's invokeOneway)."""
        cmd.flag = (cmd.flag | RPC_ONEWAY) & ~RPC_TYPE_RESPONSE
        cmd.opaque = next(self._opaque)
        await self.send(cmd)

    async def invoke(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send a request and wait for the response with the same opaque (timeout in seconds)."""
        cmd.flag &= ~(RPC_TYPE_RESPONSE | RPC_ONEWAY)
        cmd.opaque = next(self._opaque)
        pending = _Pending()
        self._pending[cmd.opaque] = pending
        try:
            await self.send(cmd)
            with trio.move_on_after(timeout):
                await pending.event.wait()
        finally:
            self._pending.pop(cmd.opaque, None)
        if pending.response is None:
            if self.closed:
                raise RemotingSendRequestError(
                    f"connection to {self.remote_addr} closed before the response ({self.close_reason})")
            raise RemotingTimeoutError(f"wait response on {self.remote_addr} timeout {int(timeout * 1000)}ms")
        return pending.response

    def _complete(self, response: RemotingCommand) -> None:
        pending = self._pending.get(response.opaque)
        if pending is None:
            log.debug("response for unknown opaque %s from %s", response.opaque, self.remote_addr)
            return
        pending.response = response
        pending.event.set()

    # -- closing ---------------------------------------------------------------------------
    def _mark_closed(self, reason: str) -> None:
        if self.closed:
            return
        self.closed = True
        self.close_reason = reason
        for pending in self._pending.values():
            pending.event.set()
        self._closed_event.set()
        drained, self._drained = self._drained, None
        if drained is not None:
            drained.set()

    async def wait_closed(self) -> None:
        await self._closed_event.wait()

    def close(self, reason: str = "closed locally") -> None:
        """Close from anywhere (e.g. expiry of an idle client): stops the connection's tasks."""
        self._mark_closed(reason)
        if self._cancel_connection is not None:
            self._cancel_connection()


@dataclass(slots=True)
class RequestContext:
    """What a handler gets besides the request: the connection it came on and the server."""

    channel: Channel
    dispatcher: "Dispatcher"

    @property
    def remote_addr(self) -> str:
        return self.channel.remote_addr


class Dispatcher:
    """Handler table by request code, plus the connection loop shared by server and client."""

    def __init__(self, name: str = "remoting", *, idle_seconds: float | None = DEFAULT_IDLE_SECONDS) -> None:
        self.name = name
        self.idle_seconds = idle_seconds
        self._handlers: dict[int, Handler] = {}
        self._inline: dict[int, InlineHandler] = {}
        self._default: Handler | None = None
        self._close_listeners: list[CloseListener] = []
        self._request_hooks: list[RequestHook] = []
        self._after_requests: list[Callable[[], Any]] = []
        #: True while an inline handler runs: whatever it sets going is followed by the
        #: after-requests hooks (LoopDispatch leaves an append's dispatch to them)
        self.in_inline_call = False
        self.channels: set[Channel] = set()
        self._in_flight = 0
        self._idle_event = trio.Event()
        self._idle_event.set()

    # -- registration ----------------------------------------------------------------------
    def register(self, code: int, handler: Handler) -> None:
        self._handlers[int(code)] = handler
        self._inline.pop(int(code), None)

    def register_many(self, table: Mapping[int, Handler]) -> None:
        for code, handler in table.items():
            self.register(code, handler)

    def register_inline(self, code: int, handler: InlineHandler) -> None:
        """A handler called on the read loop itself (see InlineHandler); replaces `register`'s."""
        self._inline[int(code)] = handler
        self._handlers.pop(int(code), None)

    def register_inline_many(self, table: dict[int, InlineHandler]) -> None:
        for code, handler in table.items():
            self.register_inline(code, handler)

    def register_default(self, handler: Handler) -> None:
        """Handler for codes without their own (RocketMQ's defaultRequestProcessor)."""
        self._default = handler

    def wrap_handlers(self, wrap: Callable[[int, Handler], Handler],
                      wrap_inline: Callable[[int, InlineHandler], InlineHandler]) -> None:
        """Put a layer around every registered handler, inline ones too (the metrics exporter
        times each request this way, so a broker without it pays nothing per request)."""
        self._handlers = {code: wrap(code, h) for code, h in self._handlers.items()}
        self._inline = {code: wrap_inline(code, h) for code, h in self._inline.items()}

    def handler_for(self, code: int) -> Handler | InlineHandler | None:
        return self._inline.get(code) or self._handlers.get(code, self._default)

    def add_request_hook(self, hook: RequestHook) -> None:
        """hook(ctx, request) runs before the handler of every request (inline ones too)."""
        self._request_hooks.append(hook)

    def _refused(self, ctx: "RequestContext", request: RemotingCommand) -> RemotingCommand | None:
        for hook in self._request_hooks:
            try:
                refusal = hook(ctx, request)
            except Exception as exc:  # noqa: BLE001 - a failing hook refuses, never passes the request
                log.error("request hook failed (code %s from %s)", request.code, ctx.remote_addr, exc_info=exc)
                return make_response(request, ResponseCode.SYSTEM_ERROR, exception_simple_desc(exc))
            if refusal is not None:
                return refusal
        return None

    def add_after_requests_hook(self, hook: Callable[[], Any]) -> None:
        """hook() runs on the loop once the answers to a read's inline requests are written,
        and after each request task's answer: work that must be done before the next request
        is read, but not before these answers go out (the broker's dispatch of what the
        requests appended)."""
        self._after_requests.append(hook)

    def _run_after_requests(self) -> None:
        for hook in self._after_requests:
            try:
                hook()
            except Exception:  # noqa: BLE001 - never the connection's problem
                log.exception("after-requests hook failed")

    def add_close_listener(self, listener: CloseListener) -> None:
        """listener(channel), sync or async, runs once when any connection closes."""
        self._close_listeners.append(listener)

    # -- request processing ----------------------------------------------------------------
    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """Run the handler and build the response to write (None: write nothing)."""
        inline = self._inline.get(request.code)
        if inline is not None:
            result = self._call_inline(RequestContext(channel, self), request, inline)
            if isinstance(result, _Later):
                return await self._finish_later(channel, request, result.awaitable)
            return result
        if self._request_hooks:
            refusal = self._refused(RequestContext(channel, self), request)
            if refusal is not None:
                return self._finish(request, refusal)
        handler = self._handlers.get(request.code, self._default)
        if handler is None:
            # the peer's mistake, not ours: a warning (4.9.8 logs it as an error)
            log.warning("%s request type %s not supported", channel.remote_addr, request.code)
            return make_response(request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                 f" request type {request.code} not supported")
        try:
            response = await handler(RequestContext(channel, self), request)
        except trio.Cancelled:
            raise
        except Exception as exc:  # noqa: BLE001 - a failing handler must not take the connection down
            return self._failed(channel, request, exc)
        return self._finish(request, response)

    def _call_inline(self, ctx: RequestContext, request: RemotingCommand,
                     handler: InlineHandler) -> "RemotingCommand | None | _Later":
        """Run an inline handler: the finished response, or _Later(awaitable) to await in a task."""
        if self._request_hooks:
            refusal = self._refused(ctx, request)
            if refusal is not None:
                return self._finish(request, refusal)
        self.in_inline_call = True
        try:
            result = handler(ctx, request)
        except Exception as exc:  # noqa: BLE001 - a failing handler must not take the connection down
            return self._failed(ctx.channel, request, exc)
        finally:
            self.in_inline_call = False
        if result is None or type(result) is RemotingCommand:
            return self._finish(request, result)
        if inspect.isawaitable(result):
            return _Later(result)
        return self._finish(request, result)

    async def _finish_later(self, channel: Channel, request: RemotingCommand,
                            awaitable: Awaitable[RemotingCommand | None]) -> RemotingCommand | None:
        try:
            response = await awaitable
        except trio.Cancelled:
            raise
        except Exception as exc:  # noqa: BLE001
            return self._failed(channel, request, exc)
        return self._finish(request, response)

    @staticmethod
    def _finish(request: RemotingCommand, response: RemotingCommand | None) -> RemotingCommand | None:
        if response is None or request.flag & RPC_ONEWAY:
            return None
        response.opaque = request.opaque
        response.flag |= RPC_TYPE_RESPONSE
        response.serialize_type = request.serialize_type
        return response

    @staticmethod
    def _failed(channel: Channel, request: RemotingCommand, exc: Exception) -> RemotingCommand | None:
        if isinstance(exc, WireError):
            # A bad header/body from the peer (RocketMQ's RemotingCommandException): the peer's
            # fault, not ours, so one warning line and the decoder's own words as the remark -
            # never a traceback in the log or a Python exception repr on the wire.
            remark = str(exc)[:_MAX_REMARK] or type(exc).__name__
            log.warning("bad request (code %s from %s): %s", request.code, channel.remote_addr, remark)
        else:
            log.error("process request exception (code %s from %s)", request.code, channel.remote_addr,
                      exc_info=exc)
            remark = exception_simple_desc(exc)
        if request.flag & RPC_ONEWAY:
            return None
        return make_response(request, ResponseCode.SYSTEM_ERROR, remark)

    @staticmethod
    def _response_parts(request: RemotingCommand, response: RemotingCommand) -> list[bytes | bytearray | memoryview]:
        try:
            return _frame_parts(response)
        except WireError as exc:  # the handler built a response that cannot be encoded
            log.error("response to code %s cannot be encoded: %s", request.code, exc)
            return [encode_frame(make_response(request, ResponseCode.SYSTEM_ERROR, exception_simple_desc(exc)))]

    async def _run_request(self, channel: Channel, request: RemotingCommand, limiter: trio.Semaphore,
                           later: Awaitable[RemotingCommand | None] | None = None) -> None:
        try:
            if later is not None:
                response = await self._finish_later(channel, request, later)
            else:
                response = await self.process_request(channel, request)
            if response is not None and not channel.closed:
                try:
                    channel.write_nowait(self._response_parts(request, response))
                    if self._after_requests:
                        self._run_after_requests()
                    if channel._out:
                        await channel.drain()
                except RemotingSendRequestError as exc:
                    _log_response_failed(exc)
            elif self._after_requests:
                self._run_after_requests()
        finally:
            limiter.release()
            self._in_flight -= 1
            if self._in_flight == 0:
                self._idle_event.set()

    async def wait_requests_done(self) -> None:
        await self._idle_event.wait()

    @property
    def in_flight(self) -> int:
        return self._in_flight

    # -- connection loop -------------------------------------------------------------------
    async def run_channel(self, channel: Channel, *, stop_reading: trio.Event | None = None,
                          grace_seconds: float = 10.0) -> None:
        """Serve one connection until EOF, framing error, close() or stop_reading.

        EOF / framing error / close(): in-flight requests of this connection are cancelled
        (nobody can receive their answers). stop_reading (graceful stop): no new requests are
        read, in-flight ones get up to grace_seconds to finish and answer.
        """
        self.channels.add(channel)
        limiter = trio.Semaphore(MAX_IN_FLIGHT_PER_CONNECTION)
        try:
            async with trio.open_nursery() as requests:
                channel._cancel_connection = requests.cancel_scope.cancel
                channel._nursery = requests
                graceful = False
                async with trio.open_nursery() as reader:
                    if stop_reading is not None:
                        async def watch_stop() -> None:
                            await stop_reading.wait()
                            reader.cancel_scope.cancel()
                        reader.start_soon(watch_stop)
                    if self.idle_seconds is not None:
                        reader.start_soon(self._watch_idle, channel, self.idle_seconds, reader.cancel_scope)
                    reader.start_soon(self._read_loop, channel, requests, limiter, reader.cancel_scope)
                if stop_reading is not None and stop_reading.is_set() and not channel.closed:
                    graceful = True
                if graceful:
                    requests.cancel_scope.deadline = trio.current_time() + grace_seconds
                    if channel._out:
                        channel._drain_soon()
                else:
                    requests.cancel_scope.cancel()
        finally:
            channel._nursery = None
            channel._mark_closed(channel.close_reason or "connection finished")
            self.channels.discard(channel)
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(channel.stream)
                await self._fire_close_listeners(channel)

    async def _watch_idle(self, channel: Channel, idle_seconds: float, reader_scope: trio.CancelScope) -> None:
        """RocketMQ's idle handler: a connection with no traffic for idle_seconds is closed."""
        while True:
            deadline = channel.last_activity + idle_seconds
            if trio.current_time() >= deadline:
                log.info("closing idle connection %s", channel.remote_addr)
                channel._mark_closed("idle")
                reader_scope.cancel()
                return
            await trio.sleep_until(deadline)

    async def _read_loop(self, channel: Channel, requests: trio.Nursery, limiter: trio.Semaphore,
                         reader_scope: trio.CancelScope) -> None:
        decoder = FrameDecoder()
        sock = channel._sock
        ctx = RequestContext(channel, self)
        data: bytes | bytearray | None
        eager = 0  # reads left before the next scheduling point
        try:
            while True:
                data = None
                if eager and sock is not None:
                    eager -= 1
                    data = receive_now(sock, RECEIVE_CHUNK)
                if data is None:
                    data = await receive_from(sock, channel.stream, RECEIVE_CHUNK)
                    if data is None:
                        continue
                    eager = EAGER_READS
                if not data:
                    channel._mark_closed("peer closed the connection")
                    break
                channel.last_activity = channel._clock.current_time()
                decoder.feed(data)
                batch: list[bytes | bytearray | memoryview] = []
                try:
                    await self._dispatch_chunk(channel, decoder, ctx, batch, requests, limiter)
                finally:  # even before a framing error closes the connection: answer what was read
                    if batch and not channel.closed:
                        try:
                            channel.write_nowait(batch)
                        except RemotingSendRequestError as exc:
                            _log_response_failed(exc)
                    if self._after_requests:  # after every inline call, whatever ended the chunk
                        self._run_after_requests()
                if channel.closed:
                    break
                if channel._out:
                    eager = 0  # the peer is not reading: wait for it through the scheduler
                    if sock is None or channel._out_bytes > MAX_QUEUED_RESPONSE_BYTES:
                        try:
                            await channel.drain()  # stop reading until the peer reads
                        except RemotingSendRequestError as exc:
                            _log_response_failed(exc)
                            break
                    else:
                        channel._drain_soon()
        except WireError as exc:
            log.warning("framing error from %s, closing the connection: %s", channel.remote_addr, exc)
            if channel._out and not channel.closed:  # the answers to the frames before it
                with trio.move_on_after(1.0):
                    try:
                        await channel.drain()
                    except RemotingSendRequestError:
                        pass
            channel._mark_closed(f"framing error: {exc}")
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            channel._mark_closed(f"read failed: {exc}")
        reader_scope.cancel()

    async def _dispatch_chunk(self, channel: Channel, decoder: FrameDecoder, ctx: RequestContext,
                              batch: list[bytes | bytearray | memoryview], requests: trio.Nursery,
                              limiter: trio.Semaphore) -> None:
        """Every complete frame received so far: responses completed, inline requests answered
        into `batch` (written together), the others started as tasks."""
        inline_handlers = self._inline
        for cmd in decoder:
            if cmd.flag & RPC_TYPE_RESPONSE:
                channel._complete(cmd)
                continue
            inline = inline_handlers.get(cmd.code)
            if inline is not None:
                response = self._call_inline(ctx, cmd, inline)
                if response is None:
                    continue
                if not isinstance(response, _Later):
                    batch += self._response_parts(cmd, response)
                    continue
                later: Awaitable[RemotingCommand | None] | None = response.awaitable
            else:
                later = None
            try:
                limiter.acquire_nowait()
            except trio.WouldBlock:
                try:
                    await limiter.acquire()
                except BaseException:
                    if later is not None and inspect.iscoroutine(later):
                        later.close()
                    raise
            if self._in_flight == 0:
                self._idle_event = trio.Event()
            self._in_flight += 1
            requests.start_soon(self._run_request, channel, cmd, limiter, later)

    async def _fire_close_listeners(self, channel: Channel) -> None:
        for listener in self._close_listeners:
            try:
                result = listener(channel)
                if inspect.isawaitable(result):
                    await result
            except Exception:  # noqa: BLE001
                log.exception("close listener failed for %s", channel)


@dataclass(slots=True)
class _Later:
    """An inline handler's answer that is not ready yet."""

    awaitable: Awaitable[RemotingCommand | None]


class RemotingServer(Dispatcher):
    """Accepts connections on one or more ports, all sharing one handler table
    (the broker's main port and its fast/VIP port serve the same processors).

    Usage:
        server = RemotingServer("broker")
        server.register(RequestCode.SEND_MESSAGE_V2, handler)
        addrs = await nursery.start(server.serve, [("0.0.0.0", 10911), ("0.0.0.0", 10909)])
        ...
        await server.stop()          # stop accepting, finish in-flight requests, close
    """

    def __init__(self, name: str = "remoting", *, idle_seconds: float | None = DEFAULT_IDLE_SECONDS,
                 grace_seconds: float = 10.0) -> None:
        super().__init__(name, idle_seconds=idle_seconds)
        self.grace_seconds = grace_seconds
        self.listen_addrs: list[tuple[str, int]] = []
        self.stopping = trio.Event()
        self._stopped = trio.Event()
        self._listeners: list[trio.SocketListener] = []
        #: stream_wrapper(accepted) -> the stream to serve, or None to close it (TLS: broker/tls.py)
        self.stream_wrapper: Callable[[trio.SocketStream], Awaitable[trio.abc.Stream | None]] | None = None

    async def open_listeners(self, endpoints: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
        """Bind every endpoint first (so a port in use fails before anything runs)."""
        self.listen_addrs = await open_tcp_endpoints(endpoints, self._listeners)
        return self.listen_addrs

    async def serve(self, endpoints: Iterable[tuple[str, int]] | None = None, *,
                    task_status: trio.TaskStatus[list[tuple[str, int]]] = trio.TASK_STATUS_IGNORED) -> None:
        """Run until stop(); task_status.started gets the bound (host, port) list."""
        if endpoints is not None:
            await self.open_listeners(endpoints)
        if not self._listeners:
            raise ValueError("RemotingServer.serve needs at least one endpoint")
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
                # connections see `stopping`, stop reading and drain their in-flight requests
        finally:
            self._stopped.set()

    async def _accept_loop(self, listener: trio.SocketListener, connections: trio.Nursery) -> None:
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:  # e.g. EMFILE: keep serving the connections we have
                log.warning("%s accept failed: %s", self.name, exc)
                await trio.sleep(0.1)
                continue
            if self.stream_wrapper is not None:
                connections.start_soon(self._serve_wrapped, stream)
                continue
            channel = Channel.from_socket_stream(stream)
            connections.start_soon(self._serve_channel, channel)

    async def _serve_wrapped(self, stream: trio.SocketStream) -> None:
        """A connection whose stream the wrapper decides first (peek, TLS handshake)."""
        base = Channel.from_socket_stream(stream)
        served: trio.abc.Stream | None = None
        try:
            async with trio.open_nursery() as setup:  # stop() cancels a set-up still waiting
                async def cancel_on_stop() -> None:
                    await self.stopping.wait()
                    setup.cancel_scope.cancel()
                setup.start_soon(cancel_on_stop)
                served = await self.stream_wrapper(stream) if self.stream_wrapper is not None else stream
                setup.cancel_scope.cancel()
        except Exception:  # noqa: BLE001 - one broken connection never stops the server
            log.exception("%s connection %s: stream set-up failed", self.name, base)
            served = None
        if served is None:
            await trio.aclose_forcefully(stream)
            return
        channel = base if served is stream else Channel(served, local_addr=base.local_addr,
                                                        remote_addr=base.remote_addr)
        await self._serve_channel(channel)

    async def _serve_channel(self, channel: Channel) -> None:
        try:
            await self.run_channel(channel, stop_reading=self.stopping, grace_seconds=self.grace_seconds)
        except Exception:  # noqa: BLE001 - one broken connection never stops the server
            log.exception("%s connection %s failed", self.name, channel)

    async def stop(self) -> None:
        """Stop accepting, let in-flight requests finish (up to grace_seconds), close."""
        self.stopping.set()
        await self._stopped.wait()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    def find_channel(self, remote_addr: str) -> Channel | None:
        for channel in self.channels:
            if channel.remote_addr == remote_addr:
                return channel
        return None


__all__ = [
    "Channel", "CloseListener", "Dispatcher", "Handler", "InlineHandler", "RemotingConnectError", "RemotingError",
    "RemotingSendRequestError", "RemotingServer", "RemotingTimeoutError", "RequestContext",
    "exception_simple_desc", "format_addr", "open_tcp_endpoints", "raw_socket", "receive_from",
]
