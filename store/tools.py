"""``rmqd store verify`` and ``rmqd store dump``: read a store directory (RocketMQ's or
rmqd's) without changing a byte, and say exactly where it is wrong.

``verify(store_dir)`` checks
  * the commit log: file names/sizes/contiguity, every record (magic, sizes, body CRC,
    physical-offset field, decodable topic and properties), BLANK end-of-file records whose
    size is the rest of the file, and that nothing but zeros follows the end of data;
  * every consume-queue unit against the record it points to (topic, queue id, queue offset,
    size, tags code as the dispatcher computes it), pre-blank units only before the first
    real unit, zeros after the last;
  * every index file: size, header, every slot and entry (the entry's record exists and one of
    its keys hashes to the entry's hash; every entry is reachable from its hash slot, so a
    zeroed or overwritten slot is reported).
Consume-queue units and index entries below the commit log's first file were expired with it
and are not errors. Files are opened read-only.

It returns ``Problem(file, offset, message)`` items (``str()`` = ``file:offset: message``).
``dump(store_dir, topic=None, queue=None)`` yields one JSON-able dict per message: in
commit-log order, or in queue order through the consume queue when ``queue`` is given.
"""
from __future__ import annotations

import base64
import mmap
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from rmqd.store.config import MessageStoreConfig
from rmqd.store.consumequeue import CqUnit, is_pre_blank, iter_unit_bytes, tags_code_of
from rmqd.store.indexfile import (HASH_SLOT_SIZE, INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, _ENTRY, _HEADER, _SLOT,
                             build_key, index_key_hash)
from rmqd.wire import fastjson
from rmqd.wire.names import topic_remark
from rmqd.wire.message import (BLANK_MAGIC_CODE, MessageConst, MessageRecord, MessageSysFlag, ReadableBuffer, RecordError,
                          decode_record)

Progress = Callable[[int, int], None]

#: progress is reported at least every this many bytes of work inside a file (a commit-log
#: file is 1 GiB by default: ticking per file left the bar still for many seconds)
TICK_BYTES = 4 << 20


@dataclass(frozen=True, slots=True)
class Problem:
    file: str
    offset: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.offset}: {self.message}"


@dataclass(slots=True)
class _Rec:
    topic: str
    queue_id: int
    queue_offset: int
    size: int
    tags_code: int
    sys_flag: int
    key_hashes: frozenset[int]


def _map(path: Path) -> mmap.mmap | bytes:
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return b""
        return mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)


def _is_offset_name(name: str, digits: int = 20) -> bool:
    return len(name) == digits and name.isdigit()


def _first_nonzero(buf: ReadableBuffer, start: int, end: int, at: Callable[[int], None] | None = None) -> int:
    """Position of the first non-zero byte in buf[start:end], or -1; ``at(pos)`` is told how
    far the scan has come, chunk by chunk."""
    chunk = 1 << 20
    zero = bytes(chunk)
    p = start
    while p < end:
        n = min(chunk, end - p)
        piece = buf[p:p + n]
        if piece != zero[:n]:
            return p + next(i for i, b in enumerate(piece) if b)
        p += n
        if at is not None:
            at(p)
    return -1


