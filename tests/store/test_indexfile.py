"""IndexFile / IndexService against the real RocketMQ 4.9.8 fixture stores."""
from __future__ import annotations

import gzip
import json
import shutil
import struct
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures import CLEAN, CRASHED, facts, require
from rmqd.store.errors import StoreFileError
from rmqd.store.indexfile import (INDEX_ENTRY, INDEX_HEADER, INDEX_HEADER_SIZE, IndexFile, IndexService,
                             human_string_to_time_millis, index_file_size, index_key_hash,
                             time_millis_to_human_string, _ENTRY, _HEADER)

SLOTS, ENTRIES = 1000, 4000  # the fixtures' maxHashSlotNum / maxIndexNum


def _jsonl(path: Path) -> list[dict]:
    with gzip.open(require(path), "rt") as f:
        return [json.loads(line) for line in f]


@pytest.fixture
def utc(monkeypatch):
    """Index file names are JVM local time; the fixtures were written in UTC."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture(params=[CLEAN, CRASHED], ids=["clean", "crashed"])
def fixture_dir(request) -> Path:
    return require(request.param / "store").parent


def _index_names(fixture: Path) -> list[str]:
    """The index files the fixture's broker left, oldest first (the full one, then the open one)."""
    return [f["file"] for f in facts(fixture)["index"]]


def test_every_header_slot_and_entry_equals_rocketmq_dump(fixture_dir: Path, tmp_path: Path) -> None:
    shutil.copytree(fixture_dir / "store" / "index", tmp_path / "index")
    svc = IndexService(tmp_path / "index", SLOTS, ENTRIES)
    svc.load()
    dump = _jsonl(fixture_dir / "dump" / "index-dump.jsonl.gz")
    got = []
    for f in svc.index_files:
        h = f.header
        got.append({"file": f.file_name, "record": "HEADER", "fileSize": f.file_size,
                    "beginTimestamp": h.beginTimestamp, "endTimestamp": h.endTimestamp,
                    "beginPhyOffset": h.beginPhyOffset, "endPhyOffset": h.endPhyOffset,
                    "hashSlotCount": h.hashSlotCount, "indexCount": h.indexCount})
        got += [{"file": f.file_name, "record": "SLOT", "slot": s, "lastIndexNo": v} for s, v in f.iter_slots()]
        got += [{"file": f.file_name, "record": "ENTRY", "indexNo": e.index_no, "keyHash": e.keyHash,
                 "slot": e.keyHash % SLOTS, "phyOffset": e.phyOffset, "timeDiffSec": e.timeDiff,
                 "prevIndexNo": e.prevIndex} for e in f.iter_entries()]
    for d in dump:
        d.pop("keys", None)
    order = lambda d: (d["file"], d["record"], d.get("slot", 0), d.get("indexNo", 0))  # noqa: E731
    assert sorted(got, key=order) == sorted(dump, key=order)
    # the recorded key strings hash to the recorded hashes
    for d in _jsonl(fixture_dir / "dump" / "index-dump.jsonl.gz"):
        for k in d.get("keys", []):
            assert index_key_hash(k) == d["keyHash"]
    svc.shutdown()


def test_rebuild_from_commitlog_gives_identical_files(fixture_dir: Path, tmp_path: Path, utc) -> None:
    """Index every record in commit-log order (like CommitLogDispatcherBuildIndex), with the
    file-creation clock pinned to the fixture's file names: same bytes as RocketMQ's files."""
    names = sorted(p.name for p in (fixture_dir / "store" / "index").iterdir())
    clock = iter(human_string_to_time_millis(n) for n in names)
    svc = IndexService(tmp_path / "index", SLOTS, ENTRIES, clock_ms=lambda: next(clock))
    for r in _jsonl(fixture_dir / "dump" / "commitlog-dump.jsonl.gz"):
        if r["record"] != "MESSAGE":
            continue
        p = r["properties"]
        svc.build_index(r["topic"], r["physicalOffset"], r["storeTimestamp"], p.get("KEYS"), p.get("UNIQ_KEY"),
                        r["sysFlag"])
    svc.shutdown()
    assert sorted(p.name for p in (tmp_path / "index").iterdir()) == names
    for n in names:
        assert (tmp_path / "index" / n).read_bytes() == (fixture_dir / "store" / "index" / n).read_bytes(), n


