"""What a broker runs for its statistics and for RocketMQ 5's metrics (``metricsExporterType=PROM``):
the 10-s sampling of the 4.9 stats (store/broker_stats.py), and with the exporter on the
timing of every request (``rocketmq_rpc_latency``) and the HTTP listener (broker/metrics_http.py)
serving the metric families (broker/prometheus.py) and /health.

The per-request timing exists only while the exporter is on (``instrument`` wraps the
handlers then), so a broker without it pays nothing per request for it.
"""
from __future__ import annotations

import inspect
import logging
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable

import trio

from rmqd.broker.config import metrics_exporter_type
from rmqd.store.broker_stats import SAMPLE_INTERVAL_S, RpcLatency
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import RPC_ONEWAY, RemotingCommand

if TYPE_CHECKING:
    from rmqd.broker.broker import BrokerRole
    from rmqd.broker.metrics_http import MetricsHttpServer
    from rmqd.broker.server import Dispatcher, Handler, InlineHandler, RequestContext

log = logging.getLogger("rmqd.metrics")


# -- rocketmq_rpc_latency: timing every request while the exporter is on ---------------------------
def instrument(dispatcher: "Dispatcher", rpc: RpcLatency) -> None:
    """Time every handler of ``dispatcher`` into ``rpc`` (request code, response code, whether a
    pull was held for long polling, oneway). A handler that raises counts as SYSTEM_ERROR, the
    answer the dispatcher then gives."""
    clock = time.perf_counter_ns

    def record(request: RemotingCommand, response: RemotingCommand | None, t0: int, held: bool) -> None:
        if response is not None:
            rpc.record(request.code, response.code, (clock() - t0) // 1_000_000, held,
                       bool(request.flag & RPC_ONEWAY))

    def wrap(code: int, handler: "Handler") -> "Handler":
        async def timed(ctx: "RequestContext", request: RemotingCommand) -> RemotingCommand | None:
            t0 = clock()
            try:
                response = await handler(ctx, request)
            except Exception:
                rpc.record(request.code, ResponseCode.SYSTEM_ERROR, (clock() - t0) // 1_000_000, False,
                           bool(request.flag & RPC_ONEWAY))
                raise
            record(request, response, t0, False)
            return response
        return timed

    def wrap_inline(code: int, handler: "InlineHandler") -> "InlineHandler":
        held = code == RequestCode.PULL_MESSAGE  # a pull answered later was suspended (long polling)

        async def later(request: RemotingCommand, awaitable: Awaitable[RemotingCommand | None],
                        t0: int) -> RemotingCommand | None:
            response = await awaitable
            record(request, response, t0, held)
            return response

        def timed(ctx: "RequestContext", request: RemotingCommand) -> Any:
            t0 = clock()
            result = handler(ctx, request)
            if result is None or type(result) is RemotingCommand:
                record(request, result, t0, False)
                return result
            if inspect.isawaitable(result):
                return later(request, result, t0)
            return result
        return timed

    dispatcher.wrap_handlers(wrap, wrap_inline)


async def sample_loop(sample: Callable[[], None], interval_s: float = SAMPLE_INTERVAL_S, *,
                      task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """The statistics' 10-s tick (the first one at once, as 4.9's fixed-rate tasks start)."""
    task_status.started()
    while True:
        try:
            sample()
        except Exception:  # noqa: BLE001 - statistics never stop the broker
            log.exception("sampling the broker statistics failed")
        await trio.sleep(interval_s)


#: NamesrvController scans out brokers silent for this long; a broker that has not registered
#: within it is not served to clients any more.
REGISTRATION_FRESH_S = 120.0


def exporter_host(configured: str, listen_host: str) -> str:
    """Where the exporter binds: ``metricsPromExporterHost`` when set, else the address the
    broker's own ports listen on (``--host``, default 0.0.0.0: every interface). Apache 5.x
    binds brokerIP1 when the key is blank, which is the machine's first non-loopback address,
    so there ``curl 127.0.0.1:5557/metrics`` is refused; rmqd's exporter is reachable wherever
    the broker is (127.0.0.1 included), and ``metricsPromExporterHost`` still keeps it to one
    interface."""
    return configured.strip() or listen_host


class Observability:
    """What a BrokerRole runs for its statistics and metrics: the 10-s sampling of the 4.9
    stats, and with ``metricsExporterType=PROM`` the request timing and the HTTP listener
    (metrics and /health) on ``metricsPromExporterHost`` : ``metricsPromExporterPort`` (see
    :func:`exporter_host` for the default host)."""

    def __init__(self, role: "BrokerRole") -> None:
        self.role = role
        self.exporter: "MetricsHttpServer | None" = None
        kind = metrics_exporter_type(role.broker_config.metricsExporterType)
        if kind == "PROM":
            from rmqd.broker.metrics_http import MetricsHttpServer
            from rmqd.broker.prometheus import registry_for

            instrument(role.server, role.stats.rpc_latency)
            self.exporter = MetricsHttpServer(registry_for(role), self.health)
        elif kind != "DISABLE":
            log.error("metricsExporterType=%s is not supported by rmqd (PROM is): metrics are not exported", kind)

    def health(self) -> tuple[bool, dict[str, Any]]:
        """Ready: the store is running and a name server took the last registration recently
        (or none is configured)."""
        r = self.role
        store_ok = r.store_running
        if r.settings.broker.namesrvAddr:
            last = r.last_registered
            registered = last is not None and time.monotonic() - last < REGISTRATION_FRESH_S
        else:
            registered = True
        return store_ok and registered, {"storeRecovered": store_ok, "nameServerRegistered": registered}

    async def run(self, *, task_status: trio.TaskStatus[tuple[str, int] | None] = trio.TASK_STATUS_IGNORED) -> None:
        r = self.role
        stats = r.stats
        token = trio.lowlevel.current_trio_token()
        schedule = r.schedule_service
        if schedule is not None:  # delayed deliveries are counted on the loop, as every count is
            def delivered(*args: Any) -> None:
                try:
                    token.run_sync_soon(stats.on_schedule_delivered, *args)
                except trio.RunFinishedError:
                    pass
            schedule.on_delivered = delivered
        async with trio.open_nursery() as nursery:
            await nursery.start(sample_loop, stats.sample)
            bound = None
            if self.exporter is not None:
                bc = r.broker_config
                bound = await nursery.start(self.exporter.run, exporter_host(bc.metricsPromExporterHost, r.host),
                                            bc.metricsPromExporterPort)
            task_status.started(bound)


__all__ = ["Observability", "REGISTRATION_FRESH_S", "exporter_host", "instrument", "sample_loop"]
