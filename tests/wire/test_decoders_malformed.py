"""Every wire decoder raises only WireError on malformed input (issue 11, item 6).

Why: the server turns a WireError into a clean RocketMQ answer (SYSTEM_ERROR + the decoder's
remark) and logs one warning line; any other exception is a bug that used to reach clients
as a Python exception repr with a traceback in the log. So each body decoder gets arbitrary
bytes, non-UTF-8 bytes, arbitrary JSON of the wrong shapes and types; each typed header gets
arbitrary extFields dicts; the property and record codecs get arbitrary text and bytes.
"""

from __future__ import annotations

import dataclasses
import inspect
import json

import pytest
from hypothesis import given, settings, strategies as st

import rmqd.wire.bodies as B
import rmqd.wire.headers as H
from rmqd.wire import fastjson
from rmqd.wire.errors import WireError
from rmqd.wire.message import decode_batch, decode_messages, decode_properties, parse_offset_msg_id

BODY_CLASSES = sorted(
    (c for c in vars(B).values()
     if inspect.isclass(c) and issubclass(c, B.Body) and c is not B.Body and dataclasses.is_dataclass(c)
     and c.from_json_obj.__func__ is not B.Body.from_json_obj.__func__),  # (encode-only bodies excluded)
    key=lambda c: c.__name__)

HEADER_CLASSES = sorted(
    (c for c in vars(H).values()
     if inspect.isclass(c) and issubclass(c, H.CommandHeader) and dataclasses.is_dataclass(c)),
    key=lambda c: c.__name__)

#: JSON values of every type, nested a little: what a hostile client can put in any field.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12)


def _field_names(cls: type) -> list[str]:
    names = [f.name for f in dataclasses.fields(cls)]
    # the nested shapes' keys too, so the wrong-typed values reach the nested decoders
    return names + ["groupName", "topic", "subscriptionDataSet", "consumerDataSet", "producerDataSet", "mqSet",
                    "queueId", "brokerAddrs", "topicConfigTable", "dataVersion", "offsetTable", "subscriptionData"]


def _shaped_objects(cls: type) -> st.SearchStrategy:
    """JSON objects with the class's own keys (and nested ones) holding values of any type."""
    return st.dictionaries(st.sampled_from(_field_names(cls)), json_values, max_size=6)


def _decode(cls: type, data: bytes) -> None:
    try:
        cls.decode(data)
    except WireError:
        pass


def test_there_are_body_and_header_classes() -> None:
    assert len(BODY_CLASSES) >= 24
    assert len(HEADER_CLASSES) >= 79


@pytest.mark.parametrize("cls", BODY_CLASSES, ids=lambda c: c.__name__)
def test_body_decoders_raise_only_wire_errors(cls: type) -> None:
    @settings(max_examples=60, deadline=None)
    @given(st.binary(max_size=64) | _shaped_objects(cls).map(lambda o: json.dumps(o).encode("utf-8"))
           | json_values.map(lambda o: json.dumps(o).encode("utf-8")))
    def check(data: bytes) -> None:
        _decode(cls, data)

    check()


@pytest.mark.parametrize("cls", BODY_CLASSES, ids=lambda c: c.__name__)
def test_body_decoders_reject_non_utf8(cls: type) -> None:
    for data in (b"\xff\xfe{}", b'{"groupName":"\xc3\x28"}', b"\x80", b'{"a":"\xed\xa0\x80"}'):
        with pytest.raises(WireError):
            cls.decode(data)


def test_heartbeat_decoder_rejects_wrong_types_cleanly() -> None:
    for text in ('{"consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"subVersion":1e999}]}]}',
                 '{"consumerDataSet":[{"subscriptionDataSet":[{"codeSet":["NaN"]}]}]}',
                 '{"consumerDataSet":7}', '{"producerDataSet":[3]}', '[]', '"x"', 'null x'):
        with pytest.raises(WireError):
            B.HeartbeatData.decode(text.encode())


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=64), st.booleans())
def test_register_broker_body_raises_only_wire_errors(data: bytes, compressed: bool) -> None:
    try:
        B.RegisterBrokerBody.decode_register(data, compressed)
    except WireError:
        pass


