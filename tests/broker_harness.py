"""A real name server + broker on loopback free ports, driven with raw Remoting frames the
way the Java / C++ / Go clients send them (extFields copied from the 4.9.8 capture).

Used by tests/processors/test_*.py and tests/broker/test_broker_e2e.py (importable as
``broker_harness``: pyproject puts tests/ on sys.path): every test runs inside
`run_with_broker(fn)`, bounded in time, and the broker is stopped by the harness.
"""

from __future__ import annotations

import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

import trio

from rmqd.broker.broker import BrokerRole
from rmqd.broker.config import BrokerSettings
from rmqd.broker.namesrv import NamesrvRole
from rmqd.broker.remoting_client import RemotingClient
from rmqd.pytest_plugin import serving
from support import free_broker_port
from rmqd.wire.bodies import HeartbeatData
from rmqd.wire.codes import RequestCode
from rmqd.wire.frame import RemotingCommand, make_request
from rmqd.wire.message import decode_messages, encode_properties

CLUSTER = "TestCluster"
BROKER_NAME = "broker-t"


@dataclass
class Harness:
    role: BrokerRole
    namesrv: NamesrvRole | None
    client: RemotingClient
    broker_addr: str
    namesrv_addr: str | None
    notifications: list[RemotingCommand] = field(default_factory=list)

    async def invoke(self, code: int, ext: dict[str, Any] | None = None, body: bytes | None = None, *,
                     timeout: float = 5.0, addr: str | None = None, oneway: bool = False) -> RemotingCommand:
        cmd = make_request(code, ext, body)
        if oneway:
            await self.client.invoke_oneway(addr or self.broker_addr, cmd)
            return cmd
        return await self.client.invoke(addr or self.broker_addr, cmd, timeout)

    # -- requests shaped like the Java 4.9.8 client's -------------------------------------------
    async def send_v2(self, topic: str, body: bytes, *, queue_id: int = 0, tags: str | None = "TagA",
                      keys: str | None = None, extra: dict[str, str] | None = None, group: str = "pg",
                      sys_flag: int = 0, code: int = RequestCode.SEND_MESSAGE_V2, batch: bool = False,
                      default_topic_queue_nums: int = 4) -> RemotingCommand:
        props: dict[str, str] = dict(extra or {})
        if keys:
            props["KEYS"] = keys
        props["WAIT"] = "true"
        if tags:
            props["TAGS"] = tags
        ext = {"a": group, "b": topic, "c": "TBW102", "d": str(default_topic_queue_nums), "e": str(queue_id),
               "f": str(sys_flag), "g": str(int(time.time() * 1000)), "h": "0", "i": encode_properties(props),
               "j": "0", "k": "false", "m": "true" if batch else "false", "n": BROKER_NAME}
        return await self.invoke(code, ext, body)

    async def heartbeat(self, client_id: str, group: str, topic: str, sub: str = "*", *, sub_version: int | None = None,
                        message_model: str = "CLUSTERING", expression_type: str = "TAG",
                        producer_groups: tuple[str, ...] = ()) -> RemotingCommand:
        tags = [] if sub == "*" else [t.strip() for t in sub.split("||")]
        from rmqd.wire.message import java_string_hash
        body = {
            "clientID": client_id,
            "consumerDataSet": [{
                "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "consumeType": "CONSUME_PASSIVELY",
                "groupName": group, "messageModel": message_model,
                "subscriptionDataSet": [{
                    "classFilterMode": False, "codeSet": [java_string_hash(t) for t in tags],
                    "expressionType": expression_type, "subString": sub, "subVersion": sub_version or 1,
                    "tagsSet": tags, "topic": topic}],
                "unitMode": False}] if group else [],
            "producerDataSet": [{"groupName": g} for g in producer_groups],
        }
        import json
        return await self.invoke(RequestCode.HEART_BEAT, None, json.dumps(body).encode())

    async def pull(self, topic: str, group: str, queue_id: int, offset: int, *, sys_flag: int = 2,
                   suspend_ms: int = 1000, subscription: str | None = None, sub_version: int = 0,
                   max_msgs: int = 32, commit_offset: int = 0, expression_type: str = "TAG",
                   timeout: float = 10.0) -> RemotingCommand:
        ext = {"queueId": str(queue_id), "maxMsgNums": str(max_msgs), "sysFlag": str(sys_flag),
               "suspendTimeoutMillis": str(suspend_ms), "commitOffset": str(commit_offset), "bname": BROKER_NAME,
               "topic": topic, "queueOffset": str(offset), "expressionType": expression_type,
               "subVersion": str(sub_version), "consumerGroup": group}
        if subscription is not None:
            ext["subscription"] = subscription
        return await self.invoke(RequestCode.PULL_MESSAGE, ext, timeout=timeout)

    def wait_dispatched(self) -> None:
        assert self.role.store.wait_dispatched(timeout_s=5.0)


