"""The gRPC mode of scripts/fuzz_live.py: malformed HTTP/2 and gRPC against rmqd's gRPC port.

Why a mode of its own: the gRPC port is a different door (h2 frames, HPACK headers, gRPC's
length-prefixed messages, protobuf) with its own ways to break: frames with bad lengths, types,
flags or stream ids, HPACK garbage, CONTINUATION floods, flow-control abuse, requests with no
path or an unknown method, bad grpc-timeout / grpc-encoding, oversized, truncated or falsely
compressed messages, invalid protobuf, streams left half-open. Every answer must be a gRPC
status, a RocketMQ status or a connection-level error (GOAWAY / close): never a traceback in the
server's log, never a wedge. Health checks on new connections (a QueryRoute and a SendMessage
over h2c, the Remoting health check of fuzz_live) must keep passing.

Seeds are valid calls of every MessagingService method, built with rmqd's own descriptors; a
mutator picks a layer (HTTP/2 frame bytes, headers, gRPC framing, protobuf, stream behaviour)
and damages it. "Frames" counted are HTTP/2 frames written to the server.
"""

from __future__ import annotations

import random
import struct
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import hpack
import trio

from rmqd.wire.grpc import encode_message, encode_timeout
from rmqd.wire.rocketmq_v2 import ClientType, MESSAGING_METHODS, MESSAGING_SERVICE, pb

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
# frame types
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, END_HEADERS, PADDED, PRIORITY_FLAG = 0x1, 0x4, 0x8, 0x20


def frame(kind: int, flags: int, stream_id: int, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind & 0xFF, flags & 0xFF]) + \
        struct.pack(">I", stream_id & 0xFFFFFFFF) + payload


def settings_frame(values: dict[int, int] | None = None, ack: bool = False) -> bytes:
    payload = b"".join(struct.pack(">HI", k, v & 0xFFFFFFFF) for k, v in (values or {}).items())
    return frame(SETTINGS, 1 if ack else 0, 0, payload)


# -- seeds -----------------------------------------------------------------------------------------

def _settings(client_type: int, topic: str, group: str | None = None) -> Any:
    s = pb.Settings(client_type=client_type)
    s.request_timeout.FromMilliseconds(3000)
    if group is None:
        s.publishing.topics.add(name=topic)
    else:
        s.subscription.group.name = group
        e = s.subscription.subscriptions.add()
        e.topic.name = topic
        e.expression.type = 1
        e.expression.expression = "*"
    return pb.TelemetryCommand(settings=s)


def seed_messages(topic: str, group: str) -> list[tuple[str, bytes]]:
    """(method, serialized request) of every MessagingService method, shaped as the 5.x clients send."""
    msg = pb.Message(body=b"fuzz body")
    msg.topic.name = topic
    msg.system_properties.tag = "TagA"
    msg.system_properties.keys.extend(["k1"])
    msg.system_properties.message_id = "01FUZZ0000000000000000000000000000"
    msg.system_properties.message_type = 1
    msg.system_properties.born_timestamp.FromMilliseconds(int(time.time() * 1000))
    mq = pb.MessageQueue(id=0)
    mq.topic.name = topic
    receive = pb.ReceiveMessageRequest(group=pb.Resource(name=group), message_queue=mq, batch_size=4)
    receive.invisible_duration.FromSeconds(15)
    receive.long_polling_timeout.FromSeconds(1)
    receive.filter_expression.type = 1
    receive.filter_expression.expression = "*"
    change = pb.ChangeInvisibleDurationRequest(group=pb.Resource(name=group), topic=pb.Resource(name=topic),
                                               receipt_handle="0 1 15000 0 0 broker-a 0 0 0", message_id="x")
    change.invisible_duration.FromSeconds(5)
    ack = pb.AckMessageRequest(group=pb.Resource(name=group), topic=pb.Resource(name=topic))
    ack.entries.add(message_id="x", receipt_handle="0 1 15000 0 0 broker-a 0 0 0")
    out = [
        ("QueryRoute", pb.QueryRouteRequest(topic=pb.Resource(name=topic))),
        ("Heartbeat", pb.HeartbeatRequest(client_type=ClientType.PRODUCER)),
        ("Heartbeat", pb.HeartbeatRequest(client_type=ClientType.SIMPLE_CONSUMER, group=pb.Resource(name=group))),
        ("SendMessage", pb.SendMessageRequest(messages=[msg])),
        ("QueryAssignment", pb.QueryAssignmentRequest(topic=pb.Resource(name=topic), group=pb.Resource(name=group))),
        ("ReceiveMessage", receive),
        ("AckMessage", ack),
        ("ChangeInvisibleDuration", change),
        ("ForwardMessageToDeadLetterQueue", pb.ForwardMessageToDeadLetterQueueRequest(
            group=pb.Resource(name=group), topic=pb.Resource(name=topic), receipt_handle="0 1 2 3 0 b 0 0 0")),
        ("EndTransaction", pb.EndTransactionRequest(topic=pb.Resource(name=topic), message_id="x",
                                                    transaction_id="x", resolution=1)),
        ("NotifyClientTermination", pb.NotifyClientTerminationRequest(group=pb.Resource(name=group))),
        ("Telemetry", _settings(ClientType.PRODUCER, topic)),
        ("Telemetry", _settings(ClientType.SIMPLE_CONSUMER, topic, group)),
        ("PullMessage", pb.PullMessageRequest(group=pb.Resource(name=group), message_queue=mq)),
        ("RecallMessage", pb.RecallMessageRequest(topic=pb.Resource(name=topic), recall_handle="x")),
    ]
    return [(m, r.SerializeToString()) for m, r in out]


