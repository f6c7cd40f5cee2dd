"""What every apache.rocketmq.v2 handler shares: the call context from the request metadata,
the error that becomes a RocketMQ status, and the proxy's checks of names and values.

Why a RocketMQ status and not a gRPC one: Apache's proxy answers nearly every failure with a
normal response whose `status` field carries apache.rocketmq.v2.Code (TOPIC_NOT_FOUND,
ILLEGAL_TOPIC, UNAUTHORIZED, ...) and gRPC status OK; the 5.x clients read that field and raise
their own typed exceptions from it. Only transport-level problems (unknown method, bytes that
are no protobuf, deadlines) are gRPC statuses. The texts follow Apache RocketMQ 5.3.3's proxy
(GrpcValidator, SendMessageActivity, ResponseBuilder); the numbers are rocketmq-proto's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from dataclasses import dataclass

from rmqd.processors.common import is_system_topic, validate_group, validate_topic
from rmqd.wire.codes import ResponseCode
from rmqd.wire.javamap import java_string_hash
from rmqd.wire.names import java_is_blank
from rmqd.wire.rocketmq_v2 import Code, pb

# request metadata (GrpcConstants, 5.3.3)
CLIENT_ID = "x-mq-client-id"
LANGUAGE = "x-mq-language"
CLIENT_VERSION = "x-mq-client-version"
PROTOCOL = "x-mq-protocol"
NAMESPACE = "x-mq-namespace"
REQUEST_ID = "x-mq-request-id"
AUTHORIZATION = "authorization"
DATE_TIME = "x-mq-date-time"
SESSION_TOKEN = "x-mq-session-token"

SYS_CONSUMER_GROUP_PREFIX = "CID_RMQ_SYS_"  # MixAll.CID_SYS_RMQ_TRANS's family (isSysConsumerGroup)

# ProxyConfig defaults (5.3.3) that shape answers
MAX_USER_PROPERTY_SIZE = 16 * 1024
USER_PROPERTY_MAX_NUM = 128
MAX_MESSAGE_GROUP_SIZE = 64
DEFAULT_INVISIBLE_TIME_MS = 60_000
MIN_INVISIBLE_TIME_MS_FOR_RECV = 10_000
MAX_INVISIBLE_TIME_MS = 12 * 3600 * 1000
MAX_DELAY_TIME_MS = 24 * 3600 * 1000
MAX_TRANSACTION_RECOVERY_SECOND = 3600
PRODUCER_MAX_ATTEMPTS = 3
PRODUCER_BACKOFF_INITIAL_MS = 10
PRODUCER_BACKOFF_MAX_MS = 1000
PRODUCER_BACKOFF_MULTIPLIER = 2
CONSUMER_MIN_LONG_POLLING_MS = 5_000
CONSUMER_MAX_LONG_POLLING_MS = 20_000
CONSUMER_LONG_POLLING_BATCH_SIZE = 32


class ProxyError(Exception):
    """A failure answered as a status (apache.rocketmq.v2.Code and text), as GrpcProxyException."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def status(code: int = Code.OK, message: str | None = None) -> "pb.Status":
    """ResponseBuilder.buildStatus: the code's name when no text is given."""
    if message is None:
        message = CODE_NAMES.get(code, str(code))
    return pb.Status(code=code, message=message)


CODE_NAMES = {number: name for name, number in vars(Code).items() if not name.startswith("_")}

#: ResponseBuilder.RESPONSE_CODE_MAPPING: a broker response code as a v2 code (else INTERNAL_SERVER_ERROR)
_REMOTING_TO_V2 = {
    int(ResponseCode.SUCCESS): Code.OK,
    int(ResponseCode.SYSTEM_BUSY): Code.TOO_MANY_REQUESTS,
    int(ResponseCode.REQUEST_CODE_NOT_SUPPORTED): Code.NOT_IMPLEMENTED,
    int(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST): Code.CONSUMER_GROUP_NOT_FOUND,
}


def code_of_remoting(response_code: int) -> int:
    return _REMOTING_TO_V2.get(int(response_code), Code.INTERNAL_SERVER_ERROR)


@dataclass(slots=True, init=False)
class GrpcContext:
    """ProxyContext: who is calling (from the metadata) and from where. Its __init__ is written
    out (not the dataclass's generated one, which runs interpreted): one is made per call."""

    client_id: str
    language: str
    client_version: str
    remote_addr: str
    local_addr: str
    namespace: str
    #: seconds left before the call's deadline (None: the client set none)
    remaining: float | None
    metadata: Mapping[str, str]

    def __init__(self, client_id: str, language: str, client_version: str, remote_addr: str, local_addr: str,
                 namespace: str = "", remaining: float | None = None, metadata: Mapping[str, str] | None = None) -> None:
        self.client_id = client_id
        self.language = language
        self.client_version = client_version
        self.remote_addr = remote_addr
        self.local_addr = local_addr
        self.namespace = namespace
        self.remaining = remaining
        self.metadata = {} if metadata is None else metadata

    @classmethod
    def of(cls, metadata: Mapping[str, str], remote_addr: str, local_addr: str,
           remaining: float | None) -> "GrpcContext":
        return cls(metadata.get(CLIENT_ID, ""), metadata.get(LANGUAGE, ""), metadata.get(CLIENT_VERSION, ""),
                   remote_addr, local_addr, metadata.get(NAMESPACE, ""), remaining, metadata)

    @property
    def remote_host(self) -> str:
        host = self.remote_addr.rpartition(":")[0] if ":" in self.remote_addr else self.remote_addr
        return host.strip("[]")


