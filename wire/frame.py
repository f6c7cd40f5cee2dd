"""Remoting frames: ``RemotingCommand`` and its two header serializations, sans IO.

Layout (RocketMQ ``RemotingCommand#encode``/``decode``, ``NettyDecoder``)::

    int32 BE  length            everything after this word
    int32 BE  serializeType<<24 | headerLength
    header    JSON (fastjson bean: fields alphabetical, nulls omitted) or ROCKETMQ binary
    body      the rest

The binary header (``RocketMQSerializable``)::

    int16 code | int8 language | int16 version | int32 opaque | int32 flag |
    int32 remarkLen + UTF-8 | int32 extLen + (int16 keyLen + key, int32 valLen + value)*

Decoders never trust a length: every declared length is checked against the bytes present
before anything is sliced, and every failure is a :class:`wire.errors.WireError`.
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any, Callable, Iterable, Iterator, Sequence

from construct import Bytes, Int8sb, Int16sb, Int32sb, Int32ub, Struct, this

from rmqd.wire import fastjson
from rmqd.wire.codes import CURRENT_VERSION, LanguageCode, SerializeType
from rmqd.wire.errors import FrameError, FrameTooLargeError, JsonError, WireError

#: ``com.rocketmq.remoting.frameMaxLength`` default: a whole frame, its length word included.
DEFAULT_MAX_FRAME_LENGTH = 16 * 1024 * 1024

RPC_TYPE_RESPONSE = 1  # flag bit 0 (RemotingCommand.RPC_TYPE)
RPC_ONEWAY = 2  # flag bit 1 (RemotingCommand.RPC_ONEWAY)

# --- layouts, declared once (construct) -------------------------------------------------------

#: The fixed part of a frame: the length word and the serialize-type/header-length word.
FRAME_PREFIX = Struct("length" / Int32sb, "header_word" / Int32ub)

#: The fixed part of the ROCKETMQ binary header, up to and including the remark length.
BINARY_HEADER_FIXED = Struct(
    "code" / Int16sb,
    "language" / Int8sb,
    "version" / Int16sb,
    "opaque" / Int32sb,
    "flag" / Int32sb,
    "remark_length" / Int32sb,
)

#: One extFields entry of the binary header.
BINARY_EXT_ENTRY = Struct(
    "key_length" / Int16sb,
    "key" / Bytes(this.key_length),
    "value_length" / Int32sb,
    "value" / Bytes(this.value_length),
)

# struct twins of the declarations above; tests/wire/test_frame.py checks they agree.
_PREFIX = struct.Struct(">iI")
_BIN_FIXED = struct.Struct(">hbhiii")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_U32 = struct.Struct(">I")
_BIN_EMPTY_LEN = _BIN_FIXED.size + 4  # 21 bytes: fixed part, remark length 0, ext length 0

assert FRAME_PREFIX.sizeof() == _PREFIX.size
assert BINARY_HEADER_FIXED.sizeof() == _BIN_FIXED.size

#: True where this module runs as a Cython build (scripts/build_ext): JSON headers are then read
#: by ``scan_plain_json_header`` and plain extFields written by ``_plain_ext_json``, C loops
#: (interpreted, those loops would cost more than json's own C scanner and encoder, so plain
#: Python goes straight to json).
COMPILED = not __file__.endswith(".py")

_LANG_BY_NAME = {m.name: m for m in LanguageCode}
_JAVA = LanguageCode.JAVA
# Enum members as module constants: every access through an Enum class runs the metaclass's
# __getattr__ hook (~850 instructions on CPython 3.11), and these are read on every frame.
_OTHER = LanguageCode.OTHER
_JSON = SerializeType.JSON
_ROCKETMQ = SerializeType.ROCKETMQ
_LANG_NAMES = [m.name for m in LanguageCode]


@dataclass(repr=False)
class RemotingCommand:
    """One request or response; ``ext_fields`` carries the custom header as strings.

    ``ext_fields`` keeps the order it was decoded or built in: the JSON header is written in
    that order, which is how a decoded Java frame is re-encoded byte for byte. ``None`` and
    ``{}`` differ on the JSON wire (absent vs. ``"extFields":{}``), so both are kept.
    """

    code: int
    language: int = LanguageCode.JAVA
    version: int = CURRENT_VERSION
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] | None = None
    body: bytes | memoryview | None = None
    serialize_type: int = SerializeType.JSON

    def __repr__(self) -> str:
        # bodies can be megabytes: show their size only
        body = "None" if self.body is None else f"<{len(self.body)} bytes>"
        return (f"RemotingCommand(code={int(self.code)}, language={self.language}, version={self.version}, "
                f"opaque={self.opaque}, flag={self.flag}, remark={self.remark!r}, ext_fields={self.ext_fields!r}, "
                f"body={body}, serialize_type={int(self.serialize_type)})")

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RPC_TYPE_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & RPC_ONEWAY)

    def mark_response(self) -> None:
        self.flag |= RPC_TYPE_RESPONSE

    def mark_oneway(self) -> None:
        self.flag |= RPC_ONEWAY

    def ext(self, key: str, default: str | None = None) -> str | None:
        """One extFields value (``None``-safe lookup)."""
        ext = self.ext_fields
        if ext is None:
            return default
        return ext.get(key, default)


def make_response(
    request: RemotingCommand,
    code: int,
    remark: str | None = None,
    ext_fields: dict[str, str] | None = None,
    body: bytes | memoryview | None = None,
) -> RemotingCommand:
    """A response as a 4.9.8 server writes it: request's opaque and serialize type, flag bit 0,
    the server's language (JAVA) and version (``CURRENT_VERSION``)."""
    # positional: the dataclass's generated __init__ matches keywords one by one (every answer)
    return RemotingCommand(code, _JAVA, CURRENT_VERSION, request.opaque, RPC_TYPE_RESPONSE, remark, ext_fields,
                           body, request.serialize_type)


