"""processors/grpc_convert.py and grpc_common.py's checks against the rules they shortcut: the
properties a send hands the broker decoded must be the map the proxy's text would decode to,
and the control-character check must be Character.isISOControl over every character."""

from __future__ import annotations

from hypothesis import given, strategies as st

from rmqd.processors.grpc_common import contains_control, java_iso_control, status
from rmqd.processors.grpc_convert import ack_ok_response, as_broker_reads, send_ok_response
from rmqd.wire.rocketmq_v2 import Code, pb
from rmqd.wire.message import decode_properties, encode_properties

# names and values that hit the separators, empty strings and the ISO control ranges
_TEXT = st.text(alphabet=st.sampled_from(["a", "b", "Z", "0", " ", "\x01", "\x02", "\x00", "\x1f", "\x7f", "\x9f",
                                          "\xa0", "é", "中"]), max_size=6)


@given(st.dictionaries(_TEXT, _TEXT, max_size=8))
def test_as_broker_reads_is_the_text_round_trip(props: dict[str, str]) -> None:
    expected = decode_properties(encode_properties(props))
    got = as_broker_reads(props)
    assert got == expected
    assert list(got) == list(expected)  # the order decides the stored HashMap layout's input


def test_as_broker_reads_keeps_a_clean_map_as_it_is() -> None:
    props = {"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "01AB", "color": "red"}
    assert as_broker_reads(props) is props
    # an empty value, or a separator in a value, is what the text would lose or split
    assert as_broker_reads({"a": "", "b": "1"}) == {"b": "1"}
    assert as_broker_reads({"t": "x\x02y\x01z"}) == {"t": "x", "y": "z"}
    assert as_broker_reads({"t": "x\x01y"}) == {"t": "x\x01y"}


@given(st.text(max_size=40))
def test_contains_control_is_java_iso_control_over_every_character(text: str) -> None:
    assert contains_control(text) == any(java_iso_control(c) for c in text)


def test_contains_control_bounds() -> None:
    for ch in ("\x00", "\x1f", "\x7f", "\x9f"):
        assert contains_control(f"a{ch}b")
    for ch in ("\x20", "\x7e", "\xa0", "\u2028"):
        assert not contains_control(f"a{ch}b")


@given(st.text(max_size=80), st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1))
def test_the_common_send_answer_is_the_bytes_upb_writes(message_id: str, offset: int) -> None:
    """send_ok_response writes exactly what building and serializing the upb messages writes
    (any message id text, offsets of the whole int64 range, 0 left out as proto3 does)."""
    expected = pb.SendMessageResponse(status=status(Code.OK))
    expected.entries.add(status=status(Code.OK), message_id=message_id, transaction_id=message_id, offset=offset)
    assert send_ok_response(message_id, offset) == expected.SerializeToString()
    parsed = pb.SendMessageResponse.FromString(send_ok_response(message_id, offset))
    assert parsed.entries[0].message_id == message_id and parsed.entries[0].offset == offset


@given(st.lists(st.tuples(st.text(max_size=40), st.text(max_size=300)), max_size=4))
def test_the_common_ack_answer_is_the_bytes_upb_writes(entries: list[tuple[str, str]]) -> None:
    """ack_ok_response writes what the upb AckMessageResponse of those entries, all OK, writes
    (empty ids and handles left out as proto3 does, handles longer than one length byte)."""
    expected = pb.AckMessageResponse(status=status(Code.OK))
    for message_id, handle in entries:
        expected.entries.add(message_id=message_id, receipt_handle=handle, status=status(Code.OK))
    assert ack_ok_response(entries) == expected.SerializeToString()
