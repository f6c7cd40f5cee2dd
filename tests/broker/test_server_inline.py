"""Inline handlers (answered on the connection's read loop, no task per request) and the
queued, batched write path, seen from a raw socket client. Every test is bounded."""

from __future__ import annotations

import struct

import pytest
import trio
import trio.testing

import rmqd.broker.server as server_module
import test_server
from rmqd.broker.server import RemotingServer
from rmqd.wire.codes import ResponseCode, SerializeType
from rmqd.wire.errors import WireError
from rmqd.wire.frame import RemotingCommand, encode_frame, make_request, make_response
from support import wait_until

pytestmark = pytest.mark.timeout(30)

FAST, LATER, BOOM, BAD, BIG, ASYNC_SLOW = 9101, 9102, 9103, 9104, 9105, 9106


@pytest.fixture(autouse=True, params=["socket", "stream"])
def io_path(request, monkeypatch):
    """Every test twice: the raw-socket fast path and the portable trio Stream path."""
    if request.param == "stream":
        monkeypatch.setattr(server_module, "raw_socket", lambda stream: None)
    return request.param


class RawConn(test_server.RawConn):
    async def send(self, *cmds: RemotingCommand) -> None:
        await self.stream.send_all(b"".join(encode_frame(c) for c in cmds))


class Fixture:
    def __init__(self) -> None:
        self.server = RemotingServer("test", grace_seconds=5)
        self.release = trio.Event()
        self.later_started = trio.Event()
        self.big_calls = 0
        self.hook_calls = 0
        self.flag_in_handler: list[bool] = []
        self.flag_in_hook: list[bool] = []
        s = self.server
        s.add_after_requests_hook(self.hook)
        s.register_inline(FAST, self.fast)
        s.register_inline(LATER, self.later)
        s.register_inline(BOOM, self.boom)
        s.register_inline(BAD, self.bad)
        s.register_inline(BIG, self.big)
        s.register(ASYNC_SLOW, self.async_slow)

    def hook(self):
        self.hook_calls += 1
        self.flag_in_hook.append(self.server.in_inline_call)

    def fast(self, ctx, req):
        self.flag_in_handler.append(self.server.in_inline_call)
        return make_response(req, ResponseCode.SUCCESS, "fast", ext_fields={"echo": req.ext("x", "")}, body=req.body)

    def later(self, ctx, req):
        async def wait():
            self.later_started.set()
            await self.release.wait()
            return make_response(req, ResponseCode.SUCCESS, "later done")
        return wait()

    def boom(self, ctx, req):
        raise RuntimeError("inline handler exploded")

    def bad(self, ctx, req):
        raise WireError("field 'x' is missing")

    def big(self, ctx, req):
        self.big_calls += 1
        return make_response(req, ResponseCode.SUCCESS, body=[b"x" * 65536, memoryview(b"y" * 34464)])

    async def async_slow(self, ctx, req):
        await self.release.wait()
        return make_response(req, ResponseCode.SUCCESS, "async slow done")


def run(test):
    async def main():
        fx = Fixture()
        with trio.fail_after(25):
            async with trio.open_nursery() as nursery:
                addrs = await nursery.start(fx.server.serve, [("127.0.0.1", 0)])
                await test(fx, addrs[0][1])
                fx.release.set()
                await fx.server.stop()
    trio.run(main)


def test_inline_answer_gets_opaque_flag_and_serialize_type():
    async def t(fx, port):
        c = await RawConn.open(port)
        await c.send(make_request(FAST, {"x": "1"}, b"body", opaque=41, serialize_type=SerializeType.ROCKETMQ))
        r = await c.recv()
        assert (r.opaque, r.code, r.remark, r.flag & 1) == (41, 0, "fast", 1)
        assert r.serialize_type == SerializeType.ROCKETMQ and r.ext_fields == {"echo": "1"} and r.body == b"body"
    run(t)


