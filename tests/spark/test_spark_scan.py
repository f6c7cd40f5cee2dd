"""The columnar readers (no Spark): rows equal RocketMQ's own decoding of the fixture stores,
whatever the split size; corrupt input is reported with file and offset."""
from __future__ import annotations

import gzip
import hashlib
import json
import shutil

import pytest

np = pytest.importorskip("numpy")
pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from hypothesis import given, settings, strategies as st  # noqa: E402

from rmqd.spark import scan  # noqa: E402
from fixtures import facts  # noqa: E402
from tests.spark.conftest import CLEAN, CRASHED, copy_store  # noqa: E402
from rmqd.wire.message import decode_properties, encode_record  # noqa: E402


def _dump(fixture, name):
    with gzip.open(fixture / "dump" / name, "rt") as fh:
        return [json.loads(line) for line in fh]


def _messages(fixture) -> int:
    """How many records RocketMQ's MessageDecoder read in the fixture's commit log."""
    return facts(fixture)["commitlog"]["messages"]


def _first_positions(n: int) -> list[int]:
    """File positions of the clean store's first n records (all in file 0), from the dump."""
    rows = [d for d in _dump(CLEAN, "commitlog-dump.jsonl.gz") if d["record"] == "MESSAGE"][:n]
    assert all(d["file"] == "00000000000000000000" for d in rows)
    return [d["filePos"] for d in rows]


def _rows(root, split_size=scan.DEFAULT_SPLIT_SIZE, **kw):
    batches = [b for sp in scan.plan_commitlog(root, split_size) for b in scan.scan_commitlog(sp, **kw)]
    return pa.Table.from_batches(batches).to_pylist() if batches else []


def _problems(root, split_size=scan.DEFAULT_SPLIT_SIZE):
    out = []
    for sp in scan.plan_commitlog(root, split_size):
        for b in scan.check_commitlog(sp):
            out += b.to_pylist()
    return out


@pytest.mark.parametrize("fixture", [CLEAN, CRASHED], ids=["clean", "crashed"])
def test_commitlog_rows_equal_rocketmq_dump(fixture):
    dump = [d for d in _dump(fixture, "commitlog-dump.jsonl.gz") if d["record"] == "MESSAGE"]
    rows = _rows(fixture / "store")
    assert len(rows) == len(dump) == _messages(fixture)
    for r, d in zip(rows, dump):
        assert (r["file"], r["filePos"]) == (d["file"], d["filePos"])
        for k in ("totalSize", "bodyCRC", "queueId", "flag", "queueOffset", "sysFlag", "bornTimestamp",
                  "storeTimestamp", "reconsumeTimes", "preparedTransactionOffset", "topic", "offsetMsgId"):
            assert r[k] == d[k], (k, d["filePos"])
        assert r["physicalOffset"] == d["physicalOffsetField"]
        assert r["magic"] == int(d["magic"], 16) - (1 << 32)
        assert "/" + r["bornHost"] == d["bornHost"] and "/" + r["storeHost"] == d["storeHost"]
        assert dict(r["properties"]) == d["properties"]
        assert r["tags"] == d["properties"].get("TAGS") and r["keys"] == d["properties"].get("KEYS")
        assert r["uniqKey"] == d["properties"].get("UNIQ_KEY")
        assert hashlib.sha256(r["body"]).hexdigest() == d["storedBodySha256"]
        assert r["bodyLength"] == d["storedBodyLength"] and r["crc_ok"] is True
    assert _problems(fixture / "store") == []


def test_manifest_messages_are_all_read():
    rows = _rows(CLEAN / "store", read_body=False)
    uniq = {r["uniqKey"] for r in rows}
    manifest = [json.loads(line) for line in open(CLEAN / "manifest.jsonl")]
    sent = [m for m in manifest if m.get("sendStatus", "SEND_OK") == "SEND_OK" or m["kind"] == "oneway"]
    missing = [m["seq"] for m in sent if m["msgId"] and "," not in m["msgId"] and m["msgId"] not in uniq]
    assert missing == []
    assert all(r["body"] is None and r["crc_ok"] is True for r in rows)


