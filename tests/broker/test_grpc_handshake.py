"""Issue 46 item 4: a connection that never finishes its HTTP/2 preface is closed (trio's MockClock).

Each byte restarts the idle time, so a client sending one byte of the preface every 100 s held a
connection for ever. Now the preface and the client's first SETTINGS must have come within
DEFAULT_HANDSHAKE_SECONDS (120 s, grpc-java's handshake timeout) of accepting the connection;
after that only the idle time applies. In-memory streams, virtual time: nothing here waits.
"""

from __future__ import annotations

import h2.config
import h2.connection
import h2.events
import pytest
import trio
import trio.testing

from rmqd.broker.grpc_server import DEFAULT_HANDSHAKE_SECONDS, GrpcConnection, GrpcServer

pytestmark = pytest.mark.timeout(30)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


async def _serve(client_side: trio.abc.Stream, server_side: trio.abc.Stream, feed: object) -> float:
    """The connection served until it ends; ``feed`` talks to it meanwhile. When it ended."""
    server = GrpcServer({})
    conn = GrpcConnection(server, server_side, "peer", "local")
    ended = 0.0
    async with trio.open_nursery() as nursery:
        async def serve() -> None:
            nonlocal ended
            async with trio.open_nursery() as handlers:
                await conn.serve(handlers)
                handlers.cancel_scope.cancel()
            ended = trio.current_time()
            await server_side.aclose()
            nursery.cancel_scope.cancel()
        nursery.start_soon(serve)
        await feed(client_side)  # type: ignore[operator]
    assert conn.closed
    return ended


def _run(feed: object) -> float:
    async def main() -> float:
        client_side, server_side = trio.testing.memory_stream_pair()
        start = trio.current_time()
        return await _serve(client_side, server_side, feed) - start
    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_one_byte_of_the_preface_every_100_s_is_closed_at_the_deadline() -> None:
    async def feed(stream: trio.abc.Stream) -> None:
        for byte in PREFACE:
            await stream.send_all(bytes([byte]))
            await trio.sleep(100)
        await trio.sleep_forever()

    lived = _run(feed)
    assert lived == pytest.approx(DEFAULT_HANDSHAKE_SECONDS)  # not 24 bytes x 100 s, nor for ever


def test_a_preface_without_settings_is_closed_at_the_deadline() -> None:
    async def feed(stream: trio.abc.Stream) -> None:
        await stream.send_all(PREFACE)  # the preface must be followed by a SETTINGS frame
        while True:
            await trio.sleep(60)
            await stream.send_all(b"\x00\x00\x00\xfa\x00\x00\x00\x00\x00")  # an unknown, empty frame

    assert _run(feed) == pytest.approx(DEFAULT_HANDSHAKE_SECONDS)


def test_a_finished_handshake_lives_by_the_idle_time_only() -> None:
    async def feed(stream: trio.abc.Stream) -> None:
        client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        client.initiate_connection()
        await stream.send_all(client.data_to_send())
        for _ in range(4):  # a PING every 100 s: past the handshake deadline, never idle
            await trio.sleep(100)
            client.ping(b"12345678")
            await stream.send_all(client.data_to_send())
            acked = False
            while not acked:
                data = await stream.receive_some()
                assert data, "the connection was closed"
                acked = any(isinstance(e, h2.events.PingAckReceived) for e in client.receive_data(data))
        await trio.sleep_forever()  # then silent: closed once idle

    lived = _run(feed)
    assert lived == pytest.approx(400 + 120)  # the idle time after the last PING
