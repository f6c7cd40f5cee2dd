"""RocketMQ message codecs: the commit-log record, properties, batch bodies and message ids.

The commit-log record is declared ONCE, in ``RECORD_FIELDS``; both the construct declaration
(``COMMIT_LOG_RECORD``, used for tests, tools and documentation) and the struct fast paths used
at runtime (``record_head_struct``) are generated from that table, so they cannot drift apart.
The stored record is also what a PULL_MESSAGE response body carries, so the same decoder serves
the store, pull bodies, verification and Spark.

Facts come from Apache RocketMQ 4.9.8 (``CommitLog.MessageExtEncoder``, ``MessageDecoder``,
``MessageSysFlag``, ``MessageClientIDSetter``) and the fixtures written by a real broker.
"""

from __future__ import annotations

import ipaddress
import mmap
import os
import struct
import threading
import time
import zlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Iterator, Mapping

import construct as cs

from rmqd.wire.errors import WireError
from rmqd.wire.javamap import java_hashmap_order, java_string_hash

__all__ = [
    "MAGIC_CODE_V1", "MAGIC_CODE_V2", "BLANK_MAGIC_CODE", "MessageSysFlag", "MessageConst",
    "RecordError", "MessageRecord", "BatchItem", "RECORD_FIELDS", "COMMIT_LOG_RECORD", "BATCH_ITEM",
    "BLANK_RECORD", "BLANK_RECORD_STRUCT", "SYSFLAG_POSITION", "QUEUE_OFFSET_POSITION", "store_timestamp_position",
    "crc32_masked", "java_string_hash", "encode_properties", "decode_properties", "properties_bytes",
    "java_hashmap_order", "encode_properties_java",
    "record_head_struct", "record_head_reader", "calc_record_length", "encode_record", "decode_record", "decode_messages",
    "iter_records", "encode_batch", "decode_batch", "create_offset_msg_id", "parse_offset_msg_id",
    "UniqIdGenerator", "compress_body", "decompress_body", "ip_to_bytes", "format_socket_address",
]

MAGIC_CODE_V1 = 0xDAA320A7  # Java int -626843481 (CommitLog.MESSAGE_MAGIC_CODE)
MAGIC_CODE_V2 = 0xDAA320AB  # 5.x MessageVersion.MESSAGE_VERSION_V2: 2-byte topic length
BLANK_MAGIC_CODE = 0xCBD43194  # Java int -875286124: end-of-file filler record
END_FILE_MIN_BLANK_LENGTH = 8
NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
SHORT_MAX = 0x7FFF


class RecordError(WireError):
    """A commit-log record (or pull body, batch body) that cannot be decoded; says where."""

    def __init__(self, message: str, *, offset: int | None = None, where: str | None = None):
        self.offset = offset
        self.where = where
        loc = ""
        if where is not None:
            loc = f"{where}: "
        if offset is not None:
            loc += f"offset {offset}: "
        super().__init__(loc + message)


class MessageSysFlag:
    """Bits of the record's sysFlag (MessageSysFlag.java, identical in 4.9.x and 5.x)."""

    COMPRESSED_FLAG = 0x1
    MULTI_TAGS_FLAG = 0x2
    TRANSACTION_NOT_TYPE = 0
    TRANSACTION_PREPARED_TYPE = 0x4
    TRANSACTION_COMMIT_TYPE = 0x8
    TRANSACTION_ROLLBACK_TYPE = 0xC
    BORNHOST_V6_FLAG = 0x10
    STOREHOSTADDRESS_V6_FLAG = 0x20
    NEED_UNWRAP_FLAG = 0x40
    INNER_BATCH_FLAG = 0x80
    COMPRESSION_LZ4_TYPE = 0x100
    COMPRESSION_ZSTD_TYPE = 0x200
    COMPRESSION_ZLIB_TYPE = 0x300
    COMPRESSION_TYPE_COMPARATOR = 0x700

    @staticmethod
    def get_transaction_value(flag: int) -> int:
        return flag & MessageSysFlag.TRANSACTION_ROLLBACK_TYPE

    @staticmethod
    def reset_transaction_value(flag: int, tran_type: int) -> int:
        return (flag & ~MessageSysFlag.TRANSACTION_ROLLBACK_TYPE) | tran_type

    @staticmethod
    def clear_compressed_flag(flag: int) -> int:
        return flag & ~MessageSysFlag.COMPRESSED_FLAG