@pytest.mark.parametrize("split_size", [4096, 65536 + 7, 300_001])
def test_split_size_does_not_change_rows(split_size):
    root = CRASHED / "store"
    whole = [(r["file"], r["filePos"], r["offsetMsgId"]) for r in _rows(root, read_body=False, check_crc=False)]
    split = [(r["file"], r["filePos"], r["offsetMsgId"]) for r in _rows(root, split_size, read_body=False, check_crc=False)]
    assert split == whole and len(whole) == _messages(CRASHED)
    assert _problems(root, split_size) == []


def test_bad_magic_is_located_and_reading_resumes(tmp_path):
    root = copy_store(CLEAN, tmp_path)
    first = _first_positions(8)
    third, seventh = first[2], first[6]
    path = root / "commitlog" / "00000000000000000000"
    data = bytearray(path.read_bytes())
    data[third + 4:third + 8] = b"\x00\x11\x22\x33"  # magic of the 3rd record (key-1k)
    data[seventh:seventh + 4] = (10**9).to_bytes(4, "big")  # size of the 7th record
    path.write_bytes(bytes(data))
    probs = _problems(root, 65536)
    locs = {(p["file"], p["offset"]) for p in probs}
    assert ("commitlog/00000000000000000000", third) in locs
    assert ("commitlog/00000000000000000000", seventh) in locs
    rows = _rows(root, 65536, read_body=False)
    assert len(rows) == _messages(CLEAN) - 2  # both damaged records skipped, everything else still read
    assert {r["filePos"] for r in rows if r["file"] == "00000000000000000000"} >= set(first) - {third, seventh}


def test_blank_tail_and_garbage_after_end(tmp_path):
    root = copy_store(CLEAN, tmp_path)
    log = facts(CLEAN)["commitlog"]
    blank, end = log["blanks"][0], log["endOfData"]
    assert blank["file"] == "00000000000000000000"
    f0 = root / "commitlog" / blank["file"]
    data = bytearray(f0.read_bytes())
    data[blank["filePos"]:blank["filePos"] + 4] = (1000).to_bytes(4, "big")  # BLANK size no longer reaches the end
    f0.write_bytes(bytes(data))
    last = root / "commitlog" / end["file"]
    data = bytearray(last.read_bytes())
    stray = (end["filePos"] + len(data)) // 2  # a stray byte after the end of data
    data[stray] = 7
    last.write_bytes(bytes(data))
    locs = {(p["file"], p["offset"], p["check"]) for p in _problems(root)}
    assert ("commitlog/00000000000000000000", blank["filePos"], "blank-tail") in locs
    assert (f"commitlog/{end['file']}", stray, "blank-tail") in locs


def test_ipv6_hosts_and_v2_topic(tmp_path):
    d = tmp_path / "store" / "commitlog"
    d.mkdir(parents=True)
    recs = []
    pos = 0
    for i, (born, store, topic) in enumerate([("::1", "127.0.0.1", "T" * 200), ("10.0.0.1", "fe80::2", "t"),
                                              ("1.2.3.4", "5.6.7.8", "plain")]):
        r = encode_record(queue_id=i, flag=0, queue_offset=i, physical_offset=pos, sys_flag=0, born_timestamp=1,
                          born_ip=born, born_port=1000 + i, store_timestamp=2, store_ip=store, store_port=10911,
                          reconsume_times=0, prepared_transaction_offset=0, body=b"b%d" % i, topic=topic,
                          properties={"TAGS": "x", "KEYS": "a b"})
        recs.append(r)
        pos += len(r)
    (d / ("%020d" % 0)).write_bytes(b"".join(recs) + bytes(4096))
    rows = _rows(tmp_path / "store")
    assert [r["topic"] for r in rows] == ["T" * 200, "t", "plain"]
    assert rows[0]["bornHost"] == "0:0:0:0:0:0:0:1:1000" and rows[1]["storeHost"] == "fe80:0:0:0:0:0:0:2:10911"
    assert rows[2]["bornHost"] == "1.2.3.4:1002" and len(rows[1]["offsetMsgId"]) == 56
    assert all(r["crc_ok"] and r["tags"] == "x" for r in rows)
    assert _problems(tmp_path / "store") == []


