"""``rmqd spark verify`` on local Spark: the real RocketMQ stores pass; each kind of damage in
a copy is found and located by file:offset; the CLI exits 1 listing them."""
from __future__ import annotations

import gzip
import json
import struct

import pytest

pytest.importorskip("pyspark")

from rmqd.spark.cli import verify_main  # noqa: E402
from rmqd.spark.verify import format_report, verify_store  # noqa: E402
from fixtures import facts, require  # noqa: E402
from tests.spark.conftest import CLEAN, CRASHED, copy_store  # noqa: E402


def _dump(name: str) -> list[dict]:
    with gzip.open(require(CLEAN / "dump" / name), "rt") as fh:
        return [json.loads(line) for line in fh]


# from the clean store's dump: the 2nd and 3rd records (FixTopicA: 100 B and key-1k, file 0) and
# the first index entry (the first record's UNIQ_KEY, at offset 0) with its slot in the first file
_FIRST = [d for d in _dump("commitlog-dump.jsonl.gz") if d["record"] == "MESSAGE"][:3]
SECOND, THIRD = _FIRST[1], _FIRST[2]
INDEX0 = facts(CLEAN)["index"][0]["file"]
_ENTRY1 = next(d for d in _dump("index-dump.jsonl.gz") if d["record"] == "ENTRY" and d["file"] == INDEX0
               and d["indexNo"] == 1)
SLOT, FIRST_KEY = _ENTRY1["slot"], _ENTRY1["keys"][0]

pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize("fixture", [CLEAN, CRASHED], ids=["clean", "crashed"])
def test_real_rocketmq_stores_pass(spark, fixture):
    report = verify_store(spark, str(fixture / "store"), options={"splitSize": "300000"})
    assert report.ok, format_report(report)
    counts = {c.name: c.checked for c in report.checks}
    n = facts(fixture)["commitlog"]["messages"]  # as RocketMQ's MessageDecoder counted
    entries = sum(f["indexCount"] - 1 for f in facts(fixture)["index"])
    assert counts == {"record integrity": n, "consume queues vs commit log": n, "index vs commit log": entries}


def _patch(path, pos, data):
    b = bytearray(path.read_bytes())
    b[pos:pos + len(data)] = data
    path.write_bytes(bytes(b))


@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
    """One copy of the clean store with four independent kinds of damage."""
    root = copy_store(CLEAN, tmp_path_factory.mktemp("damaged"))
    # 1. a flipped body byte: the key-1k record in commitlog file 0 (body starts after the 88-byte head)
    cl0 = root / "commitlog" / "00000000000000000000"
    b = bytearray(cl0.read_bytes())
    b[THIRD["filePos"] + 88 + 10] ^= 0xFF
    cl0.write_bytes(bytes(b))
    # 2. a truncated consume queue: FixBulkTopic/1's second file cut inside unit 150 (queue offset 450)
    cq = root / "consumequeue" / "FixBulkTopic" / "1" / "00000000000000006000"
    cq.write_bytes(cq.read_bytes()[:3010])
    # 3. a zeroed index slot: the first key's slot in the first index file
    _patch(root / "index" / INDEX0, 40 + SLOT * 4, bytes(4))
    # 4. a record of another topic in a queue: unit 0 of the 2nd record's FixTopicA queue now points
    #    at a FixBulkTopic record
    rows = {}
    for q in range(4):
        data = (root / "consumequeue" / "FixBulkTopic" / str(q) / "00000000000000000000").read_bytes()
        rows[q] = struct.unpack_from(">qiq", data, 0)
    offset, size, _tags = rows[2]
    assert SECOND["topic"] == "FixTopicA" and SECOND["queueOffset"] == 0
    a0 = root / "consumequeue" / "FixTopicA" / str(SECOND["queueId"]) / "00000000000000000000"
    _patch(a0, 0, struct.pack(">qi", offset, size))
    return root, offset


def test_each_damage_is_found_and_located(spark, damaged):
    root, foreign = damaged
    report = verify_store(spark, str(root))
    assert not report.ok
    by_check = {c.name: c.problems for c in report.checks}
    locs = {(p.file, p.offset) for p in report.problems}
    text = format_report(report)
    # 1. body CRC
    assert [(p.file, p.offset, p.check) for p in by_check["record integrity"]] == [
        ("commitlog/00000000000000000000", THIRD["filePos"], "body-crc")]
    # 2. truncated consume queue: the file and the 50 records that lost their units
    cq = "consumequeue/FixBulkTopic/1/00000000000000006000"
    assert (cq, 3000) in locs
    lost_units = [p for p in by_check["consume queues vs commit log"]
                  if p.check == "cq-missing" and "FixBulkTopic/1 " in p.problem]
    assert len(lost_units) == 50
    # 3. zeroed slot: the slot itself, and every key whose chain went through it
    assert (f"index/{INDEX0}", 40 + SLOT * 4) in locs
    lost_keys = [p for p in by_check["index vs commit log"] if p.check == "index-missing"]
    assert lost_keys and all(p.file.startswith("commitlog/") for p in lost_keys)
    assert any(FIRST_KEY in p.problem and p.offset == 0 for p in lost_keys)
    # 4. the foreign unit, and the FixTopicA record that no unit points to any more
    queue_file = f"consumequeue/FixTopicA/{SECOND['queueId']}/00000000000000000000"
    foreign_p = [p for p in report.problems if p.file == queue_file]
    assert [p.offset for p in foreign_p] == [0]
    assert any("record of FixBulkTopic/2" in p.problem for p in foreign_p)
    assert ("commitlog/00000000000000000000", SECOND["filePos"]) in locs  # its queue offset 0 lost its unit
    assert f"commitlog/00000000000000000000:{THIRD['filePos']}: [body-crc]" in text and text.endswith(
        f"FAILED: {len(report.problems)} problem(s)")


def test_cli_exit_codes(spark, damaged, capsys):
    root, _ = damaged
    assert verify_main([str(CLEAN / "store"), "--master", "local[2]"]) == 0
    out = capsys.readouterr().out
    assert "record integrity" in out and out.rstrip().endswith("OK")
    assert verify_main([str(root), "--master", "local[2]", "--max-problems", "5"]) == 1
    out = capsys.readouterr().out
    assert f"commitlog/00000000000000000000:{THIRD['filePos']}: [body-crc]" in out and "not listed" in out
    assert verify_main([str(root / "nope")]) == 2
    assert "not a RocketMQ store directory" in capsys.readouterr().err
    assert verify_main(["--bogus"]) == 2
