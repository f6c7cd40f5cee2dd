"""wire/message.py: golden records from real RocketMQ 4.9.8 stores, round trips, bad input."""
from __future__ import annotations

import gzip
import hashlib
import json
import struct

import pytest
from hypothesis import given, settings, strategies as st

from fixtures import CLEAN_NAME, CRASHED_NAME, FIXTURES, facts, require
from rmqd.wire.errors import WireError
from rmqd.wire.message import (
    BLANK_MAGIC_CODE, COMMIT_LOG_RECORD, MAGIC_CODE_V1, MAGIC_CODE_V2, MessageSysFlag, RecordError,
    UniqIdGenerator, calc_record_length, compress_body, create_offset_msg_id, decode_batch, decode_messages,
    decode_properties, decode_record, decompress_body, encode_batch, encode_properties, encode_record,
    iter_records, java_string_hash, parse_offset_msg_id, crc32_masked,
)

STORES = [CLEAN_NAME, CRASHED_NAME]


def _dump(name):
    with gzip.open(require(FIXTURES / name / "dump" / "commitlog-dump.jsonl.gz"), "rt") as f:
        return [json.loads(line) for line in f]


@pytest.mark.parametrize("name", STORES)
def test_golden_every_commitlog_record(name):
    files = {}
    n = 0
    for d in _dump(name):
        buf = files.setdefault(d["file"], (FIXTURES / name / "store" / "commitlog" / d["file"]).read_bytes())
        pos = d["filePos"]
        if d["record"] == "BLANK":
            assert struct.unpack_from(">iI", buf, pos) == (d["totalSize"], BLANK_MAGIC_CODE)
            with pytest.raises(RecordError, match="BLANK"):
                decode_record(buf, pos)
            continue
        if d["record"] != "MESSAGE":
            continue
        r = decode_record(buf, pos, check_crc=True, where=d["file"])
        raw = buf[pos:pos + r.total_size]
        assert r.total_size == d["totalSize"]
        assert f"0x{r.magic:08X}" == d["magic"]
        assert (r.body_crc, r.queue_id, r.flag, r.queue_offset, r.physical_offset, r.sys_flag) == (
            d["bodyCRC"], d["queueId"], d["flag"], d["queueOffset"], d["physicalOffsetField"], d["sysFlag"])
        assert (r.born_timestamp, r.store_timestamp, r.born_host, r.store_host) == (
            d["bornTimestamp"], d["storeTimestamp"], d["bornHost"], d["storeHost"])
        assert (r.reconsume_times, r.prepared_transaction_offset) == (d["reconsumeTimes"], d["preparedTransactionOffset"])
        assert r.topic == d["topic"] and r.properties == d["properties"]
        assert r.offset_msg_id == d["offsetMsgId"]
        assert hashlib.sha256(r.body).hexdigest() == d["storedBodySha256"]
        if d.get("compressed"):
            assert hashlib.sha256(r.uncompressed_body()).hexdigest() == d["uncompressedBodySha256"]
        # byte-exact re-encode, through the fast path and through the construct declaration
        assert r.encode() == raw
        assert COMMIT_LOG_RECORD.build(COMMIT_LOG_RECORD.parse(raw)) == raw
        assert calc_record_length(r.sys_flag, len(r.body), len(r.topic.encode()), len(r.properties_raw)) == r.total_size
        n += 1
    assert n == facts(FIXTURES / name)["commitlog"]["messages"] > 2000  # as RocketMQ's MessageDecoder counted


def test_iter_records_walks_a_file_to_the_blank():
    buf = require(FIXTURES / STORES[0] / "store" / "commitlog" / "00000000000000000000").read_bytes()
    items = list(iter_records(buf))
    blank = facts(FIXTURES / STORES[0])["commitlog"]["blanks"][0]
    assert blank["file"] == "00000000000000000000"
    assert items[-1] == (blank["filePos"], None)
    assert all(r is not None for _, r in items[:-1])


def test_compressed_fixture_bodies_inflate():
    seen = 0
    for d in _dump(STORES[0]):
        if d["record"] == "MESSAGE" and d["sysFlag"] & MessageSysFlag.COMPRESSED_FLAG:
            buf = (FIXTURES / STORES[0] / "store" / "commitlog" / d["file"]).read_bytes()
            r = decode_record(buf, d["filePos"])
            assert r.sys_flag & MessageSysFlag.COMPRESSION_TYPE_COMPARATOR == MessageSysFlag.COMPRESSION_ZLIB_TYPE
            body = r.uncompressed_body()
            assert hashlib.sha256(body).hexdigest() == d["uncompressedBodySha256"]
            seen += 1
    assert seen >= 3


def test_java_string_hash_known_values():
    assert java_string_hash("") == 0
    assert java_string_hash("TagA") == 2598919
    assert java_string_hash("polygenelubricants") == -2147483648
    assert java_string_hash("\U0001F600") == (0xD83D * 31 + 0xDE00)


