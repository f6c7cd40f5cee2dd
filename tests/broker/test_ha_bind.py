"""Issue 22, D8: the HA port (listenPort + 1) serves the whole commit log to whoever connects
and reports an offset, with or without ACL, as 4.9.8's HAService does. haBindAddress keeps
it to one interface (the replication network): elsewhere nothing listens, and a slave told
that address replicates as before."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import trio

from rmqd.broker.config import ConfigError, validate
from broker_harness import make_settings
from test_ha_replication import caught_up, cluster, commit_log_files, send_many, settings_for  # type: ignore[import-not-found]
from rmqd.wire.ha import encode_report

REPLICATION_ADDR = "127.0.0.2"  # another loopback address: stands for the replication network


def _connects(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def test_ha_port_bound_to_ha_bind_address_only(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(60) as c:
            master = await c.start(settings_for(tmp_path / "m", c.ns_addr, "ASYNC_MASTER",
                                                haBindAddress=REPLICATION_ADDR, brokerIP2=REPLICATION_ADDR))
            host, port = master.bound["ha"]
            assert (host, port) == (REPLICATION_ADDR, master.settings.listen_port + 1)
            assert master.settings.ha_server_addr == f"{REPLICATION_ADDR}:{port}"
            # the client port still serves on the broker's own address; the HA port does not
            assert await trio.to_thread.run_sync(_connects, "127.0.0.1", master.settings.listen_port)
            assert not await trio.to_thread.run_sync(_connects, "127.0.0.1", port)
            # a slave that finds the master through the name server (haServerAddr = brokerIP2) replicates
            slave = await c.start(settings_for(tmp_path / "s", c.ns_addr, "SLAVE"))
            await send_many(c.harness(master), 60)
            await caught_up(master, slave)
            assert commit_log_files(master) == commit_log_files(slave)
            assert slave.ha_client.master_address == f"{REPLICATION_ADDR}:{port}"
            await slave.stop()
            await master.stop()

    trio.run(main)


def test_without_ha_bind_address_anyone_reaching_the_port_gets_the_commit_log(tmp_path: Path) -> None:
    """The exposure documented in docs/security.md: a report of offset 0 is all it takes."""
    async def main() -> None:
        async with cluster(60) as c:
            master = await c.start(settings_for(tmp_path / "m", c.ns_addr, "ASYNC_MASTER"))
            await send_many(c.harness(master), 5)
            stream = await trio.open_tcp_stream("127.0.0.1", master.bound["ha"][1])
            async with stream:
                await stream.send_all(encode_report(0))
                got = b""
                with trio.fail_after(10):
                    while len(got) < 12 + 100:
                        got += await stream.receive_some(65536)
            assert got[12:16] != b"\x00\x00\x00\x00"  # the first record's size: message bytes follow
            await master.stop()

    trio.run(main)


def test_ha_bind_address_must_be_an_ip_address(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="haBindAddress='replication-net' is not an IP address"):
        validate(make_settings(tmp_path, None, haBindAddress="replication-net"))
    validate(make_settings(tmp_path, None, haBindAddress="::1"))
