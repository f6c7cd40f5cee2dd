"""The numpy pieces ``rmqd spark verify``'s tasks are built from: the prefix-sum String.hashCode
of byte ranges (spark/javahash.py) must equal Java's (wire.javamap) on any text, and the narrow
form columns travel in (spark/compact.py) must give back exactly the int64 values."""
from __future__ import annotations

import pickle

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqd.spark import compact
from rmqd.spark import javahash as J
from rmqd.store.indexfile import index_key_hash
from rmqd.wire.javamap import java_string_hash

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)


def _ranges(strings: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    raw = [s.encode() for s in strings]
    data = np.frombuffer(b"".join(raw) or b"\0", dtype=np.uint8)
    lens = np.array([len(r) for r in raw], dtype=np.int64)
    start = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    return data, start, start + lens


@settings(max_examples=200, deadline=None)
@given(st.lists(_text, min_size=1, max_size=30))
def test_range_hashes_equal_java(strings):
    data, start, end = _ranges(strings)
    h = J.RangeHasher(data)
    assert h.hash(start, end).tolist() == [java_string_hash(s) for s in strings]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["T", "Topic-é", "SCHEDULE_TOPIC_XXXX"]), st.lists(_text, min_size=1, max_size=20))
def test_topic_key_hash_from_parts(topic, keys):
    data, start, end = _ranges(keys)
    h = J.RangeHasher(data)
    prefix = np.full(len(keys), java_string_hash(topic + "#"), dtype=np.int64)
    got = J.index_hash(J.combine(prefix, h.hash(start, end), h.utf16_length(start, end)))
    assert got.tolist() == [index_key_hash(f"{topic}#{k}") for k in keys]


def test_powers_across_table_blocks():
    p, ip = J._powers(3 * J._BLOCK + 5)
    for j in (0, 1, J._BLOCK - 1, J._BLOCK, 2 * J._BLOCK + 3, 3 * J._BLOCK + 4):
        assert int(p[j]) == pow(31, j, 1 << 32) and int(ip[j]) == pow(J._INV31, j, 1 << 32)


_ints = st.integers(-(2 ** 63), 2 ** 63 - 1)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.lists(_ints, max_size=40),
                 st.lists(st.integers(-(2 ** 31), 2 ** 31 - 1), max_size=40),
                 st.tuples(_ints, st.lists(st.integers(0, 2 ** 20), max_size=40)).map(
                     lambda t: [t[0] + sum(t[1][:i]) for i in range(len(t[1]))] if abs(t[0]) < 2 ** 62 else [])))
def test_compact_round_trip(values):
    a = np.array(values, dtype=np.int64)
    back = compact.unpack(pickle.loads(pickle.dumps(compact.pack(a))))
    assert back.dtype == np.int64 and back.tolist() == a.tolist()


_run = st.tuples(st.integers(-(2 ** 62), 2 ** 62), st.lists(st.integers(-300, 40_000), max_size=120))


@settings(max_examples=300, deadline=None)
@given(st.lists(_run, min_size=1, max_size=6), st.sampled_from([np.int64, np.int32]))
def test_compact_round_trip_of_concatenated_runs(runs, dtype):
    """Runs of small steps joined by big jumps (queues concatenated): the few wide steps kept
    aside, the values back exactly."""
    info = np.iinfo(dtype)
    parts = [np.clip(start + np.cumsum(np.array([0] + steps, dtype=np.int64)), info.min, info.max) for start, steps in runs]
    a = np.concatenate(parts).astype(dtype)
    p = compact.pack(a)
    back = compact.unpack(pickle.loads(pickle.dumps(p)))
    assert back.dtype == a.dtype and back.tolist() == a.tolist()


def test_compact_keeps_a_few_wide_steps_aside():
    queues = np.concatenate([2 ** 33 + q * 10 + np.arange(0, 50_000 * 4852, 4852, dtype=np.int64) for q in range(4)])
    p = compact.pack(queues)
    assert p[0] == "x" and p[3].dtype == np.int16 and p[4].size == 3
    assert compact.unpack(p).tolist() == queues.tolist()
    qoff = np.concatenate([np.arange(50_000, dtype=np.int64)] * 4)
    assert compact.pack(qoff)[0] == "x" and compact.pack(qoff)[3].dtype == np.int8
    assert compact.unpack(compact.pack(qoff)).tolist() == qoff.tolist()