def test_query_every_manifest_key(tmp_path: Path) -> None:
    shutil.copytree(require(CLEAN / "store" / "index"), tmp_path / "index")
    svc = IndexService(tmp_path / "index", SLOTS, ENTRIES, max_msgs_num_batch=64)
    svc.load()
    records = {r["physicalOffset"]: r for r in _jsonl(CLEAN / "dump" / "commitlog-dump.jsonl.gz")
               if r["record"] == "MESSAGE"}
    for r in records.values():
        keys = [r["properties"].get("UNIQ_KEY")] + (r["properties"].get("KEYS") or "").split(" ")
        for k in filter(None, keys):
            res = svc.query_offset(r["topic"], k, 64, r["storeTimestamp"] - 1000, r["storeTimestamp"] + 1000)
            assert r["physicalOffset"] in res.phy_offsets, (r["topic"], k)
            for off in res.phy_offsets:  # hash collisions may add others; none is foreign to the key's hash
                other = records[off]
                okeys = [other["properties"].get("UNIQ_KEY")] + (other["properties"].get("KEYS") or "").split(" ")
                assert any(index_key_hash(f"{other['topic']}#{x}") == index_key_hash(f"{r['topic']}#{k}")
                           for x in okeys if x)
    res = svc.query_offset("FixBulkTopic", "bulk-7", 64, 0, 2**62)
    last = facts(CLEAN)["index"][-1]  # the open file's header, as Apache left it
    assert res.index_last_update_phyoffset == last["endPhyOffset"] > 0
    assert res.index_last_update_timestamp == last["endTimestamp"] > 0
    assert res.phy_offsets == [r["physicalOffset"] for r in records.values() if r["properties"].get("KEYS") == "bulk-7"]
    # time range excludes it
    assert svc.query_offset("FixBulkTopic", "bulk-7", 64, 0, 1000).phy_offsets == []
    svc.shutdown()


def _jsonl_plain(path: Path) -> list[dict]:
    with open(require(path)) as f:
        return [json.loads(line) for line in f]


def test_hash_handles_integer_min_value() -> None:
    assert index_key_hash("polygenelubricants") == 0  # String.hashCode() == Integer.MIN_VALUE
    assert index_key_hash("FixTopicA#key-single-1") == 1559091542
    assert index_key_hash("") == 0


@given(st.text())
def test_hash_is_non_negative_int32(key: str) -> None:
    assert 0 <= index_key_hash(key) <= 0x7FFFFFFF


@given(st.integers(-2**63, 2**63 - 1), st.integers(-2**63, 2**63 - 1), st.integers(-2**63, 2**63 - 1),
       st.integers(-2**63, 2**63 - 1), st.integers(-2**31, 2**31 - 1), st.integers(-2**31, 2**31 - 1))
def test_header_struct_matches_construct(a, b, c, d, e, f) -> None:
    raw = INDEX_HEADER.build(dict(beginTimestamp=a, endTimestamp=b, beginPhyOffset=c, endPhyOffset=d,
                                  hashSlotCount=e, indexCount=f))
    assert raw == _HEADER.pack(a, b, c, d, e, f) and len(raw) == INDEX_HEADER_SIZE == 40


@given(st.integers(-2**31, 2**31 - 1), st.integers(-2**63, 2**63 - 1), st.integers(-2**31, 2**31 - 1),
       st.integers(-2**31, 2**31 - 1))
def test_entry_struct_matches_construct(h, off, td, prev) -> None:
    raw = INDEX_ENTRY.build(dict(keyHash=h, phyOffset=off, timeDiff=td, prevIndex=prev))
    assert raw == _ENTRY.pack(h, off, td, prev) and len(raw) == 20


def test_file_size_and_names(utc) -> None:
    assert index_file_size(5_000_000, 20_000_000) == 420_000_040
    assert index_file_size(SLOTS, ENTRIES) == 84040
    assert time_millis_to_human_string(1795316128885) == "20261122025528885"
    assert human_string_to_time_millis("20261122025528885") == 1795316128885


def test_rollover_when_full_and_chain(tmp_path: Path) -> None:
    now = iter(range(1_700_000_000_000, 1_700_000_100_000, 7))
    svc = IndexService(tmp_path, 3, 5, clock_ms=lambda: next(now))  # 4 entries per file
    for i in range(10):
        svc.build_index("T", 100 * i, 1_700_000_000_000 + 1000 * i, f"k{i % 2}", None)
    assert len(svc.index_files) == 3
    a, b, c = svc.index_files
    assert a.header.indexCount == 5 and a.is_write_full()
    assert b.header.beginPhyOffset == 400 and b.header.beginTimestamp == 1_700_000_004_000
    assert c.header.indexCount == 3
    assert len({f.file_name for f in svc.index_files}) == 3
    # entry 1 of the rolled file measured from the previous file's end (RocketMQ quirk)
    assert b.entry(1).timeDiff == 1
    res = svc.query_offset("T", "k0", 64, 0, 2**62)
    assert res.phy_offsets == [800, 600, 400, 200, 0]
    assert svc.query_offset("T", "k1", 2, 0, 2**62).phy_offsets == [900, 700]
    # rollback messages are not indexed; records below the last end offset are skipped
    svc.build_index("T", 1000, 1_700_000_010_000, "rb", None, sys_flag=0xC)
    svc.build_index("T", 5, 1_700_000_010_000, "old", None)
    assert svc.query_offset("T", "rb", 64, 0, 2**62).phy_offsets == []
    assert svc.query_offset("T", "old", 64, 0, 2**62).phy_offsets == []
    assert svc.delete_expired_file(10_000) == 2  # never the last file
    assert len(svc.index_files) == 1 and svc.index_files[0] is c
    svc.shutdown()


