"""GET_BROKER_HA_STATUS (907, mqadmin 5.x haStatus) with real replication: an rmqd master and an
rmqd slave report each other as 5.x's DefaultHAService.getRuntimeInfo does (rocketmq-all-5.3.3):
the master lists the slave's connection (acked offset, diff, in sync, bytes per second, where the
next transfer starts), the slave its link (the master's HA address, its max offset, read/write
times, bytes per second, the checkpoint's master flush offset). Plus the cases no pair shows:
a slave fallen behind haMaxGapNotInSync, no HA service, a slave between connections."""

from __future__ import annotations

import time
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any, AsyncIterator

import trio

from broker_harness import Harness, make_settings
from rmqd.broker.broker import BrokerRole
from rmqd.broker.config import validate
from rmqd.broker.namesrv import NamesrvRole
from rmqd.broker.remoting_client import RemotingClient
from rmqd.processors.admin5 import HA_MAX_GAP_NOT_IN_SYNC, Admin5Processor
from rmqd.wire.admin5 import HARuntimeInfo
from rmqd.wire.codes import RequestCode, ResponseCode
from support import free_broker_port, wait_until


@asynccontextmanager
async def pair(root: Path) -> AsyncIterator[tuple[Harness, Harness]]:
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            namesrv = NamesrvRole(host="127.0.0.1", port=0)
            _, ns_port = await nursery.start(namesrv.run)
            ns = f"127.0.0.1:{ns_port}"
            roles = []
            for name, role in (("m", "ASYNC_MASTER"), ("s", "SLAVE")):
                s = make_settings(root / name, ns, listenPort=free_broker_port(), brokerRole=role,
                                  brokerId=1 if role == "SLAVE" else 0, mappedFileSizeCommitLog=64 * 1024,
                                  mappedFileSizeConsumeQueue=6000)
                validate(s)
                b = BrokerRole(s, host="127.0.0.1")
                if b.ha_client is not None:
                    b.ha_client.retry_interval_s = 0.2
                    b.slave_synchronize.initial_delay_s = 3600
                await nursery.start(b.run)
                roles.append(b)
            async with RemotingClient("ha-status-test") as client:
                yield (Harness(roles[0], None, client, roles[0].settings.broker_addr, ns),
                       Harness(roles[1], None, client, roles[1].settings.broker_addr, ns))
            nursery.cancel_scope.cancel()


async def _status(h: Harness) -> HARuntimeInfo:
    r = await h.invoke(RequestCode.GET_BROKER_HA_STATUS)
    assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
    return HARuntimeInfo.decode(r.body)


def test_master_and_slave_report_the_replication(tmp_path: Path) -> None:
    async def main() -> None:
        async with pair(tmp_path) as (hm, hs):
            master, slave = hm.role, hs.role
            t0 = int(time.time() * 1000)
            for i in range(50):
                assert (await hm.send_v2("HaS", b"m" * (200 + i), queue_id=i % 4)).code == ResponseCode.SUCCESS
            end = master.store.get_max_phy_offset()
            await wait_until(lambda: slave.store.get_max_phy_offset() == end, 15, "the slave caught up")
            assert master.ha_service is not None
            conn = next(iter(master.ha_service.connections))
            await wait_until(lambda: conn.slave_ack_offset == end, 15, "the slave acked the end")

            m = await _status(hm)
            assert m.master and m.masterCommitLogMaxOffset == end and m.inSyncSlaveNums == 1
            (c,) = m.haConnectionInfo
            assert (c.addr, c.slaveAckOffset, c.diff, c.inSync, c.transferFromWhere) == (conn.remote, end, 0, True, end)
            assert c.addr.startswith("127.0.0.1:") and c.addr != master.settings.ha_server_addr
            assert m.haClientRuntimeInfo.masterAddr is None and m.haClientRuntimeInfo.maxOffset == 0

            s = await _status(hs)
            assert not s.master and s.haConnectionInfo == [] and s.masterCommitLogMaxOffset == 0
            cl = s.haClientRuntimeInfo
            assert cl.masterAddr == master.settings.ha_server_addr and cl.maxOffset == end
            now = int(time.time() * 1000)
            assert t0 <= cl.lastReadTimestamp <= now and t0 - 1000 <= cl.lastWriteTimestamp <= now
            assert cl.masterFlushOffset == 0  # a 4.9-format checkpoint: 5.x's field is never written

            # the bytes of the last whole second, on both sides, once a second with traffic has ended
            async def busy_second() -> None:
                for i in range(20):
                    await hm.send_v2("HaS", b"b" * 500)
                    await trio.sleep(0.05)
            await busy_second()
            assert slave.ha_client is not None
            await wait_until(lambda: conn.flow.per_second() > 0 or slave.ha_client.flow.per_second() > 0, 5,
                             "a second with replication traffic")
            m, s = await _status(hm), await _status(hs)
            sent, got = m.haConnectionInfo[0].transferredByteInSecond, s.haClientRuntimeInfo.transferredByteInSecond
            assert sent >= 0 and got >= 0 and sent + got > 0
            # two quiet seconds later the figure is back to what the heartbeats alone carry
            await trio.sleep(2.2)
            assert (await _status(hm)).haConnectionInfo[0].transferredByteInSecond < 100
    trio.run(main)