_PROP_TEXT = st.text(alphabet=st.sampled_from(["a", "Z", "\x01", "\x02", "é", "値", " ", "="]), max_size=40)


@settings(max_examples=300, deadline=None)
@given(st.lists(_PROP_TEXT, min_size=1, max_size=20))
def test_properties_map_follows_java_rules(texts):
    arr = pa.array(texts, pa.string())
    got = scan.properties_map(arr).to_pylist()
    for t, g in zip(texts, got):
        m = {}
        for k, v in g:  # duplicate names: the later one wins, as in a Java HashMap
            m[k] = v
        assert m == decode_properties(t)


_PROP_PART = st.text(alphabet=st.sampled_from(["a", "Z", "é", " ", "="]), max_size=6)
# name\x01value items joined by \x02, as brokers write them (mostly one \x01 an item: the
# fast path of _property_items), with now and then an empty name or value, a second \x01 or
# an extra \x02, which take the general path
_PROP_ITEM = st.one_of(st.tuples(_PROP_PART, _PROP_PART).map(lambda nv: f"{nv[0]}\x01{nv[1]}"),
                       _PROP_PART, st.tuples(_PROP_PART, _PROP_PART).map(lambda nv: f"{nv[0]}\x01\x01{nv[1]}"))
_PROP_ITEMS = st.lists(st.one_of(st.tuples(_PROP_PART, _PROP_PART).map(lambda nv: f"{nv[0]}\x01{nv[1]}"), _PROP_ITEM),
                       max_size=5).map("\x02".join)
_PROP_ROW = st.one_of(_PROP_ITEMS, _PROP_ITEMS.map(lambda t: t + "\x02"), _PROP_ITEMS.map(lambda t: "\x02" + t))
_PROP_PAIR = st.tuples(st.text(alphabet=st.sampled_from(["a", "Z", "é"]), min_size=1, max_size=6),
                       _PROP_PART).map(lambda nv: f"{nv[0]}\x01{nv[1]}")
_WELL_FORMED_ROW = st.lists(_PROP_PAIR, max_size=5).map(lambda items: "".join(i + "\x02" for i in items))


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.lists(_PROP_ROW, min_size=1, max_size=20), st.lists(_WELL_FORMED_ROW, min_size=1, max_size=20)))
def test_properties_map_of_item_lists_follows_java_rules(texts):
    arr = pa.array(texts, pa.string())
    got = scan.properties_map(arr).to_pylist()
    for t, g in zip(texts, got):
        m = {}
        for k, v in g:
            m[k] = v
        assert m == decode_properties(t)
    # the sliced array (a non-zero offset into its buffers) gives the same
    if len(texts) > 1:
        assert scan.properties_map(arr.slice(1)).to_pylist() == got[1:]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "TAG", "KEYSX", "UNIQ_KEZ", "tags"]),
                          st.text(alphabet=st.sampled_from(["T", "A", "G", "S", "K", "\x02"]), max_size=9)),
                max_size=30), st.integers(0, 9))
def test_items_named_each_equals_one_name_at_a_time(names, tail):
    """The shared 8-byte-word comparison finds exactly the items _items_named finds per name,
    also for items near the end of the buffer (the per-name fallback)."""
    text = "".join(f"{n}\x01v\x02" for n in names)[: max(0, len("".join(f"{n}\x01v\x02" for n in names)) - tail)]
    data = np.frombuffer(text.encode() or b"\x00", dtype=np.uint8)
    starts, lens, at = [], [], 0
    for n in names:
        if at + len(n.encode()) <= data.size:
            starts.append(at)
            lens.append(len(n.encode()))
        at += len(n.encode()) + 3
    s, ln = np.array(starts, np.int64), np.array(lens, np.int64)
    wanted = ("TAGS", "KEYS", "UNIQ_KEY", "DELAY")
    got = scan._items_named_each(data, s, ln, wanted)
    for name, hit in zip(wanted, got):
        assert hit.tolist() == scan._items_named(data, s, ln, name).tolist()


