"""trio Remoting client: invoke with timeout, oneway, one reused connection per address.

Used by the broker to register with name servers (REGISTER_BROKER every 30 s) and by tests
as a raw client. Connections are `Channel`s run by the same loop as the server's, so a
client connection also answers requests the server pushes down it (a test registers
handlers for NOTIFY_CONSUMER_IDS_CHANGED exactly as a real client would receive it).
"""

from __future__ import annotations

import logging
import zlib
from typing import Any, Awaitable, Callable

import trio

from rmqd.broker.server import (Channel, Dispatcher, RemotingConnectError, RemotingError, RemotingSendRequestError,
                           RemotingTimeoutError)
from rmqd.wire.bodies import KVTable, RegisterBrokerBody, RegisterBrokerResult, TopicConfigSerializeWrapper, TopicRouteData
from rmqd.wire.errors import WireError
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand, make_request

log = logging.getLogger("rmqd.remoting_client")

DEFAULT_CONNECT_TIMEOUT = 3.0  # RocketMQ NettyClientConfig.connectTimeoutMillis = 3000


def parse_addr(addr: str) -> tuple[str, int]:
    """"host:port" (or "[v6]:port") -> (host, port); a clear ValueError otherwise."""
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"bad address {addr!r}: expected host:port")
    return host.strip("[]"), int(port)


class RemotingClient(Dispatcher):
    """Use as `async with RemotingClient() as client:`; connections live in its nursery."""

    def __init__(self, name: str = "client", *, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT) -> None:
        super().__init__(name, idle_seconds=None)
        self.connect_timeout = connect_timeout
        self._nursery: trio.Nursery | None = None
        self._conns: dict[str, Channel] = {}
        self._connect_lock = trio.Lock()
        #: stream_wrapper(tcp) -> the stream to speak over (TLS when tls.enable=true: broker/tls.py)
        self.stream_wrapper: Callable[[trio.SocketStream], Awaitable[trio.abc.Stream]] | None = None

    async def __aenter__(self) -> "RemotingClient":
        self._nursery_manager = trio.open_nursery()
        self._nursery = await self._nursery_manager.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        assert self._nursery is not None
        self._nursery.cancel_scope.cancel()
        try:
            return await self._nursery_manager.__aexit__(*exc_info)
        finally:
            self._nursery = None
            self._conns.clear()

    async def channel(self, addr: str) -> Channel:
        """The open connection to addr, connecting if needed (connections are reused)."""
        channel = self._conns.get(addr)
        if channel is not None and not channel.closed:
            return channel
        async with self._connect_lock:
            channel = self._conns.get(addr)
            if channel is not None and not channel.closed:
                return channel
            if self._nursery is None:
                raise RuntimeError("RemotingClient used outside `async with`")
            host, port = parse_addr(addr)
            stream: trio.SocketStream | None = None
            with trio.move_on_after(self.connect_timeout):
                try:
                    stream = await trio.open_tcp_stream(host, port)
                except OSError as exc:
                    raise RemotingConnectError(f"connect to {addr} failed: {exc}") from exc
            if stream is None:
                raise RemotingConnectError(f"connect to {addr} timed out")
            channel = Channel.from_socket_stream(stream)
            if self.stream_wrapper is not None:
                try:
                    with trio.fail_after(self.connect_timeout):
                        wrapped = await self.stream_wrapper(stream)
                except (trio.TooSlowError, trio.BrokenResourceError, OSError) as exc:
                    await trio.aclose_forcefully(stream)
                    raise RemotingConnectError(f"TLS handshake with {addr} failed: {exc!r}") from exc
                channel = Channel(wrapped, local_addr=channel.local_addr)
            channel.remote_addr = addr
            self._conns[addr] = channel
            self._nursery.start_soon(self.run_channel, channel)
            return channel

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        """Send a request to addr and wait for its response (seconds). On timeout the
        connection is kept, like RocketMQ's default clientCloseSocketIfTimeout=false."""
        channel = await self.channel(addr)
        try:
            return await channel.invoke(cmd, timeout)
        except RemotingSendRequestError:
            self._conns.pop(addr, None)
            raise

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        channel = await self.channel(addr)
        await channel.send_request_oneway(cmd)

    def close_channel(self, addr: str) -> None:
        channel = self._conns.pop(addr, None)
        if channel is not None:
            channel.close("closed by client")


