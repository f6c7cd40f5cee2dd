"""CommitLog: every message of every topic, appended to one sequence of mapped files.

The record bytes are built outside the lock (like RocketMQ's MessageExtEncoder); under the
lock only the queue offset, physical offset and store timestamp are patched in with
struct.pack_into and the bytes go to the file with one pwrite (MappedFile.write). A record never spans files: when it does not fit
(plus the 8-byte minimum blank), the file gets the BLANK end-of-file record and the write rolls.
"""

from __future__ import annotations

import enum
import logging
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from rmqd.store.config import MessageStoreConfig
from rmqd.store.consumequeue import SCHEDULE_TOPIC, tags_code_of
from rmqd.store.mapped_file import MappedFile, MappedFileQueue
from rmqd.wire.errors import WireError
from rmqd.wire.message import (
    BLANK_MAGIC_CODE, BLANK_RECORD_STRUCT as _BLANK, MAGIC_CODE_V1, MAGIC_CODE_V2, QUEUE_OFFSET_POSITION,
    SHORT_MAX, SYSFLAG_POSITION, BatchItem, MessageConst, MessageSysFlag, create_offset_msg_id, crc32_masked,
    ReadableBuffer, decode_batch, decode_properties, encode_properties_java, record_head_reader, record_head_struct,
    store_timestamp_position,
)

END_FILE_MIN_BLANK_LENGTH = 8
_QQ = struct.Struct(">qq")
_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_TRAN_MASK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
_NO_QUEUE_OFFSET = (MessageSysFlag.TRANSACTION_PREPARED_TYPE, MessageSysFlag.TRANSACTION_ROLLBACK_TYPE)

log = logging.getLogger("rmqd.store")


def _with_host_flags(sys_flag: int, born_host: bytes, store_host: bytes) -> int:
    """Set BORNHOST_V6 / STOREHOSTADDRESS_V6 from the address sizes (as CommitLog.asyncPutMessage)."""
    sys_flag &= ~(MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG)
    if len(born_host) == 16:
        sys_flag |= MessageSysFlag.BORNHOST_V6_FLAG
    if len(store_host) == 16:
        sys_flag |= MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
    return sys_flag


# the head fields dispatch reads (others skipped), per host-address size combination
_DISPATCH_HEADS = record_head_reader(("body_crc", "queue_id", "queue_offset", "physical_offset", "sys_flag",
                                      "store_timestamp", "prepared_transaction_offset", "body_length"))
_DISPATCH_V4 = _DISPATCH_HEADS[0]  # 91 B or more: total >= 91 was checked, so it is always readable
_HOST_FLAGS = MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
_TOPICS: dict[bytes, str] = {}  # topic names repeat: decode each once
_KEYS = MessageConst.PROPERTY_KEYS
_UNIQ = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_APPENDED_MAX = 4096  # CommitLog.appended entries at most (eight dispatch rounds' worth of sends)


class PutMessageStatus(enum.Enum):
    PUT_OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3
    SERVICE_NOT_AVAILABLE = 4
    CREATE_MAPEDFILE_FAILED = 5
    MESSAGE_ILLEGAL = 6
    PROPERTIES_SIZE_EXCEEDED = 7
    OS_PAGECACHE_BUSY = 8
    UNKNOWN_ERROR = 9
    LMQ_CONSUME_QUEUE_NUM_EXCEEDED = 10


class AppendMessageStatus(enum.Enum):
    PUT_OK = 0
    END_OF_FILE = 1
    MESSAGE_SIZE_EXCEEDED = 2
    PROPERTIES_SIZE_EXCEEDED = 3
    UNKNOWN_ERROR = 4


# The members every append reads, as module constants: an access through an Enum class runs the
# metaclass's __getattr__ hook (~850 instructions on CPython 3.11).
_APPEND_OK = AppendMessageStatus.PUT_OK
_PUT_OK = PutMessageStatus.PUT_OK


@dataclass
class AppendMessageResult:
    status: AppendMessageStatus
    wroteOffset: int = 0
    wroteBytes: int = 0
    storeTimestamp: int = 0
    logicsOffset: int = 0
    msgNum: int = 1
    pagecacheRT: int = 0
    store_host: bytes = b""
    store_port: int = 0
    phy_offsets: list[int] | None = None  # per message, for a batch

    @property
    def msgId(self) -> str:
        """offsetMsgId (comma-joined for a batch), computed on demand like RocketMQ's supplier."""
        if self.phy_offsets is None:
            return create_offset_msg_id(self.store_host, self.store_port, self.wroteOffset)
        return ",".join(create_offset_msg_id(self.store_host, self.store_port, x) for x in self.phy_offsets)

    def is_ok(self) -> bool:
        return self.status is _APPEND_OK


