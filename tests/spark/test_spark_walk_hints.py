"""spark/walk_hints.py: record starts from the consume queues speed the commit-log walk up and
never change what it yields, whatever the queues hold."""
from __future__ import annotations

import pytest

np = pytest.importorskip("numpy")
pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from hypothesis import given, settings, strategies as st  # noqa: E402

from rmqd.spark import scan, walk_hints  # noqa: E402
from rmqd.spark.datasource import parse_options, plan_partitions, read_partition  # noqa: E402
from fixtures import facts  # noqa: E402
from tests.spark.conftest import CLEAN, CRASHED  # noqa: E402
from rmqd.wire.message import encode_record  # noqa: E402


def _rows(root, split_size, hinted: bool):
    qf = scan.queue_files(root)
    out = []
    for sp in scan.plan_commitlog(root, split_size):
        starts = walk_hints.record_starts(qf, sp.base + sp.start, sp.base + sp.end) if hinted else None
        out += [r for b in scan.scan_commitlog(sp, starts=starts) for r in b.to_pylist()]
    return out


def _units(root) -> np.ndarray:
    rows = [r for b in scan.scan_queue_files(scan.queue_files(root)) for r in b.to_pylist()]
    return np.array(sorted(r["commitLogOffset"] for r in rows if 0 < r["size"] < 2**31 - 1), np.int64)


@pytest.mark.parametrize("fixture", [CLEAN, CRASHED], ids=["clean", "crashed"])
def test_starts_are_the_units_of_the_range(fixture):
    root = fixture / "store"
    units = _units(root)
    qf = scan.queue_files(root)
    for lo, hi in [(0, 2**62), (0, 1), (int(units[100]), int(units[900])), (int(units[-1]) + 1, 2**62)]:
        got = walk_hints.record_starts(qf, lo, hi)
        want = units[(units >= lo) & (units < hi)]
        assert (got.tolist() if got is not None else []) == want.tolist()


@pytest.mark.parametrize("fixture", [CLEAN, CRASHED], ids=["clean", "crashed"])
@pytest.mark.parametrize("split_size", [65536 + 7, scan.DEFAULT_SPLIT_SIZE])
def test_hinted_rows_equal_walked_rows(fixture, split_size):
    root = fixture / "store"
    plain = _rows(root, split_size, False)
    assert _rows(root, split_size, True) == plain and len(plain) == facts(fixture)["commitlog"]["messages"]
    sp = scan.plan_commitlog(root, scan.DEFAULT_SPLIT_SIZE)[0]
    with scan._Mapped(sp.path) as m:  # the hints do make runs the walk takes whole
        runs = scan._Runs(m.u8, walk_hints.record_starts(scan.queue_files(root), sp.base, sp.base + sp.end) - sp.base)
        assert sum(last - first + 1 for first, last in runs.at.values()) > 0.9 * len(runs.c)
        del runs


def test_the_data_source_uses_the_queues(monkeypatch):
    """The commitlog kind's tasks hand the walk their split's starts (and the rows stay)."""
    seen = []
    real = walk_hints.record_starts

    def spy(files, lo, hi):
        out = real(files, lo, hi)
        seen.append(0 if out is None else out.size)
        return out
    monkeypatch.setattr(walk_hints, "record_starts", spy)
    o = parse_options({"path": str(CLEAN / "store")})
    rows = [r for p in plan_partitions(o) for b in read_partition(o, p) for r in b.to_pylist()]
    assert len(rows) == facts(CLEAN)["commitlog"]["messages"] and sum(seen) >= 2000


def test_too_many_queue_files_means_no_hints(monkeypatch):
    """Past walk_hints.MAX_FILES the driver hands the tasks no queue files: no task probes
    them, and the rows stay the same."""
    o = parse_options({"path": str(CLEAN / "store")})
    hinted = plan_partitions(o)
    assert all(p.payload[1] and len(p.payload[1]) == len(scan.queue_files(CLEAN / "store")) for p in hinted)
    want = [r for p in hinted for b in read_partition(o, p) for r in b.to_pylist()]
    monkeypatch.setattr(walk_hints, "MAX_FILES", len(scan.queue_files(CLEAN / "store")) - 1)
    calls = []
    monkeypatch.setattr(walk_hints, "record_starts", lambda *a: calls.append(a))
    plain = plan_partitions(o)
    assert [p.payload[1] for p in plain] == [None] * len(plain)
    assert [r for p in plain for b in read_partition(o, p) for r in b.to_pylist()] == want and not calls


_BODY = st.binary(min_size=0, max_size=40)


@settings(max_examples=60, deadline=None)
@given(bodies=st.lists(_BODY, min_size=20, max_size=70), drop=st.sets(st.integers(0, 69), max_size=4),
       shifts=st.lists(st.integers(-40, 40), max_size=8), extra=st.lists(st.integers(0, 20_000), max_size=8),
       damage=st.lists(st.tuples(st.integers(0, 20_000), st.integers(0, 255)), max_size=3),
       split_size=st.sampled_from([300, 1000, 1 << 20]))
def test_any_starts_leave_the_rows_alone(bodies, drop, shifts, extra, damage, split_size, tmp_path_factory):
    """Starts dropped, shifted into records, made up, and damage to the records themselves: the
    hinted walk yields exactly the plain walk's rows."""
    root = tmp_path_factory.mktemp("hint")
    (root / "commitlog").mkdir()
    blobs, pos, starts = [], 0, []
    for i, body in enumerate(bodies):
        b = encode_record(queue_id=0, flag=0, queue_offset=i, physical_offset=pos, sys_flag=0,
                          born_timestamp=1, born_ip="10.0.0.2", born_port=1, store_timestamp=2, store_ip="10.0.0.1",
                          store_port=10911, reconsume_times=0, prepared_transaction_offset=0, body=body,
                          topic="T", properties={"KEYS": f"k{i}"})
        blobs.append(b)
        starts.append(pos)
        pos += len(b)
    data = bytearray(b"".join(blobs) + bytes(64))
    for at, v in damage:
        data[at % len(data)] = v
    (root / "commitlog" / ("%020d" % 0)).write_bytes(bytes(data))
    hint = [s for i, s in enumerate(starts) if i not in drop]
    hint += [starts[i % len(starts)] + d for i, d in enumerate(shifts)] + extra
    hint_arr = np.unique(np.array(hint, np.int64))
    taken = 0
    for sp in scan.plan_commitlog(root, split_size):
        lo, hi = sp.base + sp.start, sp.base + sp.end
        mine = hint_arr[(hint_arr >= lo) & (hint_arr < hi)]
        plain = [b.to_pylist() for b in scan.scan_commitlog(sp, batch_rows=7)]
        hinted = [b.to_pylist() for b in scan.scan_commitlog(sp, batch_rows=7, starts=mine)]
        assert sum(hinted, []) == sum(plain, [])
        taken += split_size > 4096 and not damage and not drop and not shifts and not extra
    if taken:  # the undamaged store with every start: one run of all its records
        with scan._Mapped(str(root / "commitlog" / ("%020d" % 0))) as m:
            runs = scan._Runs(m.u8, hint_arr)
            assert list(runs.at.values()) == [(0, len(starts) - 1)]
            del runs