def test_properties_java_semantics():
    assert encode_properties({"A": "1", "B": None, "C": "3"}) == "A\x011\x02C\x013"
    assert decode_properties("A\x011\x02C\x013") == {"A": "1", "C": "3"}
    assert decode_properties("\x02\x02A\x01\x02\x01x\x02KK\x01v") == {"KK": "v"}
    with pytest.raises(WireError):
        decode_properties(b"\xff\xfe")


def test_offset_msg_id_round_trip_and_errors():
    ip = bytes([127, 0, 0, 1])
    mid = create_offset_msg_id(ip, 10921, 193)
    assert mid == "7F00000100002AA900000000000000C1"
    assert parse_offset_msg_id(mid) == (ip, 10921, 193)
    v6 = bytes(range(16))
    assert parse_offset_msg_id(create_offset_msg_id(v6, 1, 2)) == (v6, 1, 2)
    for bad in ("XYZ", "7F00000100002AA9000000000000ZZC1"):
        with pytest.raises(WireError):
            parse_offset_msg_id(bad)


@given(st.one_of(st.binary(min_size=4, max_size=4), st.binary(min_size=16, max_size=16)),
       st.integers(-2**31, 2**31 - 1), st.integers(-2**63, 2**63 - 1), st.booleans())
def test_offset_msg_id_is_the_hex_of_address_port_and_offset(ip, port, offset, mutable):
    """The per-address prefix kept by create_offset_msg_id changes no id: every id is the upper
    hex of ip + int32 port + int64 offset, for a bytearray address too."""
    expect = (ip + struct.pack(">iq", port, offset)).hex().upper()
    addr = bytearray(ip) if mutable else ip
    assert create_offset_msg_id(addr, port, offset) == expect
    assert create_offset_msg_id(addr, port, offset) == expect  # the cached prefix the second time


def test_uniq_id_layout():
    g = UniqIdGenerator(ip="192.0.2.2", pid=0x49A4, loader_hash=0x5FFD2B27)
    a, b = g.next_id(), g.next_id()
    assert len(a) == 32 and a.startswith("C000020249A45FFD2B27")
    assert int(b[-4:], 16) == int(a[-4:], 16) + 1
    assert a == a.upper()


ips = st.one_of(st.binary(min_size=4, max_size=4), st.binary(min_size=16, max_size=16))
i32 = st.integers(-2**31, 2**31 - 1)
i64 = st.integers(-2**63, 2**63 - 1)
props = st.dictionaries(st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1, max_size=8),
                        st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1, max_size=20),
                        max_size=5)


@settings(max_examples=150, deadline=None)
@given(qid=i32, flag=i32, qoff=i64, phy=i64, sysflag=st.integers(0, 0xFFF), bts=i64, bip=ips, bport=i32, sts=i64,
       sip=ips, sport=i32, rec=i32, pto=i64, body=st.binary(max_size=300),
       topic=st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=200), p=props)
def test_record_round_trip_matches_construct(qid, flag, qoff, phy, sysflag, bts, bip, bport, sts, sip, sport, rec,
                                             pto, body, topic, p):
    raw = encode_record(queue_id=qid, flag=flag, queue_offset=qoff, physical_offset=phy, sys_flag=sysflag,
                        born_timestamp=bts, born_ip=bip, born_port=bport, store_timestamp=sts, store_ip=sip,
                        store_port=sport, reconsume_times=rec, prepared_transaction_offset=pto, body=body,
                        topic=topic, properties=p)
    r = decode_record(raw, 0, check_crc=True)
    assert (r.queue_id, r.flag, r.queue_offset, r.physical_offset, r.born_ip, r.store_ip, r.body, r.topic) == (
        qid, flag, qoff, phy, bip, sip, body, topic)
    assert r.properties == p and r.total_size == len(raw)
    assert r.magic == (MAGIC_CODE_V2 if len(topic) > 127 else MAGIC_CODE_V1)
    assert COMMIT_LOG_RECORD.build(COMMIT_LOG_RECORD.parse(raw)) == raw
    assert decode_messages(raw + raw)[1].encode() == raw


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200), cut=st.integers(0, 200), flip=st.integers(0, 10_000))
def test_mutated_records_raise_only_wire_errors(data, cut, flip):
    base = bytearray(encode_record(queue_id=1, flag=0, queue_offset=2, physical_offset=3, sys_flag=0, born_timestamp=4,
                                   born_ip=b"\1\2\3\4", born_port=5, store_timestamp=6, store_ip=b"\1\2\3\4",
                                   store_port=7, reconsume_times=0, prepared_transaction_offset=0, body=data,
                                   topic="T", properties={"TAGS": "x"}))
    base[flip % len(base)] ^= 0xFF
    for buf in (bytes(base), bytes(base[:cut]), data):
        try:
            decode_record(buf, 0, check_crc=True)
        except WireError as e:
            assert "offset 0" in str(e)
        try:
            decode_batch(buf)
        except WireError:
            pass