def make_request(
    code: int,
    ext_fields: dict[str, str] | None = None,
    body: bytes | memoryview | None = None,
    *,
    opaque: int = 0,
    oneway: bool = False,
    serialize_type: int = SerializeType.JSON,
) -> RemotingCommand:
    """A request as a 4.9.8 Java peer writes it (language JAVA, version 409)."""
    return RemotingCommand(
        code=code,
        opaque=opaque,
        flag=RPC_ONEWAY if oneway else 0,
        ext_fields=ext_fields,
        body=body,
        serialize_type=serialize_type,
    )


# --- JSON header --------------------------------------------------------------------------------


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


# parse_float=str keeps a C++ client's float literal exactly as Java's String field would see it.
_JSON_DECODER = json.JSONDecoder(parse_float=str, parse_constant=_reject_constant)
_JSON_SCAN = _JSON_DECODER.scan_once  # type: ignore[attr-defined]  # set by JSONDecoder.__init__, not in typeshed
_JSON_TAIL_WS = frozenset(" \t\n\r")
# The C encoder object itself, built once: json.dumps would rebuild it on every call.
_json_encode_map: Callable[[Any, int], Iterable[str]] = (
    c_make_encoder(None, None, encode_basestring, None, ":", ",", False, False, True)
    if c_make_encoder is not None
    else lambda obj, _indent_level: json.JSONEncoder(
        ensure_ascii=False, separators=(",", ":"), check_circular=False).iterencode(obj)
)
_HEADER_TAIL = '"serializeTypeCurrentRPC":"JSON","version":'


def _plain_text(s: str) -> bool:
    """Printable ASCII without '"' or '\\': text json and fastjson both write as it is."""
    for ch in s:
        c = ord(ch)
        if c < 0x20 or c > 0x7E or c == 0x22 or c == 0x5C:
            return False
    return True


def _plain_ext_json(ext: dict[str, str], parts: list[str]) -> bool:
    """extFields as json writes them, appended to ``parts``, when every key and value is plain
    text (``_plain_text``: ids, numbers, names, as in nearly every answer); False, with nothing
    appended, otherwise. Compiled only (frame.pxd: a C loop per string); the C encoder it spares
    walks and joins far more, and the pieces go into the header's one join."""
    if type(ext) is not dict:
        return False
    n = len(parts)
    sep = '{"'
    for k, v in ext.items():
        if type(k) is not str or type(v) is not str or not _plain_text(k) or not _plain_text(v):
            del parts[n:]
            return False
        parts.append(sep)
        parts.append(k)
        parts.append('":"')
        parts.append(v)
        sep = '","'
    parts.append('"}' if len(parts) > n else "{}")
    return True


