"""Issue 46 item 3a: a reset call's buffers are freed at once, not at the next full GC pass.

A handler waiting for its request wakes on the reset with CallCancelled. `_run_call` used to keep
the exception bound in its frame after the except clause (`exc = _leaf(raised)`): the frame held
the exception, whose traceback held the frame and the handler's, which held the call, its
decoder and the partial message. Only a full collection freed that cycle, and the cyclic GC
rarely runs one: 4 x 100 MiB partial messages then a reset left 464 MiB held a minute later.
Here the collector is off: the call and its decoder must go by reference counting alone.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import h2.config
import h2.connection
import h2.events
import pytest
import trio

from rmqd.broker.grpc_server import GrpcCall, GrpcServer
from support import wait_until

pytestmark = pytest.mark.timeout(60)

PARTIAL = 60_000  # within h2's default stream window: the client may send it at once


def _client() -> h2.connection.H2Connection:
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
    conn.initiate_connection()
    return conn


def _request_headers(path: bytes) -> list[tuple[bytes, bytes]]:
    return [(b":method", b"POST"), (b":scheme", b"http"), (b":path", path), (b":authority", b"127.0.0.1"),
            (b"content-type", b"application/grpc"), (b"te", b"trailers")]


async def _until(cond: Callable[[], Any], what: str) -> None:
    await wait_until(lambda: bool(cond()), 10, what, interval=0.01)


Scenario = Callable[[trio.SocketStream, h2.connection.H2Connection], Awaitable[None]]


def _one_call(handler: Callable[[GrpcCall], Awaitable[None]], scenario: Scenario, **server_kw: Any) -> None:
    """A server whose one method /t.S/Wait is ``handler``; a client that opens stream 1 on it,
    then ``scenario``; all with the cyclic collector off, so what is freed is freed by
    reference counting."""

    async def main() -> None:
        server = GrpcServer({("t.S", "Wait"): handler}, **server_kw)
        await server.open_listeners([("127.0.0.1", 0)])
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                (addr,) = await nursery.start(server.serve)
                stream = await trio.open_tcp_stream("127.0.0.1", addr[1])
                h2c = _client()
                h2c.send_headers(1, _request_headers(b"/t.S/Wait"))
                await scenario(stream, h2c)
                await stream.aclose()
                await server.stop()

    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        trio.run(main)
    finally:
        if enabled:
            gc.enable()


@pytest.mark.parametrize("handler_kind", ["recv", "recv_then_more"])
def test_a_reset_call_is_freed_without_a_gc_pass(handler_kind: str) -> None:
    calls: list[weakref.ref[GrpcCall]] = []
    decoders: list[weakref.ref[object]] = []

    async def wait_for_request(call: GrpcCall) -> None:
        calls.append(weakref.ref(call))
        decoders.append(weakref.ref(call._decoder))
        await call.recv()
        if handler_kind == "recv_then_more":
            await call.send(b"never")

    async def scenario(stream: trio.SocketStream, h2c: h2.connection.H2Connection) -> None:
        # a 1 MiB message announced, PARTIAL bytes of it sent: the decoder holds them
        body = b"\x00" + (1 << 20).to_bytes(4, "big") + b"x" * (PARTIAL - 5)
        for at in range(0, len(body), 16384):  # h2's default frame size
            h2c.send_data(1, body[at:at + 16384])
        await stream.send_all(h2c.data_to_send())
        await _until(lambda: calls and calls[0]() is not None
                     and calls[0]()._decoder.buffered >= PARTIAL - 5,  # type: ignore[union-attr]
                     "the partial message reached the call")
        h2c.reset_stream(1)
        await stream.send_all(h2c.data_to_send())
        await _until(lambda: calls[0]() is None and decoders[0]() is None,
                     "the reset call (and its partial message) freed by reference counting")

    _one_call(wait_for_request, scenario)


def test_a_call_refused_for_its_request_is_freed_without_a_gc_pass() -> None:
    """The request's framing error is kept on the call and raised from recv: kept with its
    traceback, it would hold the frames that hold the call (call -> error -> traceback -> call)."""
    calls: list[weakref.ref[GrpcCall]] = []

    async def wait_for_request(call: GrpcCall) -> None:
        calls.append(weakref.ref(call))
        await call.recv()

    async def scenario(stream: trio.SocketStream, h2c: h2.connection.H2Connection) -> None:
        h2c.send_data(1, b"\x00" + (1 << 30).to_bytes(4, "big") + b"x" * 100)  # above the maximum
        await stream.send_all(h2c.data_to_send())
        ended = False
        with trio.move_on_after(10):
            while not ended:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    break
                ended = any(isinstance(e, h2.events.StreamEnded) and e.stream_id == 1
                            for e in h2c.receive_data(chunk))
        assert ended, "the call was answered (RESOURCE_EXHAUSTED)"
        assert calls, "the handler ran"
        await _until(lambda: calls[0]() is None, "the refused call freed by reference counting")

    _one_call(wait_for_request, scenario, max_message_size=1 << 20)
