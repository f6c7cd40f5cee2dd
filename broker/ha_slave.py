"""The slave side of HA replication (RocketMQ 4.9 HAService.HAClient), on trio.

The slave connects to its master's HA address - haMasterAddress from broker.conf, else the
haServerAddr the name server returns on REGISTER_BROKER - and reports its max commit-log
offset (8 bytes) at once, every haSendHeartbeatInterval and after each append. It appends
the master's transfers at its own max offset (store.ha_append.append_at: same bytes, same
offsets, so the files are identical) and its reput thread dispatches them. A transfer that
does not start at the slave's max offset (when the slave has any data) means the two logs
diverged: the connection is closed, as HAClient.dispatchReadRequest does. A master silent for
haHousekeepingInterval, a refused connection or a dead master: close and try again after
``retry_interval_s`` (HAClient waits 5 s).

One deviation from HAClient: the first report goes out right after the connect instead of
one heartbeat interval later; a master treats both the same, the slave just starts sooner.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import trio

from rmqd.broker.ha_flow import ByteRate
from rmqd.store.ha_append import HAAppendError, SlaveReceiver
from rmqd.wire.ha import HAProtocolError, TransferReader, encode_report

log = logging.getLogger("rmqd.ha.slave")

#: HAClient: waitForRunning(1000 * 5) after a failed connect or a closed connection.
RETRY_INTERVAL_S = 5.0
#: HAClient's connect timeout (RemotingUtil.connect(addr), 3 s in SocketChannel terms).
CONNECT_TIMEOUT_S = 3.0


class HAClient:
    def __init__(self, store: Any, config: Any) -> None:
        self.store = store
        self.config = config  # MessageStoreConfig: haMasterAddress, haSendHeartbeatInterval, ...
        addr = config.haMasterAddress
        self.master_address: str | None = addr if addr and len(addr) >= 6 else None
        #: BrokerController: the name server's haServerAddr is taken only without haMasterAddress
        self.update_master_periodically = self.master_address is None
        self.retry_interval_s = RETRY_INTERVAL_S
        self.current_reported_offset = 0
        self.connected = trio.Event()
        self.connects = 0
        self._changed = trio.Event()
        # what GET_BROKER_HA_STATUS reports (5.x DefaultHAClient): wall-clock ms of the last
        # bytes read from / report written to the master (read is 0 while disconnected), and
        # the bytes read per second
        self.last_read_ms = self.last_write_ms = _now_ms()
        self.flow = ByteRate()

    def update_master_address(self, addr: str | None) -> None:
        """REGISTER_BROKER result (haServerAddr): follow the master when it moves."""
        if not self.update_master_periodically or not addr or addr == self.master_address:
            return
        log.info("HA master address %s -> %s", self.master_address, addr)
        self.master_address = addr
        event, self._changed = self._changed, trio.Event()
        event.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            addr = self.master_address
            if addr is None:
                with trio.move_on_after(self.retry_interval_s):
                    await self._changed.wait()
                continue
            connects = self.connects
            try:
                await self._session(addr)
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError, HAProtocolError,
                    HAAppendError, ValueError) as exc:
                log.warning("HA connection to master %s: %s", addr, exc or type(exc).__name__)
            except Exception:  # noqa: BLE001 - replication trouble must never stop the slave's broker
                log.exception("HA connection to master %s failed", addr)
            self.connected = trio.Event()
            if self.connects != connects:  # a connection was open: closeMaster zeroes lastReadTimestamp
                self.last_read_ms = 0
            if self.master_address == addr:
                with trio.move_on_after(self.retry_interval_s):
                    await self._changed.wait()

    async def _session(self, addr: str) -> None:
        host, _, port = addr.rpartition(":")
        with trio.fail_after(CONNECT_TIMEOUT_S):
            stream = await trio.open_tcp_stream(host, int(port))
        async with stream:
            self.connects += 1
            self.current_reported_offset = self.store.get_max_phy_offset()
            await stream.send_all(encode_report(self.current_reported_offset))
            last_write = last_read = time.monotonic()
            self.last_read_ms = self.last_write_ms = _now_ms()
            self.connected.set()
            log.info("HA connected to master %s, reported %d", addr, self.current_reported_offset)
            reader = TransferReader()
            receiver = SlaveReceiver(self.store)
            heartbeat = int(self.config.haSendHeartbeatInterval) / 1000
            housekeeping = int(self.config.haHousekeepingInterval) / 1000
            while self.master_address == addr:
                data = b""
                with trio.move_on_after(min(1.0, heartbeat)):
                    data = await stream.receive_some(256 * 1024)
                    if not data:
                        raise trio.BrokenResourceError("master closed the connection")
                now = time.monotonic()
                if data:
                    last_read = now
                    self.last_read_ms = _now_ms()
                    self.flow.add(len(data))
                    for t in reader.feed(data):
                        mine = receiver.expected_offset
                        if mine != 0 and mine != t.offset:
                            raise HAProtocolError(f"master pushed offset {t.offset}, the slave's max offset is {mine}")
                        if t.body:
                            await trio.to_thread.run_sync(receiver.feed, t.offset, t.body)
                elif now - last_read > housekeeping:
                    raise HAProtocolError(f"master silent for {housekeeping:.0f} s")
                mine = self.store.get_max_phy_offset()
                if mine > self.current_reported_offset or now - last_write > heartbeat:
                    await stream.send_all(encode_report(mine))
                    self.current_reported_offset = mine
                    last_write = now
                    self.last_write_ms = _now_ms()


def _now_ms() -> int:
    return int(time.time() * 1000)


__all__ = ["HAClient"]
