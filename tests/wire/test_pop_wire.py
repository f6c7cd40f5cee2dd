"""wire/pop.py: ExtraInfoUtil's strings, KeyBuilder's names, the BATCH_ACK body (property tests
and the exact strings 5.3.3 produced: see tests/store/test_pop_records.py for where they come from)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqd.wire.errors import WireError
from rmqd.wire.pop import (
    BatchAck, ExtraInfo, ExtraInfoError, bitset_bits, bitset_bytes, build_extra_info, decode_batch_ack_body,
    encode_batch_ack_body, msg_offset_info_item, parse_extra_info, parse_normal_topic, parse_offset_info,
    pop_retry_topic, queue_id_order_count_item, queue_offset_order_count_item, real_topic_of_kind,
    start_offset_info_item, topic_kind,
)


def test_strings_5_3_3_answered() -> None:
    # an Apache 5.3.3 pop of PopT queue 3 offset 0, and the retry message it revived
    assert build_extra_info(0, 1795739631599, 20000, 0, "PopT", "broker-a", 3, 0) == "0 1795739631599 20000 0 0 broker-a 3 0"
    assert build_extra_info(0, 1795739762515, 4000, 0, "%RETRY%PopG_PopT", "broker-a", 0, 2) == \
        "0 1795739762515 4000 0 1 broker-a 0 2"
    x = parse_extra_info("1 1795739764159 3033 999 0 broker-a 0 1")
    assert x.order and x.queue_offset == 1 and x.ck_queue_offset == 1 and x.real_topic("OrdT", "OrdG") == "OrdT"
    assert parse_extra_info("0 1 2 0 1 b 0").real_topic("T", "G") == "%RETRY%G_T"


def test_names() -> None:
    assert pop_retry_topic("T", "G") == "%RETRY%G_T" and pop_retry_topic("T", "G", True) == "%RETRY%G+T"
    assert parse_normal_topic("%RETRY%G_T", "G") == "T" and parse_normal_topic("%RETRY%G+T", "G") == "T"
    assert parse_normal_topic("T", "G") == "T"
    assert [topic_kind(t) for t in ("T", "%RETRY%G_T", "%RETRY%G+T")] == ["0", "1", "2"]
    with pytest.raises(ValueError):
        real_topic_of_kind("T", "G", "3")


def test_offset_info_items() -> None:
    assert start_offset_info_item("T", 3, 7) == "0 3 7"
    assert msg_offset_info_item("%RETRY%G_T", 0, [1, 2]) == "1 0 1,2"
    assert queue_offset_order_count_item("T", 0, 5, 2) == "0 qo0%5 2"
    assert queue_id_order_count_item("T", 0, 1) == "0 0 1"
    assert parse_offset_info("0 3 7;1 0 1,2") == {"0@3": "7", "1@0": "1,2"}
    with pytest.raises(ValueError):
        parse_offset_info("0 3 7;0 3 8")


names = st.text(st.characters(blacklist_characters=" ", blacklist_categories=("Cs",)), min_size=1, max_size=12)


@settings(deadline=None)
@given(st.integers(0, 2**62), st.integers(0, 2**62), st.integers(0, 2**62), st.integers(0, 2**31 - 1),
       st.sampled_from(["T", "%RETRY%G_T", "%RETRY%G+T"]), names, st.integers(0, 2**31 - 1),
       st.one_of(st.none(), st.integers(0, 2**62)))
def test_extra_info_round_trip(ck: int, pt: int, it: int, rq: int, topic: str, bn: str, q: int, qo: int | None) -> None:
    text = build_extra_info(ck, pt, it, rq, topic, bn, q, qo)
    x = parse_extra_info(text)
    assert x == ExtraInfo(ck, pt, it, rq, topic_kind(topic), bn, q, -1 if qo is None else qo)
    assert x.encode() == text


@settings(deadline=None)
@given(st.text(max_size=60))
def test_extra_info_never_crashes(text: str) -> None:
    try:
        parse_extra_info(text)
    except ExtraInfoError:
        pass


@settings(deadline=None)
@given(st.lists(st.integers(0, 300), max_size=40, unique=True))
def test_bitset(bits: list[int]) -> None:
    assert bitset_bits(bitset_bytes(bits)) == tuple(sorted(bits))


acks = st.builds(BatchAck, consumer_group=names, topic=names, retry=st.sampled_from(["0", "1", "2"]),
                 start_offset=st.integers(0, 2**62), queue_id=st.integers(0, 2**31 - 1),
                 revive_queue_id=st.integers(0, 999), pop_time=st.integers(0, 2**45),
                 invisible_time=st.integers(0, 2**40),
                 bits=st.lists(st.integers(0, 64), max_size=32, unique=True).map(lambda b: tuple(sorted(b))))


@settings(deadline=None)
@given(st.one_of(st.none(), names), st.lists(acks, max_size=5))
def test_batch_ack_body_round_trip(broker: str | None, items: list[BatchAck]) -> None:
    assert decode_batch_ack_body(encode_batch_ack_body(broker, items)) == (broker, items)


@settings(deadline=None)
@given(st.binary(max_size=80))
def test_batch_ack_body_never_crashes(body: bytes) -> None:
    try:
        decode_batch_ack_body(body)
    except WireError:
        pass


def test_batch_ack_body_as_the_client_writes_it() -> None:
    body = b'{"acks":[{"b":"BQ==","c":"G","it":4000,"pt":7,"q":1,"r":"0","rq":3,"so":10,"t":"T"}],"brokerName":"b"}'
    assert decode_batch_ack_body(body) == ("b", [BatchAck("G", "T", "0", 10, 1, 3, 7, 4000, (0, 2))])