def request_headers(method: str, *, timeout_s: float | None = 5.0, client_id: str = "fuzz-client",
                    extra: list[tuple[str, str]] | None = None) -> list[tuple[str, str]]:
    h = [(":method", "POST"), (":scheme", "http"), (":path", f"/{MESSAGING_SERVICE}/{method}"),
         (":authority", "127.0.0.1"), ("content-type", "application/grpc"), ("te", "trailers"),
         ("x-mq-client-id", client_id), ("x-mq-language", "JAVA"), ("x-mq-client-version", "5.0.8"),
         ("x-mq-protocol", "v2")]
    if timeout_s is not None:
        h.append(("grpc-timeout", encode_timeout(timeout_s)))
    return h + (extra or [])


# -- mutation -----------------------------------------------------------------------------------------

@dataclass
class GrpcStats:
    frames: int = 0
    connections: int = 0
    server_closes: int = 0
    goaways: int = 0
    by_mutator: Counter = field(default_factory=Counter)
    statuses: Counter = field(default_factory=Counter)  # grpc-status values seen in answers
    health_ok: int = 0
    health_failed: int = 0
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0


NASTY_VALUES = ["", " ", "\x00", "a" * 9000, "%", "-1", "99999999999S", "1n", "100m", "gzip", "br", "deflate", "x" * 300,
                "application/grpc+json", "text/plain", "../../etc/passwd", "\ud800".encode("utf-8", "surrogatepass").decode(
                    "latin-1")]