def test_compact_narrows_offsets():
    offsets = 2 ** 40 + np.cumsum(np.full(1000, 1300, dtype=np.int64))
    assert compact.pack(offsets)[0] == "d" and compact.pack(offsets)[3].dtype == np.int16
    small = np.array([5, -7, 100_000, 3], dtype=np.int64)
    assert compact.pack(small)[0] == "v" and compact.pack(small)[2].dtype == np.int32
    assert compact.pack(np.array([0, 2 ** 40, 0], dtype=np.int64))[0] == "raw"
    hashes = np.array([2 ** 31 - 1, -2 ** 31, 0], dtype=np.int32)  # no narrower form: as it is
    assert compact.pack(hashes)[0] == "raw"
    wraps = np.array([0, 2 ** 63 - 1, -2 ** 63], dtype=np.int64)  # steps that wrap come back exact
    assert compact.unpack(compact.pack(wraps)).tolist() == wraps.tolist()
    files = np.array([3, 3, 1, 2], dtype=np.int32)
    back = compact.unpack(pickle.loads(pickle.dumps(compact.pack(files))))
    assert back.dtype == np.int32 and back.tolist() == files.tolist()


class _InlineSpark:
    """Runs verify's jobs in this process (the task functions are plain Python)."""

    defaultParallelism = 2

    def setJobDescription(self, _what: str) -> None:
        pass

    def parallelize(self, items: list, _n: int) -> "_InlineSpark._Rdd":
        return _InlineSpark._Rdd(items)

    def broadcast(self, value) -> "_InlineSpark._Broadcast":
        return _InlineSpark._Broadcast(pickle.loads(pickle.dumps(value)))

    class _Broadcast:
        def __init__(self, value) -> None:
            self.value = value

        def destroy(self) -> None:
            self.value = None

    class _Rdd:
        def __init__(self, items: list) -> None:
            self.items = items

        def map(self, fn):
            # through pickle, as Spark ships them (the narrow forms included)
            self.items = [pickle.loads(pickle.dumps(fn(pickle.loads(pickle.dumps(x))))) for x in self.items]
            return self

        def collect(self) -> list:
            return self.items


def test_tasks_on_ipv6_hosts_and_a_long_topic(tmp_path):
    """IPv6 born/store hosts move every later field and a topic over 127 bytes takes the v2
    record; the tasks find units matching such records and one wrong tags code."""
    from rmqd.spark.datasource import parse_options
    from rmqd.spark.verify_plan import run_checks
    from rmqd.wire.message import encode_record
    root = tmp_path / "store"
    (root / "commitlog").mkdir(parents=True)
    recs, units, pos = [], {}, 0
    for i, (born, store, topic) in enumerate([("::1", "127.0.0.1", "T" * 200), ("10.0.0.1", "fe80::2", "t"),
                                              ("1.2.3.4", "5.6.7.8", "T" * 200)]):
        r = encode_record(queue_id=0, flag=0, queue_offset=len(units.get(topic, [])), physical_offset=pos, sys_flag=0,
                          born_timestamp=1, born_ip=born, born_port=1000 + i, store_timestamp=2, store_ip=store,
                          store_port=10911, reconsume_times=0, prepared_transaction_offset=0, body=b"b%d" % i,
                          topic=topic, properties={"TAGS": "x", "KEYS": "a b"})
        units.setdefault(topic, []).append((pos, len(r), java_string_hash("x")))
        recs.append(r)
        pos += len(r)
    (root / "commitlog" / ("%020d" % 0)).write_bytes(b"".join(recs) + bytes(4096))
    for topic, rows in units.items():
        q = root / "consumequeue" / topic / "0"
        q.mkdir(parents=True)
        (q / ("%020d" % 0)).write_bytes(b"".join(int.to_bytes(o, 8, "big") + int.to_bytes(s, 4, "big")
                                                 + int.to_bytes(t, 8, "big", signed=True) for o, s, t in rows)
                                        .ljust(6000, b"\0"))  # one file size for every queue, as a store has
    o = parse_options({"path": str(root), "splitSize": "300"})
    found = run_checks(_InlineSpark(), o, {"records", "consumequeue", "index"})
    assert (found.records, found.units, found.problems) == (3, 3, [])
    cq = root / "consumequeue" / "t" / "0" / ("%020d" % 0)
    data = bytearray(cq.read_bytes())
    data[12:20] = int.to_bytes(7, 8, "big")
    cq.write_bytes(bytes(data))
    found = run_checks(_InlineSpark(), o, {"consumequeue"})
    assert [(p[0], p[1], p[2]) for p in found.problems] == [("consumequeue/t/0/" + "%020d" % 0, 0, "cq-unit")]
    assert f"tags code 7 != {java_string_hash('x')}" in found.problems[0][3]


