"""A grpcio client of apache.rocketmq.v2 for the tests (rmqd's own descriptors marshal the
messages): blocking calls, meant to run in trio.to_thread beside an in-process broker."""

from __future__ import annotations

import time
from typing import Any

import grpc

from rmqd.wire.rocketmq_v2 import MESSAGING_METHODS, MESSAGING_SERVICE, message_class, pb


class V2Client:
    """One channel to rmqd's gRPC port; `call(method, request, **metadata)`."""

    def __init__(self, port: int, *, client_id: str = "test-client-1", tls: bool = False,
                 metadata: dict[str, str] | None = None) -> None:
        target = f"127.0.0.1:{port}"
        if tls:
            creds = grpc.ssl_channel_credentials()
            self.channel = grpc.secure_channel(target, creds, options=[("grpc.ssl_target_name_override", "localhost")])
        else:
            self.channel = grpc.insecure_channel(target)
        self.client_id = client_id
        self.metadata = {"x-mq-client-id": client_id, "x-mq-language": "JAVA", "x-mq-client-version": "5.0.8",
                         "x-mq-protocol": "v2", **(metadata or {})}

    def _stub(self, method: str) -> tuple[Any, type, bool, bool]:
        req, resp, client_streaming, server_streaming = MESSAGING_METHODS[method]
        path = f"/{MESSAGING_SERVICE}/{method}"
        kinds = {(False, False): self.channel.unary_unary, (False, True): self.channel.unary_stream,
                 (True, True): self.channel.stream_stream, (True, False): self.channel.stream_unary}
        factory = kinds[(client_streaming, server_streaming)]
        resp_cls = message_class(resp)
        return factory(path, request_serializer=lambda m: m.SerializeToString(),
                       response_deserializer=resp_cls.FromString), resp_cls, client_streaming, server_streaming

    def call(self, method: str, request: Any, *, timeout: float = 10.0, **extra: str) -> Any:
        stub, _, _, _ = self._stub(method)
        md = list({**self.metadata, **extra}.items())
        return stub(request, timeout=timeout, metadata=md)

    def telemetry(self, commands: Any, *, timeout: float = 30.0) -> Any:
        stub, _, _, _ = self._stub("Telemetry")
        return stub(commands, timeout=timeout, metadata=list(self.metadata.items()))

    def close(self) -> None:
        self.channel.close()


def resource(name: str) -> Any:
    return pb.Resource(name=name)


def new_message(topic: str, body: bytes, *, tag: str | None = None, keys: tuple[str, ...] = (),
                message_id: str = "", group: str | None = None, kind: int = 1, props: dict[str, str] | None = None,
                deliver_at_ms: int | None = None) -> Any:
    m = pb.Message(body=body)
    m.topic.name = topic
    sp = m.system_properties
    if tag is not None:
        sp.tag = tag
    sp.keys.extend(keys)
    sp.message_id = message_id or f"01{int(time.time_ns()):032X}"[:34]
    sp.message_type = kind
    sp.born_timestamp.FromMilliseconds(int(time.time() * 1000))
    sp.born_host = "test-host"
    if group is not None:
        sp.message_group = group
    if deliver_at_ms is not None:
        sp.delivery_timestamp.FromMilliseconds(deliver_at_ms)
    for k, v in (props or {}).items():
        m.user_properties[k] = v
    return m
