"""ConsumeQueue against the real RocketMQ 4.9.8 fixture stores, plus layout properties."""
from __future__ import annotations

import gzip
import json
import shutil
import struct
from pathlib import Path

import pytest
from construct import Int16sb, Int32sb, Int64sb, Struct
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures import CLEAN, CRASHED, facts, require
from rmqd.store.config import MessageStoreConfig
from rmqd.store.consumequeue import (CQ_STORE_UNIT_SIZE, CQ_UNIT, INT_MAX, PRE_BLANK_UNIT, ConsumeQueue,
                                load_consume_queues, tags_code_of)
from rmqd.store.errors import StoreFileError
from rmqd.store.layout import struct_of

CQ_FILE_SIZE = 6000  # the fixtures' mappedFileSizeConsumeQueue
DELAY_TABLE = dict(enumerate(MessageStoreConfig().delay_levels_ms(), 1))


def _jsonl(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f]


@pytest.fixture(params=[CLEAN, CRASHED], ids=["clean", "crashed"])
def fixture_dir(request) -> Path:
    return require(request.param / "store").parent


@pytest.fixture
def store_copy(fixture_dir: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "store"
    shutil.copytree(fixture_dir / "store", dst)
    return dst


def _unit_dicts(cqs) -> list[dict]:
    out = []
    for (topic, qid), cq in cqs.items():
        for u in cq.iter_units():
            out.append({"topic": topic, "queueId": qid, "file": u.file, "filePos": u.file_pos,
                        "logicalOffset": u.logical_offset, "commitLogOffset": u.commit_log_offset,
                        "size": u.size, "tagsCode": u.tags_code})
    key = lambda d: (d["topic"], d["queueId"], d["logicalOffset"])  # noqa: E731
    return sorted(out, key=key)


def test_every_unit_equals_rocketmq_dump(fixture_dir: Path, store_copy: Path) -> None:
    cqs = load_consume_queues(store_copy / "consumequeue", CQ_FILE_SIZE)
    for cq in cqs.values():
        cq.recover()
    expected = sorted(_jsonl(fixture_dir / "dump" / "consumequeue-dump.jsonl.gz"),
                      key=lambda d: (d["topic"], d["queueId"], d["logicalOffset"]))
    assert _unit_dicts(cqs) == expected
    # max offsets as the Apache broker reported them (after its own recovery, for the crashed store)
    if fixture_dir == CRASHED:
        traffic = facts(CRASHED)["apacheRecovery"]["reported"]["topics"]["FixTrafficTopic"]
        assert [cqs[("FixTrafficTopic", q)].get_max_offset_in_queue() for q in range(4)] == \
            [traffic[str(q)]["maxOffset"] for q in range(4)]
    else:
        reported = facts(CLEAN)["reported"]["topics"]
        assert [cqs[("FixBulkTopic", q)].get_max_offset_in_queue() for q in range(4)] == [500] * 4
        assert cqs[("SCHEDULE_TOPIC_XXXX", 2)].get_max_offset_in_queue() == 4  # 2 delays + 2 retries at level 3
        for topic, queues in reported.items():
            for q, o in queues.items():
                if o["maxOffset"]:
                    assert cqs[(topic, int(q))].get_max_offset_in_queue() == o["maxOffset"], (topic, q)
    for cq in cqs.values():
        assert cq.get_min_offset_in_queue() == 0
        cq.close()


def test_rebuild_from_commitlog_gives_identical_files(fixture_dir: Path, tmp_path: Path) -> None:
    """Dispatch every commit-log record like CommitLogDispatcherBuildConsumeQueue and compare
    the resulting files byte for byte with RocketMQ's."""
    records = [r for r in _jsonl(fixture_dir / "dump" / "commitlog-dump.jsonl.gz") if r["record"] == "MESSAGE"]
    cqs: dict[tuple[str, int], ConsumeQueue] = {}
    for r in records:
        if r["sysFlag"] & 0xC not in (0, 0x8):  # only NOT_TYPE and COMMIT reach a consume queue
            continue
        key = (r["topic"], r["queueId"])
        cq = cqs.get(key) or cqs.setdefault(key, ConsumeQueue(*key, tmp_path / "cq", CQ_FILE_SIZE))
        code = tags_code_of(r["topic"], r["properties"], r["storeTimestamp"], DELAY_TABLE)
        assert cq.put_message_position_info(r["physicalOffset"], r["totalSize"], code, r["queueOffset"])
    for cq in cqs.values():
        cq.flush()
        cq.close()
    src = fixture_dir / "store" / "consumequeue"
    want = sorted(p.relative_to(src) for p in src.rglob("*") if p.is_file())
    got = sorted(p.relative_to(tmp_path / "cq") for p in (tmp_path / "cq").rglob("*") if p.is_file())
    assert got == want
    for rel in want:
        assert (tmp_path / "cq" / rel).read_bytes() == (src / rel).read_bytes(), rel


def test_replay_is_idempotent(tmp_path: Path) -> None:
    cq = ConsumeQueue("T", 0, tmp_path, 200)
    for i in range(25):
        assert cq.put_message_position_info(100 * i, 100, i, i)
    snapshot = [p.read_bytes() for p in sorted((tmp_path / "T" / "0").iterdir())]
    for i in range(25):  # re-dispatch after recovery from an older checkpoint
        assert cq.put_message_position_info(100 * i, 100, i, i)
    assert [p.read_bytes() for p in sorted((tmp_path / "T" / "0").iterdir())] == snapshot
    assert cq.get_max_offset_in_queue() == 25
    assert [p.name for p in sorted((tmp_path / "T" / "0").iterdir())] == [
        "00000000000000000000", "00000000000000000200", "00000000000000000400"]


def test_fill_pre_blank_when_queue_starts_mid_file(tmp_path: Path) -> None:
    cq = ConsumeQueue("T", 3, tmp_path, CQ_FILE_SIZE)
    assert cq.put_message_position_info(1000, 50, 7, 305)
    files = sorted((tmp_path / "T" / "3").iterdir())
    assert [p.name for p in files] == ["00000000000000006000"]
    data = files[0].read_bytes()
    assert data[:5 * 20] == PRE_BLANK_UNIT * 5
    assert struct.unpack(">qiq", PRE_BLANK_UNIT) == (0, INT_MAX, 0)
    assert struct.unpack_from(">qiq", data, 100) == (1000, 50, 7)
    assert cq.get_min_offset_in_queue() == 305
    assert cq.get_max_offset_in_queue() == 306
    assert cq.get_unit(305) == (1000, 50, 7)
    assert cq.get_unit(304) is None and cq.get_index_buffer(300) is None
    cq.close()
    # a reload + recover sees the same queue (pre-blank units count as written)
    again = ConsumeQueue("T", 3, tmp_path, CQ_FILE_SIZE)
    again.load()
    again.recover()
    again.correct_min_offset(0)
    assert again.get_max_offset_in_queue() == 306
    assert again.get_min_offset_in_queue() == 300  # RocketMQ's correctMinOffset: blanks have offset 0
    again.correct_min_offset(1)
    assert again.get_min_offset_in_queue() == 305


def test_truncate_dirty_and_recover(store_copy: Path) -> None:
    cq = ConsumeQueue("FixBulkTopic", 1, store_copy / "consumequeue", CQ_FILE_SIZE)
    cq.load()
    cq.recover()
    assert cq.get_max_offset_in_queue() == 500
    cut_phy = cq.get_unit(420)[0]
    cq.truncate_dirty_logic_files(cut_phy)
    assert cq.get_max_offset_in_queue() == 420
    assert cq.get_last_offset() == sum(cq.get_unit(419)[:2])
    assert cq.max_physic_offset == cq.get_last_offset()
    cq.close()
    again = ConsumeQueue("FixBulkTopic", 1, store_copy / "consumequeue", CQ_FILE_SIZE)
    again.load()
    again.recover()
    assert again.get_max_offset_in_queue() == 420
    # cut below the second file's first unit: the second file goes away
    again.truncate_dirty_logic_files(again.get_unit(100)[0])
    assert again.get_max_offset_in_queue() == 100
    assert [f.file_name for f in again.files] == ["00000000000000000000"]
    assert not (store_copy / "consumequeue" / "FixBulkTopic" / "1" / "00000000000000006000").exists()
    again.close()


def test_index_buffer_is_a_view_of_units(store_copy: Path) -> None:
    cq = ConsumeQueue("FixBulkTopic", 0, store_copy / "consumequeue", CQ_FILE_SIZE)
    cq.load()
    cq.recover()
    buf = cq.get_index_buffer(298)
    assert isinstance(buf, memoryview) and len(buf) == 2 * CQ_STORE_UNIT_SIZE  # to the end of file 0
    units = list(ConsumeQueue.iter_buffer(buf))
    assert units == [cq.get_unit(298), cq.get_unit(299)]
    buf.release()
    assert len(cq.get_index_buffer(300)) == 200 * CQ_STORE_UNIT_SIZE
    assert cq.get_index_buffer(500) is None
    cq.close()


def test_offset_by_time_binary_search(tmp_path: Path) -> None:
    cq = ConsumeQueue("T", 0, tmp_path, 2000)
    times = {}
    for i in range(50):
        cq.put_message_position_info(i * 10, 10, 0, i)
        times[i * 10] = 1_000_000 + i * 100
    pick = lambda phy, size: times.get(phy, -1)  # noqa: E731
    assert cq.get_offset_in_queue_by_time(1_000_000 + 2000, pick) == 20
    assert cq.get_offset_in_queue_by_time(1_000_000 + 2040, pick) == 20  # nearer the left
    assert cq.get_offset_in_queue_by_time(1_000_000 + 2060, pick) == 21
    assert cq.get_offset_in_queue_by_time(0, pick) == 0
    assert cq.get_offset_in_queue_by_time(10**12, pick) == 49
    assert cq.get_offset_in_queue_by_time(1_000_500, pick, min_phy_offset=200) == 20


def test_delete_expired_files_follows_commitlog_min_offset(tmp_path: Path) -> None:
    cq = ConsumeQueue("T", 0, tmp_path, 200)  # 10 units per file
    for i in range(35):
        cq.put_message_position_info(i * 10, 10, 0, i)
    assert cq.delete_expired_file(95) == 1  # file 0's last unit (phy 90) is below the min offset
    assert cq.get_min_offset_in_queue() == 10  # first unit at or above 95 is unit 10 (phy 100)
    assert cq.get_unit(9) is None and cq.get_unit(10) == (100, 10, 0)
    cq2 = ConsumeQueue("U", 0, tmp_path, 200)
    for i in range(35):
        cq2.put_message_position_info(i * 10, 10, 0, i)
    assert cq2.delete_expired_file(10_000) == 3  # never the last file
    assert [f.file_name for f in cq2.files] == ["00000000000000000600"]
    cq3 = ConsumeQueue("V", 0, tmp_path, 200)
    for i in range(35):
        cq3.put_message_position_info(i * 10, 10, 0, i)
    assert cq3.delete_expired_file(305) == 3
    assert cq3.get_min_offset_in_queue() == 31


def test_wrong_size_file_is_reported_with_file_and_offset(store_copy: Path) -> None:
    victim = store_copy / "consumequeue" / "FixTopicA" / "0" / "00000000000000000000"
    with open(victim, "r+b") as f:
        f.truncate(4010)
    cq = ConsumeQueue("FixTopicA", 0, store_copy / "consumequeue", CQ_FILE_SIZE)
    with pytest.raises(StoreFileError) as ei:
        cq.load()
    assert ei.value.file == str(victim)
    assert str(ei.value).startswith(f"{victim}:") and "4010" in str(ei.value) and "6000" in str(ei.value)


def test_bad_file_name_is_reported(store_copy: Path) -> None:
    bad = store_copy / "consumequeue" / "FixTopicA" / "0" / "junk"
    bad.write_bytes(bytes(CQ_FILE_SIZE))
    with pytest.raises(StoreFileError, match="junk:0: .*20-digit"):
        ConsumeQueue("FixTopicA", 0, store_copy / "consumequeue", CQ_FILE_SIZE).load()


def test_tags_code_rules() -> None:
    assert tags_code_of("T", {}, 5) == 0
    assert tags_code_of("T", {"TAGS": "TagA"}, 5) == 2598919  # "TagA".hashCode()
    assert tags_code_of("T", {"TAGS": "TagA", "DELAY": "3"}, 5, DELAY_TABLE) == 2598919
    assert tags_code_of("SCHEDULE_TOPIC_XXXX", {"TAGS": "x", "DELAY": "3"}, 5, DELAY_TABLE) == 10_005
    assert tags_code_of("SCHEDULE_TOPIC_XXXX", {"DELAY": "99"}, 5, DELAY_TABLE) == 5 + 7_200_000  # capped at max level
    assert tags_code_of("SCHEDULE_TOPIC_XXXX", {"TAGS": "x", "DELAY": "0"}, 5, DELAY_TABLE) == 120
    # a DELAY that is not a number counts as none (the dispatcher keeps going on such a record)
    assert tags_code_of("SCHEDULE_TOPIC_XXXX", {"TAGS": "x", "DELAY": "soon"}, 5, DELAY_TABLE) == 120


# -- layouts -------------------------------------------------------------------------------
@given(st.integers(-2**63, 2**63 - 1), st.integers(-2**31, 2**31 - 1), st.integers(-2**63, 2**63 - 1))
def test_unit_struct_matches_construct(offset: int, size: int, tags: int) -> None:
    fast = struct_of(CQ_UNIT)
    raw = CQ_UNIT.build({"commitLogOffset": offset, "size": size, "tagsCode": tags})
    assert raw == fast.pack(offset, size, tags) and len(raw) == CQ_STORE_UNIT_SIZE
    assert fast.unpack(raw) == (offset, size, tags)


@given(st.lists(st.sampled_from([Int16sb, Int32sb, Int64sb]), min_size=1, max_size=8))
def test_struct_of_any_fixed_layout(fields) -> None:
    layout = Struct(*[f"f{i}" / f for i, f in enumerate(fields)])
    assert struct_of(layout).size == layout.sizeof()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5000), st.integers(-2**63, 2**63 - 1)), min_size=1, max_size=60),
       st.integers(0, 40))
def test_put_then_read_back(tmp_path_factory, msgs, first) -> None:
    d = tmp_path_factory.mktemp("cq")
    cq = ConsumeQueue("T", 0, d, 400)
    phy = 0
    for i, (size, tags) in enumerate(msgs):
        assert cq.put_message_position_info(phy, size, tags, first + i)
        phy += size
    assert cq.get_max_offset_in_queue() == first + len(msgs)
    assert cq.get_min_offset_in_queue() == first
    phy = 0
    for i, (size, tags) in enumerate(msgs):
        assert cq.get_unit(first + i) == (phy, size, tags)
        phy += size
    cq.close()
    re = ConsumeQueue("T", 0, d, 400)
    re.load()
    re.recover()
    assert re.get_max_offset_in_queue() == first + len(msgs)
    assert [u.commit_log_offset for u in re.iter_units()] == [sum(s for s, _ in msgs[:i]) for i in range(len(msgs))]
    re.close()