def test_corrupt_record_reports_where():
    raw = bytearray(encode_record(queue_id=0, flag=0, queue_offset=0, physical_offset=0, sys_flag=0, born_timestamp=0,
                                  born_ip=b"\0" * 4, born_port=0, store_timestamp=0, store_ip=b"\0" * 4, store_port=0,
                                  reconsume_times=0, prepared_transaction_offset=0, body=b"abc", topic="T", properties={}))
    raw[-6] ^= 1  # inside the body
    buf = bytes(100) + bytes(raw)
    with pytest.raises(RecordError, match=r"00000000000000000000: offset 100: body CRC mismatch"):
        decode_record(buf, 100, check_crc=True, where="00000000000000000000")
    with pytest.raises(RecordError, match="bad magic"):
        decode_record(bytes(16), 0)


@settings(max_examples=150, deadline=None)
@given(items=st.lists(st.tuples(i32, st.binary(max_size=100), props), max_size=6))
def test_batch_round_trip(items):
    raw = encode_batch(items)
    back = decode_batch(raw)
    assert [(b.flag, b.body, b.properties) for b in back] == [(f, b, p) for f, b, p in items]


def test_batch_truncated_is_reported():
    raw = encode_batch([(0, b"hello", {"a": "b"})])
    with pytest.raises(RecordError, match="batch body"):
        decode_batch(raw[:-1])


def test_compression_helpers():
    body = b"x" * 5000
    z = compress_body(body)
    assert decompress_body(z, MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.COMPRESSION_ZLIB_TYPE) == body
    assert decompress_body(body, 0) is body
    with pytest.raises(WireError, match="LZ4"):
        decompress_body(z, MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.COMPRESSION_LZ4_TYPE)
    with pytest.raises(WireError):
        decompress_body(b"not zlib", MessageSysFlag.COMPRESSED_FLAG)
    assert crc32_masked(b"x") == 215750275


@pytest.mark.parametrize("name", STORES)
def test_java_hashmap_property_order_reproduces_real_records(name):
    """A RocketMQ broker serializes its HashMap: rmqd writes the same order, byte for byte."""
    from rmqd.wire.message import encode_properties_java
    files = {}
    checked = 0
    for d in _dump(name):
        if d["record"] != "MESSAGE":
            continue
        buf = files.setdefault(d["file"], (FIXTURES / name / "store" / "commitlog" / d["file"]).read_bytes())
        r = decode_record(buf, d["filePos"])
        if r.properties_raw.count(b"\x02") + 1 != len(r.properties):
            continue  # batch records: the message's map followed by the batch's map (duplicate keys)
        assert encode_properties_java(r.properties).encode() == r.properties_raw
        checked += 1
    assert checked >= 2000


@settings(max_examples=200, deadline=None)
@given(p=props)
def test_properties_round_trip_and_java_order_is_a_permutation(p):
    from rmqd.wire.message import encode_properties_java, java_hashmap_order
    assert decode_properties(encode_properties(p)) == p
    assert decode_properties(encode_properties_java(p)) == p
    assert sorted(java_hashmap_order(p)) == sorted(p)


@settings(max_examples=200, deadline=None)
@given(ip=ips, port=i32, off=i64)
def test_offset_msg_id_property(ip, port, off):
    mid = create_offset_msg_id(ip, port, off)
    assert len(mid) == (32 if len(ip) == 4 else 56) and mid == mid.upper()
    assert parse_offset_msg_id(mid) == (ip, port, off)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=400))
def test_random_pull_bodies_raise_only_wire_errors(data):
    try:
        decode_messages(data)
    except WireError:
        pass


def test_batch_item_construct_declaration_matches_fast_codec():
    from rmqd.wire.message import BATCH_ITEM
    raw = encode_batch([(7, b"body", {"KEYS": "k"})])
    item = BATCH_ITEM.parse(raw)
    assert (item.flag, item.body, item.properties) == (7, b"body", b"KEYS\x01k")
    assert BATCH_ITEM.build(item) == raw


def test_stored_properties_that_are_not_utf8_read_as_java_reads_them():
    """A batch's inner properties are stored raw (as 4.9.8 does); readers decode them with
    replacement characters like Java's new String(bytes, UTF_8) (H3's F1)."""
    from rmqd.wire.message import decode_record, encode_record
    raw = encode_record(queue_id=0, flag=0, queue_offset=0, physical_offset=0, sys_flag=0, born_timestamp=1,
                        born_ip=b"\x7f\x00\x00\x01", born_port=1, store_timestamp=2, store_ip=b"\x7f\x00\x00\x01",
                        store_port=2, reconsume_times=0, prepared_transaction_offset=0, body=b"b", topic="T",
                        properties=b"KEYS\x01\xdc\xd8x\x02UNIQ_KEY\x01ABC\x02")
    rec = decode_record(raw, 0)
    assert rec.properties == {"KEYS": "\ufffd\ufffdx", "UNIQ_KEY": "ABC"}
    assert rec.body == b"b"
