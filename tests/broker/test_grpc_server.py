"""broker/grpc_server.py in-process: unary, server- and client-streaming calls through grpcio,
trailers-only answers, deadlines, idle connections, graceful stop, and arbitrary bytes after the
HTTP/2 preface (hypothesis): the server answers or closes, logs no error, and keeps serving."""

from __future__ import annotations

import logging

import grpc
import h2.errors
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqd.broker.grpc_server import GrpcCall, GrpcServer
from rmqd.wire.grpc import GrpcStatus, GrpcWireError

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


async def echo(call: GrpcCall) -> None:
    msg = await call.recv()
    assert msg is not None
    await call.send(msg[::-1])
    await call.finish()


async def count(call: GrpcCall) -> None:
    n = 0
    while (await call.recv()) is not None:
        n += 1
    for i in range(n):
        await call.send(bytes([i]))
    await call.finish(GrpcStatus.NOT_FOUND, "done ✓")


async def sleepy(call: GrpcCall) -> None:
    await call.recv()
    await trio.sleep(30)


async def boom(call: GrpcCall) -> None:
    raise RuntimeError("handler bug")


async def many(call: GrpcCall) -> None:
    """The request "N SIZE": N messages of SIZE bytes in one send_many, left for finish's write."""
    msg = await call.recv()
    assert msg is not None
    n, size = (int(x) for x in msg.split())
    await call.send_many([bytes([i % 251]) * size for i in range(n)], flush=False)
    await call.finish()


HANDLERS = {("t.S", "Echo"): echo, ("t.S", "Count"): count, ("t.S", "Sleepy"): sleepy, ("t.S", "Boom"): boom,
            ("t.S", "Many"): many}


def _with_server(client, handlers=HANDLERS, **kw):  # type: ignore[no-untyped-def]
    async def main() -> object:
        server = GrpcServer(handlers, **kw)
        await server.open_listeners([("127.0.0.1", 0)])
        with trio.fail_after(60):
            async with trio.open_nursery() as n:
                (addr,) = await n.start(server.serve)
                try:
                    return await client(server, addr[1])
                finally:
                    await server.stop()
    return trio.run(main)


def _echo_ok(port: int) -> bytes:
    """One Echo call on a fresh channel (the server still serves)."""
    ch = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        return ch.unary_unary("/t.S/Echo")(b"ok", timeout=5)
    finally:
        ch.close()


def test_unary_streaming_statuses_and_deadlines() -> None:
    def blocking(port: int) -> dict:
        ch = grpc.insecure_channel(f"127.0.0.1:{port}")
        out: dict = {"echo": ch.unary_unary("/t.S/Echo")(b"abc", timeout=5)}
        it = ch.stream_stream("/t.S/Count")(iter([b"x", b"y", b"z"]), timeout=5)
        got = []
        try:
            for m in it:
                got.append(m)
        except grpc.RpcError as exc:
            out["count_status"] = (exc.code(), exc.details())
        out["count"] = got
        for name, path, kw in (("unknown", "/t.S/Nope", {}), ("boom", "/t.S/Boom", {}),
                               ("deadline", "/t.S/Sleepy", {"timeout": 0.5})):
            try:
                ch.unary_unary(path)(b"x", **({"timeout": 5} | kw))
            except grpc.RpcError as exc:
                out[name] = exc.code()
        out["big"] = len(ch.unary_unary("/t.S/Echo")(b"q" * (3 * 1024 * 1024), timeout=20))
        ch.close()
        return out

    async def client(server: GrpcServer, port: int) -> dict:
        return await trio.to_thread.run_sync(blocking, port)

    out = _with_server(client)
    assert out["echo"] == b"cba"
    assert out["count"] == [b"\x00", b"\x01", b"\x02"]
    assert out["count_status"] == (grpc.StatusCode.NOT_FOUND, "done ✓")
    assert out["unknown"] == grpc.StatusCode.UNIMPLEMENTED
    assert out["boom"] == grpc.StatusCode.INTERNAL
    assert out["deadline"] == grpc.StatusCode.DEADLINE_EXCEEDED
    assert out["big"] == 3 * 1024 * 1024


