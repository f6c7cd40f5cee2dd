"""wire.ha: the HA byte formats and the incremental parsers, fed in arbitrary chunks."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqd.wire.ha import (
    HAProtocolError, ReportReader, Transfer, TransferReader, encode_report, encode_transfer, encode_transfer_header,
)

offsets = st.integers(min_value=0, max_value=2**63 - 1)


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    out, prev = [], 0
    for p in points + [len(data)]:
        out.append(data[prev:p])
        prev = p
    return out


def test_fixed_layouts() -> None:
    assert encode_report(0x0102030405060708) == bytes(range(1, 9))
    assert encode_transfer_header(1 << 32, 7) == b"\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x07"
    assert encode_transfer(5, b"ab") == struct.pack(">qi", 5, 2) + b"ab"


@given(st.lists(offsets, min_size=1, max_size=8), st.lists(st.integers(0, 200), max_size=6))
def test_report_reader_takes_the_newest_whole_long(reports: list[int], cuts: list[int]) -> None:
    data = b"".join(encode_report(o) for o in reports)
    reader = ReportReader()
    seen: list[int] = []
    for chunk in _chunks(data, cuts):
        got = reader.feed(chunk)
        if got is not None:
            seen.append(got)
    assert seen and seen[-1] == reports[-1]
    assert all(s in reports for s in seen)
    assert reader.pending == 0


def test_report_reader_partial_then_rest() -> None:
    r = ReportReader()
    assert r.feed(encode_report(77)[:5]) is None
    assert r.pending == 5
    assert r.feed(encode_report(77)[5:] + encode_report(99)[:3]) == 77
    assert r.feed(encode_report(99)[3:]) == 99


def test_report_reader_refuses_negative() -> None:
    with pytest.raises(HAProtocolError):
        ReportReader().feed(encode_report(-1))


@settings(max_examples=150)
@given(st.lists(st.tuples(offsets, st.binary(max_size=300)), max_size=6), st.lists(st.integers(0, 3000), max_size=8))
def test_transfer_reader_roundtrip_any_chunking(transfers: list[tuple[int, bytes]], cuts: list[int]) -> None:
    data = b"".join(encode_transfer(o, b) for o, b in transfers)
    reader = TransferReader()
    got: list[Transfer] = []
    for chunk in _chunks(data, cuts):
        got.extend(reader.feed(chunk))
    assert [(t.offset, t.body) for t in got] == transfers
    assert [t.is_heartbeat for t in got] == [not b for _, b in transfers]
    assert reader.pending == 0


@given(st.integers(min_value=-(2**31), max_value=-1))
def test_transfer_reader_refuses_negative_size(size: int) -> None:
    with pytest.raises(HAProtocolError):
        TransferReader().feed(struct.pack(">qi", 0, size))


def test_transfer_reader_refuses_oversized_body() -> None:
    with pytest.raises(HAProtocolError):
        TransferReader(max_body=10).feed(encode_transfer_header(0, 11))