@pytest.mark.parametrize("cls", HEADER_CLASSES, ids=lambda c: c.__name__)
def test_typed_headers_raise_only_wire_errors(cls: type) -> None:
    keys = [f.name for f in dataclasses.fields(cls)] + ["x"]
    texts = st.text(max_size=24) | st.sampled_from(["", "-1", "2147483648", "9223372036854775808", "1e999", "NaN",
                                                    "true", "0x10", "１２", " 1", "-", "+"])

    @settings(max_examples=40, deadline=None)
    @given(st.dictionaries(st.sampled_from(keys), texts, max_size=len(keys)))
    def check(ext: dict[str, str]) -> None:
        try:
            cls.from_ext(ext)
        except WireError:
            pass

    check()


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80) | st.binary(max_size=80))
def test_fastjson_loads_raises_only_wire_errors(data: str | bytes) -> None:
    try:
        fastjson.loads(data)
    except WireError:
        pass


def test_fastjson_deep_nesting_is_a_wire_error() -> None:
    for text in ("[" * 100_000, "{\"a\":" * 100_000):
        with pytest.raises(WireError):
            fastjson.loads(text)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80) | st.text(max_size=80))
def test_message_property_and_record_codecs_raise_only_wire_errors(data: bytes | str) -> None:
    for fn in (decode_properties, parse_offset_msg_id, B.parse_properties,
               lambda d: decode_messages(d if isinstance(d, bytes) else d.encode("utf-8", "surrogatepass")),
               lambda d: decode_batch(d if isinstance(d, bytes) else d.encode("utf-8", "surrogatepass"))):
        try:
            fn(data if fn not in (parse_offset_msg_id, B.parse_properties) or isinstance(data, str)
               else data.decode("latin-1"))
        except WireError:
            pass


def test_lone_surrogate_escapes_become_question_marks_as_java_writes_them() -> None:
    """A client's "\\ud800" decodes to a Python str that nothing could encode later; Java
    keeps the char and writes '?'. rmqd decodes it as '?' (valid pairs stay one character)."""
    from rmqd.wire.frame import decode_json_header, encode_frame, make_response

    assert fastjson.loads(r'{"a\ud800":["x\udfff","\ud83d\ude00"]}') == {"a?": ["x?", "\U0001F600"]}
    assert fastjson.loads(r"{'k':'\udbff'}") == {"k": "?"}
    header = decode_json_header(rb'{"code":310,"extFields":{"i":"KEYS\u0001k\ud800"},"remark":"\udc00","opaque":1}')
    assert header.ext_fields == {"i": "KEYS\x01k?"} and header.remark == "?"
    assert B.HeartbeatData.decode(rb'{"clientID":"c\ud800"}').clientID == "c?"
    # and an encoder given one writes '?' instead of bytes no client can decode
    frame = encode_frame(make_response(header, 1, "bad \ud800 name", ext_fields={"k": "v\udfff"}))
    frame[8:].decode("utf-8")  # (after the two length prefixes: the JSON header is valid UTF-8)
    assert b"bad ? name" in frame and b"v?" in frame
    assert B.TopicList(topicList=["t\ud800"]).encode() == b'{"topicList":["t?"]}'


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a", "\\ud800", "\\udfff", "\\ud83d\\ude00", "\\u0041", '\\"', "é"]), max_size=8))
def test_decoded_json_strings_always_encode(pieces: list[str]) -> None:
    value = fastjson.loads('{"k":"' + "".join(pieces) + '"}')["k"]
    value.encode("utf-8")  # never a lone surrogate left


def test_compressed_register_body_refuses_bombs_and_truncation_cleanly() -> None:
    import zlib

    good = B.RegisterBrokerBody().encode_compressed()
    assert B.RegisterBrokerBody.decode_register(good, True) == B.RegisterBrokerBody()
    with pytest.raises(WireError, match="inflates to more than"):
        B.RegisterBrokerBody.decode_register(zlib.compress(b"\0" * (130 * 1024 * 1024), 9), True)
    for data in (good[:-3], b"xx", b""):
        with pytest.raises(WireError, match=r"bad deflate stream \((incomplete|incorrect)"):
            B.RegisterBrokerBody.decode_register(data, True)
