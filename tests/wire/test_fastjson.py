"""wire/fastjson.py: fastjson 1.2.x shapes, byte for byte against real RocketMQ files."""
from __future__ import annotations

import dataclasses
import json
from enum import Enum
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from fixtures import CLEAN, CRASHED, require
from rmqd.wire import fastjson
from rmqd.wire.errors import JsonError, WireError

CONFIG_FILES = sorted(p for store in (CLEAN, CRASHED) for p in require(store / "store" / "config").glob("*.json*"))


def test_config_fixtures_exist() -> None:
    names = {p.name for p in CONFIG_FILES}
    assert {"topics.json", "consumerOffset.json", "delayOffset.json", "subscriptionGroup.json"} <= names


@pytest.mark.parametrize("path", CONFIG_FILES, ids=lambda p: f"{p.parents[2].name}/{p.name}")
def test_config_files_round_trip_pretty_byte_for_byte(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    value = fastjson.loads(text)
    assert fastjson.dumps(value, pretty=True) == text


def test_integer_keys_unquoted_and_pretty_layout() -> None:
    value = {"offsetTable": {"t@g": {0: 4, 1: 3}}, "empty": {}, "list": [1, {"a": None}], "n": None}
    assert fastjson.dumps(value) == '{"offsetTable":{"t@g":{0:4,1:3}},"empty":{},"list":[1,{}]}'
    assert fastjson.dumps(value, pretty=True) == (
        '{\n\t"offsetTable":{\n\t\t"t@g":{0:4,1:3\n\t\t}\n\t},\n\t"empty":{},\n\t"list":[\n\t\t1,\n\t\t{\n\t\t}\n\t]\n}')
    assert fastjson.loads('{"offsetTable":{"t@g":{0:4,1:3\n\t\t}\n\t}}') == {"offsetTable": {"t@g": {0: 4, 1: 3}}}


def test_browser_compatible_quotes_keys_and_escapes_non_ascii() -> None:
    value = {"brokerAddrs": {0: "127.0.0.1:10911"}, "s": "é/€\x01😀\x7f"}
    assert fastjson.dumps(value, browser_compatible=True) == (
        '{"brokerAddrs":{"0":"127.0.0.1:10911"},"s":"\\u00E9\\/\\u20AC\\u0001\\uD83D\\uDE00\\u007F"}')
    assert fastjson.dumps(value) == '{"brokerAddrs":{0:"127.0.0.1:10911"},"s":"é/€\\u0001😀\\u007F"}'


@pytest.mark.parametrize(
    "value,text",
    [
        ("\b\f\n\r\t\"\\", '"\\b\\f\\n\\r\\t\\"\\\\"'),
        ("\x00\x0b\x0e\x1a\x1f", '"\\u0000\\u000B\\u000E\\u001A\\u001F"'),
        ("\x80\x9f\xa0", '"\\u0080\\u009F\xa0"'),
        ("\u2028\u2029", '"\\u2028\\u2029"'),
        ("\\u001a", '"\\\\u001a"'),  # a literal backslash-u stays as it is
        (1.0, "1.0"), (1e7, "1.0E7"), (1.5e-4, "1.5E-4"), (123.25, "123.25"), (-0.0, "-0.0"), (float("nan"), "null"),
        (True, "true"), (None, "null"), (2**63 - 1, "9223372036854775807"), (b"\x00\xff", '"AP8="'),
        ({3, 1}, "[1,3]"), ((1, 2), "[1,2]"), ([], "[]"),
    ],
)
def test_scalar_and_string_shapes(value: object, text: str) -> None:
    assert fastjson.dumps(value) == text


class Kind(Enum):
    CONSUME_PASSIVELY = 1


@dataclasses.dataclass
class Bean:
    zeta: int
    alpha: str | None
    kind: Kind
    nested: dict


def test_dataclasses_are_beans_alphabetical_without_nulls() -> None:
    bean = Bean(zeta=1, alpha=None, kind=Kind.CONSUME_PASSIVELY, nested={0: "x"})
    assert fastjson.dumps(bean) == '{"kind":"CONSUME_PASSIVELY","nested":{0:"x"},"zeta":1}'
    assert fastjson.dumps(bean, pretty=True) == '{\n\t"kind":"CONSUME_PASSIVELY",\n\t"nested":{0:"x"\n\t},\n\t"zeta":1\n}'


def test_unsupported_objects_are_a_wire_error() -> None:
    with pytest.raises(WireError):
        fastjson.dumps(object())
    nested: list = []
    cur = nested
    for _ in range(400):
        cur.append([])
        cur = cur[0]
    with pytest.raises(JsonError):
        fastjson.dumps(nested)


@pytest.mark.parametrize(
    "text,value",
    [
        ('{0:"127.0.0.1:10911"}', {0: "127.0.0.1:10911"}),
        ("{'a':'b\\'c',b:[1,2,],c:{},}", {"a": "b'c", "b": [1, 2], "c": {}}),
        ('{-1:1.5e3, "k" : true , n:null}', {-1: 1500.0, "k": True, "n": None}),
        ("  [ ]  ", []),
        ('"x"', "x"),
        ('{"a":"\\u00e9\\n"}', {"a": "é\n"}),
        (b'\xef\xbb\xbf{"a":1}', {"a": 1}),
    ],
)
def test_loads_is_lenient_like_fastjson(text: str | bytes, value: object) -> None:
    assert fastjson.loads(text) == value


@pytest.mark.parametrize(
    "text",
    ["", "{", "{a}", "{'a':}", "[1,,2]", "tru", "NaN", "{\"a\":1}}", '"\\x"', "'abc", "1" * 5000, b"\xff",
     "[" * 5000 + "]" * 5000, "{0:1 2}", "@"],
)
def test_loads_rejects_bad_text_with_json_error(text: str | bytes) -> None:
    with pytest.raises(JsonError):
        fastjson.loads(text)


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=12)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda c: st.lists(c, max_size=4)
    | st.dictionaries(st.text(max_size=8) | st.integers(-(2**31), 2**31 - 1), c, max_size=4),
    max_leaves=25,
)


def _drop_nulls_in_maps(v: object) -> object:
    if isinstance(v, dict):
        return {k: _drop_nulls_in_maps(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_drop_nulls_in_maps(x) for x in v]
    return v


@settings(max_examples=300, deadline=None)
@given(JSONISH, st.booleans())
def test_dumps_loads_round_trip(value: object, pretty: bool) -> None:
    text = fastjson.dumps(value, pretty=pretty)
    assert fastjson.loads(text) == _drop_nulls_in_maps(value)
    browser = fastjson.dumps(value, browser_compatible=True)
    assert browser.isascii()
    # BrowserCompatible output is standard JSON (integer keys become strings)
    json.loads(browser)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60) | st.binary(max_size=60))
def test_loads_random_text_only_raises_json_error(text: str | bytes) -> None:
    try:
        fastjson.loads(text)
    except JsonError:
        pass


@settings(max_examples=200, deadline=None)
@given(JSONISH, st.data())
def test_loads_mutated_fastjson_only_raises_json_error(value: object, data: st.DataObject) -> None:
    text = fastjson.dumps(value)
    if not text:
        return
    pos = data.draw(st.integers(0, len(text) - 1))
    ch = data.draw(st.sampled_from(list("{}[]:,'\"\\0aZ- \n")))
    mutated = text[:pos] + ch + text[pos + data.draw(st.integers(0, 2)):]
    try:
        fastjson.loads(mutated)
    except JsonError:
        pass
