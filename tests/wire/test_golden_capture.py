"""Golden bytes: every frame a real 4.9.8 name server, broker and Java client exchanged.

Each frame is decoded and re-encoded byte for byte (fastjson field order, extFields in the
order of the frame), and every typed header re-creates its extFields in the order the Java
HashMap wrote them.
"""
from __future__ import annotations

import dataclasses

import json
import random
import pytest

from fixtures import CAPTURE, facts, require
from rmqd.wire import fastjson
from rmqd.wire.codes import CURRENT_VERSION, LanguageCode, RequestCode, SerializeType
from rmqd.wire.frame import FrameDecoder, RemotingCommand, decode_frame, encode_frame, encode_frame_parts
from rmqd.wire.headers import REQUEST_HEADERS, RESPONSE_HEADERS, java_hashmap_order



def _frames() -> list[dict]:
    with open(require(CAPTURE / "remoting-frames.jsonl")) as f:
        return [json.loads(line) for line in f]


FRAMES = _frames()


def _answered_codes() -> list[int | None]:
    """Per frame, from the capture's own JSON header fields (not rmqd's decoder): the request's
    code for a request, the code of the request it answers for a response."""
    asked: dict[tuple[str, int], int] = {}
    out: list[int | None] = []
    for f in FRAMES:
        h = f["header"]
        if h["flag"] & 1:
            out.append(asked.get((f["dst"] + ">" + f["src"], h["opaque"])))
        else:
            asked[(f["src"] + ">" + f["dst"], h["opaque"])] = h["code"]
            out.append(h["code"])
    return out


def test_capture_is_present_and_complete() -> None:
    assert len(FRAMES) == facts(CAPTURE)["frames"] > 50
    for i, frame in enumerate(FRAMES):
        raw = bytes.fromhex(frame["rawFrameHex"])
        assert len(raw) == frame["frameLength"] + 4, i


@pytest.mark.parametrize("index", range(len(FRAMES)))
def test_frame_decodes_and_reencodes_byte_for_byte(index: int) -> None:
    frame = FRAMES[index]
    raw = bytes.fromhex(frame["rawFrameHex"])
    cmd = decode_frame(raw)
    assert cmd.serialize_type == frame["serializeType"] == SerializeType.JSON
    header = frame["header"]
    if isinstance(header, dict):
        assert cmd.code == header["code"]
        assert cmd.opaque == header["opaque"]
        assert cmd.flag == header["flag"]
        assert cmd.version == header["version"]
        assert LanguageCode(cmd.language).name == header["language"]
        assert cmd.remark == header.get("remark")
        assert cmd.ext_fields == header.get("extFields")
    assert (cmd.body or b"") == bytes.fromhex(frame["bodyHex"] or "")
    assert len(cmd.body or b"") == frame["bodyLength"]
    assert encode_frame(cmd) == raw
    assert b"".join(encode_frame_parts(cmd)) == raw


@pytest.mark.parametrize("index", range(len(FRAMES)))
def test_frame_survives_the_binary_serialization(index: int) -> None:
    cmd = decode_frame(bytes.fromhex(FRAMES[index]["rawFrameHex"]))
    binary = RemotingCommand(**{f.name: getattr(cmd, f.name) for f in dataclasses.fields(RemotingCommand)})
    binary.serialize_type = SerializeType.ROCKETMQ
    back = decode_frame(encode_frame(binary))
    assert back.serialize_type == SerializeType.ROCKETMQ
    # the binary form has no "empty map": {} reads back as None, as in RocketMQSerializable
    assert (back.ext_fields or None) == (cmd.ext_fields or None)
    back.ext_fields = cmd.ext_fields
    back.serialize_type = SerializeType.JSON
    assert encode_frame(back) == bytes.fromhex(FRAMES[index]["rawFrameHex"])


def test_stream_decoding_per_connection_direction_with_random_chunks() -> None:
    streams: dict[tuple[str, str], bytearray] = {}
    counts: dict[tuple[str, str], int] = {}
    for frame in FRAMES:
        key = (frame["src"], frame["dst"])
        streams.setdefault(key, bytearray()).extend(bytes.fromhex(frame["rawFrameHex"]))
        counts[key] = counts.get(key, 0) + 1
    rng = random.Random(498)
    for key, stream in streams.items():
        dec = FrameDecoder()
        got = []
        pos = 0
        while pos < len(stream):
            step = rng.randint(1, 700)
            dec.feed(bytes(stream[pos : pos + step]))
            pos += step
            got.extend(dec)
        assert len(got) == counts[key], key
        assert b"".join(encode_frame(c) for c in got) == bytes(stream)
        assert dec.buffered == 0