def encode_json_header(cmd: RemotingCommand) -> bytes:
    """The JSON header as fastjson writes a RemotingCommand bean: alphabetical, nulls omitted.
    Numbers go in as ``str(int(x))`` pieces of the one join (what ``%d`` writes, without
    parsing a format on every answer)."""
    ext = cmd.ext_fields
    parts = ['{"code":', str(int(cmd.code))]
    plain = cmd.remark is None  # then nothing in the header needs an escape or a fix-up
    if ext is not None:
        parts.append(',"extFields":')
        if not (COMPILED and _plain_ext_json(ext, parts)):
            plain = False
            for v in ext.values():
                if type(v) is not str:
                    ext = {k: _java_string(v) for k, v in ext.items() if v is not None}
                    break
            parts.append("".join(_json_encode_map(ext, 0)))
    language = cmd.language
    parts += [',"flag":', str(int(cmd.flag)), ',"language":"',
              _LANG_NAMES[language] if 0 <= language < len(_LANG_NAMES) else "OTHER",
              '","opaque":', str(int(cmd.opaque)), ","]
    if cmd.remark is not None:
        parts.append('"remark":')
        parts.append(encode_basestring(cmd.remark))
        parts.append(",")
    parts.append(_HEADER_TAIL)
    parts.append(str(int(cmd.version)))
    parts.append("}")
    if plain:
        return "".join(parts).encode("utf-8")
    return fastjson.escape_fixup("".join(parts)).encode("utf-8", "replace")


def _java_string(v: object) -> str:
    """A JSON value as the Java String a ``HashMap<String,String>`` field receives."""
    if type(v) is str:
        return v
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, (dict, list)):
        return fastjson.dumps(v)
    return str(v)


_INT_FIELDS = ("code", "version", "opaque", "flag")


def _int_field(header: dict, name: str) -> int:
    v = header.get(name)
    if type(v) is int:
        return v
    if v is None:
        return 0  # the Java bean's default
    if isinstance(v, str):  # fastjson coerces "10" into an int field
        try:
            return int(v.strip())
        except ValueError:
            pass
    raise FrameError(f"JSON header field {name!r} is not an integer: {v!r}")


def decode_json_header(data: bytes | memoryview) -> RemotingCommand:
    """A JSON header (fastjson, or the laxer shapes C++/Go/ali-ons clients send)."""
    header: object = scan_plain_json_header(data) if COMPILED and type(data) is bytes else None
    if header is None:
        try:
            text = str(data, "utf-8")
        except UnicodeDecodeError as e:
            raise FrameError(f"JSON header is not UTF-8 at byte {e.start}") from None
        header = _parse_json_header(text)
    if type(header) is not dict:
        raise FrameError(f"JSON header is a {type(header).__name__}, not an object")
    get = header.get
    code, version, opaque, flag = get("code"), get("version"), get("opaque"), get("flag")
    if not (type(code) is int and type(version) is int and type(opaque) is int and type(flag) is int):
        code, version, opaque, flag = [_int_field(header, name) for name in _INT_FIELDS]
    lang = get("language")
    language: int
    if type(lang) is str:
        language = _LANG_BY_NAME.get(lang, _OTHER)
    elif lang is None:
        language = _JAVA
    elif type(lang) is int:
        language = lang if 0 <= lang < len(_LANG_NAMES) else _OTHER
    else:
        raise FrameError(f"JSON header field 'language' is neither a name nor an ordinal: {lang!r}")
    remark = get("remark")
    if remark is not None and type(remark) is not str:
        if isinstance(remark, (dict, list)):
            raise FrameError("JSON header field 'remark' is not a string")
        remark = _java_string(remark)
    ext = get("extFields")
    if ext is not None:
        if type(ext) is not dict:
            raise FrameError(f"JSON header field 'extFields' is a {type(ext).__name__}, not an object")
        for v in ext.values():
            if type(v) is not str:
                ext = {str(k): _java_string(v) for k, v in ext.items() if v is not None}
                break
    return RemotingCommand(code, language, version, opaque, flag, remark, ext, None, _JSON)


def _plain_string_end(data: bytes, pos: int, n: int) -> int:
    """The index of the quote closing the string that opens at ``data[pos]``, or -1 when there
    is none or the string holds a raw control character (json's strict rule: fastjson's then)."""
    if pos >= n or data[pos] != 0x22:
        return -1
    pos += 1
    while pos < n:
        c = data[pos]
        if c == 0x22:
            return pos
        if c == 0x5C:
            pos += 2
            continue
        if c < 0x20:
            return -1
        pos += 1
    return -1