def test_idle_connection_is_closed() -> None:
    async def client(server: GrpcServer, port: int) -> bool:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            await stream.send_all(PREFACE + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
            with trio.fail_after(10):
                while True:
                    data = await stream.receive_some(65536)
                    if not data:
                        return True
    assert _with_server(client, idle_seconds=0.5)


async def _until_closed(stream: trio.SocketStream) -> None:
    """Half-close (EOF after the last chunk) and read until the server closes: it reads every
    byte, then the EOF, so once it has closed it has handled everything sent. Ends at that
    condition, in milliseconds; the fixed 0.3 s read every example used to take was 45 s of the
    module's 48. The bound only keeps a server that stays open from hanging the example."""
    with trio.move_on_after(1.0):
        try:
            await stream.send_eof()
            while await stream.receive_some(65536):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.binary(min_size=0, max_size=200), min_size=1, max_size=6))
def test_arbitrary_bytes_after_the_preface(chunks: list[bytes]) -> None:
    errors: list[logging.LogRecord] = []

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.ERROR:
                errors.append(record)

    handler = Catch()
    logging.getLogger("rmqd").addHandler(handler)
    try:
        async def client(server: GrpcServer, port: int) -> None:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            async with stream:
                try:
                    await stream.send_all(PREFACE)
                    for chunk in chunks:
                        await stream.send_all(chunk)
                except (trio.BrokenResourceError, OSError):
                    pass
                await _until_closed(stream)
            # and the server still serves
            assert await trio.to_thread.run_sync(_echo_ok, port) == b"ko"
        _with_server(client)
    finally:
        logging.getLogger("rmqd").removeHandler(handler)
    assert not errors, [r.getMessage() for r in errors]