class _Verifier:
    def __init__(self, root: Path, config: MessageStoreConfig, progress: Progress | None) -> None:
        self.root = root
        self.config = config
        self.progress = progress
        self.problems: list[Problem] = []
        self.records: dict[int, _Rec] = {}
        self.min_phy = 0
        self.max_phy = 0
        self.delay_table = dict(enumerate(config.delay_levels_ms(), 1))
        self.total_bytes = 0
        self.done_bytes = 0
        self.file_ticked = 0  # bytes of the current file already reported

    def report(self, file: Path | str, offset: int, message: str) -> None:
        self.problems.append(Problem(str(file), offset, message))

    def tick(self, n: int) -> None:
        self.done_bytes += n
        if self.progress:
            self.progress(self.done_bytes, self.total_bytes)

    def tick_in_file(self, pos: int) -> None:
        """The current file is checked up to ``pos``: report it every TICK_BYTES."""
        if pos - self.file_ticked >= TICK_BYTES:
            self.tick(pos - self.file_ticked)
            self.file_ticked = pos

    def finish_file(self, size: int) -> None:
        self.tick(size - self.file_ticked)
        self.file_ticked = 0

    # -- commit log -------------------------------------------------------------------------
    def commit_log(self) -> None:
        d = Path(self.config.get_store_path_commit_log())
        if not d.is_dir():
            self.report(d, 0, "commit log directory missing")
            return
        files = sorted(p for p in d.iterdir() if p.is_file())
        good: list[Path] = []
        size = None
        for p in files:
            if not _is_offset_name(p.name):
                self.report(p, 0, "not a commit-log file (name is not a 20-digit offset)")
                continue
            s = p.stat().st_size
            if size is None:
                size = s
            if s != size or s == 0:
                self.report(p, 0, f"file size {s} differs from the first file's {size}")
                continue
            if int(p.name) % size:
                self.report(p, 0, f"start offset {int(p.name)} is not a multiple of the file size {size}")
                continue
            if good and int(p.name) != int(good[-1].name) + size:
                self.report(p, 0, f"gap: previous file {good[-1].name} does not end at this file's offset")
            good.append(p)
        if not good:
            return
        self.min_phy = int(good[0].name)
        end_of_data = False
        for p in good:
            base = int(p.name)
            buf = _map(p)
            try:
                if end_of_data:
                    nz = _first_nonzero(buf, 0, len(buf), self.tick_in_file)
                    if nz >= 0:
                        self.report(p, nz, "data after the end of the commit log")
                    continue
                pos = self._walk_file(p, buf, base)
                if pos is not None:  # end of data inside this file
                    end_of_data = True
                    self.max_phy = base + pos
                    nz = _first_nonzero(buf, pos, len(buf), self.tick_in_file)
                    if nz >= 0:
                        self.report(p, nz, f"non-zero bytes after the end of data at {pos} (torn or foreign write)")
                else:
                    self.max_phy = base + len(buf)
            finally:
                self.finish_file(len(buf))
                if isinstance(buf, mmap.mmap):
                    buf.close()

    def _walk_file(self, path: Path, buf: ReadableBuffer, base: int) -> int | None:
        """Check records; returns the end-of-data position, or None if the file is full."""
        n = len(buf)
        pos = 0
        next_tick = TICK_BYTES
        while pos + 8 <= n:
            if pos >= next_tick:
                self.tick_in_file(pos)
                next_tick = pos + TICK_BYTES
            total = int.from_bytes(buf[pos:pos + 4], "big", signed=True)
            magic = int.from_bytes(buf[pos + 4:pos + 8], "big")
            if total == 0 and magic == 0:
                return pos
            if magic == BLANK_MAGIC_CODE:
                if total != n - pos:
                    self.report(path, pos, f"BLANK record size {total} is not the rest of the file ({n - pos})")
                return None
            try:
                rec = decode_record(buf, pos, check_crc=True)
            except RecordError as e:
                self.report(path, pos, str(e).removeprefix(f"offset {pos}: "))
                return None  # lengths can't be trusted past here; the next file starts clean
            if rec.physical_offset != base + pos:
                self.report(path, pos, f"physical offset field {rec.physical_offset} != actual {base + pos}")
            remark = topic_remark(rec.topic)
            if remark is not None:
                self.report(path, pos, f"topic {rec.topic!r} is not a valid topic name ({remark}): "
                                       "dispatch skips this record, no consume queue or index entry has it")
            self._remember(base + pos, rec)
            pos += rec.total_size
        if pos < n:  # fewer than 8 bytes left without a BLANK record
            nz = _first_nonzero(buf, pos, n)
            if nz >= 0:
                self.report(path, pos, "truncated record header at end of file")
        return None if pos >= n else pos

    def _remember(self, phy: int, rec: MessageRecord) -> None:
        props = rec.properties
        hashes = set()
        if MessageSysFlag.get_transaction_value(rec.sys_flag) != MessageSysFlag.TRANSACTION_ROLLBACK_TYPE:
            uniq = props.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            if uniq is not None:
                hashes.add(index_key_hash(build_key(rec.topic, uniq)))
            for k in rec.keys:
                hashes.add(index_key_hash(build_key(rec.topic, k)))
        self.records[phy] = _Rec(rec.topic, rec.queue_id, rec.queue_offset, rec.total_size,
                                 tags_code_of(rec.topic, props, rec.store_timestamp, self.delay_table),
                                 rec.sys_flag, frozenset(hashes))

    # -- consume queues ---------------------------------------------------------------------
    def consume_queues(self) -> None:
        root = Path(self.config.get_store_path_consume_queue())
        if not root.is_dir():
            return
        want = self.config.get_mapped_file_size_consume_queue()
        for tdir in sorted(root.iterdir()):
            if not tdir.is_dir():
                continue
            for qdir in sorted(tdir.iterdir()):
                if not qdir.is_dir() or not qdir.name.lstrip("-").isdigit():
                    continue
                self._queue(tdir.name, int(qdir.name), qdir, want)

    def _queue(self, topic: str, qid: int, qdir: Path, size: int) -> None:
        ended = False
        seen_real = False
        prev = None
        for p in sorted(x for x in qdir.iterdir() if x.is_file()):
            if not _is_offset_name(p.name):
                self.report(p, 0, "not a consume-queue file (name is not a 20-digit offset)")
                continue
            s = p.stat().st_size
            if s != size:
                self.report(p, 0, f"file size {s} does not match mappedFileSizeConsumeQueue {size}")
                continue
            if int(p.name) % size:
                self.report(p, 0, f"start offset {int(p.name)} is not a multiple of the file size {size}")
                continue
            if prev is not None and int(p.name) != int(prev.name) + size:
                self.report(p, 0, f"gap: previous file {prev.name} does not end at this file's offset")
            first_file = prev is None
            prev = p
            data = p.read_bytes()
            self.tick(len(data))
            for u in iter_unit_bytes(data, p.name, int(p.name)):
                if ended:
                    if u.commit_log_offset or u.size or u.tags_code:
                        self.report(p, u.file_pos, "unit after the end of the queue")
                        break
                    continue
                if not (u.commit_log_offset >= 0 and u.size > 0):
                    ended = True
                    if u.commit_log_offset or u.size or u.tags_code:
                        self.report(p, u.file_pos, f"invalid unit (offset {u.commit_log_offset}, size {u.size})")
                    continue
                if is_pre_blank(u):
                    if seen_real or not first_file:
                        self.report(p, u.file_pos, "pre-blank unit after real units")
                    continue
                seen_real = True
                self._unit(p, topic, qid, u)

    def _unit(self, p: Path, topic: str, qid: int, u: CqUnit) -> None:
        phy = u.commit_log_offset
        if phy < self.min_phy:
            return  # expired with its commit-log file
        rec = self.records.get(phy)
        if rec is None:
            where = "beyond the end of the commit log" if phy >= self.max_phy else "not at a record"
            self.report(p, u.file_pos, f"unit {u.logical_offset} points to {phy}, {where}")
            return
        bad = []
        if rec.topic != topic:
            bad.append(f"topic {rec.topic!r}")
        if rec.queue_id != qid:
            bad.append(f"queue {rec.queue_id}")
        if rec.queue_offset != u.logical_offset:
            bad.append(f"queue offset {rec.queue_offset}")
        if rec.size != u.size:
            bad.append(f"size {rec.size} (unit says {u.size})")
        if rec.tags_code != u.tags_code:
            bad.append(f"tags code {rec.tags_code} (unit says {u.tags_code})")
        if bad:
            self.report(p, u.file_pos, f"unit {u.logical_offset} -> record at {phy} has " + ", ".join(bad))

    # -- index ------------------------------------------------------------------------------
    def index(self) -> None:
        d = Path(self.config.get_store_path_index())
        if not d.is_dir():
            return
        slots, entries = self.config.maxHashSlotNum, self.config.maxIndexNum
        want = INDEX_HEADER_SIZE + slots * HASH_SLOT_SIZE + entries * INDEX_ENTRY_SIZE
        for p in sorted(x for x in d.iterdir() if x.is_file()):
            if len(p.name) != 17 or not p.name.isdigit():
                self.report(p, 0, "not an index file (name is not yyyyMMddHHmmssSSS)")
                continue
            s = p.stat().st_size
            if s != want:
                self.report(p, 0, f"file size {s} does not match maxHashSlotNum {slots} / maxIndexNum {entries} "
                                  f"({want} bytes)")
                continue
            buf = _map(p)
            try:
                self._index_file(p, buf, slots, entries)
            finally:
                self.finish_file(len(buf))
                if isinstance(buf, mmap.mmap):
                    buf.close()

    def _index_file(self, p: Path, buf: ReadableBuffer, slots: int, entries: int) -> None:
        begin_ts, end_ts, begin_phy, end_phy, slot_count, count = _HEADER.unpack_from(buf, 0)
        if count <= 0:
            count = 1
        if count > entries:
            self.report(p, 36, f"indexCount {count} exceeds maxIndexNum {entries}")
            return
        base = INDEX_HEADER_SIZE + slots * HASH_SLOT_SIZE
        reachable = bytearray(count)
        used = 0
        for s, (head,) in enumerate(_SLOT.iter_unpack(buf[INDEX_HEADER_SIZE:base])):
            if not s & 0xFFFF:
                self.tick_in_file(INDEX_HEADER_SIZE + s * HASH_SLOT_SIZE)
            if head == 0:
                continue
            used += 1
            spos = INDEX_HEADER_SIZE + s * HASH_SLOT_SIZE
            if head < 0 or head >= count:
                self.report(p, spos, f"slot {s} points to entry {head}, beyond indexCount {count}")
                continue
            n, steps = head, 0
            while 0 < n < count and not reachable[n] and steps < count:
                reachable[n] = 1
                kh, _off, _td, prev = _ENTRY.unpack_from(buf, base + n * INDEX_ENTRY_SIZE)
                if kh % slots != s:
                    self.report(p, base + n * INDEX_ENTRY_SIZE, f"entry {n} hash {kh} is chained from slot {s}")
                if prev >= n:
                    self.report(p, base + n * INDEX_ENTRY_SIZE, f"entry {n} chains forward to {prev}")
                    break
                n, steps = prev, steps + 1
        if used > slot_count:
            self.report(p, 32, f"hashSlotCount {slot_count} is below the {used} slots in use")
        for n in range(1, count):
            epos = base + n * INDEX_ENTRY_SIZE
            if not n & 0xFFFF:
                self.tick_in_file(epos)
            kh, off, td, prev = _ENTRY.unpack_from(buf, epos)
            if not reachable[n]:
                self.report(p, epos, f"entry {n} is not reachable from its slot {kh % slots if kh >= 0 else '?'}")
            if kh < 0 or td < 0 or prev < 0:
                self.report(p, epos, f"entry {n} has a negative field (hash {kh}, timeDiff {td}, prev {prev})")
                continue
            if off < self.min_phy:
                continue
            rec = self.records.get(off)
            if rec is None:
                self.report(p, epos, f"entry {n} points to {off}, not at a record")
            elif kh not in rec.key_hashes:
                self.report(p, epos, f"entry {n} hash {kh} matches no key of the record at {off}")

    # -- config -----------------------------------------------------------------------------
    def config_files(self) -> None:
        d = Path(self.config.get_config_dir())
        if not d.is_dir():
            return
        for p in sorted(d.glob("*.json")):
            text = p.read_text("utf-8", errors="replace")
            if not text:
                continue
            try:
                fastjson.loads(text)
            except ValueError as e:
                self.report(p, 0, f"does not parse: {e}")

    def total(self) -> int:
        n = 0
        c = self.config
        for sub in (c.get_store_path_commit_log(), c.get_store_path_consume_queue(), c.get_store_path_index()):
            d = Path(sub)
            if d.is_dir():
                n += sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
        return n