_JSON_ESCAPES = {0x22: '"', 0x5C: "\\", 0x2F: "/", 0x62: "\b", 0x66: "\f", 0x6E: "\n", 0x72: "\r", 0x74: "\t"}


def _key_end(data: bytes, pos: int, n: int) -> int:
    """The closing quote of an object member's name opening at ``data[pos]`` when a ':' follows
    it, else -1."""
    kend = _plain_string_end(data, pos, n)
    if kend < 0 or kend + 1 >= n or data[kend + 1] != 0x3A:
        return -1
    return kend


def _backslash(data: bytes, start: int, end: int) -> int:
    """The first backslash in ``data[start:end]``, or -1 (a C loop where compiled)."""
    while start < end:
        if data[start] == 0x5C:
            return start
        start += 1
    return -1


def _json_string(data: bytes, start: int, end: int) -> str | None:
    """The content of a JSON string (``data[start:end]``, between its quotes) as json decodes
    it; None for an escape json refuses or a surrogate escape (json's rules and the
    lone-surrogate scrub handle those)."""
    i = _backslash(data, start, end)
    if i < 0:
        return data[start:end].decode("utf-8")
    parts = []
    while i >= 0:
        parts.append(data[start:i].decode("utf-8"))
        if i + 1 >= end:
            return None
        c = data[i + 1]
        if c == 0x75:  # \uXXXX
            if i + 6 > end:
                return None
            cp = 0
            for k in range(i + 2, i + 6):
                h = data[k]
                if 0x30 <= h <= 0x39:
                    cp = cp * 16 + (h - 0x30)
                elif 0x61 <= h <= 0x66:
                    cp = cp * 16 + (h - 0x57)
                elif 0x41 <= h <= 0x46:
                    cp = cp * 16 + (h - 0x37)
                else:
                    return None
            if 0xD800 <= cp <= 0xDFFF:
                return None
            parts.append(chr(cp))
            start = i + 6
        else:
            e = _JSON_ESCAPES.get(c)
            if e is None:
                return None
            parts.append(e)
            start = i + 2
        i = _backslash(data, start, end)
    parts.append(data[start:end].decode("utf-8"))
    return "".join(parts)


def _plain_int_end(data: bytes, pos: int, n: int) -> int:
    """The end of a JSON integer at ``data[pos]`` (``-?(0|[1-9][0-9]*)``), or -1."""
    if pos < n and data[pos] == 0x2D:
        pos += 1
    if pos >= n:
        return -1
    c = data[pos]
    if c == 0x30:
        return pos + 1
    if c < 0x31 or c > 0x39:
        return -1
    pos += 1
    while pos < n:
        c = data[pos]
        if c < 0x30 or c > 0x39:
            break
        pos += 1
    return pos


def _small_int(data: bytes, pos: int, end: int) -> int:
    """The value of a JSON integer of at most 18 characters (``_plain_int_end`` checked it)."""
    negative = data[pos] == 0x2D
    if negative:
        pos += 1
    v = 0
    while pos < end:
        v = v * 10 + (data[pos] - 0x30)
        pos += 1
    return -v if negative else v


def scan_plain_json_header(data: bytes) -> dict[str, Any] | None:
    """The header as ``json`` parses it, for the one shape every Java client writes: an object
    without blanks whose values are integers, strings, and ``extFields``, an object of strings.
    None for anything else (blanks, floats, literals, other nesting, surrogate or invalid
    escapes, raw control characters, bytes that are not UTF-8), which then goes through json
    and fastjson's rules.

    Why: json's scanner needs the whole header decoded to text first and builds every key
    through its memo; this reads the bytes once and decodes only the strings (compiled, frame.pxd
    makes it a C loop: decode_json_header 46.5k -> 34k instructions per Java send header)."""
    n = len(data)
    if n < 2 or data[0] != 0x7B or data[n - 1] != 0x7D:
        return None
    out: dict[str, Any] = {}
    if n == 2:
        return out
    pos = 1
    try:
        while True:
            kend = _key_end(data, pos, n)
            if kend < 0:
                return None
            key = _json_string(data, pos + 1, kend)
            if key is None:
                return None
            pos = kend + 2
            if pos >= n:
                return None
            c = data[pos]
            if c == 0x22:
                vend = _plain_string_end(data, pos, n)
                if vend < 0:
                    return None
                value = _json_string(data, pos + 1, vend)
                if value is None:
                    return None
                out[key] = value
                pos = vend + 1
            elif c == 0x7B and key == "extFields":
                ext: dict[str, str] = {}
                pos += 1
                if pos < n and data[pos] == 0x7D:
                    pos += 1
                else:
                    while True:
                        kend = _key_end(data, pos, n)
                        if kend < 0:
                            return None
                        vend = _plain_string_end(data, kend + 2, n)
                        if vend < 0 or vend + 1 >= n:
                            return None
                        ekey = _json_string(data, pos + 1, kend)
                        value = _json_string(data, kend + 3, vend)
                        if ekey is None or value is None:
                            return None
                        ext[ekey] = value
                        pos = vend + 1
                        c = data[pos]
                        if c == 0x7D:
                            pos += 1
                            break
                        if c != 0x2C:
                            return None
                        pos += 1
                out[key] = ext
            else:
                vend = _plain_int_end(data, pos, n)
                if vend < 0:
                    return None
                out[key] = _small_int(data, pos, vend) if vend - pos <= 18 else int(data[pos:vend])
                pos = vend
            if pos >= n:
                return None
            c = data[pos]
            if c == 0x7D:
                return out if pos == n - 1 else None
            if c != 0x2C:
                return None
            pos += 1
    except (UnicodeDecodeError, ValueError):  # not UTF-8; an integer beyond int's digit limit
        return None


