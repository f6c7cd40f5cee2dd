"""Crash recovery that starts where the checkpoint's coverage ends (issue 11 item 4): the walk
starts at the last consume-queue unit stored before the checkpoint's time instead of the
first byte of the checkpoint's file, and the index files are kept through the crash and
rolled back to that point (exactly as if the records after it had never been indexed)."""
from __future__ import annotations

import os
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqd.store.commitlog import MessageExtBrokerInner
from rmqd.store.config import MessageStoreConfig
from rmqd.store.indexfile import INDEX_HEADER_SIZE, IndexFile, IndexHeader, IndexService, _HEADER
from rmqd.store.message_store import DefaultMessageStore

# (key hash, records' keys) plans: few slots so chains and stale slots happen
PLANS = st.lists(st.lists(st.integers(0, 40), min_size=0, max_size=3), min_size=1, max_size=60)


@settings(max_examples=80, deadline=None)
@given(plan=PLANS, cut=st.integers(0, 60))
def test_rollback_leaves_the_file_as_if_later_records_were_never_indexed(tmp_path_factory, plan, cut):
    d = tmp_path_factory.mktemp("idx")
    cut = min(cut, len(plan))
    full = IndexFile(d / "full", hash_slot_num=7, index_num=400)
    part = IndexFile(d / "part", hash_slot_num=7, index_num=400)
    ts = {}
    for i, keys in enumerate(plan):
        phy, t = 1000 + i * 100, 1_700_000_000_000 + i * 1500
        ts[phy] = t
        for k in keys:
            full.put_hash(k, phy, t)
            if i < cut:
                part.put_hash(k, phy, t)
    full.write_header()
    part.write_header()
    kept = full.rollback_to(1000 + cut * 100, ts.__getitem__)
    assert kept == part.header.indexCount - 1
    if kept:
        assert bytes(full._mm) == bytes(part._mm)
    else:
        assert full.header.indexCount == 1


def _cfg(root: Path) -> MessageStoreConfig:
    return MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=8 << 20,
                              mappedFileSizeConsumeQueue=60_000, maxHashSlotNum=1000, maxIndexNum=40_000)


def _put(s: DefaultMessageStore, first: int, n: int) -> None:
    for i in range(first, first + n):
        r = s.put_message(MessageExtBrokerInner(f"T{i % 3}", i % 4, os.urandom(900), {"KEYS": f"k{i}"}))
        assert r.is_ok()


def test_crash_recovery_walks_only_what_the_checkpoint_does_not_cover(tmp_path):
    root = tmp_path / "s"
    s = DefaultMessageStore(_cfg(root))
    s.load()
    s.start()
    _put(s, 0, 6000)  # most of the first 8 MiB file
    time.sleep(3.2)  # the checkpoint keeps a 3 s margin: what follows is newer than that
    _put(s, 6000, 100)
    assert s.wait_dispatched()
    s._flush_logics(0)  # a thorough round: the checkpoint now covers the 6000
    s.flush_service.flush_all()
    s.checkpoint.physicMsgTimestamp = s.commit_log.mapped_file_queue.store_timestamp
    s.checkpoint.flush()
    _put(s, 6100, 1400)  # after the checkpoint, crossing into the second file
    assert s.wait_dispatched()
    s.index_service.flush()
    # crash: no shutdown (the abort file stays), the process state is what is on disk
    s.reput_service.shutdown()
    s2 = DefaultMessageStore(_cfg(root))
    s._release_lock()
    s2.load()
    s2.start()
    try:
        rep = s2.recovery_report
        assert rep.abnormal and rep.start_file == "00000000000000000000"
        assert rep.start_position > 4_000_000, rep  # not from the file's first byte
        assert rep.dispatched < 2500
        for i in list(range(0, 7500, 97)) + [5999, 6000, 7499]:
            q = s2.query_message(f"T{i % 3}", f"k{i}", 4, 0, 2**62)
            assert len(q.message_buffers) == 1, i  # found once: kept, rolled back and re-indexed
        assert sum(s2.get_max_offset_in_queue(f"T{t}", q) for t in range(3) for q in range(4)) == 7500
    finally:
        s2.shutdown()


