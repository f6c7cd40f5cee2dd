"""processors.send.send_header_from_v2: the send path's reader of SEND_MESSAGE_V2's header.

It must give exactly what the general decoder (``SendMessageRequestHeaderV2.v1_from_ext``)
gives, object or error, for any extFields: built or plain Python alike.
"""
from __future__ import annotations

from typing import Any

from hypothesis import given, settings, strategies as st

from rmqd import _compiled
from rmqd.processors import send
from rmqd.wire.errors import WireError
from rmqd.wire.headers import SendMessageRequestHeader, SendMessageRequestHeaderV2

_PURE = _compiled.load_pure("rmqd.processors.send")
READERS = [send.send_header_from_v2, _PURE.send_header_from_v2]

JAVA = {"a": "please_rename_unique_group_name", "b": "BenchmarkTest", "c": "TBW102", "d": "4", "e": "3", "f": "0",
        "g": "1795316489378", "h": "0", "i": "UNIQ_KEY\x01C0A8\x02WAIT\x01true", "j": "0", "k": "false",
        "m": "false", "n": "broker-a"}


def _outcome(fn: Any, ext: Any) -> Any:
    try:
        h = fn(ext)
    except WireError as e:
        return ("error", type(e).__name__, str(e))
    assert type(h) is SendMessageRequestHeader
    return ("ok", h, [getattr(h, f) for f in ("bname", "producerGroup", "topic", "defaultTopic",
                                                "defaultTopicQueueNums", "queueId", "sysFlag", "bornTimestamp",
                                                "flag", "properties", "reconsumeTimes", "unitMode", "batch",
                                                "maxReconsumeTimes")])


def _check(ext: Any) -> None:
    want = _outcome(SendMessageRequestHeaderV2.v1_from_ext, ext)
    for read in READERS:
        got = _outcome(read, ext)
        assert got == want, (ext, got, want)
        if got[0] == "ok":  # int stays int, bool stays bool
            assert [type(v) for v in got[2]] == [type(v) for v in want[2]]


def test_the_java_clients_header() -> None:
    _check(JAVA)
    h = send.send_header_from_v2(JAVA)
    assert (h.topic, h.queueId, h.bornTimestamp, h.reconsumeTimes, h.unitMode, h.batch, h.bname,
            h.maxReconsumeTimes) == ("BenchmarkTest", 3, 1795316489378, 0, False, False, "broker-a", None)


def test_missing_and_odd_fields_as_the_general_decoder() -> None:
    _check(None)
    _check({})
    for key in JAVA:
        _check({k: v for k, v in JAVA.items() if k != key})
    for key in "defghjl":
        for bad in ("", "-1", "+3", " 3", "3 ", "1" * 10, "9" * 19, "2147483648", "\u0663", "0x1", "1.0"):
            _check({**JAVA, key: bad})
    for key in "km":
        for v in ("TRUE", "True", "1", "", "yes"):
            _check({**JAVA, key: v})
    _check({**JAVA, "bname": "ignored", "l": "16"})


_value = st.sampled_from(["0", "7", "16", "-1", "", " 1", "2147483647", "2147483648", "99999999999999999",
                          "999999999999999999", "9999999999999999999", "true", "false", "TRUE", "x"]) | st.text(
    max_size=6)


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(st.sampled_from(list("abcdefghijklmn") + ["bname", "zz"]), _value, max_size=16))
def test_generated_headers(ext: dict) -> None:
    _check(ext)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(list("defghjl")), _value, max_size=4))
def test_java_header_with_generated_numbers(change: dict) -> None:
    _check({**JAVA, **change})