def _parse_json_header(text: str) -> object:
    try:
        value, end = _JSON_SCAN(text, 0)
        if end == len(text) or all(c in _JSON_TAIL_WS for c in text[end:]):
            # a "\ud800" escape: '?' as Java writes it later (see fastjson.scrub_surrogates)
            return fastjson.scrub_surrogates(value) if fastjson.may_hold_lone_surrogates(text) else value
    except (ValueError, RecursionError, StopIteration):
        pass
    # Not plain JSON (leading blanks, unquoted keys, single quotes, ...): fastjson's lenient rules.
    try:
        value = fastjson.loads(text)
    except JsonError as e:
        raise FrameError(f"JSON header is not valid JSON: {e}") from None
    if type(value) is dict:
        ext = value.get("extFields")
        if type(ext) is dict and not all(type(k) is str for k in ext):
            value["extFields"] = {str(k): v for k, v in ext.items()}  # {1:"a"}: Java sees key "1"
    return value


# --- ROCKETMQ binary header ---------------------------------------------------------------------


def _short(v: int) -> int:
    return ((v + 0x8000) & 0xFFFF) - 0x8000


def _int(v: int) -> int:
    return ((v + 0x80000000) & 0xFFFFFFFF) - 0x80000000


_KEY_PREFIX_CACHE: dict[str, bytes] = {}
#: the int32 length word of a short value, prepared (an index instead of a pack per value)
_I32_SMALL: tuple[bytes, ...] = tuple(_I32.pack(i) for i in range(256))


def _key_prefix(key: str) -> bytes:
    """int16 length + UTF-8 of an extFields key; keys repeat, so they are encoded once."""
    kp = _KEY_PREFIX_CACHE.get(key)
    if kp is None:
        kb = key.encode("utf-8", "replace")
        kp = _I16.pack(_short(len(kb))) + kb
        if len(_KEY_PREFIX_CACHE) < 4096:
            _KEY_PREFIX_CACHE[key] = kp
    return kp


def encode_binary_header(cmd: RemotingCommand) -> bytes:
    """``RocketMQSerializable.rocketMQProtocolEncode``: code/version as (wrapping) shorts."""
    parts: list[bytes | bytearray | memoryview] = []
    _binary_header_into(cmd, parts)
    return b"".join(parts)