@pytest.mark.parametrize("mode", ["tls", "h2c"])
def test_tls_and_h2c_share_the_port(mode: str) -> None:
    import ssl

    from rmqd.broker.tls import TlsAcceptor, TlsConfig

    async def client(server: GrpcServer, port: int) -> str | None:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        if mode == "tls":
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            ctx.set_alpn_protocols(["h2"])
            tls = trio.SSLStream(stream, ctx, server_hostname="localhost")
            await tls.do_handshake()
            proto = tls.selected_alpn_protocol()
            await tls.aclose()
            return proto
        async with stream:
            await stream.send_all(PREFACE + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
            data = await stream.receive_some(65536)
            return "h2c" if data[3:4] == b"\x04" else None

    got = _with_server(client, tls=TlsAcceptor(TlsConfig(), "grpc-test"))
    assert got == ("h2" if mode == "tls" else "h2c")


# -- unary calls answered on the read loop (inline handlers) -------------------------------------------

def _inline_echo(call: GrpcCall, payload: bytes) -> bytes:
    task = trio.lowlevel.current_task()
    return payload[::-1] + b"|" + task.name.rsplit(".", 1)[-1].encode()


async def _later(payload: bytes) -> bytes:
    await trio.sleep(0.05)
    return b"later:" + payload


def _inline_later(call: GrpcCall, payload: bytes) -> object:
    return _later(payload)


def _inline_refuse(call: GrpcCall, payload: bytes) -> bytes:
    raise GrpcWireError(GrpcStatus.INVALID_ARGUMENT, "refused here")


def _inline_bug(call: GrpcCall, payload: bytes) -> bytes:
    raise RuntimeError("inline handler bug")


INLINE = {("t.S", "Echo"): _inline_echo, ("t.S", "Later"): _inline_later, ("t.S", "Refuse"): _inline_refuse,
          ("t.S", "Boom"): _inline_bug}
INLINE_TASKS = HANDLERS | {("t.S", "Later"): echo, ("t.S", "Refuse"): echo}


def test_inline_unary_calls() -> None:
    """Whole requests are answered by the connection's own task; answers that must wait, that do
    not fit the window, or that come from a task-only method still work; errors become statuses."""
    def blocking(port: int) -> dict:
        from concurrent.futures import ThreadPoolExecutor

        ch = grpc.insecure_channel(f"127.0.0.1:{port}")
        echo_call = ch.unary_unary("/t.S/Echo")
        out: dict = {"echo": echo_call(b"abc", timeout=5), "later": ch.unary_unary("/t.S/Later")(b"x", timeout=5)}
        with ThreadPoolExecutor(8) as pool:  # concurrent calls: several whole requests in one read
            out["many"] = list(pool.map(lambda i: echo_call(str(i).encode(), timeout=10), range(200)))
        # a request larger than a frame arrives over several reads: the task handler answers it
        out["big"] = echo_call(b"q" * (3 * 1024 * 1024), timeout=20)
        for name in ("Refuse", "Boom"):
            try:
                ch.unary_unary(f"/t.S/{name}")(b"x", timeout=5)
            except grpc.RpcError as exc:
                out[name] = (exc.code(), exc.details())
        ch.close()
        return out

    async def client(server: GrpcServer, port: int) -> dict:
        return await trio.to_thread.run_sync(blocking, port)

    errors: list[str] = []

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.ERROR:
                errors.append(record.getMessage())

    catch = Catch()
    logging.getLogger("rmqd").addHandler(catch)
    try:
        out = _with_inline(client)
    finally:
        logging.getLogger("rmqd").removeHandler(catch)
    assert out["echo"] == b"cba|_serve_connection"
    assert out["later"] == b"later:x"
    assert out["many"] == [str(i).encode()[::-1] + b"|_serve_connection" for i in range(200)]
    assert out["big"] == b"q" * (3 * 1024 * 1024)  # the task handler (echo), not the inline one
    assert out["Refuse"] == (grpc.StatusCode.INVALID_ARGUMENT, "refused here")
    assert out["Boom"] == (grpc.StatusCode.INTERNAL, "internal error: RuntimeError")
    assert len(errors) == 1 and errors[0].startswith("grpc t.S/Boom from 127.0.0.1:"), errors


def _with_inline(client):  # type: ignore[no-untyped-def]
    return _with_server(client, INLINE_TASKS, inline_handlers=INLINE)


def test_malformed_request_headers_end_the_connection() -> None:
    """h2's own inbound checks are off (wire/h2_headers.py does them): an upper-case header name
    still ends the connection with GOAWAY(PROTOCOL_ERROR), and the server keeps serving."""
    import h2.config
    import h2.connection
    import h2.events

    async def client(server: GrpcServer, port: int) -> object:
        conn = h2.connection.H2Connection(h2.config.H2Configuration(
            client_side=True, header_encoding=None, validate_outbound_headers=False,
            normalize_outbound_headers=False))
        conn.initiate_connection()
        conn.send_headers(1, [(b":method", b"POST"), (b":scheme", b"http"), (b":path", b"/t.S/Echo"),
                              (b":authority", b"x"), (b"content-type", b"application/grpc"), (b"X-Bad", b"1")],
                          end_stream=True)
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        goaway = None
        async with stream:
            await stream.send_all(conn.data_to_send())
            with trio.fail_after(10):
                while goaway is None:
                    data = await stream.receive_some(65536)
                    if not data:
                        break
                    for event in conn.receive_data(data):
                        if isinstance(event, h2.events.ConnectionTerminated):
                            goaway = event.error_code
        return goaway, await trio.to_thread.run_sync(_echo_ok, port)

    goaway, answer = _with_inline(client)
    assert goaway == h2.errors.ErrorCodes.PROTOCOL_ERROR
    assert answer == b"ko|_serve_connection"


def test_buffered_input_is_read_on_without_waiting_up_to_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a read that waited, the connection takes what is already buffered straight away
    (server.receive_now), at most EAGER_READS times before it waits through the scheduler again;
    the calls are answered as before."""
    import rmqd.broker.grpc_server as grpc_module
    import rmqd.broker.server as server_module

    from test_server_inline import count_reads

    reads: list[str] = []  # "W" a wait through the scheduler, "E" a read that returned data
    count_reads(monkeypatch, reads, grpc_module)
    waited = grpc_module.wait_readable

    async def counted_wait(sock):
        reads.append("W")
        await waited(sock)

    monkeypatch.setattr(grpc_module, "wait_readable", counted_wait)
    monkeypatch.setattr(grpc_module, "RECEIVE_CHUNK", 512)

    def blocking(port: int) -> tuple[list[bytes], bytes]:
        ch = grpc.insecure_channel(f"127.0.0.1:{port}")
        call = ch.unary_unary("/t.S/Echo")
        many = [call(str(i).encode(), timeout=10) for i in range(20)]
        big = call(b"z" * (256 * 1024), timeout=20)  # hundreds of reads, most of them buffered already
        ch.close()
        return many, big

    async def client(server: GrpcServer, port: int) -> tuple[list[bytes], bytes]:
        return await trio.to_thread.run_sync(blocking, port)

    many, big = _with_inline(client)
    assert many == [str(i).encode()[::-1] + b"|_serve_connection" for i in range(20)]
    assert big == b"z" * (256 * 1024)
    runs = [len(r) for r in "".join(reads).split("W")]  # reads after each wait: the waited one + eager ones
    assert max(runs) > 1 and max(runs) <= server_module.EAGER_READS + 1, "".join(reads)


def test_whole_unary_calls_are_taken_past_h2(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client's whole unary requests of the inline methods are answered by wire/h2_fast.py's
    frames, not h2's; an answer that has to wait makes h2 adopt the stream; a taken path whose
    method has only a task handler is adopted too and served by its task."""
    from rmqd.wire import h2_fast

    counts = {"answer": 0, "adopt": 0}
    for name in counts:
        real = getattr(h2_fast.FastInbound, name)

        def counted(self, *a, _real=real, _name=name):  # type: ignore[no-untyped-def]
            counts[_name] += 1
            return _real(self, *a)
        monkeypatch.setattr(h2_fast.FastInbound, name, counted)

    def blocking(port: int) -> dict:
        ch = grpc.insecure_channel(f"127.0.0.1:{port}")
        out = {"echo": [ch.unary_unary("/t.S/Echo")(b"%d" % i, timeout=5) for i in range(30)]}
        after_echo = dict(counts)
        out["later"] = ch.unary_unary("/t.S/Later")(b"x", timeout=5)
        after_later = dict(counts)
        try:
            ch.unary_unary("/t.S/Count")(b"y", timeout=5)
        except grpc.RpcError as exc:
            out["count"] = (exc.code(), exc.details())
        ch.close()
        out["counts"] = (after_echo, after_later, dict(counts))
        return out

    async def client(server: GrpcServer, port: int) -> dict:
        server.fast_paths = server.fast_paths | {b"/t.S/Count"}  # taken, but only a task serves it
        return await trio.to_thread.run_sync(blocking, port)

    out = _with_inline(client)
    assert out["echo"] == [str(i).encode()[::-1] + b"|_serve_connection" for i in range(30)]
    after_echo, after_later, after_count = out["counts"]
    assert after_echo["answer"] >= 29 and after_echo["adopt"] == 0  # the connection's first request opens h2's state
    assert out["later"] == b"later:x" and after_later["adopt"] == 1
    assert out["count"] == (grpc.StatusCode.NOT_FOUND, "done ✓") and after_count["adopt"] == 2


def test_send_many_streams_every_message_in_order_through_flow_control() -> None:
    """Several messages in one run of DATA frames: small ones share frames, large ones span the
    client's 64 KiB stream window several times over (send_many waits for its WINDOW_UPDATEs)."""
    def blocking(port: int) -> dict:
        ch = grpc.insecure_channel(f"127.0.0.1:{port}")
        out = {f"{n} {size}": list(ch.unary_stream("/t.S/Many")(f"{n} {size}".encode(), timeout=20))
               for n, size in ((1, 0), (33, 1100), (5, 300_000))}
        ch.close()
        return out

    async def client(server: GrpcServer, port: int) -> dict:
        return await trio.to_thread.run_sync(blocking, port)

    out = _with_server(client)
    for key, got in out.items():
        n, size = (int(x) for x in key.split())
        assert got == [bytes([i % 251]) * size for i in range(n)], key
