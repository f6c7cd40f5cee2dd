"""wire.frame.scan_plain_json_header: the compiled build's first reader of a JSON header.

It may decline any header (None: json and fastjson's rules then decide), but whatever it returns
must be exactly what json returns for the same bytes: same keys, values, types and order. The
Java client's own headers (the 4.9.8 capture) must not be declined, or the fast path is dead.
"""
from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from fixtures import CAPTURE as CAPTURE_DIR, require
from rmqd import _compiled
from rmqd.wire import frame
from rmqd.wire.frame import RemotingCommand, encode_json_header, scan_plain_json_header

CAPTURE = CAPTURE_DIR / "remoting-frames.jsonl"

# the plain-Python copy too: the build (when there is one) and the source must agree with json
_PURE = _compiled.load_pure("rmqd.wire.frame")
SCANNERS = [scan_plain_json_header, _PURE.scan_plain_json_header]


def _typed(v: Any) -> Any:
    """A value with its types spelled out (1 == True == 1.0 in Python; json keeps them apart)."""
    if isinstance(v, dict):
        return ("dict", [(k, _typed(x)) for k, x in v.items()])
    if isinstance(v, list):
        return ("list", [_typed(x) for x in v])
    return (type(v).__name__, v)


def _json(data: bytes) -> Any:
    try:
        return ("ok", _typed(json.loads(data.decode("utf-8"))))
    except (ValueError, RecursionError):
        return ("error",)


def _check(data: bytes) -> list[Any]:
    got = []
    for scan in SCANNERS:
        r = scan(data)
        if r is not None:
            assert _json(data) == ("ok", _typed(r)), data
        got.append(r)
    return got


def _capture_headers() -> list[bytes]:
    out = []
    for line in require(CAPTURE).read_text().splitlines():
        rec = json.loads(line)
        raw = bytes.fromhex(rec["rawFrameHex"])
        word = int.from_bytes(raw[4:8], "big")
        if word >> 24 == 0:
            out.append(raw[8:8 + (word & 0xFFFFFF)])
    return out


def test_the_java_clients_headers_take_the_fast_path() -> None:
    headers = _capture_headers()
    assert len(headers) > 50
    for h in headers:
        for r in _check(h):
            assert r is not None, h  # every 4.9.8 header (fastjson's output) is read by the scanner
    sends = [h for h in headers if h.startswith(b'{"code":310,')]
    assert sends and all(b"\\u0001" in h for h in sends)  # the properties' separators are escapes


def test_declines_what_json_alone_decides() -> None:
    for data in (b'{ "code":1}', b'{"code":1.0}', b'{"code":1e3}', b'{"code":01}', b'{"code":-}',
                 b'{"code":true}', b'{"code":null}', b'{"a":[1]}', b'{"a":{"b":"c"}}', b'{"code":1,}',
                 b'{"code":1}}', b'{"code":1} ', b'{"a":"\x01"}', b'{"a":"\\x"}', b'{"a":"\\ud800"}',
                 b'{"a":"\\u12"}', b'{"a":"\xff"}', b'{"a":"\xed\xa0\x80"}', b'{"extFields":{"a":1}}',
                 b'{"extFields":{"a":"b",}}', b"{'code':1}", b'{code:1}', b'[]', b'{', b'', b'{"a":"b"',
                 b'{"code":' + b"9" * 5000 + b"}"):
        assert _check(data) == [None, None], data


def test_reads_what_it_should() -> None:
    cases = {
        b"{}": {},
        b'{"extFields":{}}': {"extFields": {}},
        b'{"code":-0,"opaque":-2147483648,"big":123456789012345678901234567890}':
            {"code": 0, "opaque": -2147483648, "big": 123456789012345678901234567890},
        b'{"remark":"a\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u00e9\\u20AC","x":"\xc3\xa9"}':
            {"remark": 'a"b\\c/d\b\f\n\r\t\u00e9\u20ac', "x": "\u00e9"},
        b'{"a":1,"a":2}': {"a": 2},
    }
    for data, want in cases.items():
        for r in _check(data):
            assert r == want


_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12) | st.sampled_from(
    ["\x01", "\x02", "a\x01b\x02", '"', "\\", "\u2028", "\x7f", "\ud800", "\udfff\ud800"])