def decode_pull_body(response: RemotingCommand) -> list[Any]:
    return decode_messages(bytes(response.body or b""))


def harness_conf(root: Path, namesrv_addr: str | None = None, **overrides: Any) -> dict[str, str]:
    """The broker.conf keys of every harness broker: a small store, loopback, a quick flush."""
    props = {
        "brokerClusterName": CLUSTER, "brokerName": BROKER_NAME, "brokerIP1": "127.0.0.1", "brokerIP2": "127.0.0.1",
        "storePathRootDir": str(root), "mappedFileSizeCommitLog": str(4 * 1024 * 1024),
        "mappedFileSizeConsumeQueue": str(6000 * 20), "flushIntervalCommitLog": "50",
        # RocketMQ's index geometry (the plugin's default is smaller)
        "maxHashSlotNum": "5000000", "maxIndexNum": "20000000",
        "grpcServerPort": "0",
    }
    if namesrv_addr:
        props["namesrvAddr"] = namesrv_addr
    props.update({k: str(v) for k, v in overrides.items()})
    return props


def make_settings(root: Path, namesrv_addr: str | None, **overrides: Any) -> BrokerSettings:
    """Settings for a BrokerRole a test assembles itself (restarts, HA pairs)."""
    settings = BrokerSettings()
    settings.apply({"listenPort": str(free_broker_port()), **harness_conf(root, namesrv_addr, **overrides)},
                   source="test")
    return settings


@asynccontextmanager
async def broker_running(root: Path, *, with_namesrv: bool = True, **overrides: Any) -> AsyncIterator[Harness]:
    """A name server and a broker in this trio run (rmqd's pytest plugin's serving()), with a
    raw Remoting client that records NOTIFY_CONSUMER_IDS_CHANGED."""
    async with serving(root, harness_conf(root, **overrides), namesrv=with_namesrv) as broker:
        assert broker.broker_role is not None
        async with RemotingClient("test-client") as client:
            h = Harness(broker.broker_role, broker.namesrv_role, client, broker.broker_addr, broker.namesrv_addr)

            async def on_notify(ctx: Any, request: RemotingCommand) -> None:
                h.notifications.append(request)
                return None

            client.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, on_notify)
            try:
                yield h
            finally:
                client.close_channel(broker.broker_addr)


def run_with_broker(root: Path, fn: Callable[[Harness], Awaitable[None]], *, timeout: float = 30.0,
                    **overrides: Any) -> None:
    async def main() -> None:
        with trio.fail_after(timeout):
            async with broker_running(root, **overrides) as h:
                await fn(h)

    trio.run(main)


async def raw_invoke(port: int, frame: bytes) -> RemotingCommand:
    """Send frame bytes as they are on a new loopback connection; the first answer (decoded
    strictly, so an answer no client could read fails here)."""
    from rmqd.wire.frame import FrameDecoder

    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(frame)
        decoder = FrameDecoder()
        while True:
            data = await stream.receive_some(65536)
            assert data, "connection closed without an answer"
            decoder.feed(data)
            for cmd in decoder:
                return cmd


def heartbeat_body(h: HeartbeatData) -> bytes:
    return h.encode()