def test_pipelined_inline_requests_are_answered_in_order():
    async def t(fx, port):
        c = await RawConn.open(port)
        await c.send(*(make_request(FAST, {"x": str(i)}, opaque=i) for i in range(300)))
        got = [(await c.recv()) for _ in range(300)]
        assert [r.opaque for r in got] == list(range(300))
        assert [r.ext("echo") for r in got] == [str(i) for i in range(300)]
    run(t)


def test_awaitable_from_inline_handler_does_not_block_the_connection():
    async def t(fx, port):
        c = await RawConn.open(port)
        await c.send(make_request(LATER, opaque=1))
        await fx.later_started.wait()
        await c.send(make_request(FAST, opaque=2), make_request(ASYNC_SLOW, opaque=3), make_request(FAST, opaque=4))
        assert (await c.recv()).opaque == 2
        assert (await c.recv()).opaque == 4
        fx.release.set()
        rest = {(r.opaque, r.remark) for r in [await c.recv(), await c.recv()]}
        assert rest == {(1, "later done"), (3, "async slow done")}
    run(t)


def test_failing_inline_handler_gets_system_error_and_connection_stays_up():
    async def t(fx, port):
        c = await RawConn.open(port)
        await c.send(make_request(BOOM, opaque=5), make_request(BAD, opaque=6), make_request(FAST, opaque=7))
        boom, bad, fast = await c.recv(), await c.recv(), await c.recv()
        assert boom.code == ResponseCode.SYSTEM_ERROR and "inline handler exploded" in boom.remark
        assert bad.code == ResponseCode.SYSTEM_ERROR and "field 'x' is missing" in bad.remark
        assert (fast.opaque, fast.code) == (7, 0)
    run(t)


def test_oneway_inline_request_gets_no_answer():
    async def t(fx, port):
        c = await RawConn.open(port)
        await c.send(make_request(FAST, opaque=1, oneway=True), make_request(BOOM, opaque=2, oneway=True),
                     make_request(FAST, opaque=3))
        assert (await c.recv()).opaque == 3
    run(t)


def test_answers_queue_while_the_peer_does_not_read():
    """~100 KiB answers to 120 requests (12 MiB): far more than the socket buffers and the
    queue limit. The server stops reading until the client reads, then everything arrives."""
    async def t(fx, port):
        c = await RawConn.open(port)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(c.send, *(make_request(BIG, opaque=i) for i in range(120)))
            await trio.sleep(0.3)  # the behaviour under test: the server fills the socket and its queue
            got = [await c.recv() for _ in range(120)]
        assert [r.opaque for r in got] == list(range(120))
        assert all(len(r.body) == 100000 and r.body[:1] == b"x" and r.body[-1:] == b"y" for r in got)
        assert fx.big_calls == 120
    run(t)


def test_frames_before_a_framing_error_are_answered_then_the_connection_closes():
    async def t(fx, port):
        c = await RawConn.open(port)
        await c.stream.send_all(encode_frame(make_request(FAST, opaque=1)) + struct.pack(">i", -5) + b"xxxx")
        first = await c.recv()
        assert first is not None and first.opaque == 1
        assert await c.recv() is None
    run(t)


def test_graceful_stop_answers_a_pending_inline_continuation():
    async def t(fx, port):
        c = await RawConn.open(port)
        await c.send(make_request(LATER, opaque=9))
        await fx.later_started.wait()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fx.server.stop)
            await fx.server.stopping.wait()
            await trio.testing.wait_all_tasks_blocked()  # the connection saw it and waits for the handler
            fx.release.set()
            r = await c.recv()
            assert r is not None and (r.opaque, r.remark) == (9, "later done")
        assert await c.recv() is None
    run(t)


def test_queued_answers_are_written_in_the_background_and_keep_their_order():
    """A few MiB of answers the client does not read yet: the read loop goes on reading
    (a background task writes the queue), later answers come after the queued ones."""
    async def t(fx, port):
        c = await RawConn.open(port)
        await c.send(*(make_request(BIG, opaque=i) for i in range(30)))
        # every BIG answered into the queue (the client reads nothing yet), then one more request
        await wait_until(lambda: fx.big_calls == 30, 5, "the server to answer all 30 unread requests")
        await c.send(make_request(FAST, {"x": "after"}, opaque=30))
        got = [await c.recv() for _ in range(31)]
        assert [r.opaque for r in got] == list(range(31))
        assert got[-1].ext("echo") == "after"
    run(t)


