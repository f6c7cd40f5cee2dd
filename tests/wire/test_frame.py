"""wire/frame.py: both header serializations, framing, tolerance of real clients, bad input."""
from __future__ import annotations

import struct
import tracemalloc

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from rmqd.wire.codes import CURRENT_VERSION, LanguageCode, RequestCode, ResponseCode, SerializeType
from rmqd.wire.errors import FrameError, FrameTooLargeError, WireError
from rmqd.wire.frame import (
    BINARY_EXT_ENTRY, BINARY_HEADER_FIXED, DEFAULT_MAX_FRAME_LENGTH, FRAME_PREFIX, FrameDecoder, RemotingCommand,
    decode_binary_header, decode_frame, decode_frames, decode_json_header, encode_binary_header, encode_frame,
    encode_frame_parts, encode_json_header, make_request, make_response,
)

INT32 = st.integers(-(2**31), 2**31 - 1)
SHORT = st.integers(-(2**15), 2**15 - 1)
TEXT = st.text(max_size=40)
NONEMPTY = st.text(min_size=1, max_size=40)


def _commands(serialize_type: SerializeType) -> st.SearchStrategy[RemotingCommand]:
    # In the binary form code and version are shorts, and an empty remark / value reads back as
    # null and an empty map as no map, exactly as in RocketMQSerializable: avoid those there.
    binary = serialize_type == SerializeType.ROCKETMQ
    text = NONEMPTY if binary else TEXT
    return st.builds(
        RemotingCommand,
        code=SHORT if binary else INT32,
        language=st.sampled_from(list(LanguageCode)),
        version=SHORT if binary else INT32,
        opaque=INT32,
        flag=INT32,
        remark=st.none() | text,
        ext_fields=st.none() | st.dictionaries(text, text, min_size=int(binary), max_size=8),
        body=st.none() | st.binary(min_size=1, max_size=64),
        serialize_type=st.just(serialize_type),
    )


ANY_COMMAND = _commands(SerializeType.JSON) | _commands(SerializeType.ROCKETMQ)


# ---- layouts --------------------------------------------------------------------------------------


def test_struct_twins_match_the_construct_declarations() -> None:
    assert FRAME_PREFIX.sizeof() == 8
    assert BINARY_HEADER_FIXED.sizeof() == 17
    fixed = BINARY_HEADER_FIXED.build(dict(code=310, language=9, version=409, opaque=7, flag=2, remark_length=0))
    cmd = RemotingCommand(code=310, language=LanguageCode.GO, version=409, opaque=7, flag=2,
                          serialize_type=SerializeType.ROCKETMQ)
    header = encode_binary_header(cmd)
    assert header == fixed + b"\x00\x00\x00\x00"
    assert len(header) == 21  # the empty binary header
    entry = BINARY_EXT_ENTRY.build(dict(key_length=5, key=b"topic", value_length=2, value=b"T1"))
    cmd.ext_fields = {"topic": "T1"}
    assert encode_binary_header(cmd) == fixed + struct.pack(">i", len(entry)) + entry
    frame = encode_frame(cmd)
    prefix = FRAME_PREFIX.parse(frame[:8])
    assert prefix.length == len(frame) - 4
    assert prefix.header_word == (1 << 24) | (21 + len(entry))


def test_binary_code_and_version_are_signed_shorts() -> None:
    cmd = RemotingCommand(code=RequestCode.POP_MESSAGE, version=70000, serialize_type=SerializeType.ROCKETMQ)
    back = decode_frame(encode_frame(cmd))
    assert back.code == 3442  # (short) 200050, as Java writes it
    assert back.version == 70000 - 65536
    assert decode_frame(encode_frame(RemotingCommand(code=200051, serialize_type=SerializeType.ROCKETMQ))).code == 3443