# -- checks (GrpcValidator) -------------------------------------------------------------------

def check_client_id(ctx: GrpcContext) -> None:
    if not ctx.client_id.strip():
        raise ProxyError(Code.CLIENT_ID_REQUIRED, "client id cannot be empty")


def check_topic(topic: "pb.Resource | str") -> str:
    name = topic if isinstance(topic, str) else topic.name
    remark = validate_topic(name)
    if remark is not None:
        raise ProxyError(Code.ILLEGAL_TOPIC, remark)
    if is_system_topic(name):
        raise ProxyError(Code.ILLEGAL_TOPIC, "cannot access system topic")
    return name


def check_group(group: "pb.Resource | str") -> str:
    name = group if isinstance(group, str) else group.name
    remark = validate_group(name)
    if remark is not None:
        raise ProxyError(Code.ILLEGAL_CONSUMER_GROUP, remark)
    if name.startswith(SYS_CONSUMER_GROUP_PREFIX):
        raise ProxyError(Code.ILLEGAL_CONSUMER_GROUP, "cannot use system consumer group")
    return name


def check_invisible_time(invisible_ms: int, minimum_ms: int = 0) -> None:
    if invisible_ms < minimum_ms:
        raise ProxyError(Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too small. min is {minimum_ms}")
    if invisible_ms > MAX_INVISIBLE_TIME_MS:
        raise ProxyError(Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too large. max is {MAX_INVISIBLE_TIME_MS}")


def java_iso_control(ch: str) -> bool:
    """Character.isISOControl (Guava's CharMatcher.javaIsoControl): U+0000-001F, U+007F-009F."""
    o = ord(ch)
    return o <= 0x1F or 0x7F <= o <= 0x9F


#: java_iso_control as a character class: one scan in C instead of a call per character
_ISO_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def contains_control(text: str) -> bool:
    return _ISO_CONTROL.search(text) is not None


def check_tag(tag: str) -> None:
    if tag:
        if java_is_blank(tag):
            raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot be the char sequence of whitespace")
        if "|" in tag:
            raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain '|'")
        if contains_control(tag):
            raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain control character")


def check_key(key: str) -> None:
    if key:
        if java_is_blank(key):
            raise ProxyError(Code.ILLEGAL_MESSAGE_KEY, "key cannot be the char sequence of whitespace")
        if contains_control(key):
            raise ProxyError(Code.ILLEGAL_MESSAGE_KEY, "key cannot contain control character")


def check_message_group(group: str) -> None:
    if group:
        if java_is_blank(group):
            raise ProxyError(Code.ILLEGAL_MESSAGE_GROUP, "message group cannot be the char sequence of whitespace")
        if len(group.encode("utf-8")) >= MAX_MESSAGE_GROUP_SIZE:
            raise ProxyError(Code.ILLEGAL_MESSAGE_GROUP, f"message group exceed the max size {MAX_MESSAGE_GROUP_SIZE}")
        if contains_control(group):
            raise ProxyError(Code.ILLEGAL_MESSAGE_GROUP, "message group cannot contain control character")


def duration_ms(d: Any) -> int:
    """Durations.toMillis (truncating nanos)."""
    return int(d.seconds) * 1000 + int(d.nanos) // 1_000_000


def consistent_hash(value: int, buckets: int) -> int:
    """Guava Hashing.consistentHash(long, int): the bucket of a message group (SendMessageQueueSelector)."""
    state = value & 0xFFFFFFFFFFFFFFFF
    candidate = 0
    while True:
        state = (2862933555777941757 * state + 1) & 0xFFFFFFFFFFFFFFFF
        nxt = int((candidate + 1) / ((((state >> 33) + 1) & 0xFFFFFFFF) / 2147483648.0))
        if 0 <= nxt < buckets:
            candidate = nxt
        else:
            return candidate


__all__ = [
    "AUTHORIZATION", "CLIENT_ID", "CODE_NAMES", "DATE_TIME", "GrpcContext", "ProxyError", "check_client_id",
    "check_group", "check_invisible_time", "check_key", "check_message_group", "check_tag", "check_topic",
    "code_of_remoting", "consistent_hash", "contains_control", "duration_ms", "java_string_hash", "status",
]