def _config_for(root: Path, config: MessageStoreConfig | None) -> MessageStoreConfig:
    """The sizes of ``config`` (or :func:`infer_config`'s) with every path inside ``root``; when
    ``root`` is the config's own storePathRootDir, its storePathCommitLog stands (the store as
    the broker that wrote it laid it out)."""
    if config is None:
        return infer_config(root)
    values = dict(vars(config))
    def norm(path: str | os.PathLike[str]) -> str:
        return os.path.abspath(os.path.expanduser(path))

    own_root = norm(config.storePathRootDir) == norm(root)
    values.update(storePathRootDir=str(root))
    if not own_root:
        values.update(storePathCommitLog=None)
    return MessageStoreConfig(**values)


def infer_config(store_dir: str | os.PathLike) -> MessageStoreConfig:
    """Sizes read off the files when no broker.conf is at hand: the commit-log and
    consume-queue file sizes of the first files found, and index slots/entries from the
    index file size assuming RocketMQ's default ratio maxIndexNum = 4 x maxHashSlotNum."""
    root = Path(store_dir)
    cfg = MessageStoreConfig(storePathRootDir=str(root))
    cl = _commit_log_files(cfg)
    if cl:
        cfg.mappedFileSizeCommitLog = cl[0].stat().st_size
    cq_root = Path(cfg.get_store_path_consume_queue())
    if cq_root.is_dir():
        first = next((f for f in sorted(cq_root.glob("*/*/*")) if f.is_file() and _is_offset_name(f.name)), None)
        if first is not None and first.stat().st_size % 20 == 0 and first.stat().st_size:
            cfg.mappedFileSizeConsumeQueue = first.stat().st_size
    idx = Path(cfg.get_store_path_index())
    if idx.is_dir():
        first = next((f for f in sorted(idx.iterdir()) if f.is_file()), None)
        if first is not None:
            size = first.stat().st_size
            default = INDEX_HEADER_SIZE + cfg.maxHashSlotNum * HASH_SLOT_SIZE + cfg.maxIndexNum * INDEX_ENTRY_SIZE
            per_slot = HASH_SLOT_SIZE + 4 * INDEX_ENTRY_SIZE
            if size != default and size > INDEX_HEADER_SIZE and (size - INDEX_HEADER_SIZE) % per_slot == 0:
                cfg.maxHashSlotNum = (size - INDEX_HEADER_SIZE) // per_slot
                cfg.maxIndexNum = 4 * cfg.maxHashSlotNum
    return cfg