@dataclass
class PutMessageResult:
    putMessageStatus: PutMessageStatus
    appendMessageResult: AppendMessageResult | None = None

    def is_ok(self) -> bool:
        return (self.appendMessageResult is not None and self.appendMessageResult.is_ok()
                and self.putMessageStatus is _PUT_OK)

    @property
    def end_offset(self) -> int:
        """Commit-log offset the message's durability wait must reach (wroteOffset + wroteBytes)."""
        r = self.appendMessageResult
        return 0 if r is None else r.wroteOffset + r.wroteBytes


@dataclass
class MessageEnvelope:
    """What a single message and a batch share: destination, body, hosts, times."""

    topic: str
    queue_id: int
    body: bytes
    properties: dict[str, str] = field(default_factory=dict)
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: bytes = b"\x7f\x00\x00\x01"
    born_port: int = 0
    store_host: bytes = b"\x7f\x00\x00\x01"
    store_port: int = 10911
    reconsume_times: int = 0


@dataclass
class MessageExtBrokerInner(MessageEnvelope):
    """A message as the send processor hands it to the store (MessageExtBrokerInner).

    ``properties`` is the map; ``properties_string`` (if set) is written as is. Otherwise the
    map is written in Java HashMap order, which is what a RocketMQ broker stores."""

    flag: int = 0
    prepared_transaction_offset: int = 0
    properties_string: str | None = None
    store_timestamp: int = 0
    #: (properties_string, the map that string decodes back to), when the sender built the string
    #: from a map it knows round-trips (see CommitLog.appended); ignored once the string is replaced
    stored_properties: tuple[str, dict[str, str]] | None = None

    @property
    def delay_time_level(self) -> int:
        t = self.properties.get(MessageConst.PROPERTY_DELAY_TIME_LEVEL)
        try:
            return int(t) if t else 0
        except ValueError:
            return 0

    def get_properties_string(self) -> str:
        if self.properties_string is None:
            self.properties_string = encode_properties_java(self.properties)
        return self.properties_string


def new_inner_message(topic: str, queue_id: int, body: bytes, properties: dict[str, str], flag: int,
                      sys_flag: int, born_timestamp: int, born_host: bytes, born_port: int, store_host: bytes,
                      store_port: int, reconsume_times: int, properties_string: str | None) -> MessageExtBrokerInner:
    """``MessageExtBrokerInner(...)`` as a send makes one, every field set. Why: a dataclass's
    ``__init__`` is generated Python source, so it runs interpreted even where this module is
    compiled; these stores are compiled (a test holds the two to the same object)."""
    msg = MessageExtBrokerInner.__new__(MessageExtBrokerInner)
    msg.topic = topic
    msg.queue_id = queue_id
    msg.body = body
    msg.properties = properties
    msg.sys_flag = sys_flag
    msg.born_timestamp = born_timestamp
    msg.born_host = born_host
    msg.born_port = born_port
    msg.store_host = store_host
    msg.store_port = store_port
    msg.reconsume_times = reconsume_times
    msg.flag = flag
    msg.prepared_transaction_offset = 0
    msg.properties_string = properties_string
    msg.store_timestamp = 0
    msg.stored_properties = None
    return msg


def _put_ok(wrote_offset: int, wrote_bytes: int, store_timestamp: int, logics_offset: int, store_host: bytes,
            store_port: int) -> PutMessageResult:
    """``PutMessageResult(PUT_OK, AppendMessageResult(PUT_OK, ...))`` of one appended record,
    built with compiled stores like :func:`new_inner_message`."""
    res = AppendMessageResult.__new__(AppendMessageResult)
    res.status = _APPEND_OK
    res.wroteOffset = wrote_offset
    res.wroteBytes = wrote_bytes
    res.storeTimestamp = store_timestamp
    res.logicsOffset = logics_offset
    res.msgNum = 1
    res.pagecacheRT = 0
    res.store_host = store_host
    res.store_port = store_port
    res.phy_offsets = None
    out = PutMessageResult.__new__(PutMessageResult)
    out.putMessageStatus = _PUT_OK
    out.appendMessageResult = res
    return out