__all__ = ["BrokerOuterAPI", "RemotingClient", "RemotingConnectError", "RemotingSendRequestError", "RemotingTimeoutError",
           "parse_addr"]


# --------------------------------------------------------------------------------------------
# broker -> name server calls (RocketMQ BrokerOuterAPI)


class BrokerOuterAPI:
    """REGISTER_BROKER / UNREGISTER_BROKER to every name server, as a 4.9.8 broker sends them."""

    def __init__(self, client: RemotingClient, namesrv_addrs: list[str], *, timeout: float = 6.0) -> None:
        self.client = client
        self.namesrv_addrs = namesrv_addrs
        self.timeout = timeout

    @staticmethod
    def split_namesrv_addr(value: str | None) -> list[str]:
        """namesrvAddr "a:9876;b:9876" -> ["a:9876", "b:9876"] (each checked)."""
        addrs = [a.strip() for a in (value or "").split(";") if a.strip()]
        for addr in addrs:
            parse_addr(addr)
        return addrs

    async def register_broker_all(self, *, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int,
                                  ha_server_addr: str, topic_config_wrapper: TopicConfigSerializeWrapper,
                                  filter_server_list: list[str] | None = None, oneway: bool = False,
                                  compressed: bool = False) -> list[RegisterBrokerResult]:
        """Register with every name server concurrently; failures are logged, not raised
        (a name server being down must not stop the broker). Returns the results obtained."""
        body_obj = RegisterBrokerBody(topicConfigSerializeWrapper=topic_config_wrapper,
                                      filterServerList=list(filter_server_list or []))
        body = body_obj.encode_compressed() if compressed else body_obj.encode()
        ext = {"brokerAddr": broker_addr, "brokerId": str(broker_id), "brokerName": broker_name,
               "clusterName": cluster_name, "haServerAddr": ha_server_addr,
               "compressed": "true" if compressed else "false", "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}
        results: list[RegisterBrokerResult] = []

        async def one(addr: str) -> None:
            request = make_request(RequestCode.REGISTER_BROKER, dict(ext), body)
            try:
                if oneway:
                    await self.client.invoke_oneway(addr, request)
                    return
                response = await self.client.invoke(addr, request, self.timeout)
            except (RemotingError, OSError) as exc:
                log.warning("register broker to name server %s failed: %s", addr, exc)
                return
            if response.code != ResponseCode.SUCCESS:
                log.warning("register broker to name server %s failed: code %s %s", addr, response.code,
                            response.remark)
                return
            kv = KVTable.decode(response.body) if response.body else None
            results.append(RegisterBrokerResult(haServerAddr=response.ext("haServerAddr"),
                                                masterAddr=response.ext("masterAddr"), kvTable=kv))

        async with trio.open_nursery() as nursery:
            for addr in self.namesrv_addrs:
                nursery.start_soon(one, addr)
        return results

    async def unregister_broker_all(self, *, cluster_name: str, broker_addr: str, broker_name: str,
                                    broker_id: int) -> None:
        ext = {"brokerAddr": broker_addr, "brokerId": str(broker_id), "brokerName": broker_name,
               "clusterName": cluster_name}

        async def one(addr: str) -> None:
            try:
                response = await self.client.invoke(addr, make_request(RequestCode.UNREGISTER_BROKER, dict(ext)),
                                                     self.timeout)
                if response.code != ResponseCode.SUCCESS:
                    log.warning("unregister broker from %s: code %s %s", addr, response.code, response.remark)
            except (RemotingError, OSError) as exc:
                log.warning("unregister broker from name server %s failed: %s", addr, exc)

        async with trio.open_nursery() as nursery:
            for addr in self.namesrv_addrs:
                nursery.start_soon(one, addr)

    async def get_topic_route(self, topic: str) -> TopicRouteData | None:
        """GET_ROUTEINFO_BY_TOPIC from the first name server that answers (TopicRouteInfoManager's
        lookup for QUERY_ASSIGNMENT); None when none knows the topic or none answers."""
        for addr in self.namesrv_addrs:
            try:
                response = await self.client.invoke(
                    addr, make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), self.timeout)
            except (RemotingError, OSError) as exc:
                log.warning("route of %s from name server %s failed: %s", topic, addr, exc)
                continue
            if response.code == ResponseCode.SUCCESS and response.body:
                try:
                    return TopicRouteData.decode(response.body)
                except WireError as exc:
                    log.warning("route of %s from name server %s does not decode: %s", topic, addr, exc)
        return None