def test_typed_headers_rebuild_the_java_extfields_in_order() -> None:
    request_code: dict[tuple[str, int], int] = {}
    checked = 0
    for frame in FRAMES:
        cmd = decode_frame(bytes.fromhex(frame["rawFrameHex"]))
        if not cmd.is_response:
            request_code[(frame["src"] + ">" + frame["dst"], cmd.opaque)] = cmd.code
            cls = REQUEST_HEADERS.get(cmd.code)
        else:
            code = request_code.get((frame["dst"] + ">" + frame["src"], cmd.opaque))
            cls = RESPONSE_HEADERS.get(code) if cmd.code == 0 else None
        if cls is None or cmd.ext_fields is None:
            continue
        header = cls.from_ext(cmd.ext_fields)
        extra = {k: v for k, v in cmd.ext_fields.items() if k not in header.__dataclass_fields__}
        assert list(header.to_ext(extra).items()) == list(cmd.ext_fields.items()), (cls.__name__, frame["time"])
        checked += 1
    # sends, pulls, offsets, routes, registrations, client lists and unregistrations, and the
    # answers with header fields: every one of them has its typed header
    typed = {RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE, RequestCode.PULL_MESSAGE,
             RequestCode.QUERY_CONSUMER_OFFSET, RequestCode.UPDATE_CONSUMER_OFFSET, RequestCode.GET_ROUTEINFO_BY_TOPIC,
             RequestCode.REGISTER_BROKER, RequestCode.GET_CONSUMER_LIST_BY_GROUP, RequestCode.UNREGISTER_CLIENT,
             RequestCode.NOTIFY_CONSUMER_IDS_CHANGED}
    answered = {RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE, RequestCode.PULL_MESSAGE,
                RequestCode.QUERY_CONSUMER_OFFSET, RequestCode.REGISTER_BROKER}
    want = sum(1 for f, code in zip(FRAMES, _answered_codes())
               if "extFields" in f["header"] and (code in typed if not f["header"]["flag"] & 1
                                                  else code in answered and f["header"]["code"] == 0))
    assert checked == want > 40


def test_extfields_orders_are_java_hashmap_orders() -> None:
    differing_codes = set()
    for frame in FRAMES:
        cmd = decode_frame(bytes.fromhex(frame["rawFrameHex"]))
        if not cmd.ext_fields:
            continue
        assert list(java_hashmap_order(cmd.ext_fields)) == list(cmd.ext_fields)
        alphabetical = dict(sorted(cmd.ext_fields.items()))
        if list(java_hashmap_order(alphabetical)) != list(cmd.ext_fields):
            differing_codes.add(cmd.code)
    # only pull and register-broker requests have two keys in one bucket (e.g. commitOffset and
    # bname): their order is the insertion order, which java_field_order reproduces (see the
    # typed-header test)
    assert differing_codes == {RequestCode.PULL_MESSAGE, RequestCode.REGISTER_BROKER}


def test_send_v2_request_and_response_from_the_capture() -> None:
    sends = [decode_frame(bytes.fromhex(f["rawFrameHex"])) for f in FRAMES]
    v2 = next(c for c in sends if c.code == RequestCode.SEND_MESSAGE_V2)
    header = REQUEST_HEADERS[v2.code].from_ext(v2.ext_fields)
    v1 = header.to_v1()
    assert (v1.producerGroup, v1.topic, v1.defaultTopic, v1.defaultTopicQueueNums) == (
        "WireProducerGroup", "WireTopic", "TBW102", 4)
    assert v1.bname == "broker-a" and v1.batch is False and v1.unitMode is False
    first = facts(CAPTURE)["session"]["sends"][0]["msgId"]
    assert f"UNIQ_KEY\x01{first}" in v1.properties
    responses = [c for c in sends if c.is_response and c.opaque == v2.opaque]
    assert responses and responses[0].version == CURRENT_VERSION


def test_json_bodies_are_fastjson_byte_for_byte() -> None:
    checked = 0
    for frame in FRAMES:
        body = bytes.fromhex(frame["bodyHex"] or "")
        if body[:1] != b"{":
            continue
        text = body.decode()
        value = fastjson.loads(text)
        # the 4.9.8 name server answers version-409 clients BrowserCompatible: "0" keys quoted
        assert fastjson.dumps(value) == text
        checked += 1
    # routes, heartbeats, registrations, consumer lists: every JSON body the capture has
    json_bodies = {RequestCode.GET_ROUTEINFO_BY_TOPIC, RequestCode.HEART_BEAT, RequestCode.REGISTER_BROKER,
                   RequestCode.GET_CONSUMER_LIST_BY_GROUP}
    want = sum(1 for f, code in zip(FRAMES, _answered_codes()) if f["bodyLength"] and code in json_bodies
               and not (code == RequestCode.GET_ROUTEINFO_BY_TOPIC and not f["header"]["flag"] & 1))
    assert checked == want > 10
