"""The name-server role over real sockets: BrokerOuterAPI registration, routes, the periodic
expiry scan, and a broker dropped when its connection closes."""

from __future__ import annotations

import pytest
import trio

from rmqd.broker.namesrv import NamesrvRole
from rmqd.broker.remoting_client import BrokerOuterAPI, RemotingClient
from rmqd.processors.namesrv import NamesrvConfig
from rmqd.wire.bodies import ClusterInfo, DataVersion, TopicConfig, TopicConfigSerializeWrapper, TopicRouteData
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import make_request

pytestmark = pytest.mark.timeout(30)


def wrapper(*topics: str, counter: int = 1) -> TopicConfigSerializeWrapper:
    return TopicConfigSerializeWrapper({t: TopicConfig(t, 4, 4, 6) for t in topics}, DataVersion(1, counter))


async def start(nursery, **kw) -> tuple[NamesrvRole, str]:
    role = NamesrvRole(NamesrvConfig(kvConfigPath=""), host="127.0.0.1", port=0, **kw)
    bound = await nursery.start(role.run)
    return role, f"127.0.0.1:{bound[1]}"


async def route(client: RemotingClient, addr: str, topic: str):
    return await client.invoke(addr, make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), 5)


def test_register_route_and_connection_loss():
    async def main():
        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                role, addr = await start(nursery)
                async with RemotingClient() as reader:
                    async with RemotingClient() as broker_conn:
                        api = BrokerOuterAPI(broker_conn, [addr])
                        results = await api.register_broker_all(
                            cluster_name="C", broker_addr="127.0.0.1:10911", broker_name="b", broker_id=0,
                            ha_server_addr="127.0.0.1:10912", topic_config_wrapper=wrapper("T1", "T2"))
                        assert len(results) == 1 and results[0].masterAddr is None
                        resp = await route(reader, addr, "T1")
                        assert resp.code == 0
                        data = TopicRouteData.decode(resp.body)
                        assert data.brokerDatas[0].brokerAddrs == {0: "127.0.0.1:10911"}
                        # a oneway registration (what the broker sends after a topic change) works too
                        await api.register_broker_all(
                            cluster_name="C", broker_addr="127.0.0.1:10911", broker_name="b", broker_id=0,
                            ha_server_addr="127.0.0.1:10912", topic_config_wrapper=wrapper("T3", counter=2), oneway=True)
                        with trio.fail_after(5):
                            while (await route(reader, addr, "T3")).code != 0:
                                await trio.sleep(0.02)
                    # the broker's connection closed: the name server forgets it at once
                    with trio.fail_after(5):
                        while (await route(reader, addr, "T1")).code != ResponseCode.TOPIC_NOT_EXIST:
                            await trio.sleep(0.02)
                await role.stop()
    trio.run(main)


def test_unregister_and_unreachable_name_server_is_tolerated():
    async def main():
        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                role, addr = await start(nursery)
                async with RemotingClient(connect_timeout=1) as client:
                    dead = "127.0.0.1:1"
                    api = BrokerOuterAPI(client, [addr, dead], timeout=2)
                    kw = dict(cluster_name="C", broker_addr="127.0.0.1:10911", broker_name="b", broker_id=0)
                    results = await api.register_broker_all(ha_server_addr="x:1", topic_config_wrapper=wrapper("T"),
                                                            **kw)
                    assert len(results) == 1  # the dead one was logged and skipped
                    await api.unregister_broker_all(**kw)
                    info = ClusterInfo.decode((await client.invoke(
                        addr, make_request(RequestCode.GET_BROKER_CLUSTER_INFO), 5)).body)
                    assert info.brokerAddrTable == {}
                await role.stop()
    trio.run(main)


def test_periodic_scan_expires_silent_brokers():
    async def main():
        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                role, addr = await start(nursery, scan_period=0.05)
                now = [1_000_000]
                role.routes.now_ms = lambda: now[0]
                async with RemotingClient() as client, RemotingClient() as broker_conn:
                    api = BrokerOuterAPI(broker_conn, [addr])
                    await api.register_broker_all(cluster_name="C", broker_addr="127.0.0.1:10911", broker_name="b",
                                                  broker_id=0, ha_server_addr="x:1", topic_config_wrapper=wrapper("T"))
                    assert (await route(client, addr, "T")).code == 0
                    broker_channel = await broker_conn.channel(addr)
                    now[0] += 121_000
                    with trio.fail_after(5):
                        while (await route(client, addr, "T")).code != ResponseCode.TOPIC_NOT_EXIST:
                            await trio.sleep(0.05)
                    # RocketMQ also closes the expired broker's channel
                    with trio.fail_after(5):
                        while not broker_channel.closed:
                            await trio.sleep(0.02)
                await role.stop()
    trio.run(main)


def test_split_namesrv_addr():
    assert BrokerOuterAPI.split_namesrv_addr("a:1; b:2;") == ["a:1", "b:2"]
    assert BrokerOuterAPI.split_namesrv_addr(None) == []
    with pytest.raises(ValueError):
        BrokerOuterAPI.split_namesrv_addr("nohostport")