_STRING_BYTES = st.one_of(st.binary(max_size=30), st.text(max_size=20).map(lambda t: t.encode()),
                          st.sampled_from([b"\xff", b"\xc3", b"abc\xe2\x82", "é値".encode(), b"\xed\xa0\x80"]))


@settings(max_examples=300, deadline=None)
@given(st.lists(_STRING_BYTES, min_size=1, max_size=40), st.integers(0, 3))
def test_strings_flag_exactly_the_rows_that_are_not_utf8(values, gap):
    """_strings over byte ranges of one buffer: each row decoded as UTF-8, invalid rows flagged
    and decoded with replacement characters (both the short-value and the long-value paths)."""
    for scale in (1, 8):  # 8: values long enough for the binary_view path
        vals = [v * scale for v in values]
        buf = bytearray()
        starts = []
        for v in vals:
            buf += b"\x00" * gap
            starts.append(len(buf))
            buf += v
        u8 = np.frombuffer(bytes(buf) + b"\x00" * 16, dtype=np.uint8)
        arr, ok = scan._strings(u8, np.array(starts, np.int64), np.array([len(v) for v in vals], np.int64))
        want_ok = []
        for v in vals:
            try:
                v.decode("utf-8")
                want_ok.append(True)
            except UnicodeDecodeError:
                want_ok.append(False)
        assert ok.tolist() == want_ok
        assert arr.to_pylist() == [v.decode("utf-8", "replace") for v in vals]


@pytest.mark.parametrize("fixture", [CLEAN, CRASHED], ids=["clean", "crashed"])
def test_consume_queue_rows_equal_dump(fixture):
    dump = _dump(fixture, "consumequeue-dump.jsonl.gz")
    files = scan.queue_files(fixture / "store")
    rows = pa.Table.from_batches(list(scan.scan_queue_files(files))).to_pylist()
    key = lambda r: (r["topic"], r["queueId"], r["file"], r["filePos"])  # noqa: E731
    got = sorted((key(r), r["queueOffset"], r["commitLogOffset"], r["size"], r["tagsCode"]) for r in rows)
    want = sorted((key(d), d["logicalOffset"], d["commitLogOffset"], d["size"], d["tagsCode"]) for d in dump)
    assert got == want
    assert scan.infer_queue_file_size(files) == 6000
    assert list(scan.check_queue_files(files, 6000)) == []


@pytest.mark.parametrize("fixture", [CLEAN, CRASHED], ids=["clean", "crashed"])
def test_index_rows_equal_dump(fixture):
    dump = [d for d in _dump(fixture, "index-dump.jsonl.gz") if d["record"] == "ENTRY"]
    refs = scan.index_files(fixture / "store")
    rows = pa.Table.from_batches(list(scan.scan_index_files(refs))).to_pylist()
    got = sorted((r["file"], r["indexNo"], r["keyHash"], r["slot"], r["commitLogOffset"], r["timeDiff"], r["prevIndex"])
                 for r in rows)
    want = sorted((d["file"], d["indexNo"], d["keyHash"], d["slot"], d["phyOffset"], d["timeDiffSec"], d["prevIndexNo"])
                  for d in dump)
    assert got == want and all(r["reachable"] for r in rows)
    assert scan.index_geometry(84040) == (1000, 4000)
    assert scan.index_geometry(420_000_040) == (5_000_000, 20_000_000)
    assert list(scan.check_index_files(refs)) == []