def verify(store_dir: str | os.PathLike, config: MessageStoreConfig | None = None,
           progress: Progress | None = None) -> list[Problem]:
    """Check every record, consume-queue unit and index entry of ``store_dir``.

    ``config`` gives the sizes the store was written with (mappedFileSizeConsumeQueue,
    maxHashSlotNum, maxIndexNum, messageDelayLevel; paths are taken inside ``store_dir``);
    without it they are inferred from the files (:func:`infer_config`). ``progress(done_bytes, total_bytes)`` is called as files are checked."""
    root = Path(store_dir)
    cfg = _config_for(root, config)
    v = _Verifier(root, cfg, progress)
    if not root.is_dir():
        return [Problem(str(root), 0, "not a directory")]
    v.total_bytes = v.total()
    v.commit_log()
    v.consume_queues()
    v.index()
    v.config_files()
    return v.problems


def compare_commit_logs(store_dir: str | os.PathLike, other_dir: str | os.PathLike,
                        config: MessageStoreConfig | None = None,
                        other_config: MessageStoreConfig | None = None) -> tuple[list[Problem], str]:
    """``verify --against``: the two commit logs byte for byte where both have data.

    A replica may start later (a slave copies from the master's last file on), so files
    one side has before the other's first file are not a difference; the range compared is
    returned with the problems (file + offset of the first differing byte of each file,
    files missing inside the common range, different end offsets)."""
    a_cfg, b_cfg = _config_for(Path(store_dir), config), _config_for(Path(other_dir), other_config)
    a_files = {p.name: p for p in _commit_log_files(a_cfg)}
    b_files = {p.name: p for p in _commit_log_files(b_cfg)}
    problems: list[Problem] = []
    if not a_files or not b_files:
        return [Problem(str(store_dir if not a_files else other_dir), 0, "no commit-log files")], "nothing"
    start = max(min(a_files), min(b_files))
    names = sorted(n for n in set(a_files) | set(b_files) if n >= start)
    for name in names:
        a, b = a_files.get(name), b_files.get(name)
        if a is None or b is None:
            missing_in = other_dir if b is None else store_dir
            problems.append(Problem(str(a or b), 0, f"file missing in {missing_in}"))
            continue
        if a.stat().st_size != b.stat().st_size:
            problems.append(Problem(str(a), 0, f"file size {a.stat().st_size} != {b.stat().st_size} in {other_dir}"))
            continue
        with open(a, "rb") as fa, open(b, "rb") as fb:
            pos = 0
            while True:
                ca, cb = fa.read(1 << 20), fb.read(1 << 20)
                if ca != cb:
                    n = min(len(ca), len(cb))
                    i = next((k for k in range(n) if ca[k] != cb[k]), n)
                    problems.append(Problem(str(a), pos + i, f"differs from {b} (first different byte)"))
                    break
                if not ca:
                    break
                pos += len(ca)
    first, last = names[0], names[-1]
    return problems, f"commit-log files {first} .. {last} ({len(names)} file(s))"


