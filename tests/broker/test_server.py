"""RemotingServer behaviour seen from a raw socket client: concurrency on one connection,
unknown codes, failing handlers, framing errors, oneway requests, serialize types,
broker->client calls over the client's own connection, close listeners, idle expiry and
graceful stop. Every test is bounded (fail_after + pytest-timeout)."""

from __future__ import annotations

import logging
import struct

import pytest
import trio

from rmqd.broker.remoting_client import RemotingClient
from rmqd.broker.server import RemotingServer, RemotingTimeoutError
from rmqd.wire.codes import ResponseCode, SerializeType
from rmqd.wire.frame import FrameDecoder, RemotingCommand, encode_frame, make_request, make_response

pytestmark = pytest.mark.timeout(30)

SLOW, FAST, BOOM, ONEWAY_CODE, PARTS, CALLBACK, HUGE, BIG_BODY = 9001, 9002, 9003, 9004, 9005, 9006, 9007, 9008


class RawConn:
    """A bare TCP client speaking frames through wire/ only."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.decoder = FrameDecoder()

    @classmethod
    async def open(cls, port: int) -> "RawConn":
        return cls(await trio.open_tcp_stream("127.0.0.1", port))

    async def send(self, cmd: RemotingCommand) -> None:
        await self.stream.send_all(encode_frame(cmd))

    async def recv(self) -> RemotingCommand | None:
        while True:
            cmd = self.decoder.next_command()
            if cmd is not None:
                return cmd
            data = await self.stream.receive_some(65536)
            if not data:
                return None
            self.decoder.feed(data)

    async def call(self, cmd: RemotingCommand) -> RemotingCommand:
        await self.send(cmd)
        resp = await self.recv()
        assert resp is not None
        return resp


class Fixture:
    def __init__(self, idle_seconds: float = 120.0) -> None:
        self.server = RemotingServer("test", grace_seconds=5, idle_seconds=idle_seconds)
        self.release = trio.Event()
        self.slow_started = trio.Event()
        self.oneway_seen: list[RemotingCommand] = []
        self.oneway_event = trio.Event()
        self.closed: list[str] = []
        self.channels: list = []
        s = self.server
        s.register(SLOW, self.slow)
        s.register(FAST, self.fast)
        s.register(BOOM, self.boom)
        s.register(ONEWAY_CODE, self.oneway)
        s.register(PARTS, self.parts)
        s.register(CALLBACK, self.callback)
        s.register(HUGE, self.huge)
        s.register(BIG_BODY, self.big_body)
        s.add_close_listener(lambda ch: self.closed.append(ch.remote_addr))

    async def slow(self, ctx, req):
        self.slow_started.set()
        await self.release.wait()
        return make_response(req, ResponseCode.SUCCESS, "slow done")

    async def fast(self, ctx, req):
        return make_response(req, ResponseCode.SUCCESS, "fast", ext_fields={"echo": req.ext("x", "")},
                             body=req.body)

    async def boom(self, ctx, req):
        raise RuntimeError("handler exploded")

    async def oneway(self, ctx, req):
        self.oneway_seen.append(req)
        self.oneway_event.set()
        return make_response(req, ResponseCode.SUCCESS)

    async def parts(self, ctx, req):
        resp = make_response(req, ResponseCode.SUCCESS)
        resp.body = [b"abc", memoryview(b"defg"), bytearray(b"h")]
        return resp

    async def huge(self, ctx, req):
        return make_response(req, ResponseCode.SUCCESS, "x" * (17 * 1024 * 1024))  # header > 24-bit length

    async def big_body(self, ctx, req):
        resp = make_response(req, ResponseCode.SUCCESS)
        resp.body = [memoryview(bytes(1024 * 1024))] * 48  # more than both socket buffers hold
        return resp

    async def callback(self, ctx, req):
        self.channels.append(ctx.channel)
        return make_response(req, ResponseCode.SUCCESS)


def run(test, **fixture_args):
    async def main():
        fx = Fixture(**fixture_args)
        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                addrs = await nursery.start(fx.server.serve, [("127.0.0.1", 0)])
                await test(fx, addrs[0][1])
                await fx.server.stop()
    trio.run(main)


def test_requests_on_one_connection_run_concurrently():
    async def t(fx, port):
        c = await RawConn.open(port)
        await c.send(make_request(SLOW, opaque=1))
        await fx.slow_started.wait()
        await c.send(make_request(FAST, {"x": "1"}, opaque=2))
        first = await c.recv()
        assert (first.opaque, first.remark) == (2, "fast")  # not blocked behind the slow one
        fx.release.set()
        second = await c.recv()
        assert (second.opaque, second.remark, second.code) == (1, "slow done", 0)
    run(t)


def test_response_copies_opaque_flag_and_server_identity():
    async def t(fx, port):
        c = await RawConn.open(port)
        req = make_request(FAST, {"x": "y"}, b"body!", opaque=77)
        req.language, req.version = 1, 63  # a C++ client
        resp = await c.call(req)
        assert resp.opaque == 77 and resp.flag & 1 and resp.code == 0
        assert resp.language == 0 and resp.version == 409  # JAVA, 4.9.8
        assert resp.ext_fields == {"echo": "y"} and bytes(resp.body) == b"body!"
    run(t)


def test_unknown_code_gets_request_code_not_supported():
    async def t(fx, port):
        c = await RawConn.open(port)
        resp = await c.call(make_request(4242, opaque=5))
        assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED == 3
        assert resp.remark == " request type 4242 not supported"
        assert resp.opaque == 5 and resp.flag & 1
        # the connection stays usable
        assert (await c.call(make_request(FAST, opaque=6))).code == 0
    run(t)


def test_failing_handler_gets_system_error_and_connection_stays_up():
    async def t(fx, port):
        c = await RawConn.open(port)
        resp = await c.call(make_request(BOOM, opaque=9))
        assert resp.code == ResponseCode.SYSTEM_ERROR and resp.opaque == 9
        assert "RuntimeError" in resp.remark and "handler exploded" in resp.remark
        assert (await c.call(make_request(FAST, opaque=10))).remark == "fast"
    run(t)


@pytest.mark.parametrize("garbage", [
    struct.pack(">i", -5) + b"xxxx",                        # negative length
    struct.pack(">iI", 8, (7 << 24) | 0) + b"\0\0\0\0",      # unknown serialize type
    struct.pack(">iI", 10, 6) + b"{nope}",                  # header is not JSON
    struct.pack(">i", 64 * 1024 * 1024),                    # larger than the max frame
])
def test_framing_error_closes_only_that_connection(garbage):
    async def t(fx, port):
        good = await RawConn.open(port)
        bad = await RawConn.open(port)
        await bad.stream.send_all(garbage)
        assert await bad.recv() is None  # closed by the server, no answer
        assert (await good.call(make_request(FAST, opaque=1))).code == 0
        with trio.fail_after(5):
            while len(fx.closed) < 1:
                await trio.sleep(0.01)
    run(t)


def test_oneway_request_gets_no_response():
    async def t(fx, port):
        c = await RawConn.open(port)
        await c.send(make_request(ONEWAY_CODE, {"k": "v"}, opaque=1, oneway=True))
        await fx.oneway_event.wait()
        resp = await c.call(make_request(FAST, opaque=2))
        assert resp.opaque == 2  # nothing was written for opaque 1
        assert fx.oneway_seen[0].ext("k") == "v"
    run(t)


def test_oneway_without_flag_is_answered_like_java():
    """C++/Go/ali-ons never set flag 2: the Java broker answers and they ignore it."""
    async def t(fx, port):
        c = await RawConn.open(port)
        resp = await c.call(make_request(ONEWAY_CODE, opaque=3))
        assert resp.opaque == 3 and resp.code == 0
    run(t)


def test_failing_oneway_handler_writes_nothing():
    async def t(fx, port):
        c = await RawConn.open(port)
        await c.send(make_request(BOOM, opaque=1, oneway=True))
        resp = await c.call(make_request(FAST, opaque=2))
        assert resp.opaque == 2
    run(t)


def test_unencodable_response_becomes_system_error():
    async def t(fx, port):
        c = await RawConn.open(port)
        resp = await c.call(make_request(HUGE, opaque=3))
        assert resp.code == ResponseCode.SYSTEM_ERROR and resp.opaque == 3 and "header" in resp.remark
        assert (await c.call(make_request(FAST, opaque=4))).code == 0
    run(t)


def test_response_uses_request_serialize_type():
    async def t(fx, port):
        c = await RawConn.open(port)
        req = make_request(FAST, {"x": "bin"}, opaque=4, serialize_type=SerializeType.ROCKETMQ)
        resp = await c.call(req)
        assert resp.serialize_type == SerializeType.ROCKETMQ and resp.ext_fields == {"echo": "bin"}
        unknown = await c.call(make_request(31000, opaque=5, serialize_type=SerializeType.ROCKETMQ))
        assert unknown.serialize_type == SerializeType.ROCKETMQ and unknown.code == 3
    run(t)


def test_body_given_as_buffer_list_is_written_whole():
    async def t(fx, port):
        c = await RawConn.open(port)
        resp = await c.call(make_request(PARTS, opaque=1))
        assert bytes(resp.body) == b"abcdefgh"
    run(t)


def test_many_pipelined_requests_all_answered():
    async def t(fx, port):
        c = await RawConn.open(port)
        await c.stream.send_all(b"".join(encode_frame(make_request(FAST, {"x": str(i)}, opaque=i))
                                         for i in range(500)))
        got = {}
        for _ in range(500):
            r = await c.recv()
            got[r.opaque] = r.ext("echo")
        assert got == {i: str(i) for i in range(500)}
    run(t)


def test_broker_calls_client_over_its_own_connection():
    async def t(fx, port):
        notified = trio.Event()
        received: list[RemotingCommand] = []
        async with RemotingClient() as client:
            async def on_check(ctx, req):
                received.append(req)
                if req.is_oneway:
                    notified.set()
                    return None
                return make_response(req, ResponseCode.SUCCESS, ext_fields={"state": "COMMIT"})
            client.register(39, on_check)  # CHECK_TRANSACTION_STATE
            client.register(40, on_check)  # NOTIFY_CONSUMER_IDS_CHANGED
            addr = f"127.0.0.1:{port}"
            assert (await client.invoke(addr, make_request(CALLBACK), 5)).code == 0
            channel = fx.channels[0]
            await channel.send_request_oneway(make_request(40, {"consumerGroup": "g"}))
            await notified.wait()
            resp = await channel.invoke(make_request(39, {"msgId": "m"}), 5)
            assert resp.code == 0 and resp.ext("state") == "COMMIT"
            unsupported = await channel.invoke(make_request(41), 5)
            assert unsupported.code == 3
        assert received[0].ext("consumerGroup") == "g" and received[0].is_oneway
    run(t)


def test_invoke_times_out_when_peer_is_silent():
    async def t(fx, port):
        async with RemotingClient() as client:
            addr = f"127.0.0.1:{port}"
            with pytest.raises(RemotingTimeoutError):
                await client.invoke(addr, make_request(SLOW), 0.2)
            fx.release.set()
            # the connection is reused and still works
            first = await client.channel(addr)
            assert (await client.invoke(addr, make_request(FAST), 5)).code == 0
            assert await client.channel(addr) is first
    run(t)


def test_close_listener_and_channel_registry():
    async def t(fx, port):
        c = await RawConn.open(port)
        await c.call(make_request(FAST))
        assert len(fx.server.channels) == 1
        remote = next(iter(fx.server.channels)).remote_addr
        await c.stream.aclose()
        with trio.fail_after(5):
            while remote not in fx.closed:
                await trio.sleep(0.01)
        assert not fx.server.channels
    run(t)


def test_idle_connection_is_closed():
    async def t(fx, port):
        c = await RawConn.open(port)
        assert (await c.call(make_request(FAST))).code == 0
        start = trio.current_time()
        assert await c.recv() is None  # server hung up after 0.3 s of silence
        assert trio.current_time() - start >= 0.25
    run(t, idle_seconds=0.3)


def test_graceful_stop_finishes_in_flight_requests_and_stops_accepting():
    async def t(fx, port):
        c = await RawConn.open(port)
        await c.send(make_request(SLOW, opaque=1))
        await fx.slow_started.wait()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fx.server.stop)
            await trio.sleep(0.1)
            with pytest.raises(OSError):
                await trio.open_tcp_stream("127.0.0.1", port)
            fx.release.set()
            resp = await c.recv()
            assert resp is not None and resp.opaque == 1 and resp.remark == "slow done"
        assert await c.recv() is None
    run(t)


def test_port_in_use_fails_before_serving():
    async def main():
        first = RemotingServer("a")
        second = RemotingServer("b")
        async with trio.open_nursery() as nursery:
            addrs = await nursery.start(first.serve, [("127.0.0.1", 0)])
            with pytest.raises(OSError):
                await second.open_listeners([("127.0.0.1", addrs[0][1])])
            await first.stop()
    trio.run(main)


def test_a_client_closing_with_a_response_in_flight_is_no_warning(caplog):
    """A consumer that shuts down while a pull answer is being written closes with unread data
    (the kernel answers with a reset): the write fails with EPIPE/ECONNRESET, which is a debug
    line, not the WARNING "Broken pipe" it was."""
    async def t(fx, port):
        c = await RawConn.open(port)
        await c.send(make_request(BIG_BODY, opaque=1))
        assert await c.stream.receive_some(65536)  # the server is writing
        await c.stream.aclose()
        with trio.fail_after(10):
            while not fx.closed:
                await trio.sleep(0.01)

    with caplog.at_level(logging.DEBUG, logger="rmqd.server"):
        run(t)
    server_lines = [r for r in caplog.records if r.name == "rmqd.server"]
    assert not [r for r in server_lines if r.levelno >= logging.WARNING], [r.getMessage() for r in server_lines]
    assert any("peer has closed the connection" in r.getMessage() and r.levelno == logging.DEBUG
               for r in server_lines), [r.getMessage() for r in server_lines]
