"""processors/grpc_service.py on a live in-process broker, driven by grpcio with rmqd's own
apache.rocketmq.v2 descriptors: route, settings over Telemetry, heartbeat, send (normal, FIFO,
delay, transaction), end transaction with the check-back, the proxy's status codes."""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
import trio

from broker_harness import Harness, run_with_broker
from grpc_support import V2Client, new_message, resource
from rmqd.wire.bodies import TopicConfig
from rmqd.wire.message import decode_messages
from rmqd.wire.rocketmq_v2 import ClientType, Code, MessageType, Permission, TransactionResolution, pb
from support import wait_until


def _port(h: Harness) -> int:
    return h.role.bound["grpc"][1]


def _create_topic(h: Harness, name: str, message_type: str | None = None, queues: int = 4) -> None:
    h.role.topic_config_manager.update_topic_config(TopicConfig(
        topicName=name, readQueueNums=queues, writeQueueNums=queues,
        attributes={"message.type": message_type} if message_type else None))


def _run(tmp_path: Path, body: Any, **overrides: Any) -> None:
    async def fn(h: Harness) -> None:
        await body(h)
    run_with_broker(tmp_path, fn, timeout=60, **overrides)


def _producer_settings(topic: str) -> Any:
    s = pb.Settings(client_type=ClientType.PRODUCER)
    s.publishing.topics.add(name=topic)
    s.request_timeout.FromMilliseconds(3000)
    return pb.TelemetryCommand(settings=s)


class _Telemetry:
    """A Telemetry stream from a thread: commands in through a queue, answers collected."""

    def __init__(self, client: V2Client, first: Any) -> None:
        self.out: queue.Queue[Any] = queue.Queue()
        self.out.put(first)
        self.received: list[Any] = []
        self.got = threading.Event()
        self.error: BaseException | None = None

        def requests() -> Any:
            while True:
                item = self.out.get()
                if item is None:
                    return
                yield item

        self.responses = client.telemetry(requests())
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            for r in self.responses:
                self.received.append(r)
                self.got.set()
                kind = r.WhichOneof("command")
                if kind == "print_thread_stack_trace_command":  # answered as a 5.x client does
                    reply = pb.TelemetryCommand(status=pb.Status(code=Code.OK))
                    reply.thread_stack_trace.nonce = r.print_thread_stack_trace_command.nonce
                    reply.thread_stack_trace.thread_stack_trace = "\"main\" RUNNABLE"
                    self.out.put(reply)
                elif kind == "verify_message_command":
                    reply = pb.TelemetryCommand(status=pb.Status(code=Code.OK))
                    reply.verify_message_result.nonce = r.verify_message_command.nonce
                    self.out.put(reply)
        except grpc.RpcError as exc:
            self.error = exc
            self.got.set()

    def wait(self, n: int, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.received) < n and time.monotonic() < deadline and self.error is None:
            self.got.wait(0.1)
            self.got.clear()
        assert len(self.received) >= n, (self.received, self.error)

    def close(self) -> None:
        self.out.put(None)
        self.thread.join(10)


