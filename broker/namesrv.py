"""The name-server role: RemotingServer + NamesrvProcessor + the broker-expiry scan.

Like NamesrvController: brokers silent for 120 s are dropped by a scan every 10 s (first
after 5 s), and a broker whose connection closes is dropped at once.
"""

from __future__ import annotations

import logging

import trio

from rmqd.broker.server import RemotingServer
from rmqd.broker.tls import TlsAcceptor, TlsConfig
from rmqd.processors.namesrv import NamesrvConfig, NamesrvProcessor

log = logging.getLogger("rmqd.namesrv")

SCAN_INITIAL_DELAY = 5.0
SCAN_PERIOD = 10.0


class NamesrvRole:
    """`addrs = await nursery.start(role.run)`; later `await role.stop()`."""

    def __init__(self, config: NamesrvConfig | None = None, host: str = "0.0.0.0", port: int | None = None,
                 *, scan_period: float = SCAN_PERIOD) -> None:
        self.config = config or NamesrvConfig()
        self.host = host
        self.port = self.config.listenPort if port is None else port
        self.scan_period = scan_period
        self.processor = NamesrvProcessor(self.config)
        self.server = RemotingServer("namesrv", idle_seconds=float(self.config.serverChannelMaxIdleTimeSeconds))
        # TLS as the broker's (a client with tls.enable=true speaks TLS to the name server too)
        self.server.stream_wrapper = TlsAcceptor(
            TlsConfig.load(), "namesrv", first_byte_seconds=float(self.config.serverChannelMaxIdleTimeSeconds)).wrap
        self.server.register_many(self.processor.handlers())
        self.server.add_close_listener(self.processor.on_channel_close)
        self.bound: tuple[str, int] | None = None

    @property
    def routes(self):  # noqa: ANN201 - RouteInfoManager, for tests and `serve`
        return self.processor.routes

    async def run(self, *, task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED) -> None:
        self.processor.kv.load()
        (self.bound,) = await self.server.open_listeners([(self.host, self.port)])
        async with trio.open_nursery() as nursery:
            await nursery.start(self.server.serve)
            scan_scope = trio.CancelScope()
            nursery.start_soon(self._scan_loop, scan_scope)
            log.info("The Name Server boot success. serializeType=JSON, listening on %s:%s", *self.bound)
            task_status.started(self.bound)
            await self.server.wait_stopped()
            scan_scope.cancel()

    async def _scan_loop(self, scope: trio.CancelScope) -> None:
        with scope:
            await trio.sleep(min(SCAN_INITIAL_DELAY, self.scan_period))
            while True:
                removed = self.processor.routes.scan_not_active_broker()
                if removed:
                    log.info("removed %d expired broker(s)", removed)
                await trio.sleep(self.scan_period)

    async def stop(self) -> None:
        await self.server.stop()
