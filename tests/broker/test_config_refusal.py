"""Issue 11 item 5 end to end: a store whose topics.json and .bak are both damaged makes
`rmqd serve` refuse with one line naming the file, writing nothing; `rmqd store
repair-config` moves them aside and rebuilds topics from consumequeue/; the broker then
serves the old messages again."""
from __future__ import annotations

import pytest

from broker_harness import decode_pull_body, run_with_broker
from support import free_broker_port, free_port, run_once
from rmqd.wire.codes import ResponseCode

pytestmark = pytest.mark.timeout(120)


def test_refuse_repair_and_serve_again(tmp_path):
    root = tmp_path / "store"
    bodies = [f"kept-{i}".encode() for i in range(3)]

    async def produce(h) -> None:
        for b in bodies:
            r = await h.send_v2("KeepT", b, queue_id=1)
            assert r.code == ResponseCode.SUCCESS, r.remark
        h.wait_dispatched()

    run_with_broker(root, produce)
    cfg = root / "config"
    (cfg / "topics.json").write_bytes(b'{"topicConfigTable":{')
    (cfg / "topics.json.bak").write_bytes(b"\xff\xfe not json")
    before = {p.name: p.read_bytes() for p in cfg.iterdir()}

    result = run_once("serve", "--store", str(root), "--namesrv-port", str(free_port()), "--broker-port",
                      str(free_broker_port()), "--host", "127.0.0.1", "--kv-config", str(tmp_path / "kv.json"))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert str(cfg / "topics.json") in lines[0] and "topics.json.bak" in lines[0]
    assert "repair-config" in lines[0]
    assert {p.name: p.read_bytes() for p in cfg.iterdir()} == before  # nothing overwritten

    repaired = run_once("store", "repair-config", str(root))
    assert repaired.returncode == 0, repaired.stderr
    assert "config/topics.json" in repaired.stdout and "rebuilt" in repaired.stdout
    assert sorted(p.name.split(".corrupt-")[0] for p in cfg.iterdir() if ".corrupt-" in p.name) == \
        ["topics.json", "topics.json.bak"]

    async def consume(h) -> None:
        tc = h.role.topic_config_manager.select_topic_config("KeepT")
        assert tc is not None and tc.writeQueueNums == 2  # queues 0..1 on disk
        assert (await h.heartbeat("c1", "cg", "KeepT")).code == ResponseCode.SUCCESS
        p = await h.pull("KeepT", "cg", 1, 0, suspend_ms=0)
        assert p.code == ResponseCode.SUCCESS, p.remark
        assert [m.body for m in decode_pull_body(p)] == bodies

    run_with_broker(root, consume)
    again = run_once("store", "repair-config", str(root))
    assert again.returncode == 0 and "nothing to repair" in again.stdout
