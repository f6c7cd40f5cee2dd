"""The master side of HA replication (RocketMQ 4.9 HAService + HAConnection), on trio.

A listener on haListenPort takes slave connections. Per connection, as HAConnection:
* a reader takes the slave's 8-byte offset reports; the first one fixes where streaming
  starts, every one is the slave's ack (push2SlaveMaxOffset is the highest ack of all
  slaves), and acks wake SYNC_MASTER sends waiting for them (GroupTransferService);
* a writer waits for that first report, starts at the reported offset (0 -> the start of
  the master's last commit-log file, store.ha_append.master_start_offset), then sends
  12-byte header + at most haTransferBatchSize bytes of one file at a time; with nothing
  new it waits up to 100 ms (notifyTransferSome) and sends a header-only heartbeat when
  nothing was written for haSendHeartbeatInterval.
A connection silent for haHousekeepingInterval is closed (the slave reconnects).

SYNC_MASTER (CommitLog.submitReplicaRequest): a send with waitStoreMsgOK is answered only when
push2SlaveMaxOffset >= its end offset; no slave, or a slave more than haSlaveFallbehindMax
behind, is SLAVE_NOT_AVAILABLE at once; no ack within syncFlushTimeout is FLUSH_SLAVE_TIMEOUT.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import trio

from rmqd.broker.ha_flow import ByteRate
from rmqd.broker.listen import bind_tcp
from rmqd.store.ha_append import master_start_offset, read_commit_log
from rmqd.wire.ha import HAProtocolError, ReportReader, encode_transfer_header

log = logging.getLogger("rmqd.ha.master")

#: WriteSocketService waits this long for new data before looking again (notifyTransferSome).
TRANSFER_WAIT_S = 0.1


class HAConnection:
    """One slave: its acked offset, where the writer is, and the bytes sent to it per second
    (what GET_BROKER_HA_STATUS reports for it)."""

    def __init__(self, remote: str) -> None:
        self.remote = remote
        self.connected_at = time.monotonic()
        self.flow = ByteRate()
        self.slave_request_offset = -1
        self.slave_ack_offset = -1
        self.next_transfer_from = -1
        self.last_read = time.monotonic()
        self.first_report = trio.Event()


class HAMasterService:
    """`await nursery.start(service.run)` -> (host, port) of the HA listener."""

    def __init__(self, store: Any, config: Any, host: str = "0.0.0.0") -> None:
        self.store = store
        self.config = config  # MessageStoreConfig: haListenPort, haTransferBatchSize, ...
        self.host = host
        self.connections: set[HAConnection] = set()
        self.push2slave_max_offset = 0
        self._ack_changed = trio.Event()
        self._data = trio.Event()
        self.bound: tuple[str, int] | None = None

    # -- SYNC_MASTER ---------------------------------------------------------------------------
    def is_slave_ok(self, master_put_where: int) -> bool:
        """HAService.isSlaveOK: a slave is connected and not too far behind."""
        return bool(self.connections) and \
            master_put_where - self.push2slave_max_offset < int(self.config.haSlaveFallbehindMax)

    def notify_data(self) -> None:
        """New commit-log bytes: wake the writers now rather than after their 100 ms wait."""
        event, self._data = self._data, trio.Event()
        event.set()

    async def wait_replicated(self, end_offset: int, timeout_ms: int) -> str:
        """The put status a SYNC_MASTER send ends with: PUT_OK, SLAVE_NOT_AVAILABLE or
        FLUSH_SLAVE_TIMEOUT."""
        if not self.is_slave_ok(end_offset):
            return "SLAVE_NOT_AVAILABLE"
        self.notify_data()
        with trio.move_on_after(max(timeout_ms, 0) / 1000.0):
            while self.push2slave_max_offset < end_offset:
                await self._ack_changed.wait()
        return "PUT_OK" if self.push2slave_max_offset >= end_offset else "FLUSH_SLAVE_TIMEOUT"

    def _on_ack(self, offset: int) -> None:
        if offset > self.push2slave_max_offset:
            self.push2slave_max_offset = offset
            event, self._ack_changed = self._ack_changed, trio.Event()
            event.set()

    # -- serving ---------------------------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await bind_tcp(self.host, int(self.config.haListenPort))  # (a failure names the address)
        sock = listeners[0].socket
        self.bound = sock.getsockname()[:2]
        async with trio.open_nursery() as nursery:
            task_status.started(self.bound)
            await trio.serve_listeners(self._serve_one, listeners, handler_nursery=nursery)

    async def _serve_one(self, stream: trio.SocketStream) -> None:
        try:
            remote = "%s:%d" % stream.socket.getpeername()[:2]
        except OSError:
            remote = "?"
        conn = HAConnection(remote)
        self.connections.add(conn)
        log.info("HA slave %s connected", remote)
        try:
            async with stream, trio.open_nursery() as nursery:
                nursery.start_soon(self._guarded, self._read_loop, stream, conn, nursery.cancel_scope)
                nursery.start_soon(self._guarded, self._write_loop, stream, conn, nursery.cancel_scope)
        finally:
            self.connections.discard(conn)
            log.info("HA slave %s disconnected (acked %d)", remote, conn.slave_ack_offset)

    @staticmethod
    async def _guarded(loop: Any, stream: trio.SocketStream, conn: HAConnection, scope: trio.CancelScope) -> None:
        """Either loop ending (a broken socket, bad bytes) ends the connection, never the broker."""
        try:
            await loop(stream, conn, scope)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError, HAProtocolError) as exc:
            log.info("HA slave %s: %s", conn.remote, exc)
        finally:
            scope.cancel()

    async def _read_loop(self, stream: trio.SocketStream, conn: HAConnection, scope: trio.CancelScope) -> None:
        reader = ReportReader()
        housekeeping = int(self.config.haHousekeepingInterval) / 1000
        while True:
            with trio.move_on_after(housekeeping) as timer:
                data = await stream.receive_some(64 * 1024)
            if timer.cancelled_caught:
                log.warning("HA slave %s silent for %.0f s, closing", conn.remote, housekeeping)
                scope.cancel()
                return
            if not data:
                scope.cancel()
                return
            conn.last_read = time.monotonic()
            offset = reader.feed(data)
            if offset is None:
                continue
            conn.slave_ack_offset = offset
            if conn.slave_request_offset < 0:
                conn.slave_request_offset = offset
                conn.first_report.set()
            self._on_ack(offset)

    async def _write_loop(self, stream: trio.SocketStream, conn: HAConnection, scope: trio.CancelScope) -> None:
        await conn.first_report.wait()
        commit_log = self.store.commit_log
        conn.next_transfer_from = master_start_offset(commit_log, conn.slave_request_offset)
        log.info("HA slave %s reported %d, streaming from %d", conn.remote, conn.slave_request_offset,
                 conn.next_transfer_from)
        batch = int(self.config.haTransferBatchSize)
        heartbeat = int(self.config.haSendHeartbeatInterval) / 1000
        last_write = time.monotonic()
        while True:
            chunk = read_commit_log(commit_log, conn.next_transfer_from, batch)
            if chunk is None:
                if time.monotonic() - last_write > heartbeat:
                    header = encode_transfer_header(conn.next_transfer_from, 0)
                    await stream.send_all(header)
                    conn.flow.add(len(header))
                    last_write = time.monotonic()
                with trio.move_on_after(TRANSFER_WAIT_S):
                    await self._data.wait()
                continue
            body = bytes(chunk)
            frame = encode_transfer_header(conn.next_transfer_from, len(body)) + body
            await stream.send_all(frame)
            conn.flow.add(len(frame))
            conn.next_transfer_from += len(body)
            last_write = time.monotonic()


__all__ = ["HAConnection", "HAMasterService"]