def test_json_header_shape_is_fastjsons() -> None:
    cmd = RemotingCommand(code=105, opaque=3, ext_fields={"topic": "T"}, remark=None)
    assert encode_json_header(cmd) == (
        b'{"code":105,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":3,'
        b'"serializeTypeCurrentRPC":"JSON","version":409}')
    # absent vs empty extFields differ on the wire and survive a round trip
    assert b"extFields" not in encode_json_header(RemotingCommand(code=0))
    assert decode_frame(encode_frame(RemotingCommand(code=0, ext_fields={}))).ext_fields == {}
    assert decode_frame(encode_frame(RemotingCommand(code=0))).ext_fields is None


def test_json_string_escapes_follow_fastjson() -> None:
    cmd = RemotingCommand(code=0, remark='a"b\\c\n\t\x01\x0b\x1f\x7f\x85\u2028/é€😀')
    header = encode_json_header(cmd).decode("utf-8")
    assert '"remark":"a\\"b\\\\c\\n\\t\\u0001\\u000B\\u001F\\u007F\\u0085\\u2028/é€😀"' in header
    assert decode_frame(encode_frame(cmd)).remark == cmd.remark


# ---- round trips ------------------------------------------------------------------------------------


@settings(max_examples=600, deadline=None)
@given(ANY_COMMAND)
def test_round_trip_both_serializations(cmd: RemotingCommand) -> None:
    frame = encode_frame(cmd)
    back = decode_frame(frame)
    assert back == cmd
    assert encode_frame(back) == frame


@settings(max_examples=100, deadline=None)
@given(st.lists(ANY_COMMAND, min_size=1, max_size=6), st.data())
def test_stream_decoder_any_chunking(cmds: list[RemotingCommand], data: st.DataObject) -> None:
    stream = b"".join(encode_frame(c) for c in cmds)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    dec = FrameDecoder()
    got = []
    last = 0
    for cut in cuts + [len(stream)]:
        dec.feed(stream[last:cut])
        last = cut
        got.extend(dec)
    assert got == cmds
    assert dec.buffered == 0
    assert decode_frames(stream) == cmds


def test_encode_frame_parts_is_zero_copy_and_equivalent() -> None:
    records = [memoryview(bytearray(b"x" * 100)), memoryview(b"y" * 50)]
    cmd = RemotingCommand(code=0, flag=1, remark="FOUND", ext_fields={"nextBeginOffset": "2"})
    parts = encode_frame_parts(cmd, records)
    assert parts[1] is records[0] and parts[2] is records[1]
    whole = b"".join(bytes(p) for p in parts)
    cmd.body = b"x" * 100 + b"y" * 50
    assert whole == encode_frame(cmd)
    assert decode_frame(whole).body == cmd.body
    # without body_parts the command's own body is used
    assert b"".join(encode_frame_parts(cmd)) == encode_frame(cmd)
    assert len(encode_frame_parts(RemotingCommand(code=0))) == 1


def test_decode_accepts_any_buffer_and_repr_hides_bodies() -> None:
    import array

    frame = next(f for f in (encode_frame(RemotingCommand(code=11, body=b"z" * k)) for k in range(3, 7))
                 if len(f) % 4 == 0)  # a whole number of C ints
    cmd = decode_frames(bytearray(frame))[0]
    assert decode_frame(memoryview(frame)) == decode_frame(bytearray(frame)) == cmd
    assert decode_frame(memoryview(array.array("i", frame))) == cmd  # cast to bytes, not items
    cmd.body = b"z" * 3
    assert "<3 bytes>" in repr(cmd) and "zzz" not in repr(cmd)


def test_make_response_copies_opaque_and_serialize_type() -> None:
    req = RemotingCommand(code=310, language=LanguageCode.CPP, version=63, opaque=77, flag=0,
                          serialize_type=SerializeType.ROCKETMQ)
    resp = make_response(req, ResponseCode.SUCCESS, ext_fields={"queueId": "1"})
    assert (resp.opaque, resp.serialize_type, resp.language, resp.version) == (77, 1, 0, CURRENT_VERSION)
    assert resp.is_response and not resp.is_oneway
    assert decode_frame(encode_frame(resp)).ext_fields == {"queueId": "1"}
    oneway = make_request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "g"}, oneway=True, opaque=9)
    assert oneway.is_oneway and not oneway.is_response and oneway.ext("consumerGroup") == "g"
    assert oneway.ext("missing", "d") == "d" and RemotingCommand(code=1).ext("x") is None