def _binary_header_into(cmd: RemotingCommand, out: list[bytes | bytearray | memoryview]) -> int:
    """The ROCKETMQ header's pieces appended to ``out`` (so a frame is joined once, its length
    word included); their total length."""
    remark = cmd.remark
    rb = remark.encode("utf-8", "replace") if remark else b""
    language = cmd.language
    code, version, opaque, flag = cmd.code, cmd.version, cmd.opaque, cmd.flag
    # in range (every real command): no wrapping calls; a field per answer, so it counts
    if not (-0x8000 <= code < 0x8000 and -0x8000 <= version < 0x8000):
        code, version = _short(code), _short(version)
    if not (-0x80000000 <= opaque < 0x80000000 and -0x80000000 <= flag < 0x80000000):
        opaque, flag = _int(opaque), _int(flag)
    out.append(_BIN_FIXED.pack(code, language if -128 <= language < 128 else 0, version, opaque, flag, len(rb)))
    out.append(rb)
    ext = cmd.ext_fields
    if not ext:
        out.append(b"\x00\x00\x00\x00")
        return _BIN_EMPTY_LEN + len(rb)
    at = len(out)
    out.append(b"")  # the extFields length, once known
    size = 0
    prefixes = _KEY_PREFIX_CACHE
    pack_len = _I32.pack
    lengths = _I32_SMALL
    for k, v in ext.items():
        if k is None or v is None:
            continue
        kp = prefixes.get(k)
        if kp is None:
            kp = _key_prefix(k)
        vs = v if type(v) is str else _java_string(v)
        vb = vs.encode("utf-8", "replace")
        n = len(vb)
        out.append(kp)
        out.append(lengths[n] if n < 256 else pack_len(n))
        out.append(vb)
        size += len(kp) + 4 + n
    out[at] = pack_len(size)
    return _BIN_EMPTY_LEN + len(rb) + size


def decode_binary_header(header: bytes | memoryview) -> RemotingCommand:
    """``rocketMQProtocolDecode``, with every length checked against the header's own bytes."""
    # one copy of the header; slicing bytes is cheaper than memoryviews
    data = header if type(header) is bytes else bytes(header)
    n = len(data)
    if n < _BIN_EMPTY_LEN:
        raise FrameError(f"ROCKETMQ header truncated: {n} bytes, at least {_BIN_EMPTY_LEN} needed")
    code, language, version, opaque, flag, remark_len = _BIN_FIXED.unpack_from(data, 0)
    pos = 17
    remark = None
    if remark_len:
        if remark_len < 0 or remark_len > n - pos - 4:
            raise FrameError(f"ROCKETMQ header remark length {remark_len} at offset 13 exceeds the header ({n} bytes)")
        try:
            remark = data[pos : pos + remark_len].decode()
        except UnicodeDecodeError as e:
            raise FrameError(f"ROCKETMQ header remark at offset {pos + e.start} is not UTF-8") from None
        pos += remark_len
    (ext_len,) = _I32.unpack_from(data, pos)
    pos += 4
    ext: dict[str, str] | None = None
    if ext_len > 0:
        end = pos + ext_len
        if end > n:
            raise FrameError(f"ROCKETMQ header extFields length {ext_len} at offset {pos - 4} exceeds the header ({n} bytes)")
        ext = {}
        try:
            # Lengths are read byte by byte: as cheap as a struct call in CPython, and a plain
            # C read where this module is compiled (frame.pxd types the positions).
            while pos < end:
                kstart = pos + 2
                if kstart > end:
                    raise FrameError(f"ROCKETMQ header extFields entry truncated at offset {pos}")
                klen = (data[pos] << 8) | data[pos + 1]
                kend = kstart + klen
                if klen & 0x8000 or kend + 4 > end:
                    raise FrameError(f"ROCKETMQ header extFields key length {_short(klen)} at offset {pos} "
                                     "exceeds extFields")
                vstart = kend + 4
                high = data[kend]
                # a negative length is refused before the shift (compiled, a C int would wrap)
                vlen = -1 if high > 0x7F else (high << 24) | (data[kend + 1] << 16) | (data[kend + 2] << 8) | data[kend + 3]
                vend = vstart + vlen
                if vlen < 0 or vend > end:
                    raise FrameError(f"ROCKETMQ header extFields value length {_I32.unpack_from(data, kend)[0]} at "
                                     f"offset {kend} exceeds extFields")
                # readStr: an empty string reads as null; Java's HashMap then holds a null key or
                # value, which its encoder skips - so such an entry is dropped (a null value
                # replaces an earlier value of the same key).
                if klen:
                    pos = kstart
                    key = data[kstart:kend].decode()
                    if vlen:
                        pos = vstart
                        ext[key] = data[vstart:vend].decode()
                    else:
                        ext.pop(key, None)
                pos = vend
        except UnicodeDecodeError as e:
            raise FrameError(f"ROCKETMQ header extFields entry at offset {pos + e.start} is not UTF-8") from None
    return RemotingCommand(code, language, version, opaque, flag, remark, ext, None, _ROCKETMQ)


# --- frames ---------------------------------------------------------------------------------------