class MessageConst:
    """Property names (MessageConst.java, 4.9.8)."""

    PROPERTY_KEYS = "KEYS"
    PROPERTY_TAGS = "TAGS"
    PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
    PROPERTY_DELAY_TIME_LEVEL = "DELAY"
    PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
    PROPERTY_REAL_TOPIC = "REAL_TOPIC"
    PROPERTY_REAL_QUEUE_ID = "REAL_QID"
    PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
    PROPERTY_PRODUCER_GROUP = "PGROUP"
    PROPERTY_MIN_OFFSET = "MIN_OFFSET"
    PROPERTY_MAX_OFFSET = "MAX_OFFSET"
    PROPERTY_BUYER_ID = "BUYER_ID"
    PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
    PROPERTY_TRANSFER_FLAG = "TRANSFER_FLAG"
    PROPERTY_CORRECTION_FLAG = "CORRECTION_FLAG"
    PROPERTY_MQ2_FLAG = "MQ2_FLAG"
    PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
    PROPERTY_MSG_REGION = "MSG_REGION"
    PROPERTY_TRACE_SWITCH = "TRACE_ON"
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
    PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    PROPERTY_CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
    PROPERTY_TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    PROPERTY_INSTANCE_ID = "INSTANCE_ID"
    PROPERTY_CORRELATION_ID = "CORRELATION_ID"
    PROPERTY_MESSAGE_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
    PROPERTY_MESSAGE_TTL = "TTL"
    PROPERTY_REPLY_MESSAGE_ARRIVE_TIME = "ARRIVE_TIME"
    PROPERTY_PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
    PROPERTY_CLUSTER = "CLUSTER"
    PROPERTY_MESSAGE_TYPE = "MSG_TYPE"
    PROPERTY_INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"
    PROPERTY_INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"
    KEY_SEPARATOR = " "


# ---------------------------------------------------------------------------------------------
# small helpers


def crc32_masked(data: bytes | bytearray | memoryview) -> int:
    """UtilAll.crc32: CRC32 with the sign bit cleared, as stored in BODYCRC."""
    return zlib.crc32(data) & 0x7FFFFFFF


def encode_properties(props: Mapping[str, str | None] | None) -> str:
    """MessageDecoder.messageProperties2String: name\\x01value\\x02..., no trailing separator,
    None values skipped, order = mapping order (the broker keeps the client's order)."""
    if not props:
        return ""
    return PROPERTY_SEPARATOR.join(
        f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in props.items() if v is not None
    )


_HASHMAP_ORDERS: dict[tuple[str, ...], tuple[str, ...]] = {}  # key sequence -> HashMap iteration order


def encode_properties_java(props: Mapping[str, str | None] | None) -> str:
    """encode_properties in the order a RocketMQ broker writes them (HashMap order). The
    order depends only on the keys and their insertion order, which repeat from message to
    message, so it is computed once per key sequence."""
    if not props:
        return ""
    keys = tuple(k for k, v in props.items() if v is not None)
    order = _HASHMAP_ORDERS.get(keys)
    if order is None:
        order = tuple(java_hashmap_order(dict.fromkeys(keys)))
        if len(_HASHMAP_ORDERS) < 4096:
            _HASHMAP_ORDERS[keys] = order
    return PROPERTY_SEPARATOR.join([f"{k}{NAME_VALUE_SEPARATOR}{props[k]}" for k in order])


def decode_properties(data: str | bytes | bytearray | memoryview | None) -> dict[str, str]:
    """MessageDecoder.string2messageProperties: entries shorter than 3 chars, without a name or
    without a value are skipped exactly as Java skips them."""
    if data is None:
        return {}
    if not isinstance(data, str):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as e:
            raise WireError(f"message properties are not UTF-8 (byte {e.start})") from None
    out: dict[str, str] = {}
    if not data:
        return out
    for item in data.split(PROPERTY_SEPARATOR):
        # a name and a value around the first separator (so at least 3 chars), else skipped
        name, _sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if name and value:
            out[name] = value
    return out