def test_zeroed_index_slot_makes_its_chain_unreachable(tmp_path):
    root = copy_store(CLEAN, tmp_path)
    name = facts(CLEAN)["index"][0]["file"]
    slot = next(d["slot"] for d in _dump(CLEAN, "index-dump.jsonl.gz")
                if d["record"] == "ENTRY" and d["file"] == name and d["indexNo"] == 1)  # the first key's slot
    f = root / "index" / name
    data = bytearray(f.read_bytes())
    data[40 + slot * 4:40 + (slot + 1) * 4] = bytes(4)
    f.write_bytes(bytes(data))
    probs = [p for b in scan.check_index_files(scan.index_files(root)) for p in b.to_pylist()]
    assert [(p["file"], p["offset"]) for p in probs] == [(f"index/{name}", 40 + slot * 4)]
    rows = pa.Table.from_batches(list(scan.scan_index_files(scan.index_files(root)))).to_pylist()
    lost = [r for r in rows if not r["reachable"]]
    assert lost and all(r["slot"] == slot and r["file"] == name for r in lost)


def test_empty_and_missing_dirs(tmp_path):
    (tmp_path / "commitlog").mkdir()
    (tmp_path / "commitlog" / ("%020d" % 0)).write_bytes(bytes(8192))
    assert _rows(tmp_path) == [] and _problems(tmp_path) == []
    assert scan.queue_files(tmp_path) == [] and scan.index_files(tmp_path) == []
    shutil.rmtree(tmp_path / "commitlog")
    assert scan.plan_commitlog(tmp_path) == []


_IP = st.one_of(st.binary(min_size=4, max_size=4), st.binary(min_size=16, max_size=16))
_RECORD = st.fixed_dictionaries({
    "queue_id": st.integers(0, 2**31 - 1), "flag": st.integers(-2**31, 2**31 - 1),
    "queue_offset": st.integers(0, 2**62), "sys_flag": st.sampled_from([0, 1, 2, 0x8, 0x301]),
    "born_timestamp": st.integers(0, 2**62), "born_ip": _IP, "born_port": st.integers(0, 65535),
    "store_timestamp": st.integers(0, 2**62), "store_ip": _IP, "store_port": st.integers(0, 65535),
    "reconsume_times": st.integers(0, 16), "prepared_transaction_offset": st.integers(0, 2**40),
    "body": st.binary(max_size=300), "topic": st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=200),
    "properties": st.dictionaries(st.text("abcKEYSTAG_", min_size=1, max_size=8), st.text("xyz é\x01", min_size=1, max_size=12), max_size=5),
})


@settings(max_examples=40, deadline=None)
@given(st.lists(_RECORD, min_size=1, max_size=30), st.integers(64, 5000))
def test_reader_equals_wire_decoder(tmp_path_factory, records, split_size):
    """Any records wire.message encodes read back field for field, whatever the split size."""
    from rmqd.wire.message import create_offset_msg_id, decode_record, format_socket_address
    root = tmp_path_factory.mktemp("gen")
    (root / "commitlog").mkdir()
    blobs, pos = [], 0
    for r in records:
        b = encode_record(physical_offset=pos, **r)
        blobs.append(b)
        pos += len(b)
    data = b"".join(blobs)
    (root / "commitlog" / ("%020d" % 0)).write_bytes(data + bytes(64))
    rows = _rows(root, split_size)
    assert len(rows) == len(records)
    p = 0
    for row in rows:
        rec = decode_record(data, p)
        assert row["filePos"] == p and row["totalSize"] == rec.total_size
        assert (row["queueId"], row["flag"], row["queueOffset"], row["physicalOffset"], row["sysFlag"]) == (
            rec.queue_id, rec.flag, rec.queue_offset, rec.physical_offset, rec.sys_flag)
        assert (row["bornTimestamp"], row["storeTimestamp"], row["reconsumeTimes"], row["preparedTransactionOffset"]) == (
            rec.born_timestamp, rec.store_timestamp, rec.reconsume_times, rec.prepared_transaction_offset)
        assert row["bornHost"] == format_socket_address(rec.born_ip, rec.born_port)[1:]
        assert row["storeHost"] == format_socket_address(rec.store_ip, rec.store_port)[1:]
        assert row["offsetMsgId"] == create_offset_msg_id(rec.store_ip, rec.store_port, rec.physical_offset)
        assert row["body"] == rec.body and row["topic"] == rec.topic and row["crc_ok"]
        assert dict(row["properties"]) == rec.properties
        assert (row["tags"], row["keys"], row["uniqKey"]) == tuple(rec.properties.get(k) for k in ("TAGS", "KEYS", "UNIQ_KEY"))
        p += rec.total_size
    assert _problems(root, split_size) == []