def encode_header(cmd: RemotingCommand) -> bytes:
    if cmd.serialize_type == _JSON:
        return encode_json_header(cmd)
    if cmd.serialize_type == _ROCKETMQ:
        return encode_binary_header(cmd)
    raise FrameError(f"unknown serialize type {cmd.serialize_type}")


def encode_frame_parts(
    cmd: RemotingCommand, body_parts: Sequence[bytes | bytearray | memoryview] | None = None
) -> list[bytes | bytearray | memoryview]:
    """Length word + header as one buffer, then the body buffers untouched.

    A pull response passes its stored records (memoryviews into the commit log) as
    ``body_parts`` so they go to the socket without being copied; ``cmd.body`` is ignored then.
    """
    header = encode_header(cmd)
    hl = len(header)
    if hl > 0xFFFFFF:
        raise FrameError(f"header of {hl} bytes does not fit the 24-bit header length")
    if body_parts is None:
        body = cmd.body
        body_parts = [body] if body else []
    try:
        body_len = sum(map(len, body_parts))  # == nbytes for byte buffers (checked below)
    except TypeError:
        raise FrameError("body parts must be bytes-like") from None
    out: list[bytes | bytearray | memoryview] = [b""]
    out += body_parts
    for p in body_parts:
        if type(p) is memoryview and p.itemsize != 1:
            raise FrameError(f"body part memoryview has item size {p.itemsize}; cast it to bytes ('B')")
    out[0] = _PREFIX.pack(4 + hl + body_len, (cmd.serialize_type << 24) | hl) + header
    return out


def encode_frame(cmd: RemotingCommand) -> bytes:
    """The complete frame, length word included."""
    stype = cmd.serialize_type  # encode_header inlined: every answer passes here
    if stype == _ROCKETMQ:  # one join for the whole frame
        parts: list[bytes | bytearray | memoryview] = [b""]
        hl = _binary_header_into(cmd, parts)
        if hl > 0xFFFFFF:
            raise FrameError(f"header of {hl} bytes does not fit the 24-bit header length")
        body = cmd.body
        if body:
            parts.append(body)
            parts[0] = _PREFIX.pack(4 + hl + len(body), (stype << 24) | hl)
        else:
            parts[0] = _PREFIX.pack(4 + hl, (stype << 24) | hl)
        return b"".join(parts)
    if stype == _JSON:
        header = encode_json_header(cmd)
    else:
        raise FrameError(f"unknown serialize type {stype}")
    hl = len(header)
    if hl > 0xFFFFFF:
        raise FrameError(f"header of {hl} bytes does not fit the 24-bit header length")
    body = cmd.body
    if body:
        return b"".join((_PREFIX.pack(4 + hl + len(body), (cmd.serialize_type << 24) | hl), header, body))
    return _PREFIX.pack(4 + hl, (cmd.serialize_type << 24) | hl) + header


def _be_u32(buf: bytes | bytearray | memoryview, pos: int) -> int:
    """The big-endian unsigned 32-bit word at ``buf[pos]`` (in range: the callers checked);
    four C byte reads where compiled and ``buf`` is bytes (a received chunk), else struct.

    Compiled, each byte is widened to a 64-bit ``Py_ssize_t`` (frame.pxd) before it is shifted:
    shifted as a C ``int``, a first byte of 0x80 or more went negative, and 0xFFFFFFFF came out
    as -1, the value that ``except -1`` reads as "an error was raised", so the decoder returned
    NULL with no exception set and the connection hung. Widened, the word is 0..2**32-1."""
    if type(buf) is bytes:
        b = buf
        b0 = b[pos]
        b1 = b[pos + 1]
        b2 = b[pos + 2]
        b3 = b[pos + 3]
        return (b0 << 24) | (b1 << 16) | (b2 << 8) | b3
    return _U32.unpack_from(buf, pos)[0]


def _decode_payload(buf: bytes | bytearray | memoryview, start: int, end: int) -> RemotingCommand:
    """Decode ``buf[start:end]``, the bytes after a frame's length word.

    Header and body are copied out under one short-lived view, so nothing returned or raised
    keeps a view of ``buf`` alive (a stream decoder's bytearray must stay resizable).
    """
    if end - start < 4:
        raise FrameError(f"frame of {end - start} bytes after the length word is shorter than the 4-byte header length word")
    word = _be_u32(buf, start)
    stype = word >> 24
    hl = word & 0xFFFFFF
    hstart = start + 4
    bstart = hstart + hl
    if bstart > end:
        raise FrameError(f"header length {hl} exceeds the {end - hstart} bytes left in the frame")
    if stype > 1:
        raise FrameError(f"unknown serialize type {stype} in the header length word")
    if type(buf) is bytes:
        header = buf[hstart:bstart]
        body = buf[bstart:end] if bstart < end else None
    else:
        with memoryview(buf) as view:
            header = bytes(view[hstart:bstart])
            body = bytes(view[bstart:end]) if bstart < end else None
    cmd = decode_json_header(header) if stype == 0 else decode_binary_header(header)
    cmd.body = body
    return cmd


