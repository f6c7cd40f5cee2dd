"""HA replication through the CLI: `rmqd serve` master and `rmqd serve` slave as processes; the
master is SIGKILLed mid-stream (sends in flight, the slave behind), restarted on its store, and
the slave - which retries every 5 s as HAClient does - resumes from its own max offset: both
commit logs end byte-identical and every acknowledged message is on the slave."""

from __future__ import annotations

import time
from pathlib import Path

import trio

from rmqd.broker.remoting_client import RemotingClient
from broker_harness import Harness
from support import free_broker_port, free_port, rmqd, run_once, stop, wait_ready
from rmqd.wire.codes import ResponseCode

FILE = 64 * 1024


def _conf(path: Path, **keys: str) -> Path:
    base = {"mappedFileSizeCommitLog": str(FILE), "mappedFileSizeConsumeQueue": "6000", "brokerName": "ha-kill",
            "brokerIP1": "127.0.0.1", "brokerIP2": "127.0.0.1", "flushIntervalCommitLog": "50"}
    path.write_text("".join(f"{k}={v}\n" for k, v in {**base, **keys}.items()))
    return path


def _files(store: Path) -> dict[str, bytes]:
    d = store / "commitlog"
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())} if d.is_dir() else {}


def test_sigkill_master_mid_stream_slave_resumes(tmp_path: Path) -> None:
    mport, sport = free_broker_port(), free_broker_port()
    mconf = _conf(tmp_path / "m.conf", brokerRole="ASYNC_MASTER")
    sconf = _conf(tmp_path / "s.conf", brokerRole="SLAVE", brokerId="1", haMasterAddress=f"127.0.0.1:{mport + 1}")
    mstore, sstore = tmp_path / "m", tmp_path / "s"
    mns, sns = free_port(), free_port()

    def start_master():
        p = rmqd("serve", "--store", str(mstore), "--namesrv-port", str(mns), "--broker-port", str(mport),
                 "--host", "127.0.0.1", "-c", str(mconf))
        wait_ready(p)
        return p

    procs = []
    try:
        master = start_master()
        procs.append(master)
        slave = rmqd("serve", "--store", str(sstore), "--namesrv-port", str(sns), "--broker-port", str(sport),
                     "--host", "127.0.0.1", "-c", str(sconf))
        procs.append(slave)
        wait_ready(slave)
        acked: list[int] = []

        async def send(n: int, start: int) -> None:
            async with RemotingClient("ha-kill") as client:
                h = Harness(None, None, client, f"127.0.0.1:{mport}", f"127.0.0.1:{mns}")  # type: ignore[arg-type]
                for i in range(start, start + n):
                    r = await h.send_v2("HK", (b"%06d" % i) * 50, queue_id=i % 4)
                    assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
                    acked.append(i)

        trio.run(send, 200, 0)
        # mid-stream: the slave has started receiving (else, empty, it would rightly restart at
        # the master's last file after the restart, as RocketMQ's rule says), but may be behind
        started = time.monotonic() + 20
        while not any(b.strip(b"\0") for b in _files(sstore).values()):
            assert time.monotonic() < started, "the slave received nothing from the master"
            time.sleep(0.02)
        master.kill()  # SIGKILL: no shutdown hook, the slave may be behind
        master.wait(10)
        master = start_master()
        procs.append(master)
        trio.run(send, 200, 200)
        deadline = time.monotonic() + 30  # the slave retries after 5 s
        while True:
            m, s = _files(mstore), _files(sstore)
            if m and m == s:
                break
            assert time.monotonic() < deadline, {n: (n in s, m.get(n) == s.get(n)) for n in m}
            time.sleep(0.3)
        assert len(m) >= 2
        data = b"".join(s.values())
        assert all((b"%06d" % i) * 50 in data for i in acked)  # every acknowledged message is on the slave
        for p in (slave, master):
            code, err = stop(p)
            assert code == 0, err
        # the operator's check: `rmqd store verify --against` finds the replica equal
        conf = str(tmp_path / "m.conf")
        result = run_once("store", "verify", "-c", conf, str(sstore), "--against", str(mstore))
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"commit logs of {sstore} and {mstore} are identical" in result.stdout
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