@dataclass
class MessageExtBatch(MessageEnvelope):
    """SEND_BATCH_MESSAGE: one topic/queue, the client's batch body, batch-level properties
    (appended to every message's own properties, as MessageExtEncoder.encode(batch) does)."""

    items: list[BatchItem] | None = None  # decoded batch (set by the caller or lazily)


def _record_head(buf: ReadableBuffer, pos: int) -> tuple[int, int]:
    """The checks every record walk starts with: (total size, magic) of the record at ``pos``;
    total is 0 for the BLANK end-of-file record and -1 when the magic or the size cannot be a
    record here."""
    if pos + 8 > len(buf):
        return -1, 0
    total, magic = _BLANK.unpack_from(buf, pos)
    if magic == BLANK_MAGIC_CODE:
        return 0, magic
    if (magic != MAGIC_CODE_V1 and magic != MAGIC_CODE_V2) or total < 91 or pos + total > len(buf):
        return -1, magic
    return total, magic


def _apply_delay(cl: CommitLog, msg: MessageExtBrokerInner) -> None:
    """CommitLog._apply_delay (a module function: compiled, ``msg`` is typed in commitlog.pxd)."""
    tran = msg.sys_flag & _TRAN_MASK
    if tran != MessageSysFlag.TRANSACTION_NOT_TYPE and tran != MessageSysFlag.TRANSACTION_COMMIT_TYPE:
        return
    t = msg.properties.get(MessageConst.PROPERTY_DELAY_TIME_LEVEL)
    if not t:
        return
    level = msg.delay_time_level
    if level <= 0:
        return
    if level > cl.max_delay_level:
        level = cl.max_delay_level
        msg.properties[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = str(level)
    msg.properties[MessageConst.PROPERTY_REAL_TOPIC] = msg.topic
    msg.properties[MessageConst.PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    msg.properties_string = encode_properties_java(msg.properties)
    msg.topic = SCHEDULE_TOPIC
    msg.queue_id = level - 1


def _encode(cl: CommitLog, msg: MessageExtBrokerInner) -> bytearray | PutMessageStatus:
    """CommitLog.encode (a module function: compiled, ``msg`` is typed in commitlog.pxd)."""
    props_o = msg.properties_string
    if props_o is None:
        props_o = msg.properties_string = encode_properties_java(msg.properties)
    props_s = props_o if type(props_o) is str else str(props_o)
    props_b = props_s.encode("utf-8")
    if len(props_b) > SHORT_MAX:
        return PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
    body = msg.body
    if len(body) > cl.max_message_size:
        return PutMessageStatus.MESSAGE_ILLEGAL
    topic_o = msg.topic
    topic_s = topic_o if type(topic_o) is str else str(topic_o)
    topic_b = topic_s.encode("utf-8")
    magic = MAGIC_CODE_V1 if len(topic_b) <= 127 else MAGIC_CODE_V2
    born_host = msg.born_host
    store_host = msg.store_host
    msg.sys_flag = sys_flag = _with_host_flags(msg.sys_flag, born_host, store_host)
    st = record_head_struct(sys_flag)
    tlen_size = 1 if magic == MAGIC_CODE_V1 else 2
    total = st.size + len(body) + tlen_size + len(topic_b) + 2 + len(props_b)
    if total > cl.max_message_size + 64 * 1024:
        return PutMessageStatus.MESSAGE_ILLEGAL
    head = st.pack(total, magic, crc32_masked(body), msg.queue_id, msg.flag, 0, 0, sys_flag,
                   msg.born_timestamp, born_host, msg.born_port, 0, store_host, msg.store_port,
                   msg.reconsume_times, msg.prepared_transaction_offset, len(body))
    tn = len(topic_b)
    pn = len(props_b)
    return bytearray(b"").join((head, body, _U8[tn] if tlen_size == 1 else tn.to_bytes(2, "big"), topic_b,
                                _U16_SMALL[pn] if pn < 256 else pn.to_bytes(2, "big"), props_b))


#: the one- and two-byte lengths of a record's topic and short properties, prepared
_U8: tuple[bytes, ...] = tuple(bytes((i,)) for i in range(256))
_U16_SMALL: tuple[bytes, ...] = tuple(bytes((0, i)) for i in range(256))


def _put_message(cl: CommitLog, msg: MessageExtBrokerInner) -> PutMessageResult:
    """CommitLog.put_message (a module function: compiled, ``msg`` is typed in commitlog.pxd)."""
    _apply_delay(cl, msg)
    rec = _encode(cl, msg)
    if isinstance(rec, PutMessageStatus):
        return PutMessageResult(rec, None)
    sp = msg.stored_properties
    known = sp[1] if sp is not None and sp[0] is msg.properties_string else None
    sys_flag = msg.sys_flag
    topic = msg.topic
    queue_id = msg.queue_id
    tran = sys_flag & _TRAN_MASK
    key = f"{topic}-{queue_id}"
    ts_pos = store_timestamp_position(sys_flag)
    n = len(rec)
    if n + END_FILE_MIN_BLANK_LENGTH > cl.config.mappedFileSizeCommitLog:
        return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, None)  # can never fit a file
    with cl.put_message_lock:
        now = time.time_ns() // 1_000_000
        cl.begin_time_in_lock = now
        mf = cl._file_for(n)
        if mf is None:
            cl.begin_time_in_lock = 0
            return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED, None)
        pos = mf.wrote_position
        qoff = 0 if tran in _NO_QUEUE_OFFSET else cl.topic_queue_table.get(key, 0)
        phy = mf.file_from_offset + pos
        _QQ.pack_into(rec, QUEUE_OFFSET_POSITION, qoff, phy)
        _Q.pack_into(rec, ts_pos, now)
        try:  # CommitLog._write written out (a call less per send)
            mf.write(pos, rec)
        except OSError as exc:
            log.error("commit log %s: write at %d failed: %s", mf.file_name, pos, exc)
            cl.begin_time_in_lock = 0
            return PutMessageResult(PutMessageStatus.UNKNOWN_ERROR, None)
        if known is not None:  # before the record is published, so the reput finds it
            appended = cl.appended
            if len(appended) >= _APPENDED_MAX:
                appended.clear()  # dispatch is not taking them (stopped or suspended): parsed instead
            appended[phy] = (topic, queue_id, phy, n, tags_code_of(topic, known, now, cl.delay_level_table),
                             now, qoff, known.get(_KEYS), known.get(_UNIQ), sys_flag,
                             msg.prepared_transaction_offset, known)
        mf.wrote_position = pos + n
        mf.store_timestamp = now
        if tran not in _NO_QUEUE_OFFSET:
            cl.topic_queue_table[key] = qoff + 1
        cl.begin_time_in_lock = 0
    msg.store_timestamp = now
    if cl.on_appended is not None:
        cl.on_appended(phy + n)
    return _put_ok(phy, n, now, qoff, msg.store_host, msg.store_port)