def test_full_file_reports_checkpoint_timestamp(tmp_path: Path) -> None:
    seen = []
    svc = IndexService(tmp_path, 3, 3, on_index_file_full=seen.append)
    for i in range(3):
        svc.build_index("T", i, 1000 + i, None, f"u{i}")
    svc.shutdown()  # waits for the background flush of the full file
    assert seen == [1001]


def test_crash_load_drops_files_newer_than_checkpoint(tmp_path: Path) -> None:
    shutil.copytree(require(CRASHED / "store" / "index"), tmp_path / "index")
    full, newer = _index_names(CRASHED)
    assert facts(CRASHED)["apacheRecovery"]["deletedIndexFiles"] == [newer]  # what Apache deleted
    svc = IndexService(tmp_path / "index", SLOTS, ENTRIES)
    svc.load(last_exit_ok=False, index_msg_timestamp=facts(CRASHED)["checkpoint"]["indexMsgTimestamp"])
    assert [f.file_name for f in svc.index_files] == [full]
    assert not (tmp_path / "index" / newer).exists()
    svc.shutdown()


def test_wrong_size_index_file_is_reported(tmp_path: Path) -> None:
    (tmp_path / "20261122025528885").write_bytes(bytes(1000))
    with pytest.raises(StoreFileError) as ei:
        IndexService(tmp_path, SLOTS, ENTRIES).load()
    assert ei.value.file.endswith("20261122025528885") and "1000 bytes, expected 84040" in str(ei.value)


def test_zeroed_slot_hides_its_chain(tmp_path: Path) -> None:
    shutil.copytree(require(CLEAN / "store" / "index"), tmp_path / "index")
    first, name = _index_names(CLEAN)
    # two bulk keys only the newer file holds, in different slots
    entries = [e for e in _jsonl(CLEAN / "dump" / "index-dump.jsonl.gz") if e["record"] == "ENTRY"]
    older = {k for e in entries if e["file"] == first for k in e["keys"]}
    bulk = [(k, e["slot"]) for e in entries if e["file"] == name for k in e["keys"]
            if k.startswith("FixBulkTopic#bulk-") and k not in older]
    (key, slot) = bulk[0]
    other = next(k for k, s in bulk if s != slot)
    with open(tmp_path / "index" / name, "r+b") as f:
        f.seek(INDEX_HEADER_SIZE + 4 * slot)
        f.write(struct.pack(">i", 0))
    svc = IndexService(tmp_path / "index", SLOTS, ENTRIES)
    svc.load()
    assert svc.query_offset("FixBulkTopic", key.split("#", 1)[1], 64, 0, 2**62).phy_offsets == []
    assert svc.query_offset("FixBulkTopic", other.split("#", 1)[1], 64, 0, 2**62).phy_offsets != []
    svc.shutdown()


def test_put_key_on_fresh_file_matches_rocketmq_first_entry(tmp_path: Path) -> None:
    f = IndexFile(tmp_path / "x", 10, 10)
    assert f.put_key("FixTopicA#key-single-1", 0, 1795316128878)
    raw = (tmp_path / "x").read_bytes()
    assert _HEADER.unpack_from(raw, 0) == (1795316128878, 1795316128878, 0, 0, 1, 2)
    e = f.entry(1)
    assert (e.keyHash, e.phyOffset, e.timeDiff, e.prevIndex) == (1559091542, 0, 0, 0)
    f.close()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.text(st.characters(blacklist_characters=" "), min_size=1, max_size=6),
                          st.integers(0, 30)), min_size=1, max_size=40))