def properties_bytes(props: Mapping[str, str] | str | bytes | None) -> bytes:
    """Properties as stored (UTF-8); at most Short.MAX_VALUE bytes, the int16 length limit."""
    if isinstance(props, bytes):
        pb = props
    else:
        pb = (props if isinstance(props, str) else encode_properties(props)).encode("utf-8", "replace")  # Java's '?'
    if len(pb) > SHORT_MAX:
        raise WireError(f"message properties too long: {len(pb)} > {SHORT_MAX} bytes")
    return pb


def ip_to_bytes(host: str | bytes | ipaddress.IPv4Address | ipaddress.IPv6Address) -> bytes:
    """4 bytes for IPv4, 16 for IPv6 (what InetAddress.getAddress returns)."""
    if isinstance(host, bytes):
        if len(host) not in (4, 16):
            raise WireError(f"IP address must be 4 or 16 bytes, got {len(host)}")
        return host
    if isinstance(host, str):
        host = ipaddress.ip_address(host.strip("[]"))
    return host.packed


def format_socket_address(ip: bytes, port: int) -> str:
    """Java InetSocketAddress.toString() for a literal address: '/127.0.0.1:44948'."""
    if len(ip) == 4:
        return f"/{ip[0]}.{ip[1]}.{ip[2]}.{ip[3]}:{port}"
    groups = struct.unpack(">8H", ip)
    return "/" + ":".join(f"{g:x}" for g in groups) + f":{port}"


# ---------------------------------------------------------------------------------------------
# the commit-log record: ONE declaration

# (name, construct type, struct code). "born_ip"/"store_ip" are 4 bytes or 16 bytes depending on
# sysFlag's BORNHOST_V6 / STOREHOSTADDRESS_V6 bits; "body", "topic", "properties" are
# length-prefixed (body int32, topic int8 (v1) / int16 (v2), properties int16).
RECORD_FIELDS: tuple[tuple[str, object, str], ...] = (
    ("total_size", cs.Int32sb, "i"),          # 1 TOTALSIZE (whole record)
    ("magic", cs.Int32ub, "I"),               # 2 MAGICCODE
    ("body_crc", cs.Int32sb, "i"),            # 3 BODYCRC crc32 & 0x7FFFFFFF
    ("queue_id", cs.Int32sb, "i"),            # 4 QUEUEID
    ("flag", cs.Int32sb, "i"),                # 5 FLAG
    ("queue_offset", cs.Int64sb, "q"),        # 6 QUEUEOFFSET
    ("physical_offset", cs.Int64sb, "q"),     # 7 PHYSICALOFFSET
    ("sys_flag", cs.Int32sb, "i"),            # 8 SYSFLAG
    ("born_timestamp", cs.Int64sb, "q"),      # 9 BORNTIMESTAMP
    ("born_ip", "born_ip", "{born}s"),        # 10 BORNHOST ip
    ("born_port", cs.Int32sb, "i"),           # 10 BORNHOST port
    ("store_timestamp", cs.Int64sb, "q"),     # 11 STORETIMESTAMP
    ("store_ip", "store_ip", "{store}s"),     # 12 STOREHOST ip
    ("store_port", cs.Int32sb, "i"),          # 12 STOREHOST port
    ("reconsume_times", cs.Int32sb, "i"),     # 13 RECONSUMETIMES
    ("prepared_transaction_offset", cs.Int64sb, "q"),  # 14 PREPARED TRANSACTION OFFSET
    ("body_length", cs.Int32sb, "i"),         # 15 BODY length, then body bytes
)
HEAD_FIELD_NAMES = tuple(f[0] for f in RECORD_FIELDS)


def _construct_field(name: str, typ: object) -> cs.Subconstruct:
    if typ == "born_ip":
        return name / cs.IfThenElse(cs.this.sys_flag & MessageSysFlag.BORNHOST_V6_FLAG, cs.Bytes(16), cs.Bytes(4))
    if typ == "store_ip":
        return name / cs.IfThenElse(cs.this.sys_flag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG, cs.Bytes(16), cs.Bytes(4))
    return name / typ  # type: ignore[operator]