class _Flow:
    def __init__(self, n: int) -> None:
        self.n = n

    def per_second(self) -> int:
        return self.n


def _fake(role: str, max_offset: int, **kw: Any) -> Any:
    store_config = SimpleNamespace(brokerRole=role, get_store_checkpoint=lambda: "/nonexistent/checkpoint")
    return SimpleNamespace(store=SimpleNamespace(get_max_phy_offset=lambda: max_offset),
                           message_store_config=store_config, broker_config=SimpleNamespace(),
                           ha_service=kw.get("ha_service"), ha_client=kw.get("ha_client"))


def test_fallen_behind_no_service_and_a_disconnected_slave() -> None:
    # a slave more than haMaxGapNotInSync behind is "Fall Behind"; connections in connect order
    behind = SimpleNamespace(remote="10.0.0.2:40000", slave_ack_offset=5, next_transfer_from=7,
                             connected_at=2.0, flow=_Flow(3))
    fresh = SimpleNamespace(remote="10.0.0.1:40000", slave_ack_offset=-1, next_transfer_from=-1,
                            connected_at=1.0, flow=_Flow(0))
    end = HA_MAX_GAP_NOT_IN_SYNC + 10
    info = Admin5Processor(_fake("ASYNC_MASTER", end, ha_service=SimpleNamespace(connections=[behind, fresh]))
                           ).ha_runtime_info()
    assert info is not None and info.inSyncSlaveNums == 0
    assert [(c.addr, c.diff, c.inSync, c.slaveAckOffset, c.transferFromWhere, c.transferredByteInSecond)
            for c in info.haConnectionInfo] == [("10.0.0.1:40000", end + 1, False, -1, -1, 0),
                                                ("10.0.0.2:40000", end - 5, False, 5, 7, 3)]
    small = Admin5Processor(_fake("SYNC_MASTER", 100, ha_service=SimpleNamespace(connections=[behind])))
    assert (info := small.ha_runtime_info()) is not None and info.inSyncSlaveNums == 1
    # no HA service: None, which the handler answers with 5.x's SYSTEM_ERROR
    assert Admin5Processor(_fake("ASYNC_MASTER", 0)).ha_runtime_info() is None
    assert Admin5Processor(_fake("SLAVE", 0)).ha_runtime_info() is None
    # a slave between connections (lastReadTimestamp 0, as closeMaster leaves it), master unknown,
    # checkpoint unreadable: -1, 5.x's value before the checkpoint is read
    client = SimpleNamespace(master_address=None, last_read_ms=0, last_write_ms=1234, flow=_Flow(0))
    info = Admin5Processor(_fake("SLAVE", 42, ha_client=client)).ha_runtime_info()
    assert info is not None and not info.master
    assert info.encode() == (b'{"haClientRuntimeInfo":{"lastReadTimestamp":0,"lastWriteTimestamp":1234,'
                             b'"masterFlushOffset":-1,"maxOffset":42,"transferredByteInSecond":0},'
                             b'"haConnectionInfo":[],"inSyncSlaveNums":0,"master":false,"masterCommitLogMaxOffset":0}')