def test_query_finds_every_key_across_collisions_and_rollovers(tmp_path_factory, puts) -> None:
    """Tiny files (7 slots, 9 entries): many collisions and rollovers; every key is still
    found, newest first, and only offsets whose key hashes alike come back."""
    d = tmp_path_factory.mktemp("idx")
    clock = iter(range(1_700_000_000_000, 1_700_000_000_000 + 10**6, 1000))
    svc = IndexService(d, 7, 9, max_msgs_num_batch=1000, clock_ms=lambda: next(clock))
    keys_at: dict[int, set[str]] = {}
    phy = 0
    for key, gap in puts:
        phy += 1 + gap
        svc.build_index("T", phy, 1_700_000_000_000 + phy * 1000, key, None)
        keys_at.setdefault(phy, set()).add(key)
    for key in {k for k, _ in puts}:
        got = svc.query_offset("T", key, 1000, 0, 2**62).phy_offsets
        want = [p for p, ks in keys_at.items() if key in ks]
        assert set(want) <= set(got)
        assert got == sorted(got, reverse=True)  # newest first
        h = index_key_hash("T#" + key)
        assert all(any(index_key_hash("T#" + k) == h for k in keys_at[p]) for p in got)
    svc.shutdown()


def test_new_file_header_bytes_before_first_put(tmp_path: Path) -> None:
    """Only the fields IndexHeader's setters wrote reach a fresh file; flush writes all."""
    f = IndexFile(tmp_path / "a", 10, 10, end_phy_offset=500, end_timestamp=7000)
    assert _HEADER.unpack_from((tmp_path / "a").read_bytes(), 0) == (7000, 7000, 500, 500, 0, 0)
    f.flush()
    assert _HEADER.unpack_from((tmp_path / "a").read_bytes(), 0) == (7000, 7000, 500, 500, 0, 1)
    f.close()
    g = IndexFile(tmp_path / "b", 10, 10)
    assert (tmp_path / "b").read_bytes() == bytes(index_file_size(10, 10))
    g.close()


def test_crash_rebuild_reindexes_what_the_deleted_file_held(tmp_path: Path) -> None:
    """What the real broker did on restart of the crashed store: drop the index file newer
    than the checkpoint and rebuild from the commit log (recovery re-dispatches from the file
    Apache's recovery started at). Records below the full file's endPhyOffset are skipped; the
    one *at* it is indexed again (IndexService.buildIndex compares with <), then everything the
    dropped file held, in the same order."""
    shutil.copytree(require(CRASHED / "store" / "index"), tmp_path / "index")
    full_name, newer = _index_names(CRASHED)
    start = int(facts(CRASHED)["apacheRecovery"]["startFile"])
    dropped = IndexFile(CRASHED / "store" / "index" / newer, SLOTS, ENTRIES)
    dropped.load()
    want = [(e.keyHash, e.phyOffset) for e in dropped.iter_entries()]
    want_header = dropped.header
    dropped.close()
    svc = IndexService(tmp_path / "index", SLOTS, ENTRIES, clock_ms=lambda: 1_900_000_000_000)
    svc.load(last_exit_ok=False, index_msg_timestamp=facts(CRASHED)["checkpoint"]["indexMsgTimestamp"])
    for r in _jsonl(CRASHED / "dump" / "commitlog-dump.jsonl.gz"):
        if r["record"] == "MESSAGE" and r["physicalOffset"] >= start:
            p = r["properties"]
            svc.build_index(r["topic"], r["physicalOffset"], r["storeTimestamp"], p.get("KEYS"),
                            p.get("UNIQ_KEY"), r["sysFlag"])
    assert [f.file_name for f in svc.index_files] == [full_name, time_millis_to_human_string(1_900_000_000_000)]
    full, rebuilt = svc.index_files
    assert full.header.endPhyOffset >= start  # the full file ends inside the walk
    # the entries the full file holds for the record at its endPhyOffset come again first
    full_entries = [(e.keyHash, e.phyOffset) for e in full.iter_entries()]
    k = sum(1 for _, off in full_entries if off == full.header.endPhyOffset)
    assert k >= 1
    again = [(e.keyHash, e.phyOffset) for e in rebuilt.iter_entries()]
    assert again[:k] == full_entries[-k:]
    assert again[k:] == want
    h = rebuilt.header
    assert (h.endPhyOffset, h.endTimestamp, h.indexCount) == (want_header.endPhyOffset, want_header.endTimestamp,
                                                               want_header.indexCount + k)
    last = [m for m in _jsonl_plain(CRASHED / "traffic-manifest.jsonl") if m.get("sendStatus") == "SEND_OK"][-1]
    assert svc.query_offset("FixTrafficTopic", last["keys"], 64, 0, 2**62).phy_offsets == \
        [int(last["offsetMsgId"][16:], 16)]
    svc.shutdown()
