"""Issue 11 item 1 at the broker: a store holding records dispatch cannot index (left by an
older rmqd's send-back with group "\\u0000" or "../../../../tmp/x") starts, serves sends and
pulls on every other topic, and starts again."""
from __future__ import annotations

from pathlib import Path

from broker_harness import decode_pull_body, run_with_broker
from rmqd.store.commitlog import MessageExtBrokerInner
from rmqd.store.config import MessageStoreConfig
from rmqd.store.message_store import DefaultMessageStore
from rmqd.wire.codes import ResponseCode

BAD = ["%DLQ%\x00", "%RETRY%../../../../escape"]


def _seed(root: Path) -> list[int]:
    s = DefaultMessageStore(MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=4 * 1024 * 1024,
                                               mappedFileSizeConsumeQueue=6000 * 20))
    s.load()
    s.start()
    try:
        s.reput_service.suspend()  # as a crash would leave them: written, never dispatched
        offsets = []
        for topic in BAD:
            r = s.commit_log.put_message(MessageExtBrokerInner(topic, 0, b"poison", {}))
            assert r.is_ok()
            offsets.append(r.appendMessageResult.wroteOffset)
        return offsets
    finally:
        s.reput_service.resume()
        s.shutdown()


def test_broker_serves_and_restarts_over_undispatchable_records(tmp_path):
    root = tmp_path / "a" / "store"
    bad_offsets = _seed(root)

    def round_trip(body: bytes, expect_offset: int):
        async def fn(h) -> None:
            skipped = [r.phy_offset for r in h.role.store.dispatcher.skipped]
            r = await h.send_v2("ReproT", body)
            assert r.code == ResponseCode.SUCCESS, r.remark
            h.wait_dispatched()
            assert (await h.heartbeat("c1", "cg", "ReproT")).code == ResponseCode.SUCCESS
            p = await h.pull("ReproT", "cg", 0, expect_offset, suspend_ms=0)
            assert p.code == ResponseCode.SUCCESS, p.remark
            assert [m.body for m in decode_pull_body(p)] == [body]
            assert h.role.store.dispatch_behind_bytes() == 0
            seen.append(skipped)
        return fn

    seen: list[list[int]] = []
    run_with_broker(root, round_trip(b"first", 0), timeout=30)
    run_with_broker(root, round_trip(b"second", 1), timeout=30)
    assert sorted(seen[0]) == sorted(bad_offsets)
    assert [p for p in tmp_path.rglob("*") if root not in p.parents and p != root and p not in root.parents] == []
