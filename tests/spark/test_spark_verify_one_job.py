"""``rmqd spark verify`` in one Spark job (spark/verify_plan.py _one_job): the commit-log tasks
read their units and index entries from the files themselves, assuming a store as dispatch
writes it; where the queue and index tasks show the assumption did not hold, the two jobs run
instead. Either way the findings must be the two jobs' findings, exactly."""
from __future__ import annotations

import dataclasses
import struct

import pytest

from rmqd.spark import scan
from rmqd.spark import verify_plan as VP
from rmqd.spark.datasource import parse_options
from tests.spark.conftest import CLEAN, CRASHED, copy_store
from tests.spark.test_spark_verify_parts import _InlineSpark
from rmqd.wire.javamap import java_string_hash
from rmqd.wire.message import encode_record


def _findings(root, split: int, one_job: bool, monkeypatch, checks=("records", "consumequeue", "index")):
    monkeypatch.setattr(VP, "ONE_JOB", one_job)
    f = VP.run_checks(_InlineSpark(), parse_options({"path": str(root), "splitSize": str(split)}), set(checks))
    return dataclasses.replace(f, problems=sorted(f.problems)), VP.last_path


def _written(path) -> int:
    units = scan.read_units(str(path), path.stat().st_size)
    return int(scan.written_units(units).sum())


def _queue_file(root, k: int = 0):
    """The k-th queue file of at least 10 written units."""
    return sorted(p for p in (root / "consumequeue").rglob("*") if p.is_file() and _written(p) >= 10)[k]


