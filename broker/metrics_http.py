"""The broker's HTTP listener (``metricsExporterType=PROM``): Prometheus scrapes and the health check.

* ``GET /health``: 200 when the broker is ready (its store recovered and started, a
  registration with a name server answered within the last 120 s), else 503; the body is a
  small JSON object saying which part is missing. Meant for container HEALTHCHECKs and
  load balancers.
* ``GET`` of any other path (``/metrics`` by convention): the Prometheus text exposition, as
  RocketMQ 5's PrometheusHttpServer answers on every path.

Served by trio on the broker's own event loop with h11 (a sans-IO HTTP/1.1 parser), one task
per connection, keep-alive as Prometheus uses it. A scrape collects on the loop between
requests, which is what keeps it consistent with the counters without any lock.
"""
from __future__ import annotations

import json
import logging
from typing import Any, Callable

import h11
import trio
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from rmqd.broker.listen import ListenError, bind_tcp

log = logging.getLogger("rmqd.metrics")

HEALTH_PATH = "/health"
#: A connection with no complete request for this long is closed.
IDLE_TIMEOUT_S = 60.0
_RECEIVE = 64 * 1024

Health = Callable[[], tuple[bool, dict[str, Any]]]


class MetricsHttpServer:
    def __init__(self, registry: CollectorRegistry, health: Health) -> None:
        self.registry = registry
        self.health = health
        self.bound: tuple[str, int] | None = None

    async def run(self, host: str, port: int, *,
                  task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            listeners = await bind_tcp(host, port)
        except ListenError as exc:  # name the listener and its keys: the CLI's one line says them
            raise exc.named("the metrics exporter", "metricsPromExporterHost, metricsPromExporterPort") from None
        sockname = listeners[0].socket.getsockname()
        self.bound = (host or sockname[0], sockname[1])
        log.info("metrics exporter (Prometheus) listening on %s:%d", *self.bound)
        task_status.started(self.bound)
        await trio.serve_listeners(self._serve, listeners)

    async def _serve(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                event = await self._next_event(conn, stream)
                if event is None:
                    return
                if isinstance(event, h11.Request):
                    await self._respond(conn, stream, event)
                    if conn.our_state is h11.MUST_CLOSE:
                        return
                    while True:  # the request's body (none expected) up to its end
                        event = await self._next_event(conn, stream)
                        if event is None or isinstance(event, h11.EndOfMessage):
                            break
                    if event is None or conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                        return
                    conn.start_next_cycle()
                else:
                    return
        except h11.RemoteProtocolError as exc:
            if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                await self._send(conn, stream, exc.error_status_hint, b"bad request\n", "text/plain")
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        finally:
            await trio.aclose_forcefully(stream)

    @staticmethod
    async def _next_event(conn: h11.Connection, stream: trio.SocketStream) -> Any:
        """The next h11 event, or None when the peer is gone or idle too long."""
        while True:
            event = conn.next_event()
            if event is not h11.NEED_DATA:
                return None if isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED else event
            with trio.move_on_after(IDLE_TIMEOUT_S):
                data = await stream.receive_some(_RECEIVE)
                conn.receive_data(data)
                continue
            return None

    async def _respond(self, conn: h11.Connection, stream: trio.SocketStream, request: h11.Request) -> None:
        method = request.method.decode("ascii", "replace").upper()
        path = request.target.decode("ascii", "replace").split("?", 1)[0]
        if method not in ("GET", "HEAD"):
            await self._send(conn, stream, 405, b"only GET\n", "text/plain", head=False, allow=True)
            return
        if path == HEALTH_PATH:
            ready, details = self.health()
            body = (json.dumps({"status": "UP" if ready else "DOWN", **details}) + "\n").encode()
            await self._send(conn, stream, 200 if ready else 503, body, "application/json", head=method == "HEAD")
            return
        try:
            body = generate_latest(self.registry)
        except Exception:  # noqa: BLE001 - a failing collector is a 500, never a broken broker
            log.exception("collecting metrics failed")
            await self._send(conn, stream, 500, b"collecting metrics failed\n", "text/plain")
            return
        await self._send(conn, stream, 200, body, CONTENT_TYPE_LATEST, head=method == "HEAD")

    @staticmethod
    async def _send(conn: h11.Connection, stream: trio.SocketStream, status: int, body: bytes, content_type: str,
                    *, head: bool = False, allow: bool = False) -> None:
        headers = [("Content-Type", content_type), ("Content-Length", str(len(body)))]
        if allow:
            headers.append(("Allow", "GET, HEAD"))
        data = conn.send(h11.Response(status_code=status, headers=headers))
        if not head:
            data += conn.send(h11.Data(data=body))
        data += conn.send(h11.EndOfMessage())
        await stream.send_all(data)


__all__ = ["HEALTH_PATH", "MetricsHttpServer"]
