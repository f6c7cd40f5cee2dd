"""wire/names.py: TopicValidator.validateTopic and Validators.checkGroup, Java semantics.

The reference model below is the Java algorithm transcribed literally (a char loop over
UTF-16 code units, Character.isWhitespace, the bit map); hypothesis checks the fast
implementation against it on arbitrary text, including surrogates and Unicode spaces."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from rmqd.wire import names as N

_JAVA_WS = set("\t\n\u000b\f\r\u001c\u001d\u001e\u001f") | {
    chr(c) for c in (0x20, 0x1680, *range(0x2000, 0x2007), *range(0x2008, 0x200B), 0x2028, 0x2029, 0x205F, 0x3000)}
_ALLOWED = set("%|_-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _utf16_units(s: str) -> list[str]:
    data = s.encode("utf-16-le", "surrogatepass")
    return [data[i:i + 2].decode("utf-16-le", "surrogatepass") for i in range(0, len(data), 2)]


def java_topic(topic: str) -> str | None:
    units = _utf16_units(topic)
    if all(u in _JAVA_WS for u in units):
        return "The specified topic is blank."
    if any(u not in _ALLOWED for u in units):
        return "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(units) > 127:
        return "The specified topic is longer than topic max length."
    return None


def java_group(group: str) -> str | None:
    units = _utf16_units(group)
    if all(u in _JAVA_WS for u in units):
        return "the specified group is blank"
    if len(units) > 255:
        return "the specified group is longer than group max length 255."
    if any(u not in _ALLOWED for u in units):
        return f"the specified group[{group}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    return None


names = (st.text(alphabet=st.sampled_from(sorted(_ALLOWED)), max_size=300)
         | st.text(max_size=12)
         | st.text(alphabet=st.sampled_from(sorted(_ALLOWED) + [" ", "\n", "\x00", "\u3000", "\xa0", "é", "😀",
                                                                 "\ud800", "/", "."]), max_size=300))


def test_the_remarks_are_rocketmqs() -> None:
    assert N.topic_remark("TopicTest") is None
    assert N.topic_remark("%RETRY%cg|a-b_c") is None
    assert N.topic_remark("") == "The specified topic is blank."
    assert N.topic_remark(" \t") == "The specified topic is blank."
    assert N.topic_remark(None) == "The specified topic is blank."
    assert N.topic_remark("a/b") == "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    assert N.topic_remark("a" * 127) is None
    assert N.topic_remark("a" * 128) == "The specified topic is longer than topic max length."
    assert N.group_remark("") == "the specified group is blank"
    assert N.group_remark("g" * 255) is None
    assert N.group_remark("g" * 256) == "the specified group is longer than group max length 255."
    assert N.group_remark("../x") == "the specified group[../x] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"


def test_what_python_regex_dollar_would_let_through() -> None:
    """``re.match('^...$')`` accepts a trailing newline; Java's does not."""
    assert N.topic_remark("TopicA\n") == N.TOPIC_ILLEGAL
    assert N.group_remark("cg\n") is not None


def test_java_blank_and_length() -> None:
    assert N.topic_remark("\u3000") == N.TOPIC_BLANK  # ideographic space: Character.isWhitespace
    assert N.topic_remark("\xa0") == N.TOPIC_ILLEGAL  # no-break space is not Java whitespace
    assert N.group_remark("😀" * 128) == N.GROUP_TOO_LONG  # 256 UTF-16 units
    assert N.group_remark("é" * 200).startswith("the specified group[")


@given(st.text(alphabet=st.sampled_from([chr(i) for i in range(128)] + ["\xa0", "\u2007", "\u3000", "\x85", "é"]),
               max_size=6))
def test_java_is_blank_is_character_is_whitespace_over_every_character(text: str) -> None:
    # its ASCII shortcut (str.isspace) must agree with Character.isWhitespace char by char
    assert N.java_is_blank(text) == all(N.java_is_whitespace(ch) for ch in text)
    assert N.java_is_blank(None)


def test_consumer_group_names_its_retry_topic() -> None:
    assert N.consumer_group_remark("g" * 120) is None  # %RETRY% + 120 = 127
    remark = N.consumer_group_remark("g" * 121)
    assert remark is not None and remark.startswith("The topic[%RETRY%ggg") and "127" in remark
    assert N.consumer_group_remark("\x00") == N.group_remark("\x00")


def test_remarks_quote_huge_names_shortened() -> None:
    remark = N.group_remark("/" * 100_000)
    assert remark is not None and len(remark) < 500


@settings(max_examples=400, deadline=None)
@given(names)
def test_topic_rule_is_javas(name: str) -> None:
    assert N.topic_remark(name) == java_topic(name)
    assert N.is_valid_topic(name) == (java_topic(name) is None)


@settings(max_examples=400, deadline=None)
@given(names)
def test_group_rule_is_javas(name: str) -> None:
    expected = java_group(name)
    got = N.group_remark(name)
    if expected is not None and expected.startswith("the specified group[") and len(name) > 300:
        assert got is not None and got.startswith("the specified group[")  # the name is quoted shortened
    else:
        assert got == expected


@pytest.mark.parametrize("value", [5, 1.5, ["a"], {"a": 1}, True])
def test_non_strings_are_refused(value: object) -> None:
    assert N.topic_remark(value) is not None
    assert N.group_remark(value) is not None