# ---- what real clients send -----------------------------------------------------------------------


def _json_frame(header: bytes, body: bytes = b"") -> bytes:
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


def test_cpp_style_header_numbers_booleans_and_trailing_newline() -> None:
    header = (b'{"code":10,"language":"CPP","version":63,"opaque":5,"flag":0,"remark":null,'
              b'"extFields":{"queueId":3,"sysFlag":0,"batch":"1","unitMode":false,"k":true,"rate":1.50,'
              b'"AccessKey":"","nested":{"a":[1]},"nothing":null}}\n')
    cmd = decode_frame(_json_frame(header, b"body"))
    assert cmd.code == 10 and cmd.language == LanguageCode.CPP and cmd.version == 63 and cmd.opaque == 5
    assert cmd.ext_fields == {"queueId": "3", "sysFlag": "0", "batch": "1", "unitMode": "false", "k": "true",
                              "rate": "1.50", "AccessKey": "", "nested": '{"a":[1]}'}
    assert cmd.body == b"body"


def test_language_as_ordinal_unknown_names_and_unknown_fields() -> None:
    cmd = decode_frame(_json_frame(b'{"code":34,"language":9,"opaque":1,"ns":"x","bname":"b","lo":true}'))
    assert cmd.language == LanguageCode.GO and cmd.flag == 0 and cmd.version == 0
    cmd = decode_frame(_json_frame(b'{"code":34,"language":"COBOL"}'))
    assert cmd.language == LanguageCode.OTHER
    cmd = decode_frame(_json_frame(b'{"code":"34","opaque":"12"}'))
    assert (cmd.code, cmd.opaque) == (34, 12)


def test_lenient_json_header_unquoted_keys_and_single_quotes() -> None:
    cmd = decode_frame(_json_frame(b"{code:11,'extFields':{'topic':'T',queueId:1,7:true},flag:0}"))
    assert cmd.code == 11 and cmd.ext_fields == {"topic": "T", "queueId": "1", "7": "true"}
    cmd.serialize_type = SerializeType.ROCKETMQ
    assert decode_frame(encode_frame(cmd)).ext_fields == cmd.ext_fields
    cmd = decode_frame(_json_frame(b'  {"code":12}  \r\n'))
    assert cmd.code == 12


# ---- bad input -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "frame,message",
    [
        (b"", "no complete length word"),
        (b"\x00\x00", "no complete length word"),
        (struct.pack(">i", -1), "negative frame length"),
        (struct.pack(">i", 2) + b"ab", "shorter than the 4-byte header length word"),
        (struct.pack(">ii", 4, 10), "header length 10 exceeds"),
        (struct.pack(">ii", 6, 2 << 24 | 2) + b"{}", "unknown serialize type 2"),
        (struct.pack(">ii", 5, 1) + b"[", "not valid JSON"),
        (struct.pack(">ii", 6, 2) + b"[]", "not an object"),
        (struct.pack(">ii", 5, 1) + b"\xff", "not UTF-8"),
        (_json_frame(b'{"code":[1]}'), "'code' is not an integer"),
        (_json_frame(b'{"code":1,"extFields":[]}'), "'extFields' is a list"),
        (_json_frame(b'{"code":1,"language":{}}'), "'language'"),
        (_json_frame(b'{"code":1,"remark":{}}'), "'remark'"),
        (struct.pack(">ii", 8, 1 << 24 | 4) + b"\x00" * 4, "ROCKETMQ header truncated"),
        (struct.pack(">ii", 12, 10), "says 12 bytes follow"),
    ],
)
def test_bad_frames_raise_one_clear_error(frame: bytes, message: str) -> None:
    with pytest.raises(WireError, match=message):
        decode_frame(frame)


def _binary_frame(header: bytes) -> bytes:
    return struct.pack(">ii", 4 + len(header), (1 << 24) | len(header)) + header


