"""RocketMQ 4.9 plain-ACL request signing, sans-IO.

Why: an ACL-enabled broker must recompute exactly the signature the Java
AclClientRPCHook / Go primitive.Credentials put on each request, or every
signed client is refused. The algorithm (AclUtils.combineRequestContent +
calSignature): take the request's ext fields plus AccessKey (and
SecurityToken when present) in key order (Java TreeMap = code-point order),
concatenate their values except Signature's, encode UTF-8, append the body,
HmacSHA1 with the secret key, base64.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"


def combine_request_content(fields: Mapping[str, str], body: bytes | None) -> bytes:
    """The bytes that are signed: sorted field values (Signature left out), then the body."""
    # Java's TreeMap compares UTF-16 code units; big-endian UTF-16 bytes sort the same way.
    keys = sorted(fields, key=lambda k: k.encode("utf-16-be", "surrogatepass"))
    text = "".join(fields[k] for k in keys if k != SIGNATURE)
    content = text.encode("utf-8", "surrogatepass")
    return content + body if body else content


def calc_signature(content: bytes, secret_key: str) -> str:
    """HmacSHA1(content, secretKey) in standard base64, as AclSigner does."""
    mac = hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()
    return base64.b64encode(mac).decode("ascii")


def sign_fields(
    ext_fields: Mapping[str, str],
    body: bytes | None,
    access_key: str,
    secret_key: str,
    security_token: str | None = None,
) -> dict[str, str]:
    """Ext fields as a signing client sends them: + AccessKey, [SecurityToken], Signature."""
    fields = dict(ext_fields)
    fields[ACCESS_KEY] = access_key
    if security_token is not None:
        fields[SECURITY_TOKEN] = security_token
    fields[SIGNATURE] = calc_signature(combine_request_content(fields, body), secret_key)
    return fields


def verify_signature(ext_fields: Mapping[str, str], body: bytes | None, secret_key: str) -> bool:
    """True when ext_fields' Signature matches the content under secret_key (constant-time)."""
    given = ext_fields.get(SIGNATURE)
    if given is None:
        return False
    expected = calc_signature(combine_request_content(ext_fields, body), secret_key)
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))