def _damage(root, kind: str) -> None:
    if kind == "unit-offset":  # a unit in the middle points elsewhere: the file is out of offset order
        q = _queue_file(root)
        b = bytearray(q.read_bytes())
        b[5 * 20:5 * 20 + 8] = struct.pack(">q", 7)
        q.write_bytes(bytes(b))
    elif kind == "hole":  # an unwritten unit among written ones
        q = _queue_file(root, 1)
        b = bytearray(q.read_bytes())
        b[3 * 20:4 * 20] = bytes(20)
        q.write_bytes(bytes(b))
    elif kind == "last-unit-past-the-log":  # still in offset order: no fallback, the unit is reported
        q = _queue_file(root)
        last = _written(q) - 1
        b = bytearray(q.read_bytes())
        b[last * 20:last * 20 + 8] = struct.pack(">q", 1 << 40)
        q.write_bytes(bytes(b))
    elif kind == "truncated-queue-file":
        q = _queue_file(root, 2)
        q.write_bytes(q.read_bytes()[:(_written(q) // 2) * 20 + 7])
    elif kind in ("index-slot", "index-order"):
        ix = sorted((root / "index").iterdir())[0]
        slots, _n = scan.index_geometry(ix.stat().st_size, None, None)
        b = bytearray(ix.read_bytes())
        e0 = 40 + slots * 4
        if kind == "index-slot":  # entries no lookup reaches
            for s in range(0, slots, max(1, slots // 50)):
                b[40 + s * 4:44 + s * 4] = bytes(4)
        else:  # two entries' offsets swapped
            p10, p200 = e0 + 20 * 10 + 4, e0 + 20 * 200 + 4
            b[p10:p10 + 8], b[p200:p200 + 8] = b[p200:p200 + 8], b[p10:p10 + 8]
        ix.write_bytes(bytes(b))
    else:
        assert kind == "clean"


# damage -> the path run_checks takes
DAMAGES = {"clean": "one job", "last-unit-past-the-log": "one job", "truncated-queue-file": "one job",
           "unit-offset": "two jobs after one", "hole": "two jobs after one",
           "index-slot": "two jobs after one", "index-order": "two jobs after one"}


@pytest.mark.parametrize("fixture", [CLEAN, CRASHED], ids=["clean", "crashed"])
@pytest.mark.parametrize("damage", list(DAMAGES))
def test_one_job_finds_what_two_jobs_find(tmp_path, monkeypatch, fixture, damage):
    """On both fixture stores, clean and damaged: the path taken is the expected one (a healthy
    store, and damage that leaves queue and index files in offset order, take the one job) and
    the findings equal the two jobs', at several split sizes and for each check alone."""
    root = copy_store(fixture, tmp_path)
    _damage(root, damage)
    for split in (300_000, 1_000_000, 1 << 30):
        one, path = _findings(root, split, True, monkeypatch)
        two, two_path = _findings(root, split, False, monkeypatch)
        assert (path, two_path) == (DAMAGES[damage], "two jobs")
        assert one == two
        assert one.records > 0 and one.units > 0 and one.index_keys > 0
        if damage == "clean" and fixture == CLEAN:
            assert one.problems == []
        if damage != "clean":
            assert one.problems
        if damage == "last-unit-past-the-log":
            assert any(p[2] == "cq-unit" and "where no record starts" in p[3] for p in one.problems)
    for checks in (("consumequeue",), ("index",), ("records", "index")):
        one, _path = _findings(root, 1_000_000, True, monkeypatch, checks)
        two, _path = _findings(root, 1_000_000, False, monkeypatch, checks)
        assert one == two


def test_one_job_blank_prefix_and_a_gap_between_queue_files(tmp_path, monkeypatch):
    """A queue of two files, the second starting with fillPreBlank's blank units and a few
    queue offsets past the first's last unit: the one job finds the units through the blanks
    and reports the gap as gap_problems does (at the first file's last unit)."""
    root = tmp_path / "store"
    (root / "commitlog").mkdir(parents=True)
    q = root / "consumequeue" / "t" / "0"
    q.mkdir(parents=True)
    offsets = [0, 1, 2, 3, 302, 303, 304, 305]
    recs, units, pos = [], [], 0
    for qo in offsets:
        r = encode_record(queue_id=0, flag=0, queue_offset=qo, physical_offset=pos, sys_flag=0, born_timestamp=1,
                          born_ip="1.2.3.4", born_port=1, store_timestamp=2, store_ip="5.6.7.8", store_port=10911,
                          reconsume_times=0, prepared_transaction_offset=0, body=b"x%d" % qo, topic="t",
                          properties={"TAGS": "a"})
        units.append(struct.pack(">qiq", pos, len(r), java_string_hash("a")))
        recs.append(r)
        pos += len(r)
    (root / "commitlog" / ("%020d" % 0)).write_bytes(b"".join(recs) + bytes(1024))
    blank = struct.pack(">qiq", 0, 2 ** 31 - 1, 0)
    (q / ("%020d" % 0)).write_bytes(b"".join(units[:4]).ljust(6000, b"\0"))
    (q / ("%020d" % 6000)).write_bytes((blank * 2 + b"".join(units[4:])).ljust(6000, b"\0"))
    for split in (200, 1 << 20):
        one, path = _findings(root, split, True, monkeypatch, ("records", "consumequeue"))
        two, _p = _findings(root, split, False, monkeypatch, ("records", "consumequeue"))
        assert path == "one job" and one == two
        assert (one.records, one.units) == (8, 8)
        assert one.problems == [("consumequeue/t/0/" + "%020d" % 0, 80, "cq-order", "queue t/0 jumps from offset 3 to 302")]


def test_spark_runs_one_job_on_a_healthy_store_and_two_on_a_damaged_one(spark, tmp_path, monkeypatch):
    """Through Spark: the reports are those of the two jobs, the healthy store in one job."""
    from rmqd.spark.verify import format_report, verify_store
    root = copy_store(CLEAN, tmp_path)
    jobs = []
    run = VP._job
    monkeypatch.setattr(VP, "_job", lambda sc, fn, items, what, **kw: jobs.append(what) or run(sc, fn, items, what, **kw))
    for damage, path in (("clean", "one job"), ("index-slot", "two jobs after one")):
        _damage(root, damage)
        reports = {}
        for one_job in (True, False):
            monkeypatch.setattr(VP, "ONE_JOB", one_job)
            jobs.clear()
            reports[one_job] = format_report(verify_store(spark, str(root), options={"splitSize": "1000000"}))
            assert VP.last_path == (path if one_job else "two jobs")
            assert len(jobs) == (1 if VP.last_path == "one job" else 3 if one_job else 2)
        assert reports[True] == reports[False]
        assert ("OK" if damage == "clean" else "FAILED") in reports[True].splitlines()[-1]


def test_tasks_freeze_their_worker_heap_and_the_driver_does_not(spark):
    """A verify task moves its worker's heap out of the cyclic GC's reach (the worker runs
    gc.collect() after every task); run in the driver (as the in-process tests do), nothing."""
    import gc
    from functools import partial
    before = gc.get_freeze_count()
    assert VP._in_task(lambda x: x + 1, 1) == 2
    assert gc.get_freeze_count() == before
    frozen = spark.sparkContext.parallelize([0, 1], 2).map(partial(VP._in_task, lambda _x: gc.get_freeze_count())).collect()
    assert len(frozen) == 2 and min(frozen) > 0


def test_read_index_maps_what_reading_gave(tmp_path):
    """scan.read_index maps the file: header, slot table, entries and count are what reading
    its bytes gives, for a whole index file and for ones cut short (in the slots, in the
    entries, empty)."""
    import numpy as np

    from rmqd.spark import layout as L

    def by_reading(path, size, s, n):
        e0 = L.INDEX_HEADER_SIZE + s * L.HASH_SLOT_SIZE
        raw = path.read_bytes()
        head = np.frombuffer(raw[:min(e0, size)], np.uint8)
        count_field = int(head[:L.INDEX_HEADER_SIZE].view(L.INDEX_HEADER_DTYPE)[0]["indexCount"]) \
            if head.size >= L.INDEX_HEADER_SIZE else 0
        slot_bytes = head[L.INDEX_HEADER_SIZE:]
        got = slot_bytes[:slot_bytes.size - slot_bytes.size % 4].view(L.SLOT_DTYPE)["lastIndex"].astype(np.int32)
        slots = np.zeros(s, np.int32)
        slots[:got.size] = got
        have = max(0, min(n, (size - e0) // L.INDEX_ENTRY_SIZE))
        count = max(1, min(count_field, have))
        data = raw[e0:e0 + count * L.INDEX_ENTRY_SIZE] if have else b""
        entries = np.frombuffer(data[:len(data) - len(data) % 20], np.uint8).view(L.INDEX_ENTRY_DTYPE)
        return count_field, slots, entries, max(1, min(count, entries.size))

    src = sorted((CLEAN / "store" / "index").iterdir())[0]
    full = src.read_bytes()
    s, n = scan.index_geometry(len(full), None, None)
    e0 = L.INDEX_HEADER_SIZE + s * L.HASH_SLOT_SIZE
    for cut in (len(full), e0 + 20 * 37 + 9, e0 - 1000, 30, 0):
        p = tmp_path / f"{cut:017d}"
        p.write_bytes(full[:cut])
        ref = scan.IndexFileRef(str(p), p.name, cut)
        v = scan.read_index(ref, s, n)
        count_field, slots, entries, count = by_reading(p, cut, s, n)
        assert (int(v.header["indexCount"]), v.count, v.slot_num, v.index_num) == (count_field, count, s, n)
        assert np.array_equal(v.slots, slots) and v.entries.tobytes() == entries.tobytes()
        if cut == len(full):
            assert v.count > 100 and (v.slots > 0).sum() > 100


def test_many_files_times_splits_take_the_two_jobs(tmp_path, monkeypatch):
    """Every commit-log task of the one job looks into every queue and index file: past
    ONE_JOB_MAX_READS (files x splits) the two jobs run straight away, with the same findings."""
    root = copy_store(CLEAN, tmp_path)
    _damage(root, "last-unit-past-the-log")
    files = len(scan.queue_files(root)) + len(scan.index_files(root))
    splits = len(scan.plan_commitlog(root, 300_000))
    one, path = _findings(root, 300_000, True, monkeypatch)
    assert path == "one job" and files * splits <= VP.ONE_JOB_MAX_READS
    monkeypatch.setattr(VP, "ONE_JOB_MAX_READS", files * splits - 1)
    capped, path = _findings(root, 300_000, True, monkeypatch)
    assert path == "two jobs" and capped == one and one.problems