@pytest.mark.parametrize(
    "header,message",
    [
        (struct.pack(">hbhiii", 1, 0, 0, 0, 0, 0x7FFFFFFF) + b"\x00" * 8, "remark length 2147483647"),
        (struct.pack(">hbhiii", 1, 0, 0, 0, 0, -5) + b"\x00" * 8, "remark length -5"),
        (struct.pack(">hbhiiii", 1, 0, 0, 0, 0, 0, 0x7FFFFFF0), "extFields length"),
        (struct.pack(">hbhiiii", 1, 0, 0, 0, 0, 0, 1) + b"\x00", "entry truncated"),
        (struct.pack(">hbhiiii", 1, 0, 0, 0, 0, 0, 6) + struct.pack(">hi", 100, 0), "key length 100"),
        (struct.pack(">hbhiiii", 1, 0, 0, 0, 0, 0, 7) + struct.pack(">h", 1) + b"k" + struct.pack(">i", 99), "value length 99"),
        (struct.pack(">hbhiiii", 1, 0, 0, 0, 0, 0, 7) + struct.pack(">h", -1) + b"k" + struct.pack(">i", 0), "key length -1"),
        (struct.pack(">hbhiii", 1, 0, 0, 0, 0, 2) + b"\xc3\x28" + b"\x00" * 4, "remark at offset 17 is not UTF-8"),
    ],
)
def test_bad_binary_headers(header: bytes, message: str) -> None:
    with pytest.raises(FrameError, match=message):
        decode_frame(_binary_frame(header))


def test_binary_empty_strings_read_as_null_like_java() -> None:
    ext = struct.pack(">h", 1) + b"a" + struct.pack(">i", 0) + struct.pack(">h", 1) + b"b" + struct.pack(">i", 1) + b"v"
    header = struct.pack(">hbhiiii", 1, 0, 0, 0, 0, 0, len(ext)) + ext
    cmd = decode_frame(_binary_frame(header))
    assert cmd.remark is None and cmd.ext_fields == {"b": "v"}


def test_frame_too_large_fails_before_buffering() -> None:
    dec = FrameDecoder(max_frame_length=1024)
    dec.feed(struct.pack(">i", 1021))  # 1021 + 4 > 1024
    with pytest.raises(FrameTooLargeError) as info:
        dec.next_command()
    assert info.value.length == 1025 and info.value.maximum == 1024
    with pytest.raises(FrameTooLargeError):
        decode_frame(struct.pack(">ii", DEFAULT_MAX_FRAME_LENGTH, 0))
    # exactly the maximum is allowed (LengthFieldBasedFrameDecoder counts the length word)
    ok = FrameDecoder(max_frame_length=len(encode_frame(RemotingCommand(code=1))))
    ok.feed(encode_frame(RemotingCommand(code=1)))
    assert ok.next_command() is not None


def test_decoder_never_buffers_more_than_received() -> None:
    dec = FrameDecoder()
    dec.feed(struct.pack(">ii", DEFAULT_MAX_FRAME_LENGTH - 4, 2) + b"{}")
    assert dec.next_command() is None
    assert dec.buffered == 10


def test_decoder_stays_usable_after_a_bad_frame() -> None:
    # no view of the decoder's buffer may survive an error (it would pin the bytearray)
    good = encode_frame(RemotingCommand(code=7, body=b"b" * 100))
    dec2 = FrameDecoder()
    dec2.feed(struct.pack(">ii", 5, 1) + b"[" + good[:10])
    with pytest.raises(FrameError):
        dec2.next_command()
    dec2.feed(good[10:] + good)  # resizing the buffer must still work
    assert [c.code for c in dec2] == [7, 7]


def test_decode_frames_rejects_trailing_partial_frame() -> None:
    frame = encode_frame(RemotingCommand(code=1))
    with pytest.raises(FrameError, match="incomplete frame"):
        decode_frames(frame + frame[:5])