COMMIT_LOG_RECORD = cs.Struct(
    *(_construct_field(n, t) for n, t, _ in RECORD_FIELDS),
    "body" / cs.Bytes(cs.this.body_length),
    "topic" / cs.IfThenElse(cs.this.magic == MAGIC_CODE_V2,
                            cs.PascalString(cs.Int16ub, "utf8"), cs.PascalString(cs.Int8ub, "utf8")),
    "properties" / cs.Prefixed(cs.Int16sb, cs.GreedyBytes),
)
"""construct declaration of one stored message (MessageExtEncoder / MessageDecoder.decode)."""

BLANK_RECORD = cs.Struct("total_size" / cs.Int32sb, "magic" / cs.Const(BLANK_MAGIC_CODE, cs.Int32ub))
"""The 8-byte end-of-file record (CommitLog.DefaultAppendMessageCallback)."""


def _head_format(born_len: int, store_len: int) -> str:
    return ">" + "".join(code.format(born=born_len, store=store_len) for _, _, code in RECORD_FIELDS)


_HEAD_STRUCTS = {
    (b6, s6): struct.Struct(_head_format(16 if b6 else 4, 16 if s6 else 4))
    for b6 in (False, True) for s6 in (False, True)
}


def record_head_struct(sys_flag: int) -> struct.Struct:
    """The struct for fields 1..15 (up to and including the body length) for this sysFlag."""
    return _HEAD_STRUCTS[(bool(sys_flag & MessageSysFlag.BORNHOST_V6_FLAG),
                          bool(sys_flag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG))]


def record_head_reader(names: tuple[str, ...]) -> dict[int, struct.Struct]:
    """Structs that read only the head fields ``names`` (in declaration order), the others
    skipped as pad bytes, keyed by ``sys_flag & (BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)``.

    Hot paths (dispatch) unpack just what they use - no host bytes objects per record - at
    offsets derived from ``RECORD_FIELDS``, so they cannot drift from the declaration."""
    unknown = set(names) - set(HEAD_FIELD_NAMES)
    if unknown:
        raise ValueError(f"not record head fields: {sorted(unknown)}")
    out = {}
    for b6 in (False, True):
        for s6 in (False, True):
            fmt = ">"
            for name, _typ, code in RECORD_FIELDS:
                code = code.format(born=16 if b6 else 4, store=16 if s6 else 4)
                fmt += code if name in names else f"{struct.calcsize('>' + code)}x"
            key = (MessageSysFlag.BORNHOST_V6_FLAG if b6 else 0) | (MessageSysFlag.STOREHOSTADDRESS_V6_FLAG if s6 else 0)
            out[key] = struct.Struct(fmt)
            assert out[key].size == _HEAD_STRUCTS[(b6, s6)].size
    return out


# fixed positions (independent of the host sizes) derived from the declaration
_S_PREFIX = struct.Struct(">iIiiiqqiq")
SYSFLAG_POSITION = 36
QUEUE_OFFSET_POSITION = 20
PHYSICAL_OFFSET_POSITION = 28
BORN_TIMESTAMP_POSITION = 40
BORNHOST_POSITION = 48
assert _S_PREFIX.size == 48 and struct.calcsize(">iIiiiqq") == SYSFLAG_POSITION
BLANK_RECORD_STRUCT = _BLANK = struct.Struct(">iI")  # also the (total size, magic) prefix of every record
assert BLANK_RECORD.build({"total_size": 8}) == _BLANK.pack(8, BLANK_MAGIC_CODE)
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")
_QQ = struct.Struct(">qq")


def store_timestamp_position(sys_flag: int) -> int:
    """Offset of STORETIMESTAMP inside a record (depends on the born host size)."""
    return BORNHOST_POSITION + (20 if sys_flag & MessageSysFlag.BORNHOST_V6_FLAG else 8)


def calc_record_length(sys_flag: int, body_length: int, topic_length: int, properties_length: int,
                       magic: int = MAGIC_CODE_V1) -> int:
    """CommitLog.calMsgLength."""
    return (record_head_struct(sys_flag).size + body_length
            + (2 if magic == MAGIC_CODE_V2 else 1) + topic_length + 2 + properties_length)