def decode_frame(buf: bytes | bytearray | memoryview, *, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH) -> RemotingCommand:
    """One complete frame including its 4-byte length word."""
    if type(buf) is memoryview and buf.itemsize != 1:
        buf = buf.cast("B")
    n = len(buf)
    if n < 4:
        raise FrameError(f"frame of {n} bytes has no complete length word")
    (length,) = _I32.unpack_from(buf, 0)
    if length < 0 or length + 4 > max_frame_length:
        if length < 0:
            raise FrameError(f"negative frame length {length}")
        raise FrameTooLargeError(length + 4, max_frame_length)
    if length != n - 4:
        raise FrameError(f"frame length word says {length} bytes follow, but {n - 4} are present")
    return _decode_payload(buf, 4, n)


def decode_frames(buf: bytes | bytearray | memoryview) -> list[RemotingCommand]:
    """Every frame of a buffer holding whole frames back to back."""
    dec = FrameDecoder()
    dec.feed(buf)
    out = list(dec)
    if dec.buffered:
        raise FrameError(f"{dec.buffered} bytes of an incomplete frame at the end of the buffer")
    return out


class FrameDecoder:
    """Incremental framing for a byte stream (``NettyDecoder``): feed bytes, take commands.

    Only the bytes actually received are buffered; a length word announcing more than
    ``max_frame_length`` (whole frame, length word included) fails as soon as it is seen.
    """

    __slots__ = ("max_frame_length", "_buf", "_pos")

    def __init__(self, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH) -> None:
        self.max_frame_length = max_frame_length
        # bytes while it is one received chunk decoded in place (the usual case: a chunk
        # holds whole frames), a bytearray once a partial frame has to be carried over
        self._buf: bytes | bytearray = b""
        self._pos = 0

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a command."""
        return len(self._buf) - self._pos

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        buf = self._buf
        pos = self._pos
        if pos >= len(buf):  # nothing carried over: decode the chunk itself, no copy
            self._buf = data if type(data) is bytes else bytes(data)
            self._pos = 0
            return
        if isinstance(buf, bytes):  # (never a subclass: it is `data`, or bytes(data))
            self._buf = buf = bytearray(memoryview(buf)[pos:])
            self._pos = 0
        elif pos and pos >= (len(buf) >> 1):
            del buf[:pos]
            self._pos = 0
        buf += data

    def next_command(self) -> RemotingCommand | None:
        """The next complete command, or ``None`` until more bytes arrive."""
        buf = self._buf
        pos = self._pos
        avail = len(buf) - pos
        if avail < 4:
            return None
        length = _be_u32(buf, pos)  # unsigned, as Netty's LengthFieldBasedFrameDecoder reads it
        if length + 4 > self.max_frame_length:
            raise FrameTooLargeError(length + 4, self.max_frame_length)
        if avail < 4 + length:
            return None
        end = pos + 4 + length
        self._pos = end  # a bad frame is consumed too; its connection gets closed anyway
        cmd = _decode_payload(buf, pos + 4, end)
        if end == len(buf):
            self._buf = b""
            self._pos = 0
        return cmd

    def __iter__(self) -> Iterator[RemotingCommand]:
        while True:
            cmd = self.next_command()
            if cmd is None:
                return
            yield cmd


__all__ = [
    "DEFAULT_MAX_FRAME_LENGTH",
    "RPC_TYPE_RESPONSE",
    "RPC_ONEWAY",
    "FRAME_PREFIX",
    "BINARY_HEADER_FIXED",
    "BINARY_EXT_ENTRY",
    "RemotingCommand",
    "make_response",
    "make_request",
    "encode_header",
    "encode_json_header",
    "decode_json_header",
    "encode_binary_header",
    "decode_binary_header",
    "encode_frame",
    "encode_frame_parts",
    "decode_frame",
    "decode_frames",
    "FrameDecoder",
    "WireError",
]
