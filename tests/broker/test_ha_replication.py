"""HA replication rmqd master <-> rmqd slave (RocketMQ 4.9 HAService), in one trio run each:
byte-identical commit logs, pulls from the slave, master restart mid-stream, a late slave,
SYNC_MASTER / ASYNC_MASTER acks, SlaveSynchronize, sends to a slave refused."""

from __future__ import annotations

import os
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
import trio

from rmqd.broker.broker import BrokerRole
from rmqd.broker.config import ConfigError, validate
from rmqd.broker.namesrv import NamesrvRole
from rmqd.broker.remoting_client import RemotingClient
from broker_harness import BROKER_NAME, Harness, decode_pull_body, make_settings
from support import free_broker_port
from rmqd.store.tools import compare_commit_logs, verify
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.ha import encode_report

FILE = 64 * 1024  # small commit-log files: a few hundred messages span several


def settings_for(root: Path, ns_addr: str, role: str, port: int | None = None, **kw: Any) -> Any:
    s = make_settings(root, ns_addr, listenPort=port or free_broker_port(), brokerRole=role,
                      brokerId=1 if role == "SLAVE" else 0, mappedFileSizeCommitLog=FILE,
                      mappedFileSizeConsumeQueue=6000, **kw)
    validate(s)
    return s


class Cluster:
    def __init__(self, nursery: trio.Nursery, ns_addr: str, client: RemotingClient) -> None:
        self.nursery = nursery
        self.ns_addr = ns_addr
        self.client = client

    async def start(self, settings: Any, *, retry_s: float = 0.2) -> BrokerRole:
        role = BrokerRole(settings, host="127.0.0.1")
        if role.ha_client is not None:
            role.ha_client.retry_interval_s = retry_s
            role.slave_synchronize.initial_delay_s = 3600  # the tests call sync_all themselves
        await self.nursery.start(role.run)
        return role

    def harness(self, role: BrokerRole) -> Harness:
        return Harness(role, None, self.client, role.settings.broker_addr, self.ns_addr)


@asynccontextmanager
async def cluster(timeout: float = 60) -> AsyncIterator[Cluster]:
    with trio.fail_after(timeout):
        async with trio.open_nursery() as nursery:
            namesrv = NamesrvRole(host="127.0.0.1", port=0)
            _, ns_port = await nursery.start(namesrv.run)
            async with RemotingClient("ha-test") as client:
                yield Cluster(nursery, f"127.0.0.1:{ns_port}", client)
            nursery.cancel_scope.cancel()


async def send_many(h: Harness, n: int, topic: str = "HA", start: int = 0) -> list[Any]:
    out = []
    for i in range(start, start + n):
        r = await h.send_v2(topic, os.urandom(100 + i % 400), queue_id=i % 4, keys=f"k{i}")
        assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
        out.append(r)
    return out


async def caught_up(master: BrokerRole, slave: BrokerRole, timeout: float = 15) -> int:
    end = master.store.get_max_phy_offset()
    with trio.fail_after(timeout):
        while slave.store.get_max_phy_offset() < end:
            await trio.sleep(0.05)
    assert slave.store.get_max_phy_offset() == end
    assert await trio.to_thread.run_sync(slave.store.wait_dispatched, end)
    return end


def commit_log_files(role: BrokerRole) -> dict[str, bytes]:
    d = Path(role.settings.store.storePathRootDir) / "commitlog"
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def test_slave_replicates_byte_identical_serves_pulls_refuses_sends(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster() as c:
            master = await c.start(settings_for(tmp_path / "m", c.ns_addr, "ASYNC_MASTER"))
            assert master.bound["ha"][1] == master.settings.listen_port + 1
            slave = await c.start(settings_for(tmp_path / "s", c.ns_addr, "SLAVE"))
            hm, hs = c.harness(master), c.harness(slave)
            await send_many(hm, 400)
            end = await caught_up(master, slave)
            assert end > 2 * FILE
            assert commit_log_files(master) == commit_log_files(slave)
            # the slave found the master through the name server (haServerAddr) and shows in the route
            assert slave.ha_client.master_address == master.settings.ha_server_addr
            route = await hm.invoke(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "HA"}, addr=c.ns_addr)
            assert route.code == ResponseCode.SUCCESS
            await slave.register_broker_all()
            route = await hm.invoke(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}, addr=c.ns_addr)
            assert b'"1":"%s"' % slave.settings.broker_addr.encode() in route.body
            # SlaveSynchronize brings the topic, then pulls from the slave return the master's records
            await slave.slave_synchronize.sync_all(c.client)
            assert slave.topic_config_manager.select_topic_config("HA") is not None
            for h in (hm, hs):
                assert (await h.heartbeat("cid", "g", "HA")).code == ResponseCode.SUCCESS
            for qid in range(4):
                pm = await hm.pull("HA", "g", qid, 0, suspend_ms=0)
                ps = await hs.pull("HA", "g", qid, 0, suspend_ms=0)
                assert pm.code == ps.code == ResponseCode.SUCCESS
                assert ps.body == pm.body and len(decode_pull_body(ps)) > 0
            # a slave refuses writes as 4.9.8 (store SERVICE_NOT_AVAILABLE -> code 14 with its remark)
            refused = await hs.send_v2("HA", b"to-slave")
            assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE
            assert "messages are put to the slave" in refused.remark
            assert slave.store.get_max_phy_offset() == end
            await slave.stop()
            await master.stop()
            # `rmqd store verify` on the slave: every record, consume-queue unit and index entry holds
            problems = await trio.to_thread.run_sync(verify, slave.settings.store.storePathRootDir,
                                                     slave.settings.store)
            assert problems == []

    trio.run(main)