# -- dump -----------------------------------------------------------------------------------
def message_to_json(rec: MessageRecord, phy: int) -> dict:
    body = rec.body
    try:
        body = rec.uncompressed_body()
    except ValueError:
        pass
    out = {
        "physicalOffset": phy, "totalSize": rec.total_size, "msgId": rec.offset_msg_id,
        "topic": rec.topic, "queueId": rec.queue_id, "queueOffset": rec.queue_offset,
        "flag": rec.flag, "sysFlag": rec.sys_flag, "bodyCRC": rec.body_crc,
        "bornTimestamp": rec.born_timestamp, "bornHost": rec.born_host,
        "storeTimestamp": rec.store_timestamp, "storeHost": rec.store_host,
        "reconsumeTimes": rec.reconsume_times, "preparedTransactionOffset": rec.prepared_transaction_offset,
        "properties": rec.properties, "bodyLength": len(body),
    }
    try:
        out["body"] = body.decode("utf-8")
    except UnicodeDecodeError:
        out["bodyBase64"] = base64.b64encode(body).decode("ascii")
    return out


def _commit_log_files(cfg: MessageStoreConfig) -> list[Path]:
    d = Path(cfg.get_store_path_commit_log())
    return sorted(p for p in d.iterdir() if p.is_file() and _is_offset_name(p.name)) if d.is_dir() else []