_leaf = st.integers() | _text | st.booleans() | st.none() | st.floats(allow_nan=False)
_ext = st.dictionaries(_text, _text, max_size=6)
_header = st.dictionaries(st.sampled_from(["code", "extFields", "flag", "language", "opaque", "remark", "version"])
                          | _text, _leaf | _ext | st.lists(_leaf, max_size=2), max_size=8)


@settings(max_examples=400, deadline=None)
@given(_header, st.booleans())
def test_agrees_with_json_on_generated_headers(header: dict, ascii_only: bool) -> None:
    data = json.dumps(header, separators=(",", ":"), ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    _check(data)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_text, _text, max_size=8), st.integers(-2**31, 2**31 - 1), _text | st.none())
def test_agrees_with_json_on_fastjson_output(ext: dict, opaque: int, remark: str | None) -> None:
    """What rmqd itself writes (fastjson's escapes): read, never declined unless a lone surrogate."""
    data = encode_json_header(RemotingCommand(code=310, opaque=opaque, remark=remark, ext_fields=ext))
    got = _check(data)
    assert got[0] is not None or b"\\ud" in data.lower() or b"?" in data


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_agrees_with_json_on_damaged_java_headers(data: st.DataObject) -> None:
    base = bytearray(b'{"code":310,"extFields":{"a":"G","b":"T","c":"TBW102","d":"4","e":"1","f":"0",'
                     b'"g":"1795316489378","h":"0","i":"KEYS\\u0001k1\\u0002UNIQ_KEY\\u0001C0A8\\u0002WAIT'
                     b'\\u0001true","j":"0","k":"false","m":"false","n":"broker-a"},"flag":0,"language":"JAVA",'
                     b'"opaque":5,"serializeTypeCurrentRPC":"JSON","version":409}')
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(base) - 1))
        op = data.draw(st.sampled_from(["set", "insert", "delete"]))
        if op == "delete":
            del base[i]
        else:
            b = data.draw(st.sampled_from(b'{}[]":,\\u0-.e \x01\xc3\xa9\xff9aE') | st.integers(0, 255))
            if op == "set":
                base[i] = b
            else:
                base.insert(i, b)
    _check(bytes(base))


def test_the_build_reads_json_headers_with_the_scanner() -> None:
    """decode_json_header takes the scanner only where compiled; either way the command is the same."""
    data = b'{"code":310,"extFields":{"i":"A\\u0001B"},"flag":0,"language":"JAVA","opaque":5,"version":409}'
    a, b = frame.decode_json_header(data), _PURE.decode_json_header(data)
    assert (a.code, a.ext_fields, a.opaque, a.version) == (b.code, b.ext_fields, b.opaque, b.version)
    assert a.ext_fields == {"i": "A\x01B"}
    assert frame.COMPILED == (not (frame.__file__ or "").endswith(".py"))



_ext_text = _text | st.sampled_from(["msgId", "queueId", "MSG_REGION", "0A0B0C0D00002A9F0000000000012345",
                                     "DefaultRegion", "true", "a b~!#[]", "\x7f", "\u00e9"])


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(_ext_text, _ext_text | st.integers() | st.none(), max_size=6) | st.none(),
       st.integers(-2**31, 2**31 - 1), st.sampled_from([None, "", "ok", "a\"b", "\x01"]), st.integers(0, 1))
def test_answers_written_alike_by_build_and_source(ext: Any, opaque: int, remark: Any, flag: int) -> None:
    """encode_json_header writes plain extFields itself where compiled: the same bytes as json's
    C encoder and fastjson's fix-ups (the plain-Python source's way)."""
    cmd = RemotingCommand(code=0, opaque=opaque, flag=flag, remark=remark, ext_fields=ext)
    assert frame.encode_json_header(cmd) == _PURE.encode_json_header(cmd)
    if ext is not None and all(type(v) is str for v in ext.values()):
        parts = ["x"]
        if _PURE._plain_ext_json(ext, parts):
            assert "".join(parts[1:]) == "".join(frame._json_encode_map(ext, 0))
        else:
            assert parts == ["x"]