def _walked(split, starts, batch_rows: int) -> tuple[list[int], list]:
    from rmqd.spark import scan
    probs = scan._Problems()
    with scan._Mapped(split.path) as m:
        runs = scan._Runs(m.u8, starts) if starts is not None else None
        chunks = [np.asarray(c, dtype=np.int64) for c in scan._walk(m.mm, split, "x", probs, batch_rows, runs)]
    assert all(0 < len(c) <= batch_rows for c in chunks)
    return [int(p) for c in chunks for p in c], probs.rows


def test_walk_taking_runs_is_the_record_walk(tmp_path, monkeypatch):
    """The walk that takes runs of expected record starts (a commit-log task's units) yields the
    same positions and problems as the record-by-record walk, whatever the starts (missing ones,
    wrong ones) and the file (damaged bytes), chunk limits of rows and bytes included."""
    import random

    from rmqd.spark import scan
    from tests.spark.conftest import CLEAN
    rnd = random.Random(5)
    src = CLEAN / "store" / "commitlog" / "00000000000000000000"
    data = src.read_bytes()
    monkeypatch.setattr(scan, "MAX_BATCH_BYTES", 5000)
    for trial in range(12):
        b = bytearray(data)
        for _ in range(trial % 4):  # trial 0 and every 4th: the file as it is
            b[rnd.randrange(len(b) // 3)] = rnd.randrange(256)
        path = tmp_path / f"{trial:020d}"
        path.write_bytes(bytes(b))
        for size in (100_000, 1 << 30):
            for start in range(0, len(b), size):
                sp = scan.CommitLogSplit(str(path), path.name, 0, len(b), start, min(start + size, len(b)))
                want = _walked(sp, None, 50)
                every = np.array(want[0], dtype=np.int64)
                some = every[np.array([rnd.random() < 0.9 for _ in range(every.size)], dtype=bool)] if every.size else every
                noise = np.array([rnd.randrange(len(b)) for _ in range(30)], dtype=np.int64)
                for starts in (every, np.concatenate([some, noise])):
                    assert _walked(sp, starts, 50) == want


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 5)), max_size=60),
       st.lists(st.tuples(st.integers(0, 40), st.integers(0, 5)), max_size=60), st.booleans())
def test_pairs_among_is_membership(have, want, many_per_offset):
    """A commit-log task's index lookup: (offset, hash) membership among the reachable pairs,
    by probing each offset's run or, past MAX_PROBES entries at one offset, by sorting."""
    from rmqd.spark import verify_records as R
    have = sorted(have, key=lambda p: p[0]) + ([(41, h) for h in range(R.MAX_PROBES + 1)] if many_per_offset else [])
    hp = np.array([p for p, _h in have], dtype=np.int64)
    hh = np.array([h for _p, h in have], dtype=np.int32)
    wp = np.array([p for p, _h in want], dtype=np.int64)
    wh = np.array([h for _p, h in want], dtype=np.int64)
    got = R._pairs_among(hp, hh, wp, wh, 0)
    assert got.tolist() == [w in set(have) for w in want]


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=1, max_size=80), st.lists(st.tuples(st.integers(0, 79), st.integers(0, 40)), min_size=1, max_size=20),
       st.booleans())