@settings(max_examples=60, deadline=None)
@given(plan=PLANS, cut=st.integers(0, 60), lag=st.integers(0, 20))
def test_rollback_takes_in_entries_past_a_header_the_crash_did_not_write(tmp_path_factory, plan, cut, lag):
    """The header is written once per batch: a SIGKILL can leave the last entries (and slots
    pointing at them) past indexCount. The rollback still ends exactly as if the records from
    the cut on had never been indexed (no entry pointing at itself, hashSlotCount right)."""
    d = tmp_path_factory.mktemp("idx")
    cut = min(cut, len(plan))
    full = IndexFile(d / "full", hash_slot_num=7, index_num=400)
    part = IndexFile(d / "part", hash_slot_num=7, index_num=400)
    ts = {}
    for i, keys in enumerate(plan):
        phy, t = 1000 + i * 100, 1_700_000_000_000 + i * 1500
        ts[phy] = t
        for k in keys:
            full.put_hash(k, phy, t)
            if i < cut:
                part.put_hash(k, phy, t)
    written = full.header
    stale = max(written.indexCount - lag, 1)
    # what a crash leaves: every entry and slot on disk, the header of an earlier batch
    full.header = type(written)(written.beginTimestamp, written.endTimestamp, written.beginPhyOffset,
                                written.endPhyOffset, written.hashSlotCount, stale)
    full.header.hashSlotCount -= sum(1 for n in range(stale, written.indexCount) if full.entry(n).prevIndex == 0)
    part.write_header()
    kept = full.rollback_to(1000 + cut * 100, ts.__getitem__)
    assert kept == part.header.indexCount - 1
    if kept:
        assert bytes(full._mm) == bytes(part._mm)


def _header_bytes(f: IndexFile) -> bytes:
    return bytes(f._mm[:INDEX_HEADER_SIZE])


@settings(max_examples=150, deadline=None)
@given(keys=st.lists(st.lists(st.integers(0, 12), min_size=0, max_size=2), min_size=1, max_size=40),
       batch=st.integers(1, 9), killed=st.integers(0, 40), cut=st.integers(0, 40))
def test_service_rollback_after_a_kill_in_any_batch_finds_every_key_once(tmp_path_factory, keys, batch, killed, cut):
    """Index files roll over every 5 entries; the process dies after batch ``killed`` put its
    entries but before its final header write (the rolled-over file the batch ended in still
    holds only the header it was created with). Recovery rolls back to any record the
    checkpoint might cover and re-indexes from there: every key is found exactly once."""
    d = tmp_path_factory.mktemp("svc")
    recs = [("T", 0, 1000 + i * 100, 100, 0, 1_700_000_000_000 + i * 700, i, " ".join(f"k{k}" for k in ks) or None,
             None, 0) for i, ks in enumerate(keys)]
    ts = {r[2]: r[5] for r in recs}
    clock = iter(range(1_800_000_000_000, 1_900_000_000_000, 3))
    svc = IndexService(d, 3, 6, clock_ms=lambda: next(clock))
    batches = [recs[i:i + batch] for i in range(0, len(recs), batch)]
    killed = min(killed, len(batches) - 1)
    for b in batches[:killed]:
        svc.build_index_batch(b)
    before = svc.index_files[-1] if svc.index_files else None
    saved = _header_bytes(before) if before is not None else None
    svc.build_index_batch(batches[killed])
    last = svc.index_files[-1]
    if last is before:
        last._mm[:INDEX_HEADER_SIZE] = saved  # the batch's header write never happened
    else:
        prev = svc.index_files[-2] if len(svc.index_files) > 1 else None
        fresh = IndexHeader()
        if prev is not None:
            fresh.beginPhyOffset = fresh.endPhyOffset = prev.header.endPhyOffset
            fresh.beginTimestamp = fresh.endTimestamp = prev.header.endTimestamp
        _HEADER.pack_into(last._mm, 0, fresh.beginTimestamp, fresh.endTimestamp, fresh.beginPhyOffset,
                          fresh.endPhyOffset, 0, 0)
    for f in svc.index_files:
        f.close()
    dispatched = [r for b in batches[:killed + 1] for r in b]
    limit = dispatched[min(cut, len(dispatched) - 1)][2]
    svc2 = IndexService(d, 3, 6, clock_ms=lambda: next(clock))
    svc2.load(last_exit_ok=False, keep_after_crash=True)
    svc2.rollback_to(limit, lambda p: ts.get(p, 0))
    rest = [r for r in recs if r[2] >= limit]
    for i in range(0, len(rest), batch):
        svc2.build_index_batch(rest[i:i + batch])
    for k in range(13):
        want = sorted((r[2] for r in recs if r[7] for t in r[7].split() if t == f"k{k}"), reverse=True)
        assert svc2.query_offset("T", f"k{k}", 64, 0, 2**62).phy_offsets == want, k
    svc2.shutdown()