def test_after_requests_hook_follows_every_read_and_every_request_task():
    """The hook LoopDispatch relies on: after a read's inline answers (the flag that an
    inline handler runs is up inside it and down in the hook), and after a task's answer."""
    async def t(fx, port):
        c = await RawConn.open(port)
        await c.send(make_request(FAST, opaque=1), make_request(FAST, opaque=2))
        assert [(await c.recv()).opaque for _ in range(2)] == [1, 2]
        await wait_until(lambda: fx.hook_calls >= 1, 5, "the hook after the read", interval=0.001)
        assert fx.flag_in_handler == [True, True] and set(fx.flag_in_hook) == {False}
        before = fx.hook_calls
        await c.send(make_request(ASYNC_SLOW, opaque=3))
        # the read that started the task (its answer waits)
        await wait_until(lambda: fx.hook_calls > before, 5, "the hook after the task's read", interval=0.001)
        after_read = fx.hook_calls
        fx.release.set()
        assert (await c.recv()).opaque == 3
        # and once more after the task's answer
        await wait_until(lambda: fx.hook_calls > after_read, 5, "the hook after the task's answer", interval=0.001)
        assert not fx.server.in_inline_call
    run(t)


def test_after_requests_hook_runs_when_a_framing_error_ends_the_read():
    """Whatever the inline handlers of a read set going is followed by the hook, even when
    the read ends in a framing error (LoopDispatch leaves their appends' dispatch to it)."""
    async def t(fx, port):
        c = await RawConn.open(port)
        await c.stream.send_all(encode_frame(make_request(FAST, opaque=1)) + struct.pack(">i", -5) + b"xxxx")
        assert (await c.recv()).opaque == 1
        assert await c.recv() is None
        assert fx.flag_in_handler == [True] and fx.hook_calls >= 1
        assert not fx.server.in_inline_call
    run(t)


def test_a_failing_inline_handler_lowers_the_flag():
    async def t(fx, port):
        c = await RawConn.open(port)
        await c.send(make_request(BOOM, opaque=5))
        assert (await c.recv()).code == ResponseCode.SYSTEM_ERROR
        assert not fx.server.in_inline_call
    run(t)


def count_reads(monkeypatch, reads: list[str], module=server_module) -> None:
    """Record each read of ``module``'s read loop that returned data: 'W' after a wait through
    the scheduler, 'E' taken straight after a chunk (receive_now). The gRPC listener's tests
    use it too."""
    waited, now = module.receive_from, module.receive_now

    async def counted_wait(sock, stream, size):
        data = await waited(sock, stream, size)
        if data:
            reads.append("W")
        return data

    def counted_now(sock, size):
        data = now(sock, size)
        if data:
            reads.append("E")
        return data

    monkeypatch.setattr(module, "receive_from", counted_wait)
    monkeypatch.setattr(module, "receive_now", counted_now)


def test_buffered_requests_are_read_on_without_waiting_up_to_the_bound(monkeypatch, io_path):
    reads: list[str] = []
    count_reads(monkeypatch, reads)
    monkeypatch.setattr(server_module, "RECEIVE_CHUNK", 40)  # many reads for the frames below

    async def t2(fx, port):  # the frames in one write; the answers read after all were sent
        c = await RawConn.open(port)
        await c.send(*(make_request(FAST, {"x": f"{i:04d}"}, opaque=i) for i in range(200)))
        got = [(await c.recv()) for _ in range(200)]
        assert [r.ext("echo") for r in got] == [f"{i:04d}" for i in range(200)]
    run(t2)
    assert reads, "nothing was read"
    runs = [len(r) for r in "".join(reads).split("W")]
    if io_path == "stream":  # the portable path always reads through the stream
        assert set(reads) == {"W"}
    else:
        assert "E" in reads and max(runs) <= server_module.EAGER_READS
        assert reads.count("W") >= len(reads) // (server_module.EAGER_READS + 1)