def test_varbinary_views_and_gather(data, ranges, views):
    """Byte ranges of a buffer as an Arrow binary array, through the binary_view array built
    field by field (short values inline, long ones by prefix and offset) or the byte gather."""
    import pyarrow as pa

    from rmqd.spark import scan
    u8 = np.frombuffer(data, dtype=np.uint8)
    starts = np.array([min(s, len(data) - 1) for s, _l in ranges], dtype=np.int64)
    lengths = np.array([min(ln, len(data) - s) for s, (_s, ln) in zip(starts.tolist(), ranges)], dtype=np.int64)
    old = scan._SHORT_BYTES
    scan._SHORT_BYTES = -1 if views else 1 << 20
    try:
        got = scan._varbinary(u8, starts, lengths, pa.binary()).to_pylist()
    finally:
        scan._SHORT_BYTES = old
    assert got == [data[s:s + ln] for s, ln in zip(starts.tolist(), lengths.tolist())]


def test_index_entries_read_by_the_tasks_equal_the_pairs_through_the_driver(tmp_path, monkeypatch):
    """An index file in offset order hands its entries to the commit-log tasks as file slices
    (IndexSlice); the findings equal those of the (offset, hash) pairs through the driver, on
    both fixture stores, clean and with a damaged index (zeroed slots, a changed hash, a link
    past the count), at several split sizes. A file out of offset order takes the pairs."""
    import dataclasses
    import struct

    from rmqd.spark import scan
    from rmqd.spark import verify_plan as VP
    from rmqd.spark.datasource import parse_options
    from rmqd.spark.verify_index import IndexTask
    from tests.spark.conftest import CLEAN, CRASHED, copy_store

    monkeypatch.setattr(VP, "ONE_JOB", False)  # the two jobs' paths (tests/spark/test_spark_verify_one_job.py: the one job)

    def findings(root, split, pairs: bool):
        if pairs:  # without the splits' bounds the index task returns the pairs
            monkeypatch.setattr(VP, "IndexTask", lambda ref, s, n, _b=None: IndexTask(ref, s, n))
        else:
            monkeypatch.setattr(VP, "IndexTask", IndexTask)
        f = VP.run_checks(_InlineSpark(), parse_options({"path": str(root), "splitSize": str(split)}),
                          {"records", "consumequeue", "index"})
        return dataclasses.replace(f, problems=sorted(f.problems))

    from rmqd.spark.verify_index import IndexSlice
    reads = []
    read = IndexSlice.read
    monkeypatch.setattr(IndexSlice, "read", lambda self: reads.append(self.count) or read(self))
    for fixture in (CLEAN, CRASHED):
        root = copy_store(fixture, tmp_path / fixture.name)
        checked = []
        for damage in range(3):
            if damage == 1:
                ix = sorted((root / "index").iterdir())[0]
                slots, _n = scan.index_geometry(ix.stat().st_size, None, None)
                b = bytearray(ix.read_bytes())
                e0 = 40 + slots * 4
                b[40 + 456 * 4:40 + 457 * 4] = bytes(4)
                b[e0 + 20 * 50 + 2] ^= 1
                b[e0 + 20 * 77 + 16:e0 + 20 * 77 + 20] = struct.pack(">i", 999_999_999)
                ix.write_bytes(bytes(b))
            if damage == 2:  # two entries' offsets swapped: out of offset order
                ix = sorted((root / "index").iterdir())[0]
                slots, _n = scan.index_geometry(ix.stat().st_size, None, None)
                b = bytearray(ix.read_bytes())
                e0 = 40 + slots * 4
                p10, p200 = e0 + 20 * 10 + 4, e0 + 20 * 200 + 4
                b[p10:p10 + 8], b[p200:p200 + 8] = b[p200:p200 + 8], b[p10:p10 + 8]
                ix.write_bytes(bytes(b))
            for split in (300_000, 1_000_000, 64 << 20):
                reads.clear()
                via_files = findings(root, split, False)
                assert sum(reads) > 0 or damage == 2  # the slices were read
                via_pairs = findings(root, split, True)
                assert via_files == via_pairs
                checked.append(len(via_files.problems))
        assert checked[0] == 0 and min(checked[3:]) > 0
