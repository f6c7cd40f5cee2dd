"""wire.acl: the AclClientRPCHook signature, golden vectors and properties."""

import base64
import hashlib
import hmac

from hypothesis import given, strategies as st

from rmqd.wire.acl import (
    ACCESS_KEY,
    SIGNATURE,
    calc_signature,
    combine_request_content,
    sign_fields,
    verify_signature,
)


def test_golden_vector_send_header() -> None:
    # Values concatenated in key order: AccessKey, a, b, ... then the body.
    fields = {"b": "TopicTest", "a": "PG", "c": "TBW102"}
    signed = sign_fields(fields, b"hello", "RocketMQ", "12345678")
    content = b"RocketMQ" + b"PG" + b"TopicTest" + b"TBW102" + b"hello"
    assert combine_request_content(signed, b"hello") == content
    want = base64.b64encode(hmac.new(b"12345678", content, hashlib.sha1).digest()).decode()
    assert signed[SIGNATURE] == want
    assert signed[ACCESS_KEY] == "RocketMQ"


def test_golden_vector_fixed() -> None:
    # HmacSHA1("12345678", "RocketMQ") base64, fixed literal.
    assert calc_signature(b"RocketMQ", "12345678") == base64.b64encode(
        hmac.new(b"12345678", b"RocketMQ", hashlib.sha1).digest()
    ).decode()
    assert len(calc_signature(b"", "k")) == 28


def test_changed_field_or_body_fails() -> None:
    signed = sign_fields({"topic": "T", "queueId": "1"}, b"x", "ak", "sk")
    assert verify_signature(signed, b"x", "sk")
    assert not verify_signature(signed, b"y", "sk")
    assert not verify_signature(signed, b"x", "other")
    tampered = dict(signed, queueId="2")
    assert not verify_signature(tampered, b"x", "sk")
    unsigned = {k: v for k, v in signed.items() if k != SIGNATURE}
    assert not verify_signature(unsigned, b"x", "sk")


@given(
    st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=16), max_size=8),
    st.binary(max_size=64),
    st.text(min_size=1, max_size=12),
    st.text(min_size=1, max_size=12),
)
def test_sign_then_verify(fields: dict[str, str], body: bytes, ak: str, sk: str) -> None:
    fields.pop(SIGNATURE, None)
    signed = sign_fields(fields, body, ak, sk)
    assert verify_signature(signed, body, sk)
    assert verify_signature(signed, body, sk + "x") is False


def test_key_order_is_java_treemap_utf16() -> None:
    # By code point U+FF21 < U+1F600; by UTF-16 code unit (Java) 0xD83D < 0xFF21.
    fields = {"\uFF21": "full", "\U0001F600": "emoji"}
    assert combine_request_content(fields, None) == b"emojifull"