def test_route_settings_heartbeat_and_sends(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        _create_topic(h, "TopicN")
        _create_topic(h, "TopicF", "FIFO")
        port = _port(h)

        def client_side() -> dict[str, Any]:
            c = V2Client(port)
            out: dict[str, Any] = {}
            req = pb.QueryRouteRequest(topic=resource("TopicN"))
            req.endpoints.scheme = 1
            req.endpoints.addresses.add(host="127.0.0.1", port=port)
            out["route"] = c.call("QueryRoute", req)
            out["missing"] = c.call("QueryRoute", pb.QueryRouteRequest(topic=resource("NoSuchTopic")))
            out["system"] = c.call("QueryRoute", pb.QueryRouteRequest(topic=resource("TBW102")))
            out["hb_before"] = c.call("Heartbeat", pb.HeartbeatRequest(client_type=ClientType.PRODUCER))
            tel = _Telemetry(c, _producer_settings("TopicN"))
            tel.wait(1)
            out["settings"] = tel.received[0]
            out["hb"] = c.call("Heartbeat", pb.HeartbeatRequest(client_type=ClientType.PRODUCER))
            out["send"] = c.call("SendMessage", pb.SendMessageRequest(messages=[
                new_message("TopicN", b"hello", tag="TagA", keys=("k1", "k2"), props={"color": "red"})]))
            out["fifo"] = c.call("SendMessage", pb.SendMessageRequest(messages=[
                new_message("TopicF", b"ordered", group="g1", kind=MessageType.FIFO)]))
            out["mismatch"] = c.call("SendMessage", pb.SendMessageRequest(messages=[
                new_message("TopicF", b"plain")]))
            out["unknown"] = c.call("SendMessage", pb.SendMessageRequest(messages=[new_message("NoSuchTopic", b"x")]))
            out["empty"] = c.call("SendMessage", pb.SendMessageRequest(messages=[new_message("TopicN", b"")]))
            out["too_large"] = c.call("SendMessage", pb.SendMessageRequest(
                messages=[new_message("TopicN", b"x" * (4 * 1024 * 1024 + 1))]))
            out["bad_tag"] = c.call("SendMessage", pb.SendMessageRequest(messages=[
                new_message("TopicN", b"x", tag="a|b")]))
            out["sys_prop"] = c.call("SendMessage", pb.SendMessageRequest(messages=[
                new_message("TopicN", b"x", props={"KEYS": "no"})]))
            out["no_client_id"] = c.call("QueryRoute", req, **{"x-mq-client-id": ""})
            tel.close()
            c.close()
            return out

        out = await trio.to_thread.run_sync(client_side)
        route = out["route"]
        assert route.status.code == Code.OK
        assert [q.id for q in route.message_queues] == [0, 1, 2, 3]
        assert all(q.permission == Permission.READ_WRITE for q in route.message_queues)
        assert list(route.message_queues[0].accept_message_types) == [MessageType.NORMAL]
        assert route.message_queues[0].broker.endpoints.addresses[0].port == _port(h)
        assert out["missing"].status.code == Code.TOPIC_NOT_FOUND
        assert out["system"].status.code == Code.ILLEGAL_TOPIC
        assert out["hb_before"].status.code == Code.UNRECOGNIZED_CLIENT_TYPE
        settings = out["settings"]
        assert settings.status.code == Code.OK
        assert settings.settings.backoff_policy.max_attempts == 3
        assert settings.settings.publishing.max_body_size == 4 * 1024 * 1024
        assert settings.settings.publishing.validate_message_type
        assert out["hb"].status.code == Code.OK
        send = out["send"]
        assert send.status.code == Code.OK, send
        assert send.entries[0].message_id and send.entries[0].offset == 0
        assert out["fifo"].status.code == Code.OK
        assert out["mismatch"].status.code == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
        assert out["unknown"].status.code == Code.TOPIC_NOT_FOUND
        assert out["empty"].status.code == Code.MESSAGE_BODY_EMPTY
        assert out["too_large"].status.code == Code.MESSAGE_BODY_TOO_LARGE
        assert out["bad_tag"].status.code == Code.ILLEGAL_MESSAGE_TAG
        assert out["sys_prop"].status.code == Code.ILLEGAL_MESSAGE_PROPERTY_KEY
        assert out["no_client_id"].status.code == Code.CLIENT_ID_REQUIRED
        assert "TopicN" in h.role.producer_manager.group_channel_table
        # the stored message, as a 4.x consumer would read it
        h.wait_dispatched()
        records = []
        for q in range(4):
            pulled = await h.pull("TopicN", "cg", q, 0, sys_flag=4, subscription="*", suspend_ms=0)
            records += decode_messages(bytes(pulled.body or b""))
        (rec,) = records
        assert rec.body == b"hello"
        assert rec.properties["TAGS"] == "TagA" and rec.properties["KEYS"] == "k1 k2"
        assert rec.properties["color"] == "red"
        assert rec.properties["UNIQ_KEY"] == send.entries[0].message_id
        assert rec.properties["PGROUP"] == "TopicN" and rec.properties["__BORNHOST"] == "test-host"

    _run(tmp_path, body)


def test_transaction_commit_and_check_back(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        _create_topic(h, "TopicT", "TRANSACTION")
        port = _port(h)

        def client_side() -> dict[str, Any]:
            c = V2Client(port)
            out: dict[str, Any] = {}
            tel = _Telemetry(c, _producer_settings("TopicT"))
            tel.wait(1)
            for name in ("commit", "rollback", "unknown"):
                m = new_message("TopicT", name.encode(), kind=MessageType.TRANSACTION)
                out[name] = c.call("SendMessage", pb.SendMessageRequest(messages=[m]))
            for name, resolution in (("commit", TransactionResolution.COMMIT),
                                     ("rollback", TransactionResolution.ROLLBACK)):
                entry = out[name].entries[0]
                out[f"end_{name}"] = c.call("EndTransaction", pb.EndTransactionRequest(
                    topic=resource("TopicT"), message_id=entry.message_id, transaction_id=entry.transaction_id,
                    resolution=resolution))
            out["end_missing"] = c.call("EndTransaction", pb.EndTransactionRequest(
                topic=resource("TopicT"), message_id="x", transaction_id="nope", resolution=1))
            out["tel"] = tel
            out["client"] = c
            return out

        out = await trio.to_thread.run_sync(client_side)
        assert out["end_commit"].status.code == Code.OK
        assert out["end_rollback"].status.code == Code.OK
        assert out["end_missing"].status.code == Code.INTERNAL_SERVER_ERROR
        # the check-back of the open one reaches the client on its Telemetry stream: a check round
        # asks about it once it is older than transactionTimeOut (200 ms), rounds before find nothing
        rounds: list[int] = []

        async def checked() -> bool:
            rounds.append(await h.role.transaction_check_service.run_once())
            return rounds[-1] > 0
        await wait_until(checked, 10, "a check round to send CHECK for the open half", interval=0.05)
        assert sum(rounds) == 1, rounds
        tel = out["tel"]

        def finish() -> Any:
            tel.wait(2)
            command = tel.received[1]
            recover = command.recover_orphaned_transaction_command
            c = out["client"]
            answer = c.call("EndTransaction", pb.EndTransactionRequest(
                topic=resource("TopicT"), message_id=recover.message.system_properties.message_id,
                transaction_id=recover.transaction_id, resolution=TransactionResolution.COMMIT, source=2))
            tel.close()
            c.close()
            return recover, answer

        recover, answer = await trio.to_thread.run_sync(finish)
        assert recover.message.body == b"unknown"
        assert recover.transaction_id == out["unknown"].entries[0].transaction_id
        assert answer.status.code == Code.OK
        h.wait_dispatched()
        # commit and the checked one are in the topic, the rollback is not
        bodies = set()
        for q in range(4):
            r = await h.pull("TopicT", "cg", q, 0, sys_flag=4, subscription="*", suspend_ms=0)
            if r.body:
                bodies |= {bytes(m.body) for m in decode_messages(bytes(r.body))}
        assert bodies == {b"commit", b"unknown"}

    _run(tmp_path, body, transactionTimeOut=200, transactionCheckInterval=3600000)


def test_transport_errors_are_grpc_statuses(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        port = _port(h)

        def client_side() -> dict[str, Any]:
            ch = grpc.insecure_channel(f"127.0.0.1:{port}")
            out: dict[str, Any] = {}
            for name, path, payload in (("unknown", "/apache.rocketmq.v2.MessagingService/Nope", b""),
                                        ("pull", "/apache.rocketmq.v2.MessagingService/PullMessage", b""),
                                        ("garbage", "/apache.rocketmq.v2.MessagingService/SendMessage",
                                         b"\xff\xff\xff")):
                try:
                    ch.unary_unary(path)(payload, timeout=5)
                    out[name] = "OK"
                except grpc.RpcError as exc:
                    out[name] = exc.code()
            ch.close()
            return out

        out = await trio.to_thread.run_sync(client_side)
        assert out["unknown"] == grpc.StatusCode.UNIMPLEMENTED
        assert out["pull"] == grpc.StatusCode.UNIMPLEMENTED
        assert out["garbage"] == grpc.StatusCode.INTERNAL

    _run(tmp_path, body)


@pytest.mark.parametrize("tls", [True, False])
def test_tls_and_plaintext_on_one_port(tmp_path: Path, tls: bool) -> None:
    async def body(h: Harness) -> None:
        _create_topic(h, "TopicN")
        port = _port(h)

        def client_side() -> Any:
            c = V2Client(port, tls=tls)
            try:
                return c.call("QueryRoute", pb.QueryRouteRequest(topic=resource("TopicN")))
            finally:
                c.close()

        if tls:  # the test-mode certificate is self-signed: trust it for this client
            ctx = h.role.grpc_server.tls.context  # type: ignore[union-attr]
            assert ctx is not None
            route = await trio.to_thread.run_sync(_tls_route, port)
        else:
            route = await trio.to_thread.run_sync(client_side)
        assert route.status.code == Code.OK

    _run(tmp_path, body)


def _tls_route(port: int) -> Any:
    """TLS with certificate checks off, as the 5.x Java client does (its trust-all manager)."""
    import ssl
    import socket
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    sock = ctx.wrap_socket(raw, server_hostname="localhost")
    assert sock.selected_alpn_protocol() == "h2"
    import h2.connection
    import h2.config
    import h2.events
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    sid = conn.get_next_available_stream_id()
    conn.send_headers(sid, [(":method", "POST"), (":scheme", "https"), (":authority", "localhost"),
                            (":path", "/apache.rocketmq.v2.MessagingService/QueryRoute"),
                            ("content-type", "application/grpc"), ("te", "trailers"),
                            ("x-mq-client-id", "tls-client")])
    from rmqd.wire.grpc import encode_message
    conn.send_data(sid, encode_message(pb.QueryRouteRequest(topic=resource("TopicN")).SerializeToString()),
                   end_stream=True)
    sock.sendall(conn.data_to_send())
    data = b""
    done = False
    while not done:
        chunk = sock.recv(65536)
        assert chunk
        for event in conn.receive_data(chunk):
            if isinstance(event, h2.events.DataReceived):
                data += event.data
            if isinstance(event, h2.events.StreamEnded):
                done = True
        sock.sendall(conn.data_to_send())
    sock.close()
    return pb.QueryRouteResponse.FromString(data[5:])


def test_server_commands_over_telemetry(tmp_path: Path) -> None:
    """mqadmin's consumerStatus -s and consumeMessage reach a 5.x consumer as
    PrintThreadStackTraceCommand / VerifyMessageCommand on its Telemetry stream."""
    async def body(h: Harness) -> None:
        _create_topic(h, "TopicS")
        port = _port(h)
        send = await h.send_v2("TopicS", b"verify me")
        offset_msg_id = send.ext_fields["msgId"]

        def open_stream() -> Any:
            c = V2Client(port, client_id="cmd-client")
            s = pb.Settings(client_type=ClientType.SIMPLE_CONSUMER)
            s.subscription.group.name = "GroupS"
            e = s.subscription.subscriptions.add()
            e.topic.name = "TopicS"
            e.expression.type = 1
            e.expression.expression = "*"
            tel = _Telemetry(c, pb.TelemetryCommand(settings=s))
            tel.wait(1)
            return c, tel

        c, tel = await trio.to_thread.run_sync(open_stream)
        from rmqd.wire.codes import RequestCode, ResponseCode
        stack = await h.invoke(RequestCode.GET_CONSUMER_RUNNING_INFO,
                               {"consumerGroup": "GroupS", "clientId": "cmd-client", "jstackEnable": "true"},
                               timeout=15)
        assert stack.code == ResponseCode.SUCCESS, stack.remark
        assert b"RUNNABLE" in bytes(stack.body)
        verify = await h.invoke(RequestCode.CONSUME_MESSAGE_DIRECTLY,
                                {"consumerGroup": "GroupS", "clientId": "cmd-client", "msgId": offset_msg_id},
                                timeout=15)
        assert verify.code == ResponseCode.SUCCESS, verify.remark
        assert b"CR_SUCCESS" in bytes(verify.body)
        kinds = [r.WhichOneof("command") for r in tel.received]
        assert "print_thread_stack_trace_command" in kinds and "verify_message_command" in kinds
        verified = next(r for r in tel.received if r.WhichOneof("command") == "verify_message_command")
        assert verified.verify_message_command.message.body == b"verify me"
        await trio.to_thread.run_sync(lambda: (tel.close(), c.close()))

    _run(tmp_path, body)


class _InlineCall:
    """What an inline handler reads of its call (the transport's GrpcCall)."""

    metadata = {"x-mq-client-id": "inline-client", "x-mq-language": "JAVA", "x-mq-client-version": "5.0.8",
                "x-mq-protocol": "v2"}
    remote_addr = "127.0.0.1:40000"
    local_addr = "127.0.0.1:8081"

    def remaining_seconds(self) -> float | None:
        return 3.0


def test_a_grpc_send_stores_what_the_proxys_remoting_send_stores(tmp_path: Path) -> None:
    """The service hands SendMessageProcessor its properties decoded (send_decoded_now); the
    record must be the one the proxy's local mode gets stored by handing the broker a
    SEND_MESSAGE with the properties as text, edge cases included (an empty value the text
    drops, separators inside a value the text splits)."""
    from rmqd.processors.grpc_common import GrpcContext
    from rmqd.processors.grpc_convert import build_message_properties
    from rmqd.wire.codes import RequestCode, ResponseCode
    from rmqd.wire.message import encode_properties
    from rmqd.wire.rocketmq_v2 import MESSAGING_SERVICE

    async def body(h: Harness) -> None:
        _create_topic(h, "TopicP", queues=1)
        handle = h.role.grpc_service.inline_handlers()[(MESSAGING_SERVICE, "SendMessage")]
        cases = [
            new_message("TopicP", b"plain", tag="TagA", keys=("k1", "k2"), props={"color": "red"}),
            new_message("TopicP", b"edges", tag="TagB", props={"empty": "", "size": "L"}),
        ]
        cases[1].system_properties.trace_context = "t\x01u\x02x\x01y"  # not checked by the proxy
        for message in cases:
            answer = handle(_InlineCall(), pb.SendMessageRequest(messages=[message]).SerializeToString())
            assert isinstance(answer, bytes)
            assert pb.SendMessageResponse.FromString(answer).status.code == Code.OK
            # the same message as the proxy hands it over: a SEND_MESSAGE with the text
            ctx = GrpcContext.of(_InlineCall.metadata, _InlineCall.remote_addr, _InlineCall.local_addr, 3.0)
            props = build_message_properties(ctx, message, "TopicP", 0)
            ext = {"producerGroup": "TopicP", "topic": "TopicP", "defaultTopic": "TBW102",
                   "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0",
                   "bornTimestamp": props["BORN_TIMESTAMP"], "flag": "0", "properties": encode_properties(props),
                   "reconsumeTimes": "0", "unitMode": "false", "batch": "false"}
            sent = await h.invoke(RequestCode.SEND_MESSAGE, ext, message.body)
            assert sent.code == ResponseCode.SUCCESS, sent.remark
        h.wait_dispatched()
        pulled = await h.pull("TopicP", "cg", 0, 0, sys_flag=4, subscription="*", suspend_ms=0)
        records = decode_messages(bytes(pulled.body or b""))
        assert len(records) == 4
        for via_grpc, via_remoting in zip(records[0::2], records[1::2]):
            assert via_grpc.properties_raw == via_remoting.properties_raw
            assert (via_grpc.body, via_grpc.flag, via_grpc.sys_flag, via_grpc.born_timestamp,
                    via_grpc.reconsume_times) == (via_remoting.body, via_remoting.flag, via_remoting.sys_flag,
                                                  via_remoting.born_timestamp, via_remoting.reconsume_times)
        edges = records[2].properties
        assert "empty" not in edges and edges["size"] == "L"
        assert edges["TRACE_CONTEXT"] == "t\x01u" and edges["x"] == "y"

    _run(tmp_path, body)


def test_the_send_header_is_the_one_its_keyword_constructor_builds() -> None:
    """_send_header sets the fields past the dataclass's __init__: every field must be set, to
    the values the proxy's local mode hands the broker."""
    from rmqd.processors.grpc_service import _send_header
    from rmqd.wire.headers import SendMessageRequestHeader

    for props, born in (({"BORN_TIMESTAMP": "1700000000123"}, 1700000000123), ({}, 42)):
        got = _send_header("TopicH", 3, 8, props, 42)
        expected = SendMessageRequestHeader(
            producerGroup="TopicH", topic="TopicH", defaultTopic="TBW102", defaultTopicQueueNums=4, queueId=3,
            sysFlag=8, bornTimestamp=born, flag=0, properties=None, reconsumeTimes=0, unitMode=False, batch=False)
        for f in dataclasses.fields(SendMessageRequestHeader):
            assert getattr(got, f.name) == getattr(expected, f.name), f.name