def _iter_commit_log(cfg: MessageStoreConfig) -> Iterator[tuple[int, MessageRecord]]:
    for p in _commit_log_files(cfg):
        base = int(p.name)
        buf = _map(p)
        try:
            pos, n = 0, len(buf)
            while pos + 8 <= n:
                total = int.from_bytes(buf[pos:pos + 4], "big", signed=True)
                magic = int.from_bytes(buf[pos + 4:pos + 8], "big")
                if (total == 0 and magic == 0) or magic == BLANK_MAGIC_CODE:
                    break
                rec = decode_record(buf, pos, where=str(p))
                yield base + pos, rec
                pos += rec.total_size
        finally:
            if isinstance(buf, mmap.mmap):
                buf.close()


def _read_record(files: list[Path], phy: int) -> MessageRecord | None:
    for p in reversed(files):
        base = int(p.name)
        if phy >= base:
            with open(p, "rb") as f:
                f.seek(phy - base)
                head = f.read(4)
                if len(head) < 4:
                    return None
                total = int.from_bytes(head, "big", signed=True)
                if total <= 0:
                    return None
                return decode_record(head + f.read(total - 4), 0, where=f"{p}:{phy - base}")
    return None


def dump(store_dir: str | os.PathLike, topic: str | None = None, queue: int | None = None,
         config: MessageStoreConfig | None = None) -> Iterator[dict]:
    """Messages as JSON-able dicts. With ``queue`` (needs ``topic``) they come in queue order
    through the consume queue, each with its ``queueOffset``; otherwise in commit-log order,
    optionally only ``topic``. A record that cannot be decoded raises RecordError naming the
    file and offset (run ``verify`` for the full list)."""
    cfg = _config_for(Path(store_dir), config)
    if queue is None:
        for phy, rec in _iter_commit_log(cfg):
            if topic is None or rec.topic == topic:
                yield message_to_json(rec, phy)
        return
    if topic is None:
        raise ValueError("a queue id needs a topic")
    qdir = Path(cfg.get_store_path_consume_queue()) / topic / str(queue)
    files = _commit_log_files(cfg)
    min_phy = int(files[0].name) if files else 0
    for p in sorted(x for x in qdir.iterdir() if x.is_file() and _is_offset_name(x.name)) if qdir.is_dir() else []:
        for u in iter_unit_bytes(p.read_bytes(), p.name, int(p.name)):
            if not (u.commit_log_offset >= 0 and u.size > 0):
                return
            if is_pre_blank(u) or u.commit_log_offset < min_phy:
                continue
            found = _read_record(files, u.commit_log_offset)
            if found is None:
                return
            yield message_to_json(found, u.commit_log_offset)


__all__ = ["Problem", "verify", "dump", "infer_config", "message_to_json"]