class CommitLog:
    """Append / read the commit log (CommitLog.java minus HA and DLedger)."""

    def __init__(self, config: MessageStoreConfig):
        self.config = config
        self.mapped_file_queue = MappedFileQueue(config.get_store_path_commit_log(), config.mappedFileSizeCommitLog,
                                                 durable_names=True, preallocate=config.warmMapedFileEnable)
        self.topic_queue_table: dict[str, int] = {}
        self.put_message_lock = threading.Lock()
        self.delay_levels = config.delay_levels_ms()
        self.max_delay_level = len(self.delay_levels)
        self.delay_level_table = dict(enumerate(self.delay_levels, 1))  # level -> delay ms
        self.max_message_size = config.maxMessageSize
        self.begin_time_in_lock = 0
        # called after each successful append with the end offset (flush service hook)
        self.on_appended: Callable[[int], None] | None = None
        #: records this process appended and dispatch has not taken yet, by physical offset, as
        #: dispatch_info would read them back: the reput takes these instead of parsing the bytes
        #: it has just been handed (a record without an entry is parsed, as after a restart)
        self.appended: dict[int, DispatchInfo] = {}

    # ---- lifecycle ---------------------------------------------------------------------------
    def load(self) -> None:
        self.mapped_file_queue.load()

    def shutdown(self) -> None:
        self.mapped_file_queue.shutdown()

    # ---- append ------------------------------------------------------------------------------
    def _apply_delay(self, msg: MessageExtBrokerInner) -> None:
        """Delayed messages go to SCHEDULE_TOPIC_XXXX queue level-1, the real destination kept
        in REAL_TOPIC / REAL_QID (CommitLog.asyncPutMessage)."""
        _apply_delay(self, msg)

    def encode(self, msg: MessageExtBrokerInner) -> bytearray | PutMessageStatus:
        """Record bytes with queue offset / physical offset / store time left 0 (patched in the lock)."""
        return _encode(self, msg)

    def put_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        return _put_message(self, msg)

    def _file_for(self, n: int) -> MappedFile | None:
        """The file the next ``n`` bytes go to (under the put lock): the last one, or - if they
        don't fit with the 8-byte minimum blank - a new one after a BLANK end-of-file record.
        None if a file cannot be created (disk full, permissions)."""
        mfq = self.mapped_file_queue
        try:
            mf = mfq.get_last_mapped_file()
            if mf is None or mf.is_full():
                mf = mfq.get_last_mapped_file(0)
            assert mf is not None  # with a start offset it is created, or OSError is raised
            pos = mf.wrote_position
            if n + END_FILE_MIN_BLANK_LENGTH > mf.file_size - pos:
                self._write_blank(mf, pos)
                mf = mfq.get_last_mapped_file(0)
            return mf
        except OSError:
            return None

    @staticmethod
    def _write(mf: MappedFile, pos: int, data: bytearray) -> bool:
        """Write records under the put lock; False (logged) if the file refused them, e.g. a
        full disk: the caller then publishes nothing and the position stays."""
        try:
            mf.write(pos, data)
        except OSError as exc:
            log.error("commit log %s: write at %d failed: %s", mf.file_name, pos, exc)
            return False
        return True

    def _write_blank(self, mf: MappedFile, pos: int) -> None:
        remaining = mf.file_size - pos
        if remaining >= 8:
            mf.write(pos, _BLANK.pack(remaining, BLANK_MAGIC_CODE))
        mf.wrote_position = mf.file_size

    def encode_batch(self, batch: MessageExtBatch) -> list[bytes] | PutMessageStatus:
        """One record per batch item: the item's flag/body/properties (+ batch properties),
        the batch's topic/queue/hosts (MessageExtEncoder.encode(MessageExtBatch))."""
        items = batch.items if batch.items is not None else decode_batch(batch.body)
        if len(batch.body) > self.max_message_size:
            return PutMessageStatus.MESSAGE_ILLEGAL
        batch_props = encode_properties_java(batch.properties).encode("utf-8")
        if len(batch_props) > SHORT_MAX:
            return PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
        topic_b = batch.topic.encode("utf-8")
        magic = MAGIC_CODE_V1 if len(topic_b) <= 127 else MAGIC_CODE_V2
        tlen_size = 1 if magic == MAGIC_CODE_V1 else 2
        batch.sys_flag = sys_flag = _with_host_flags(batch.sys_flag, batch.born_host, batch.store_host)
        st = record_head_struct(sys_flag)
        out = []
        for it in items:
            props = it.properties_raw
            if batch_props:
                if props and props[-1:] != b"\x02":
                    props = props + b"\x02" + batch_props
                else:
                    props = props + batch_props
            if len(props) > SHORT_MAX:
                return PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
            body = it.body
            total = st.size + len(body) + tlen_size + len(topic_b) + 2 + len(props)
            head = st.pack(total, magic, crc32_masked(body), batch.queue_id, it.flag, 0, 0, sys_flag,
                           batch.born_timestamp, batch.born_host, batch.born_port, 0, batch.store_host,
                           batch.store_port, batch.reconsume_times, 0, len(body))
            out.append(b"".join((head, body, len(topic_b).to_bytes(tlen_size, "big"), topic_b,
                                 len(props).to_bytes(2, "big"), props)))
        return out

    def put_messages(self, batch: MessageExtBatch) -> PutMessageResult:
        """Append a batch contiguously in one file (rolls first if the whole batch doesn't fit)."""
        if batch.sys_flag & _TRAN_MASK != MessageSysFlag.TRANSACTION_NOT_TYPE:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, None)  # no transactional batches
        if batch.properties.get(MessageConst.PROPERTY_DELAY_TIME_LEVEL, "0") not in ("", "0"):
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, None)  # no delayed batches
        try:
            recs = self.encode_batch(batch)
        except WireError:  # malformed batch body
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, None)
        if isinstance(recs, PutMessageStatus):
            return PutMessageResult(recs, None)
        if not recs:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, None)
        total = sum(len(r) for r in recs)
        if total + END_FILE_MIN_BLANK_LENGTH > self.config.mappedFileSizeCommitLog:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, None)  # can never fit a file
        key = f"{batch.topic}-{batch.queue_id}"
        ts_pos = store_timestamp_position(batch.sys_flag)
        with self.put_message_lock:
            now = time.time_ns() // 1_000_000
            mf = self._file_for(total)
            if mf is None:
                return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED, None)
            pos = mf.wrote_position
            begin_qoff = qoff = self.topic_queue_table.get(key, 0)
            wrote = mf.file_from_offset + pos
            buf = bytearray(b"").join(recs)
            p = 0
            phys = []
            for r in recs:
                phy = wrote + p
                _QQ.pack_into(buf, p + QUEUE_OFFSET_POSITION, qoff, phy)
                _Q.pack_into(buf, p + ts_pos, now)
                phys.append(phy)
                qoff += 1
                p += len(r)
            if not self._write(mf, pos, buf):
                return PutMessageResult(PutMessageStatus.UNKNOWN_ERROR, None)
            mf.wrote_position = pos + p
            mf.store_timestamp = now
            self.topic_queue_table[key] = qoff
        res = AppendMessageResult(_APPEND_OK, wrote, total, now, begin_qoff, len(recs), 0,
                                  batch.store_host, batch.store_port, phys)
        if self.on_appended is not None:
            self.on_appended(wrote + total)
        return PutMessageResult(_PUT_OK, res)

    # ---- read --------------------------------------------------------------------------------
    def get_min_offset(self) -> int:
        mf = self.mapped_file_queue.get_first_mapped_file()
        if mf is None:
            return -1
        return mf.file_from_offset

    def get_max_offset(self) -> int:
        return self.mapped_file_queue.get_max_offset()

    def roll_next_file(self, offset: int) -> int:
        size = self.config.mappedFileSizeCommitLog
        return offset + size - offset % size

    def get_message(self, offset: int, size: int) -> memoryview | None:
        """The stored record at ``offset`` (zero-copy view), None if not (fully) there."""
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset, offset == 0)
        if mf is None:
            return None
        return mf.select_mapped_buffer(offset % self.config.mappedFileSizeCommitLog, size)

    def get_data(self, offset: int, return_first_on_not_found: bool = False) -> tuple[int, memoryview] | None:
        """(start offset, view to the written end of the file holding ``offset``)."""
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset, return_first_on_not_found)
        if mf is None:
            return None
        pos = offset % self.config.mappedFileSizeCommitLog
        v = mf.select_mapped_buffer(pos)
        if v is None:
            return None
        return mf.file_from_offset + pos, v

    def pickup_store_timestamp(self, offset: int, size: int) -> int:
        if offset < self.get_min_offset():
            return -1
        v = self.get_message(offset, size)
        if v is None or len(v) < 8:
            return -1
        sys_flag = _I.unpack_from(v, SYSFLAG_POSITION)[0]
        return _Q.unpack_from(v, store_timestamp_position(sys_flag))[0]

    # ---- checkMessageAndReturnSize ---------------------------------------------------------------
    @staticmethod
    def validate_record(buf: ReadableBuffer, pos: int, check_crc: bool = True) -> int:
        """Size-only variant of check_message_and_return_size for clean recovery: the record's
        size if valid, 0 for a BLANK record, -1 if invalid (magic, lengths or CRC)."""
        total, magic = _record_head(buf, pos)
        if total <= 0:
            return total
        st = record_head_struct(_I.unpack_from(buf, pos + SYSFLAG_POSITION)[0])
        p = pos + st.size
        body_len = _I.unpack_from(buf, p - 4)[0]
        if body_len < 0 or p + body_len + 3 > pos + total:
            return -1
        if check_crc and body_len > 0 and crc32_masked(buf[p:p + body_len]) != _I.unpack_from(buf, pos + 8)[0]:
            return -1
        p += body_len
        if magic == MAGIC_CODE_V2:
            p += 2 + ((buf[p] << 8) | buf[p + 1])
        else:
            p += 1 + buf[p]
        if p + 2 > pos + total:
            return -1
        return total if p + 2 + ((buf[p] << 8) | buf[p + 1]) == pos + total else -1

    def dispatch_info(self, buf: ReadableBuffer, pos: int, check_crc: bool = True) -> DispatchInfo | int:
        """The record at ``pos`` as the fields of a :class:`DispatchRequest` (a plain tuple in
        that order, without ``success``); 0 for BLANK (end of file); -1 if invalid (bad magic,
        CRC, sizes) -> end of valid data. Reads only the head fields dispatch uses, and the
        tags code as CommitLog.checkMessageAndReturnSize computes it (``tags_code_of``)."""
        total, magic = _record_head(buf, pos)
        if total <= 0:
            return total
        end = pos + total
        # one unpack for the usual IPv4 head (the sysFlag is read with it), again if it is IPv6
        crc, queue_id, queue_offset, phy, sys_flag, store_ts, prepared, body_len = _DISPATCH_V4.unpack_from(buf, pos)
        p = pos + _DISPATCH_V4.size
        if sys_flag & _HOST_FLAGS:
            st = _DISPATCH_HEADS[sys_flag & _HOST_FLAGS]
            p = pos + st.size
            if p + 3 > end:
                return -1
            crc, queue_id, queue_offset, phy, sys_flag, store_ts, prepared, body_len = st.unpack_from(buf, pos)
        if body_len < 0 or p + body_len > end:
            return -1
        if check_crc and body_len > 0 and crc32_masked(buf[p:p + body_len]) != crc:
            return -1
        p += body_len
        if magic == MAGIC_CODE_V2:
            tlen = (buf[p] << 8) | buf[p + 1]
            p += 2
        else:
            tlen = buf[p]
            p += 1
        if p + tlen + 2 > end:
            return -1
        topic_b = bytes(buf[p:p + tlen])
        topic = _TOPICS.get(topic_b)
        if topic is None:
            topic = topic_b.decode("utf-8", "replace")  # Java's new String(bytes, UTF_8)
            if len(_TOPICS) < 65536:
                _TOPICS[topic_b] = topic
        p += tlen
        plen = (buf[p] << 8) | buf[p + 1]
        p += 2
        if p + plen != end:
            return -1
        if plen > 0:
            props = decode_properties(str(buf[p:end], "utf-8", "replace"))
            tags_code = tags_code_of(topic, props, store_ts, self.delay_level_table)
            keys = props.get(_KEYS)
            uniq = props.get(_UNIQ)
        else:
            props, tags_code, keys, uniq = {}, 0, None, None
        return (topic, queue_id, phy, total, tags_code, store_ts, queue_offset, keys, uniq, sys_flag, prepared,
                props)

    def check_message_and_return_size(self, buf: ReadableBuffer, pos: int, check_crc: bool = True) -> "DispatchRequest":
        """Validate and summarize the record at ``pos`` (CommitLog.checkMessageAndReturnSize):
        msg_size > 0 and success: a message; 0 and success: BLANK (end of file);
        success False: invalid (bad magic, CRC, sizes) -> end of valid data."""
        info = self.dispatch_info(buf, pos, check_crc)
        if isinstance(info, int):
            return DispatchRequest.blank() if info == 0 else DispatchRequest.invalid(-1)
        return DispatchRequest(*info, True)


#: CommitLog.dispatch_info's record: DispatchRequest's fields in order, without ``success``
#: (topic, queue id, commit-log offset, size, tags code, store timestamp, queue offset, keys,
#: unique key, sys flag, prepared-transaction offset, properties): a plain tuple, the dispatch
#: hot path builds no object per record
DispatchInfo = tuple[str, int, int, int, int, int, int, str | None, str | None, int, int, dict[str, str]]


@dataclass(slots=True)
class DispatchRequest:
    """What dispatching one record needs (DispatchRequest.java)."""

    topic: str
    queue_id: int
    commit_log_offset: int
    msg_size: int
    tags_code: int
    store_timestamp: int
    consume_queue_offset: int
    keys: str | None
    uniq_key: str | None
    sys_flag: int
    prepared_transaction_offset: int
    properties: dict[str, str]
    success: bool

    @staticmethod
    def blank() -> "DispatchRequest":
        return DispatchRequest("", 0, 0, 0, 0, 0, 0, None, None, 0, 0, {}, True)

    @staticmethod
    def invalid(size: int) -> "DispatchRequest":
        return DispatchRequest("", 0, 0, size, 0, 0, 0, None, None, 0, 0, {}, False)
