"""store.tools.verify / dump on the RocketMQ fixture stores, clean and corrupted."""
from __future__ import annotations

import base64
import gzip
import hashlib
import json
import shutil
import struct
from pathlib import Path

import pytest

from fixtures import CLEAN, CRASHED, facts, require
from rmqd.store.config import MessageStoreConfig
from rmqd.store.indexfile import INDEX_HEADER_SIZE, index_key_hash
from rmqd.store.tools import Problem, dump, infer_config, verify

SLOTS = 1000
ENTRY_BASE = INDEX_HEADER_SIZE + SLOTS * 4


def _jsonl(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(require(path), "rt") as f:
        return [json.loads(line) for line in f]


@pytest.fixture(params=[CLEAN, CRASHED], ids=["clean", "crashed"])
def fixture_dir(request) -> Path:
    return require(request.param / "store").parent


@pytest.fixture
def store(tmp_path: Path) -> Path:
    shutil.copytree(require(CLEAN / "store"), tmp_path / "store")
    return tmp_path / "store"


def _index_names() -> list[str]:
    """The clean store's index files, oldest (full) first."""
    return [f["file"] for f in facts(CLEAN)["index"]]


def _records() -> list[dict]:
    return [r for r in _jsonl(CLEAN / "dump" / "commitlog-dump.jsonl.gz") if r["record"] == "MESSAGE"]


def _patch(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def test_fixture_stores_verify_clean_and_untouched(fixture_dir: Path) -> None:
    before = {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in (fixture_dir / "store").rglob("*") if p.is_file()}
    seen = []
    assert verify(fixture_dir / "store", progress=lambda done, total: seen.append((done, total))) == []
    assert seen and seen[-1][0] == seen[-1][1] > 0
    after = {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in (fixture_dir / "store").rglob("*") if p.is_file()}
    assert before == after


def test_infer_config_reads_sizes_off_the_files() -> None:
    cfg = infer_config(CLEAN / "store")
    assert (cfg.mappedFileSizeCommitLog, cfg.mappedFileSizeConsumeQueue, cfg.maxHashSlotNum, cfg.maxIndexNum) == \
        (1048576, 6000, 1000, 4000)


def test_wrong_configured_sizes_are_reported(store: Path) -> None:
    probs = verify(store, MessageStoreConfig())  # 6,000,000-byte CQ files, 420 MB index files
    assert any(p.file.endswith("FixTopicA/0/00000000000000000000") and "6000000" in p.message for p in probs)
    assert any(p.file.endswith(f"index/{_index_names()[0]}") and "420000040" in p.message for p in probs)


def test_body_crc_mismatch_is_reported_at_the_record(store: Path) -> None:
    rec = next(r for r in _records() if r["topic"] == "FixBulkTopic" and r["file"] == f"{1 << 20:020d}")
    head = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4  # IPv4 record head, then the body
    body_pos = rec["filePos"] + head
    path = store / "commitlog" / rec["file"]
    b = path.read_bytes()[body_pos]
    _patch(path, body_pos, bytes([b ^ 0xFF]))
    probs = verify(store)
    assert probs[0] == Problem(str(path), rec["filePos"], probs[0].message)
    assert "CRC" in probs[0].message
    assert str(probs[0]).startswith(f"{path}:{rec['filePos']}: ")


def test_bad_magic(store: Path) -> None:
    last = _records()[-1]
    path = store / "commitlog" / last["file"]
    _patch(path, last["filePos"] + 4, b"\x00\x00\x00\x01")
    probs = verify(store)
    msgs = {(p.file, p.offset): p.message for p in probs}
    assert "bad magic" in msgs[(str(path), last["filePos"])]


def test_garbage_after_end_of_data(store: Path) -> None:
    last = _records()[-1]
    path = store / "commitlog" / last["file"]
    end = last["filePos"] + last["totalSize"]
    _patch(path, end + 100, b"junk")
    probs = verify(store)
    assert probs == [Problem(str(path), end + 100, probs[0].message)]
    assert "after the end of data" in probs[0].message


def test_truncated_consume_queue_file(store: Path) -> None:
    path = store / "consumequeue" / "FixBulkTopic" / "2" / "00000000000000006000"
    with open(path, "r+b") as f:
        f.truncate(3000)
    probs = verify(store)
    assert [(p.file, p.offset) for p in probs] == [(str(path), 0)]
    assert "3000" in probs[0].message and "6000" in probs[0].message


def test_consume_queue_unit_mismatches(store: Path) -> None:
    queues = facts(CLEAN)["reported"]["topics"]["FixTopicA"]
    qid = next(q for q, o in sorted(queues.items()) if o["maxOffset"] >= 4)  # units 0..3 are there
    path = store / "consumequeue" / "FixTopicA" / qid / "00000000000000000000"
    data = path.read_bytes()
    off, size, tags = struct.unpack_from(">qiq", data, 20)
    _patch(path, 20 + 12, struct.pack(">q", tags + 1))  # unit 1: wrong tags code
    _patch(path, 40, struct.pack(">q", 10**9))  # unit 2: points beyond the commit log
    _patch(path, 60 + 8, struct.pack(">i", size + 1))  # unit 3: wrong size
    probs = {(p.file, p.offset): p.message for p in verify(store)}
    assert "tags code" in probs[(str(path), 20)]
    assert "beyond the end of the commit log" in probs[(str(path), 40)]
    assert "size" in probs[(str(path), 60)]
    assert len(probs) == 3


def test_zeroed_index_slot_is_reported(store: Path) -> None:
    name = _index_names()[1]
    path = store / "index" / name
    entries = [e for e in _jsonl(CLEAN / "dump" / "index-dump.jsonl.gz") if e["file"] == name and e["record"] == "ENTRY"]
    key = next(k for e in entries for k in e["keys"] if k.startswith("FixBulkTopic#bulk-"))
    slot = index_key_hash(key) % SLOTS
    _patch(path, INDEX_HEADER_SIZE + 4 * slot, b"\x00\x00\x00\x00")
    chain = [e for e in entries if e["slot"] == slot]
    probs = verify(store)
    assert chain and {(p.file, p.offset) for p in probs} == {(str(path), ENTRY_BASE + 20 * e["indexNo"]) for e in chain}
    assert all("not reachable" in p.message for p in probs)


def test_index_entry_with_foreign_hash(store: Path) -> None:
    name = _index_names()[0]
    path = store / "index" / name
    _patch(path, ENTRY_BASE + 20 * 5 + 4, struct.pack(">q", 0))  # entry 5 now points at record 0
    probs = verify(store)
    assert [(p.file, p.offset) for p in probs] == [(str(path), ENTRY_BASE + 100)]
    assert "matches no key" in probs[0].message


def test_wrong_size_index_and_bad_config(store: Path) -> None:
    (store / "index" / "20261122025600000").write_bytes(bytes(100))
    (store / "config" / "topics.json").write_text("{\"dataVersion\":")
    probs = {(p.file, p.offset): p.message for p in verify(store)}
    assert "100" in probs[(str(store / "index" / "20261122025600000"), 0)]
    assert "does not parse" in probs[(str(store / "config" / "topics.json"), 0)]


def test_missing_store() -> None:
    assert verify("/nonexistent/store") == [Problem("/nonexistent/store", 0, "not a directory")]


def test_dump_all_and_by_queue(fixture_dir: Path) -> None:
    recs = [r for r in _jsonl(fixture_dir / "dump" / "commitlog-dump.jsonl.gz") if r["record"] == "MESSAGE"]
    out = list(dump(fixture_dir / "store"))
    assert [m["physicalOffset"] for m in out] == [r["physicalOffset"] for r in recs]
    assert [m["msgId"] for m in out] == [r["offsetMsgId"] for r in recs]
    assert all(m["properties"] == r["properties"] for m, r in zip(out, recs))
    json.dumps(out)  # JSON-able
    cq = sorted((u for u in _jsonl(fixture_dir / "dump" / "consumequeue-dump.jsonl.gz")
                 if u["topic"] == "FixBulkTopic" and u["queueId"] == 1), key=lambda u: u["logicalOffset"])
    by_queue = list(dump(fixture_dir / "store", "FixBulkTopic", 1))
    assert [m["physicalOffset"] for m in by_queue] == [u["commitLogOffset"] for u in cq]
    assert [m["queueOffset"] for m in by_queue] == list(range(len(cq)))
    assert {m["topic"] for m in dump(fixture_dir / "store", "FixOrderTopic")} == {"FixOrderTopic"}


def test_dump_bodies_match_what_the_client_sent() -> None:
    manifest = {m["msgId"]: m for m in _jsonl(CLEAN / "manifest.jsonl") if m["topic"] == "FixTopicA"}
    seen = 0
    for m in dump(CLEAN / "store", "FixTopicA"):
        sent = manifest.get(m["properties"].get("UNIQ_KEY"))
        if sent is None:
            continue
        body = m["body"].encode() if "body" in m else base64.b64decode(m["bodyBase64"])
        assert hashlib.sha256(body).hexdigest() == sent["bodySha256"], sent["kind"]
        assert m["bodyLength"] == sent["bodyLength"]
        seen += 1
    assert seen >= 10
    with pytest.raises(ValueError):
        next(dump(CLEAN / "store", None, 1))


def test_record_ending_at_the_last_byte_of_a_file(tmp_path: Path) -> None:
    """RocketMQ always leaves room for a BLANK record, but a copied or truncated store can end a
    record on a file's last byte: verify reads it whole and goes on into the next file."""
    from rmqd.wire.message import encode_record
    cl = tmp_path / "store" / "commitlog"
    cl.mkdir(parents=True)

    def rec(i: int, phys: int) -> bytes:
        return encode_record(queue_id=0, flag=0, queue_offset=i, physical_offset=phys, sys_flag=0,
                             born_timestamp=1, born_ip="10.0.0.2", born_port=1, store_timestamp=2,
                             store_ip="10.0.0.1", store_port=10911, reconsume_times=0,
                             prepared_transaction_offset=0, body=b"x" * 10, topic="T", properties={"KEYS": f"k{i}"})
    first = b"".join(rec(i, i * len(rec(0, 0))) for i in range(3))  # same size each: exactly three fill it
    size = len(first)
    (cl / f"{0:020d}").write_bytes(first)
    (cl / f"{size:020d}").write_bytes(rec(3, size).ljust(size, b"\0"))
    assert verify(tmp_path / "store") == []
    # and the next file is still checked: end of data at 0, then a record 8 bytes in, whose first
    # non-zero byte is the low byte of its 4-byte size (offset 8 + 3)
    (cl / f"{size:020d}").write_bytes((b"\0" * 8 + rec(3, size)).ljust(size, b"\0"))
    probs = verify(tmp_path / "store")
    assert [(Path(p.file).name, p.offset) for p in probs] == [(f"{size:020d}", 11)], probs
    assert "after the end of data" in probs[0].message