def test_master_restart_mid_stream_slave_resumes(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(90) as c:
            ms = settings_for(tmp_path / "m", c.ns_addr, "ASYNC_MASTER")
            port = ms.listen_port
            master = await c.start(ms)
            slave = await c.start(settings_for(tmp_path / "s", c.ns_addr, "SLAVE",
                                               haMasterAddress=f"127.0.0.1:{port + 1}"))
            hm = c.harness(master)
            await send_many(hm, 50)
            with trio.fail_after(10):  # (a slave still at 0 would restart at the master's last file)
                while slave.store.get_max_phy_offset() == 0:
                    await trio.sleep(0.01)
            await send_many(hm, 100, start=50)
            await master.stop()  # mid-stream: the slave does not have everything yet
            connects = slave.ha_client.connects
            master = await c.start(settings_for(tmp_path / "m", c.ns_addr, "ASYNC_MASTER", port=port))
            await send_many(c.harness(master), 250, start=150)
            await caught_up(master, slave)
            assert slave.ha_client.connects > connects  # it reconnected and went on from its own offset
            assert commit_log_files(master) == commit_log_files(slave)
            await slave.stop()
            await master.stop()

    trio.run(main)


def test_slave_that_fell_behind_catches_up(tmp_path: Path) -> None:
    """A slave stopped while the master takes several files of sends, then restarted on its own
    store: it reports its own offset (not 0), gets everything it missed, file rolls included."""
    async def main() -> None:
        async with cluster(90) as c:
            master = await c.start(settings_for(tmp_path / "m", c.ns_addr, "ASYNC_MASTER"))
            hm = c.harness(master)
            slave = await c.start(settings_for(tmp_path / "s", c.ns_addr, "SLAVE"))
            await send_many(hm, 60)
            before = await caught_up(master, slave)
            await slave.stop()
            await send_many(hm, 500, start=60)  # the slave is now several files behind
            assert master.store.get_max_phy_offset() - before > 2 * FILE
            slave = await c.start(settings_for(tmp_path / "s", c.ns_addr, "SLAVE"))
            assert slave.store.get_max_phy_offset() == before  # resumes from its own end
            await caught_up(master, slave, timeout=30)
            assert commit_log_files(master) == commit_log_files(slave)
            await slave.stop()
            await master.stop()
            diffs, compared = await trio.to_thread.run_sync(
                compare_commit_logs, slave.settings.store.storePathRootDir, master.settings.store.storePathRootDir,
                slave.settings.store, master.settings.store)
            assert diffs == [] and "4 file(s)" in compared, compared

    trio.run(main)


def test_late_slave_starts_at_the_masters_last_file(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster() as c:
            master = await c.start(settings_for(tmp_path / "m", c.ns_addr, "ASYNC_MASTER"))
            await send_many(c.harness(master), 400)
            mfiles = commit_log_files(master)
            assert len(mfiles) >= 3
            slave = await c.start(settings_for(tmp_path / "s", c.ns_addr, "SLAVE"))
            end = await caught_up(master, slave)
            last = max(mfiles)
            assert int(last) == end - end % FILE  # HAConnection: a slave reporting 0 gets the last file
            assert commit_log_files(slave) == {last: commit_log_files(master)[last]}
            await slave.stop()
            await master.stop()

    trio.run(main)


def test_sync_master_never_acks_what_the_slave_lacks(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster() as c:
            master = await c.start(settings_for(tmp_path / "m", c.ns_addr, "SYNC_MASTER", syncFlushTimeout=1000))
            hm = c.harness(master)
            at = master.store.get_max_phy_offset()
            r = await hm.send_v2("SY", b"no slave yet")
            assert r.code == ResponseCode.SLAVE_NOT_AVAILABLE and r.remark is None  # stored, but not replicated
            # a consumer's send-back on a SYNC_MASTER waits for the slave as well (4.9.8: the status name)
            back = await hm.invoke(RequestCode.CONSUMER_SEND_MSG_BACK, {"offset": str(at), "group": "g",
                                                                       "delayLevel": "0"})
            assert back.code == ResponseCode.SYSTEM_ERROR and back.remark == "SLAVE_NOT_AVAILABLE"
            slave = await c.start(settings_for(tmp_path / "s", c.ns_addr, "SLAVE"))
            with trio.fail_after(10):
                while not master.ha_service.connections:
                    await trio.sleep(0.05)
            # the first report was the master's last file start; let it catch up with that
            for i in range(20):
                r = await hm.send_v2("SY", f"m{i}".encode(), queue_id=i % 4)
                assert r.code == ResponseCode.SUCCESS
                assert slave.store.get_max_phy_offset() >= master.store.get_max_phy_offset()
            await slave.stop()
            t0 = trio.current_time()
            r = await hm.send_v2("SY", b"slave gone")
            assert r.code in (ResponseCode.FLUSH_SLAVE_TIMEOUT, ResponseCode.SLAVE_NOT_AVAILABLE)
            if r.code == ResponseCode.FLUSH_SLAVE_TIMEOUT:
                assert trio.current_time() - t0 >= 0.9  # waited syncFlushTimeout
            with trio.fail_after(5):
                while master.ha_service.connections:
                    await trio.sleep(0.05)
            r = await hm.send_v2("SY", b"still gone")
            assert r.code == ResponseCode.SLAVE_NOT_AVAILABLE
            await master.stop()

    trio.run(main)


def test_async_master_does_not_wait(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster() as c:
            master = await c.start(settings_for(tmp_path / "m", c.ns_addr, "ASYNC_MASTER", syncFlushTimeout=3000))
            t0 = trio.current_time()
            r = await c.harness(master).send_v2("AS", b"x")
            assert r.code == ResponseCode.SUCCESS and trio.current_time() - t0 < 1.0
            assert not master.ha_service.connections
            await master.stop()

    trio.run(main)


def test_slave_synchronize_copies_metadata(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster() as c:
            master = await c.start(settings_for(tmp_path / "m", c.ns_addr, "ASYNC_MASTER"))
            slave = await c.start(settings_for(tmp_path / "s", c.ns_addr, "SLAVE"))
            hm = c.harness(master)
            await send_many(hm, 8, topic="SYNCED")
            r = await hm.invoke(RequestCode.UPDATE_AND_CREATE_TOPIC,
                                {"topic": "CREATED", "defaultTopic": "TBW102", "readQueueNums": "3",
                                 "writeQueueNums": "3", "perm": "6", "topicFilterType": "SINGLE_TAG",
                                 "topicSysFlag": "0", "order": "false"})
            assert r.code == ResponseCode.SUCCESS
            r = await hm.invoke(RequestCode.UPDATE_CONSUMER_OFFSET,
                                {"consumerGroup": "cg", "topic": "SYNCED", "queueId": "1", "commitOffset": "2"})
            assert r.code == ResponseCode.SUCCESS
            group = b'{"groupName":"sg","consumeEnable":true,"retryMaxTimes":7}'
            r = await hm.invoke(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, group)
            assert r.code == ResponseCode.SUCCESS
            delay = Path(master.settings.store.storePathRootDir) / "config" / "delayOffset.json"
            delay.parent.mkdir(parents=True, exist_ok=True)
            delay.write_text('{\n\t"offsetTable":{1:5\n\t}\n}')
            assert slave.slave_synchronize.master_addr == master.settings.broker_addr
            await slave.slave_synchronize.sync_all(c.client)
            tc = slave.topic_config_manager.select_topic_config("CREATED")
            assert tc is not None and tc.readQueueNums == 3
            assert slave.topic_config_manager.select_topic_config("SYNCED") is not None
            assert slave.consumer_offset_manager.query_offset("cg", "SYNCED", 1) == 2
            sg = slave.subscription_group_manager.find_subscription_group_config("sg")
            assert sg is not None and sg.retryMaxTimes == 7
            sdelay = Path(slave.settings.store.storePathRootDir) / "config" / "delayOffset.json"
            assert sdelay.read_text() == delay.read_text()
            assert slave.slave_synchronize.rounds == 1
            await slave.stop()
            await master.stop()

    trio.run(main)


def test_sync_master_times_out_when_the_slave_does_not_ack(tmp_path: Path) -> None:
    """A connected slave that stops acking: the send waits syncFlushTimeout, then
    FLUSH_SLAVE_TIMEOUT (the message is stored on the master, the client is told it is not
    replicated)."""
    async def main() -> None:
        async with cluster() as c:
            master = await c.start(settings_for(tmp_path / "m", c.ns_addr, "SYNC_MASTER", syncFlushTimeout=700))
            hm = c.harness(master)
            stream = await trio.open_tcp_stream("127.0.0.1", master.bound["ha"][1])
            async with stream:
                await stream.send_all(encode_report(master.store.get_max_phy_offset()))  # then silence
                with trio.fail_after(5):
                    while master.ha_service.push2slave_max_offset != master.store.get_max_phy_offset() \
                            or not master.ha_service.connections:
                        await trio.sleep(0.02)
                t0 = trio.current_time()
                r = await hm.send_v2("SY", b"never acked")
                assert r.code == ResponseCode.FLUSH_SLAVE_TIMEOUT and r.remark is None
                assert 0.65 <= trio.current_time() - t0 < 3
                assert r.ext_fields["queueOffset"] == "0"  # stored on the master all the same
                # the fake slave acks now: the next send succeeds once its bytes are acked
                got = await stream.receive_some(1 << 16)
                assert len(got) >= 12  # the master streams the unacked record to it
                await stream.send_all(encode_report(master.store.get_max_phy_offset() + 10_000))
                r = await hm.send_v2("SY", b"acked")
                assert r.code == ResponseCode.SUCCESS
            await master.stop()

    trio.run(main)


def test_pull_suggests_the_slave_only_with_slave_read_enable(tmp_path: Path) -> None:
    """suggestWhichBrokerId: whichBrokerWhenConsumeSlowly (1) when the pulled data is no longer
    in memory and slaveReadEnable=true; MASTER_ID (0) without slaveReadEnable."""
    async def main() -> None:
        async with cluster() as c:
            for enable, expected in (("true", "1"), ("false", "0")):
                master = await c.start(settings_for(tmp_path / enable, c.ns_addr, "ASYNC_MASTER",
                                                    slaveReadEnable=enable, accessMessageInMemoryMaxRatio=0))
                hm = c.harness(master)
                await send_many(hm, 10, topic="SUG")
                hm.wait_dispatched()
                assert (await hm.heartbeat("cid", "g", "SUG")).code == ResponseCode.SUCCESS
                r = await hm.pull("SUG", "g", 0, 0, suspend_ms=0, max_msgs=1)
                assert r.code == ResponseCode.SUCCESS
                assert r.ext_fields["suggestWhichBrokerId"] == expected
                await master.stop()

    trio.run(main)


def test_garbage_on_the_ha_ports_closes_only_that_connection(tmp_path: Path) -> None:
    """A peer that is not a RocketMQ slave (a negative offset) or not a master (a bad header):
    the connection is closed with a log line, the broker keeps serving and replicating."""
    async def main() -> None:
        async with cluster() as c:
            master = await c.start(settings_for(tmp_path / "m", c.ns_addr, "ASYNC_MASTER"))
            hm = c.harness(master)
            bad = await trio.open_tcp_stream("127.0.0.1", master.bound["ha"][1])
            async with bad:
                await bad.send_all(b"\xff" * 8)  # offset -1
                with trio.fail_after(5):
                    assert await bad.receive_some(100) == b""  # closed by the master
            # a fake master whose first header has a negative size
            fake = trio.socket.socket()
            await fake.bind(("127.0.0.1", 0))
            fake.listen(1)
            fake_addr = "127.0.0.1:%d" % fake.getsockname()[1]
            slave = await c.start(settings_for(tmp_path / "s", c.ns_addr, "SLAVE", haMasterAddress=fake_addr))
            with trio.fail_after(5):
                conn, _ = await fake.accept()
            with conn:
                assert len(await conn.recv(8)) == 8  # the slave's report
                await conn.send(b"\x00" * 8 + b"\xff\xff\xff\xff")
                with trio.fail_after(5):
                    assert await conn.recv(100) == b""  # the slave gave up on it
            fake.close()
            assert slave.store.get_max_phy_offset() == 0
            await send_many(hm, 5)
            assert master.ha_service.connections == set()
            await slave.stop()
            await master.stop()

    trio.run(main)


def test_broker_ids_follow_the_role(tmp_path: Path) -> None:
    """BrokerStartup: a SLAVE needs brokerId > 0; a master is always brokerId 0."""
    s = make_settings(tmp_path, None, brokerRole="SLAVE")
    with pytest.raises(ConfigError, match="brokerId > 0"):
        validate(s)
    m = make_settings(tmp_path, None, brokerRole="SYNC_MASTER", brokerId=3)
    validate(m)
    assert m.broker.brokerId == 0