def _valid_frames() -> list[bytes]:
    cmd = RemotingCommand(code=310, opaque=5, remark="r", ext_fields={"a": "g", "b": "T", "i": "K\x01v\x02"},
                          body=b"0123456789")
    out = [encode_frame(cmd)]
    cmd.serialize_type = SerializeType.ROCKETMQ
    out.append(encode_frame(cmd))
    return out


def _mutations(frame: bytes) -> st.SearchStrategy[bytes]:
    def apply(ops: list[tuple[int, int, int]]) -> bytes:
        b = bytearray(frame)
        for kind, pos, val in ops:
            if not b:
                break
            pos %= len(b)
            if kind == 0:
                b[pos] = val
            elif kind == 1:
                del b[pos:]
            elif kind == 2:
                b.insert(pos, val)
            else:
                del b[pos]
        return bytes(b)

    return st.lists(st.tuples(st.integers(0, 3), st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=6).map(apply)


def _only_wire_errors(buf: bytes) -> None:
    try:
        decode_frame(buf)
    except WireError:
        pass
    dec = FrameDecoder(max_frame_length=1 << 16)
    try:
        dec.feed(buf)
        for _ in dec:
            pass
    except WireError:
        pass
    for decoder in (decode_json_header, decode_binary_header):
        try:
            decoder(buf)
        except WireError:
            pass


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_random_bytes_only_raise_wire_error(buf: bytes) -> None:
    _only_wire_errors(buf)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from([0, 1]).flatmap(lambda i: _mutations(_valid_frames()[i])))
def test_mutated_frames_only_raise_wire_error(buf: bytes) -> None:
    _only_wire_errors(buf)


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
                    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                    max_leaves=20))
def test_arbitrary_json_values_as_header(value: object) -> None:
    import json

    try:
        text = json.dumps(value)
    except ValueError:
        assume(False)
        return
    for header in ('{"code":1,"extFields":' + text + "}", '{"code":1,"remark":' + text + "}",
                   '{"code":' + text + "}", '{"code":1,"language":' + text + "}", text):
        try:
            cmd = decode_json_header(header.encode())
        except WireError:
            continue
        # whatever decodes re-encodes
        decode_frame(encode_frame(cmd))


def test_deeply_nested_json_header_is_a_wire_error() -> None:
    with pytest.raises(WireError):
        decode_frame(_json_frame(b"[" * 100_000 + b"]" * 100_000))
    with pytest.raises(WireError):
        decode_frame(_json_frame(b'{"code":1,"extFields":{"a":' + b"[" * 50_000 + b"]" * 50_000 + b"}}"))


def _peak_alloc(fn, *args) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        try:
            fn(*args)
        except WireError:
            pass
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    "buf",
    [
        struct.pack(">ii", 0x00FFFFFF, 1 << 24 | 0xFFFFFF) + b"\x00" * 32,
        _binary_frame(struct.pack(">hbhiii", 1, 0, 0, 0, 0, 0x7FFFFFFF) + b"\x00" * 64),
        _binary_frame(struct.pack(">hbhiiii", 1, 0, 0, 0, 0, 0, 0x7FFFFFFF) + b"\x00" * 64),
        _binary_frame(struct.pack(">hbhiiii", 1, 0, 0, 0, 0, 0, 70) + (struct.pack(">h", 1) + b"k" + struct.pack(">i", 0x7FFFFFF0)) * 10),
        _json_frame(b'{"code":1,"extFields":{"a":"' + b"x" * 100 + b'"'),
    ],
)
def test_no_allocation_beyond_the_bytes_present(buf: bytes) -> None:
    assert _peak_alloc(decode_frame, buf) < 64 * 1024 + 8 * len(buf)
    dec = FrameDecoder()
    assert _peak_alloc(lambda b: (dec.feed(b), list(dec)), buf) < 64 * 1024 + 8 * len(buf)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([0, 1]).flatmap(lambda i: _mutations(_valid_frames()[i])))
def test_mutated_frames_allocate_in_proportion(buf: bytes) -> None:
    assert _peak_alloc(decode_frame, buf) < 64 * 1024 + 8 * len(buf)