@dataclass(slots=True)
class MessageRecord:
    """One decoded stored message (MessageExt as the broker stores it)."""

    total_size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    born_ip: bytes
    born_port: int
    store_timestamp: int
    store_ip: bytes
    store_port: int
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties_raw: bytes
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def offset_msg_id(self) -> str:
        return create_offset_msg_id(self.store_ip, self.store_port, self.physical_offset)

    @property
    def tags(self) -> str | None:
        return self.properties.get(MessageConst.PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        k = self.properties.get(MessageConst.PROPERTY_KEYS)
        return [x for x in k.split(MessageConst.KEY_SEPARATOR) if x] if k else []

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    @property
    def born_host(self) -> str:
        return format_socket_address(self.born_ip, self.born_port)

    @property
    def store_host(self) -> str:
        return format_socket_address(self.store_ip, self.store_port)

    def uncompressed_body(self) -> bytes:
        return decompress_body(self.body, self.sys_flag)

    def encode(self) -> bytes:
        """Re-encode exactly (properties bytes kept as stored)."""
        return encode_record(
            queue_id=self.queue_id, flag=self.flag, queue_offset=self.queue_offset,
            physical_offset=self.physical_offset, sys_flag=self.sys_flag,
            born_timestamp=self.born_timestamp, born_ip=self.born_ip, born_port=self.born_port,
            store_timestamp=self.store_timestamp, store_ip=self.store_ip, store_port=self.store_port,
            reconsume_times=self.reconsume_times,
            prepared_transaction_offset=self.prepared_transaction_offset, body=self.body,
            topic=self.topic, properties=self.properties_raw, body_crc=self.body_crc, magic=self.magic)


def encode_record(*, queue_id: int, flag: int, queue_offset: int, physical_offset: int, sys_flag: int,
                  born_timestamp: int, born_ip: bytes, born_port: int, store_timestamp: int,
                  store_ip: bytes, store_port: int, reconsume_times: int,
                  prepared_transaction_offset: int, body: bytes, topic: str,
                  properties: Mapping[str, str] | str | bytes, body_crc: int | None = None,
                  magic: int | None = None) -> bytes:
    """Build one stored record. Host V6 bits of sys_flag are set from the IP sizes, magic is v2
    only for topics longer than 127 bytes (autoMessageVersionOnTopicLen), the CRC is computed
    unless given."""
    props_b = properties_bytes(properties)
    topic_b = topic.encode("utf-8")
    if magic is None:
        magic = MAGIC_CODE_V2 if len(topic_b) > 127 else MAGIC_CODE_V1
    if len(topic_b) > (0xFFFF if magic == MAGIC_CODE_V2 else 0xFF):
        raise WireError(f"topic too long for the record format: {len(topic_b)} bytes")
    born_ip = ip_to_bytes(born_ip)
    store_ip = ip_to_bytes(store_ip)
    sys_flag = (sys_flag & ~(MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG))
    if len(born_ip) == 16:
        sys_flag |= MessageSysFlag.BORNHOST_V6_FLAG
    if len(store_ip) == 16:
        sys_flag |= MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
    if body_crc is None:
        body_crc = crc32_masked(body)
    st = record_head_struct(sys_flag)
    total = st.size + len(body) + (2 if magic == MAGIC_CODE_V2 else 1) + len(topic_b) + 2 + len(props_b)
    head = st.pack(total, magic, body_crc, queue_id, flag, queue_offset, physical_offset, sys_flag,
                   born_timestamp, born_ip, born_port, store_timestamp, store_ip, store_port,
                   reconsume_times, prepared_transaction_offset, len(body))
    tlen = len(topic_b).to_bytes(2 if magic == MAGIC_CODE_V2 else 1, "big")
    return b"".join((head, body, tlen, topic_b, len(props_b).to_bytes(2, "big"), props_b))


#: what a record is read from: the bytes of a request or pull answer, a view or a mapped file
ReadableBuffer = bytes | bytearray | memoryview | mmap.mmap


def decode_record(buf: ReadableBuffer, pos: int = 0, *, check_crc: bool = False,
                  where: str | None = None, read_body: bool = True) -> MessageRecord:
    """Decode the record at ``pos``; never trusts a length (RecordError naming where/offset)."""
    n = len(buf)
    if pos < 0 or pos + 8 > n:
        raise RecordError("truncated record header", offset=pos, where=where)
    total, magic = _BLANK.unpack_from(buf, pos)
    if magic == BLANK_MAGIC_CODE:
        raise RecordError(f"end-of-file BLANK record (size {total}), not a message", offset=pos, where=where)
    if magic not in (MAGIC_CODE_V1, MAGIC_CODE_V2):
        raise RecordError(f"bad magic code 0x{magic:08X}", offset=pos, where=where)
    if pos + SYSFLAG_POSITION + 4 > n:
        raise RecordError("truncated record header", offset=pos, where=where)
    sys_flag = _I32.unpack_from(buf, pos + SYSFLAG_POSITION)[0]
    st = record_head_struct(sys_flag)
    if total < st.size + 3 or pos + total > n:
        raise RecordError(f"record size {total} does not fit (have {n - pos} bytes)", offset=pos, where=where)
    h = st.unpack_from(buf, pos)
    body_len = h[16]
    p = pos + st.size
    end = pos + total
    if body_len < 0 or p + body_len > end:
        raise RecordError(f"body length {body_len} exceeds record size {total}", offset=pos, where=where)
    body = bytes(buf[p:p + body_len]) if read_body else b""
    p += body_len
    if magic == MAGIC_CODE_V2:
        if p + 2 > end:
            raise RecordError("truncated topic length", offset=pos, where=where)
        tlen = (buf[p] << 8) | buf[p + 1]
        p += 2
    else:
        if p + 1 > end:
            raise RecordError("truncated topic length", offset=pos, where=where)
        tlen = buf[p]
        p += 1
    if p + tlen + 2 > end:
        raise RecordError(f"topic length {tlen} exceeds record size {total}", offset=pos, where=where)
    try:
        topic = bytes(buf[p:p + tlen]).decode("utf-8")
    except UnicodeDecodeError:
        raise RecordError("topic is not UTF-8", offset=pos, where=where) from None
    p += tlen
    plen = _I16.unpack_from(buf, p)[0]
    p += 2
    if plen < 0 or p + plen != end:
        raise RecordError(f"properties length {plen} does not match record size {total}", offset=pos, where=where)
    props_raw = bytes(buf[p:p + plen])
    # a stored record's properties are read as Java reads them (new String(bytes, UTF_8):
    # replacement characters), so a batch stored with raw non-UTF-8 properties stays readable
    props = decode_properties(props_raw.decode("utf-8", "replace"))
    if check_crc and read_body and crc32_masked(body) != h[2]:
        raise RecordError(f"body CRC mismatch (stored {h[2]}, computed {crc32_masked(body)})",
                          offset=pos, where=where)
    return MessageRecord(total, magic, h[2], h[3], h[4], h[5], h[6], sys_flag, h[8], h[9], h[10], h[11],
                         h[12], h[13], h[14], h[15], body, topic, props_raw, props)


def iter_records(buf: bytes | bytearray | memoryview, start: int = 0, end: int | None = None, *,
                 check_crc: bool = False, where: str | None = None) -> Iterator[tuple[int, MessageRecord | None]]:
    """Walk records in ``buf[start:end]``: yields (pos, record) and (pos, None) for a BLANK
    record; stops at the BLANK (rest of a file is filler) or at a zero total size (end of data)."""
    end = len(buf) if end is None else end
    view = memoryview(buf)[:end]
    pos = start
    while pos + 8 <= end:
        total, magic = _BLANK.unpack_from(buf, pos)
        if total == 0 and magic == 0:
            return
        if magic == BLANK_MAGIC_CODE:
            yield pos, None
            return
        rec = decode_record(view, pos, check_crc=check_crc, where=where)
        yield pos, rec
        pos += rec.total_size


def decode_messages(body: bytes | bytearray | memoryview, *, check_crc: bool = False) -> list[MessageRecord]:
    """A PULL_MESSAGE response body (stored records back to back) -> records."""
    out = []
    pos = 0
    n = len(body)
    while pos < n:
        rec = decode_record(body, pos, check_crc=check_crc, where="pull body")
        out.append(rec)
        pos += rec.total_size
    return out


# ---------------------------------------------------------------------------------------------
# batch body (SEND_BATCH_MESSAGE): MessageDecoder.encodeMessage / decodeMessage

BATCH_HEAD_FIELDS: tuple[tuple[str, object, str], ...] = (
    ("total_size", cs.Int32sb, "i"),
    ("magic", cs.Int32sb, "i"),       # 0 from the client
    ("body_crc", cs.Int32sb, "i"),    # 0 from the client
    ("flag", cs.Int32sb, "i"),
    ("body_length", cs.Int32sb, "i"),
)
BATCH_ITEM = cs.Struct(
    *(n / t for n, t, _ in BATCH_HEAD_FIELDS),  # type: ignore[operator]
    "body" / cs.Bytes(cs.this.body_length),
    "properties" / cs.Prefixed(cs.Int16sb, cs.GreedyBytes),
)
"""One message of a SEND_BATCH_MESSAGE body (MessageDecoder.encodeMessage)."""
_BATCH_HEAD = struct.Struct(">" + "".join(c for _, _, c in BATCH_HEAD_FIELDS))


@dataclass(slots=True)
class BatchItem:
    """One message inside a batch body (the raw properties bytes are kept for the store)."""

    flag: int
    body: bytes
    properties_raw: bytes
    body_offset: int = 0  # position of the body inside the batch buffer

    @property
    def properties(self) -> dict[str, str]:
        return decode_properties(self.properties_raw)


def encode_batch(items: list[tuple[int, bytes, Mapping[str, str] | str | bytes]]) -> bytes:
    """[(flag, body, properties)] -> the body of SEND_BATCH_MESSAGE."""
    parts = []
    for flag, body, props in items:
        pb = properties_bytes(props)
        size = 20 + len(body) + 2 + len(pb)
        parts.append(_BATCH_HEAD.pack(size, 0, 0, flag, len(body)))
        parts.append(body)
        parts.append(len(pb).to_bytes(2, "big"))
        parts.append(pb)
    return b"".join(parts)


def decode_batch(buf: bytes | bytearray | memoryview) -> list[BatchItem]:
    """The body of SEND_BATCH_MESSAGE -> items; lengths are checked against the declared sizes."""
    out = []
    pos = 0
    n = len(buf)
    while pos < n:
        if pos + 20 > n:
            raise RecordError("truncated batch message header", offset=pos, where="batch body")
        size, _magic, _crc, flag, body_len = _BATCH_HEAD.unpack_from(buf, pos)
        if size < 22 or pos + size > n:
            raise RecordError(f"batch message size {size} does not fit (have {n - pos} bytes)",
                              offset=pos, where="batch body")
        if body_len < 0 or 20 + body_len + 2 > size:
            raise RecordError(f"batch body length {body_len} exceeds message size {size}",
                              offset=pos, where="batch body")
        bp = pos + 20
        plen = _I16.unpack_from(buf, bp + body_len)[0]
        if plen < 0 or 20 + body_len + 2 + plen != size:
            raise RecordError(f"batch properties length {plen} does not match message size {size}",
                              offset=pos, where="batch body")
        pp = bp + body_len + 2
        out.append(BatchItem(flag, bytes(buf[bp:bp + body_len]), bytes(buf[pp:pp + plen]), bp))
        pos += size
    return out


# ---------------------------------------------------------------------------------------------
# message ids

_MSG_ID_PREFIXES: dict[tuple[bytes, int], str] = {}


def create_offset_msg_id(store_ip: bytes, store_port: int, offset: int) -> str:
    """offsetMsgId: hex(upper) of store IP + port int32 + commit-log offset int64.

    The address part is the same for every message a broker stores, so its hex is kept per
    address and only the offset is formatted (one per send answered; 3.1k -> 1.5k instructions)."""
    if type(store_ip) is bytes and 0 <= offset <= 0x7FFFFFFFFFFFFFFF:
        prefixes = _MSG_ID_PREFIXES  # message.pxd: a dict, so the lookup is a C call
        prefix = prefixes.get((store_ip, store_port))
        if prefix is None:
            prefix = (store_ip + struct.pack(">i", store_port)).hex().upper()
            if len(prefixes) >= 64:
                prefixes.clear()
            prefixes[(store_ip, store_port)] = prefix
        return prefix + _hex16(offset)
    return (store_ip + struct.pack(">iq", store_port, offset)).hex().upper()


def _hex16(v: int) -> str:
    """``v`` (0 <= v < 2**63) as 16 upper-case hex digits (a C loop where compiled). The digits
    are written into one shared buffer where compiled: nothing in there lets another thread run
    (no call into Python until the decode copies them out), and calling bytearray costs more than
    the loop. Interpreted, a thread switch can come between any two steps: a buffer each."""
    buf = _HEX_BUF if _COMPILED else bytearray(16)
    i = 15
    while i >= 0:
        d = v & 15
        buf[i] = d + 48 if d < 10 else d + 55  # '0'-'9', 'A'-'F'
        v >>= 4
        i -= 1
    return buf.decode("ascii")


_HEX_BUF = bytearray(16)
_COMPILED = not __file__.endswith(".py")  # this module is the extension scripts/build_ext built


def parse_offset_msg_id(msg_id: str) -> tuple[bytes, int, int]:
    """-> (store ip bytes, port, commit-log offset)."""
    if len(msg_id) not in (32, 56):
        raise WireError(f"offsetMsgId must be 32 or 56 hex digits, got {len(msg_id)}: {msg_id!r}")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise WireError(f"offsetMsgId is not hex: {msg_id!r}") from None
    iplen = 4 if len(raw) == 16 else 16
    port, offset = struct.unpack_from(">iq", raw, iplen)
    return raw[:iplen], port, offset


class UniqIdGenerator:
    """MessageClientIDSetter: ip + pid(int16) + classloader hash(int32) + ms since the start of
    the current month (local time, int32) + counter(int16), upper-case hex."""

    def __init__(self, ip: bytes | str | None = None, pid: int | None = None, loader_hash: int | None = None):
        if ip is None:
            ip = struct.pack(">I", int(time.time() * 1000) & 0xFFFFFFFF)  # createFakeIP
        ip_b = ip_to_bytes(ip)
        pid = os.getpid() if pid is None else pid
        loader_hash = id(self) & 0x7FFFFFFF if loader_hash is None else loader_hash
        self._fix = (ip_b + struct.pack(">hi", _to_short(pid), _to_int(loader_hash))).hex().upper()
        self._lock = threading.Lock()
        self._counter = 0
        self._start = 0
        self._next_start = 0
        self._set_start(int(time.time() * 1000))

    def _set_start(self, millis: int) -> None:
        d = datetime.fromtimestamp(millis / 1000).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        self._start = int(d.timestamp() * 1000)
        nxt = d.replace(year=d.year + 1, month=1) if d.month == 12 else d.replace(month=d.month + 1)
        self._next_start = int(nxt.timestamp() * 1000)

    def next_id(self, now_ms: int | None = None) -> str:
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        with self._lock:
            if now_ms >= self._next_start:
                self._set_start(now_ms)
            diff = _to_int(now_ms - self._start)
            if -1_000_000 < diff < 0:
                diff = 0
            c = self._counter
            self._counter = (c + 1) & 0xFFFFFFFF
        return self._fix + struct.pack(">ih", diff, _to_short(c)).hex().upper()


def _to_short(v: int) -> int:
    v &= 0xFFFF
    return v - 0x10000 if v & 0x8000 else v


def _to_int(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - 0x100000000 if v & 0x80000000 else v


# ---------------------------------------------------------------------------------------------
# body compression (client side zlib; sysFlag COMPRESSED | compression type)

def compress_body(body: bytes, level: int = 5) -> bytes:
    """zlib (Deflater) as the 4.9.x client does at rocketmq.message.compressLevel (default 5)."""
    return zlib.compress(body, level)


def decompress_body(body: bytes, sys_flag: int) -> bytes:
    """Stored body -> original body according to sysFlag (returns ``body`` if not compressed)."""
    if not sys_flag & MessageSysFlag.COMPRESSED_FLAG:
        return body
    ctype = sys_flag & MessageSysFlag.COMPRESSION_TYPE_COMPARATOR
    if ctype in (0, MessageSysFlag.COMPRESSION_ZLIB_TYPE):
        try:
            return zlib.decompress(body)
        except zlib.error as e:
            raise WireError(f"compressed body does not inflate: {e}") from None
    name = {MessageSysFlag.COMPRESSION_LZ4_TYPE: "LZ4", MessageSysFlag.COMPRESSION_ZSTD_TYPE: "ZSTD"}.get(ctype, hex(ctype))
    raise WireError(f"unsupported body compression type {name} (sysFlag 0x{sys_flag:X})")