@pytest.mark.parametrize("fixture", [CLEAN, CRASHED], ids=["clean", "crashed"])
def test_selected_columns_equal_the_full_rows(fixture):
    """A schema naming some columns (any order, any case) yields exactly those columns of the
    full rows; columns not asked for (crc, body, properties) are simply not computed."""
    from rmqd.spark.schemas import ARROW_SCHEMAS
    full = _rows(fixture / "store")
    for names in (["offsetMsgId", "QUEUEOFFSET", "topic"], ["keys"], ["crc_ok", "body", "filePos"],
                  ["properties", "bornHost", "storeHost", "magic"], list(reversed(ARROW_SCHEMAS["commitlog"].names))):
        schema = pa.schema([ARROW_SCHEMAS["commitlog"].field(n.lower() if n.isupper() else n).with_name(n)
                            if n.lower() != "queueoffset" else ARROW_SCHEMAS["commitlog"].field("queueOffset").with_name(n)
                            for n in names])
        got = [b for sp in scan.plan_commitlog(fixture / "store") for b in scan.scan_commitlog(sp, schema=schema)]
        assert all(b.schema.equals(schema) for b in got)
        rows = pa.Table.from_batches(got).to_pylist()
        canon = {n.lower(): n for n in ARROW_SCHEMAS["commitlog"].names}
        assert rows == [{n: r[canon[n.lower()]] for n in names} for r in full]


def test_record_ending_at_the_file_end(tmp_path):
    """The last record may end exactly at the end of the file (RocketMQ keeps 8 bytes for a BLANK
    record, but a truncated copy does not): its head and its properties length must still be
    read, not reported as lengths that do not add up."""
    (tmp_path / "commitlog").mkdir()
    data = b""
    for offset, port in ((0, 65535), (1, 0)):
        data += encode_record(queue_id=1, flag=0, queue_offset=offset, physical_offset=len(data), sys_flag=0,
                              born_timestamp=1, born_ip=bytes([10, 0, 0, 2]), born_port=port, store_timestamp=2,
                              store_ip=bytes([127, 0, 0, 1]), store_port=10911, reconsume_times=0,
                              prepared_transaction_offset=0, body=b"", topic="T", properties={})
    (tmp_path / "commitlog" / ("%020d" % 0)).write_bytes(data)
    rows = _rows(tmp_path)
    assert [(r["queueOffset"], r["bornHost"], r["body"]) for r in rows] == [(0, "10.0.0.2:65535", b""), (1, "10.0.0.2:0", b"")]
    assert _problems(tmp_path) == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([(127, 0, 0, 1), (10, 0, 0, 2), (255, 255, 255, 255), (0, 0, 0, 0)]),
                          st.sampled_from([0, 1, 10911, 65535, -1, -2147483648])), min_size=1, max_size=30),
       st.booleans())
def test_hosts_format_each_ip_and_port(hosts, same):
    """'a.b.c.d:port' per row, whether the batch holds one host (no sort) or several; a port is
    the stored int as Java prints it."""
    if same:
        hosts = [hosts[0]] * len(hosts)
    octets = np.array([h[0] for h in hosts], dtype=np.uint8)
    port = np.array([h[1] for h in hosts], dtype=np.int32)
    got = scan._hosts(octets, port).to_pylist()
    assert got == [f"{a}.{b}.{c}.{d}:{p}" for (a, b, c, d), p in hosts]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(min_size=16, max_size=16), max_size=20))
def test_hex_upper_of_each_row(rows):
    arr = np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(len(rows), 16)
    assert scan._hex_upper(arr).to_pylist() == [r.hex().upper() for r in rows]