class Mutator:
    """One call's worth of HTTP/2 frames, damaged one way; returns (frames, mutator name)."""

    def __init__(self, rng: random.Random, seeds: list[tuple[str, bytes]]) -> None:
        self.rng = rng
        self.seeds = seeds
        self.encoder = hpack.Encoder()

    def _headers(self, headers: list[tuple[str, str]]) -> bytes:
        # a fresh encoder per block: the server's decoder state must not depend on what it refused
        return hpack.Encoder().encode(headers)

    def call(self, stream_id: int) -> tuple[list[bytes], str]:
        r = self.rng
        method, payload = r.choice(self.seeds)
        headers = request_headers(method, timeout_s=r.choice([None, 0.5, 2.0, 5.0]))
        data = encode_message(payload)
        kind = r.choice(["valid", "frame_bytes", "headers", "grpc_framing", "protobuf", "half_open", "flow",
                         "control", "continuation", "compressed", "oversize", "reset"])
        end = END_STREAM
        if kind == "headers":
            headers = self._mutate_headers(headers)
        elif kind == "grpc_framing":
            data = self._mutate_grpc(data)
        elif kind == "protobuf":
            data = encode_message(self._mutate_bytes(payload))
        elif kind == "compressed":
            headers.append(("grpc-encoding", r.choice(["gzip", "deflate", "identity", "snappy"])))
            data = b"\x01" + struct.pack(">I", len(payload)) + self._mutate_bytes(payload)
        elif kind == "oversize":
            data = b"\x00" + struct.pack(">I", r.choice([2**31 - 1, 2**32 - 1, 200 * 1024 * 1024])) + payload
        elif kind == "half_open":
            end = 0
            if r.random() < 0.5:
                data = data[:r.randrange(0, max(len(data), 1))]
        frames = [frame(HEADERS, END_HEADERS, stream_id, self._headers(headers))]
        if kind == "continuation":
            block = self._headers(headers)
            cut = r.randrange(0, max(len(block), 1))
            frames = [frame(HEADERS, 0, stream_id, block[:cut])]
            for _ in range(r.choice([1, 2, 50, 300])):
                frames.append(frame(CONTINUATION, 0, stream_id, bytes(r.randrange(256) for _ in range(r.randrange(20)))))
            frames.append(frame(CONTINUATION, END_HEADERS, stream_id, block[cut:]))
        pieces = self._split(data) if data else [b""]
        for i, piece in enumerate(pieces):
            frames.append(frame(DATA, end if i == len(pieces) - 1 else 0, stream_id, piece))
        if kind == "frame_bytes":
            i = r.randrange(len(frames))
            frames[i] = self._mutate_bytes(frames[i])
        elif kind == "flow":
            frames.insert(r.randrange(len(frames) + 1), frame(WINDOW_UPDATE, 0, r.choice([0, stream_id]),
                                                                struct.pack(">I", r.choice([0, 1, 2**31 - 1, 2**31]))))
        elif kind == "control":
            frames.insert(r.randrange(len(frames) + 1), self._control(stream_id))
        elif kind == "reset":
            frames.insert(r.randrange(1, len(frames) + 1), frame(RST_STREAM, 0, stream_id, struct.pack(">I", 8)))
        return frames, kind

    def _control(self, stream_id: int) -> bytes:
        r = self.rng
        choice = r.randrange(9)
        if choice == 0:
            return settings_frame({r.randrange(0, 10): r.randrange(0, 2**32)})
        if choice == 1:
            return frame(PING, r.choice([0, 1]), r.choice([0, stream_id]), bytes(r.choice([8, 7, 9])))
        if choice == 2:
            return frame(PRIORITY, 0, stream_id, struct.pack(">IB", r.choice([stream_id, 0, 2**31 + stream_id]), 16))
        if choice == 3:
            return frame(PUSH_PROMISE, END_HEADERS, stream_id, struct.pack(">I", stream_id + 2) + b"\x82")
        if choice == 4:
            return frame(GOAWAY, 0, 0, struct.pack(">II", 0, 0))
        if choice == 5:
            return frame(r.randrange(10, 256), r.randrange(256), r.randrange(2**31), bytes(r.randrange(64)))
        if choice == 6:
            return frame(DATA, 0, r.choice([0, stream_id + 1000, 2]), b"x" * r.randrange(100))
        if choice == 7:
            return frame(HEADERS, END_HEADERS, r.choice([0, 2, stream_id]), bytes(r.randrange(256) for _ in range(20)))
        return frame(SETTINGS, 0, 0, b"\x00" * r.choice([1, 5, 7]))

    def _mutate_headers(self, headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
        r = self.rng
        headers = list(headers)
        op = r.randrange(6)
        if op == 0 and headers:
            del headers[r.randrange(len(headers))]
        elif op == 1:
            i = r.randrange(len(headers))
            headers[i] = (headers[i][0], r.choice(NASTY_VALUES))
        elif op == 2:
            headers = [(k, v) if k != ":path" else (k, r.choice([f"/{MESSAGING_SERVICE}/Nope", "/x", "", "//",
                                                                  "/apache.rocketmq.v2.Admin/ChangeLogLevel",
                                                                  f"/{MESSAGING_SERVICE}/"])) for k, v in headers]
        elif op == 3:
            headers.append(("grpc-timeout", r.choice(NASTY_VALUES)))
        elif op == 4:
            headers.append(("authorization", r.choice(["MQv2-HMAC-SHA1 Credential=ak, Signature=zz", "x", "a b",
                                                       "MQv2-HMAC-SHA1 Credential=", "MQv2-HMAC-SHA1 a=b=c"])))
        else:
            headers += [(f"x-{i}", "v" * r.randrange(200)) for i in range(r.randrange(300))]
        return headers

    def _mutate_grpc(self, data: bytes) -> bytes:
        r = self.rng
        op = r.randrange(5)
        if op == 0:
            return data[:r.randrange(len(data))]
        if op == 1:
            return bytes([r.randrange(256)]) + data[1:]
        if op == 2:
            return data[:1] + struct.pack(">I", r.randrange(2**32)) + data[5:]
        if op == 3:
            return data + data[:r.randrange(len(data))]
        return data * r.randrange(2, 5)

    def _mutate_bytes(self, data: bytes) -> bytes:
        r = self.rng
        b = bytearray(data)
        for _ in range(r.randrange(1, 6)):
            op = r.randrange(4)
            if op == 0 and b:
                b[r.randrange(len(b))] = r.randrange(256)
            elif op == 1 and b:
                i = r.randrange(len(b))
                del b[i:i + r.randrange(1, 8)]
            elif op == 2:
                b[r.randrange(len(b) + 1):r.randrange(len(b) + 1)] = bytes(r.randrange(256) for _ in range(r.randrange(1, 9)))
            elif b:
                i = r.randrange(len(b))
                b[i] ^= 1 << r.randrange(8)
        return bytes(b)

    def _split(self, data: bytes) -> list[bytes]:
        r = self.rng
        if r.random() < 0.7 or len(data) < 2:
            return [data]
        cuts = sorted(r.sample(range(1, len(data)), min(len(data) - 1, r.randrange(1, 5))))
        out, last = [], 0
        for c in cuts:
            out.append(data[last:c])
            last = c
        out.append(data[last:])
        return out


# -- connections ------------------------------------------------------------------------------------

class RawConnection:
    """A fuzzing connection: writes frames without waiting for answers; a reader drains them."""

    def __init__(self, port: int, stats: GrpcStats) -> None:
        self.port = port
        self.stats = stats
        self.stream: trio.SocketStream | None = None
        self.closed = trio.Event()
        self.next_stream = 1

    async def open(self, nursery: trio.Nursery) -> None:
        self.stream = await trio.open_tcp_stream("127.0.0.1", self.port)
        self.stats.connections += 1
        self.closed = trio.Event()
        self.next_stream = 1
        await self.stream.send_all(PREFACE + settings_frame({4: 65535 * 16}))
        nursery.start_soon(self._reader, self.stream, self.closed)

    async def _reader(self, stream: trio.SocketStream, closed: trio.Event) -> None:
        buf = bytearray()
        try:
            while True:
                data = await stream.receive_some(65536)
                if not data:
                    break
                buf += data
                while len(buf) >= 9:
                    length = int.from_bytes(buf[:3], "big")
                    if len(buf) < 9 + length:
                        break
                    kind = buf[3]
                    if kind == GOAWAY:
                        self.stats.goaways += 1
                    elif kind == HEADERS:
                        block = bytes(buf[9:9 + length])
                        if b"grpc-status" in block or len(block) < 64:
                            self.stats.statuses["headers"] += 1
                    del buf[:9 + length]
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        finally:
            closed.set()

    async def send(self, frames: list[bytes], nursery: trio.Nursery) -> None:
        if self.stream is None or self.closed.is_set() or self.next_stream > 2**30:
            if self.stream is not None:
                self.stats.server_closes += 1 if self.closed.is_set() else 0
                await self.stream.aclose()
            await self.open(nursery)
        assert self.stream is not None
        try:
            with trio.fail_after(10):
                await self.stream.send_all(b"".join(frames))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            self.closed.set()
        except trio.TooSlowError:
            self.stats.failures.append("a send blocked 10 s: the server stopped reading a connection")
            self.closed.set()

    async def close(self) -> None:
        if self.stream is not None:
            await self.stream.aclose()


# -- health ------------------------------------------------------------------------------------------

async def grpc_call(port: int, method: str, payload: bytes, timeout: float = 10.0) -> tuple[str | None, bytes]:
    """One proper unary call on a new h2c connection: (grpc-status, response payload)."""
    import h2.config
    import h2.connection
    import h2.events

    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    sid = conn.get_next_available_stream_id()
    conn.send_headers(sid, request_headers(method, timeout_s=timeout))
    conn.send_data(sid, encode_message(payload), end_stream=True)
    status: str | None = None
    body = bytearray()
    with trio.fail_after(timeout + 5):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            await stream.send_all(conn.data_to_send())
            done = False
            while not done:
                data = await stream.receive_some(65536)
                if not data:
                    break
                for event in conn.receive_data(data):
                    if isinstance(event, h2.events.DataReceived):
                        body += event.data
                        conn.acknowledge_received_data(event.flow_controlled_length, sid)
                    elif isinstance(event, (h2.events.TrailersReceived, h2.events.ResponseReceived)):
                        status = dict(event.headers).get("grpc-status", status)
                    if isinstance(event, (h2.events.StreamEnded, h2.events.StreamReset)):
                        done = True
                await stream.send_all(conn.data_to_send())
    return status, bytes(body[5:])


async def grpc_health(port: int, topic: str) -> str | None:
    """None when a QueryRoute and a SendMessage answer OK on new connections."""
    from rmqd.wire.rocketmq_v2 import Code
    try:
        status, body = await grpc_call(port, "QueryRoute", pb.QueryRouteRequest(topic=pb.Resource(name=topic))
                                       .SerializeToString())
        if status != "0" or pb.QueryRouteResponse.FromString(body).status.code != Code.OK:
            return f"QueryRoute: grpc-status {status}"
        msg = pb.Message(body=b"health")
        msg.topic.name = topic
        msg.system_properties.message_id = f"01HEALTH{time.time_ns():026d}"[:34]
        msg.system_properties.message_type = 1
        status, body = await grpc_call(port, "SendMessage", pb.SendMessageRequest(messages=[msg]).SerializeToString())
        code = pb.SendMessageResponse.FromString(body).status.code if status == "0" else None
        if code != Code.OK:
            return f"SendMessage: grpc-status {status}, code {code}"
    except Exception as exc:  # noqa: BLE001 - any failure of the check is the finding
        return f"{type(exc).__name__}: {exc}"
    return None


async def fuzz(port: int, frames: int, seed: int, topic: str, group: str, *, connections: int = 4,
               health_every: int = 2000, remote_health: Callable[[int], Any] | None = None,
               check_log: Callable[[], list[str]] | None = None, progress_every: int = 20_000) -> GrpcStats:
    """Send at least `frames` damaged HTTP/2 frames over `connections` connections, with health
    checks (gRPC, and Remoting through `remote_health(n)`) and log scans every `health_every`."""
    stats = GrpcStats()
    rng = random.Random(seed)
    mutator = Mutator(rng, seed_messages(topic, group))
    started = time.monotonic()
    next_health = health_every
    next_progress = progress_every
    async with trio.open_nursery() as nursery:
        conns = [RawConnection(port, stats) for _ in range(connections)]
        while stats.frames < frames:
            conn = rng.choice(conns)
            if conn.stream is None or conn.closed.is_set():
                await conn.send([], nursery)
            sid = conn.next_stream
            conn.next_stream += 2
            batch, kind = mutator.call(sid)
            stats.by_mutator[kind] += 1
            stats.frames += len(batch)
            await conn.send(batch, nursery)
            if rng.random() < 0.02:  # now and then a connection is dropped mid-call
                await conn.close()
                conn.closed.set()
            if stats.frames >= next_health:
                next_health += health_every
                await trio.sleep(0.05)
                problem = await grpc_health(port, topic)
                if problem is None and remote_health is not None:
                    problem = await remote_health(stats.frames)
                if problem is None:
                    stats.health_ok += 1
                else:
                    stats.health_failed += 1
                    stats.failures.append(f"health check after {stats.frames} frames: {problem}")
                if check_log is not None:
                    stats.failures += [f"log: {sig}" for sig in check_log()]
            if stats.frames >= next_progress:
                next_progress += progress_every
                print(f"  grpc fuzz: {stats.frames} frames, {stats.connections} connections, "
                      f"{stats.goaways} GOAWAYs, health {stats.health_ok} ok / {stats.health_failed} failed",
                      flush=True)
        for conn in conns:
            await conn.close()
        nursery.cancel_scope.cancel()
    stats.seconds = time.monotonic() - started
    return stats


def report(stats: GrpcStats, out: Callable[[str], None] = print) -> None:
    out(f"gRPC frames sent    {stats.frames}")
    out(f"duration            {stats.seconds:.1f} s ({stats.frames / max(stats.seconds, 1e-9):.0f} frames/s)")
    out(f"connections         {stats.connections} ({stats.goaways} GOAWAYs from the server)")
    out(f"health checks       {stats.health_ok} ok, {stats.health_failed} failed")
    out("calls by mutator    " + ", ".join(f"{k}:{v}" for k, v in sorted(stats.by_mutator.items())))
    for f in stats.failures[:20]:
        out(f"FAILURE {f}")


__all__ = ["GrpcStats", "fuzz", "grpc_call", "grpc_health", "report", "seed_messages"]
