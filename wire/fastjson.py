"""The JSON dialect of fastjson 1.2.x, which RocketMQ writes and its clients expect.

What differs from standard JSON, and why it matters:

* maps with integer keys are written with the keys unquoted (``{0:"127.0.0.1:10911"}``,
  ``consumerOffset.json``); route bodies, offsets and delay levels depend on it;
* strings escape U+007F-U+009F and U+2028/U+2029 and use upper-case hex (``\\u001F``);
* beans are written with their fields in alphabetical order and null fields left out;
* ``PrettyFormat`` indents with tabs and puts integer-keyed map entries on one line
  (``{0:1,1:1\\n\\t\\t}``), which is exactly how RocketMQ's config files look;
* ``BrowserCompatible`` (a name server answering a client of version >= 4.9.4) quotes
  integer keys and escapes every non-ASCII character and ``/``.

``loads`` is lenient as fastjson's parser is: unquoted and single-quoted keys, integer keys
(returned as ``int``), single-quoted strings, and standard JSON.
"""
from __future__ import annotations

import base64
import dataclasses
import json
import math
import re
from decimal import Decimal
from enum import Enum
from json.decoder import scanstring as _scanstring  # type: ignore[attr-defined]  # C scanner, not in typeshed
from json.encoder import encode_basestring as _encode_basestring  # C, keeps non-ASCII
from json.encoder import encode_basestring_ascii as _encode_basestring_ascii  # C
from typing import Any, Callable

from rmqd.wire.errors import JsonError

# ---- string escaping ---------------------------------------------------------------------------

# Python's json escapes differently from fastjson only for U+000B/U+000E-U+001F (hex case),
# U+007F-U+009F and U+2028/U+2029 (fastjson escapes them, Python does not).
_FIXUP_NEEDED = re.compile(r"\\u00[01][a-f]|[\x7f-\x9f\u2028\u2029]")
_LOWER_HEX_ESCAPE = re.compile(r"\\u00(?:0[bef]|1[a-f])")  # starts with a literal: fast scan
_FIXUP = re.compile(r"\\(\\|u00[01][0-9a-f])|([\x7f-\x9f\u2028\u2029])")
_BROWSER_FIXUP = re.compile(r"\\(\\|u[0-9a-f]{4})|([/\x7f])")


def _fixup_sub(m: re.Match[str]) -> str:
    esc = m.group(1)
    if esc is not None:
        return "\\\\" if esc == "\\" else "\\u" + esc[1:].upper()
    return "\\u%04X" % ord(m.group(2))


def _browser_sub(m: re.Match[str]) -> str:
    esc = m.group(1)
    if esc is not None:
        return "\\\\" if esc == "\\" else "\\u" + esc[1:].upper()
    ch = m.group(2)
    return "\\/" if ch == "/" else "\\u007F"


def escape_fixup(text: str) -> str:
    """Turn Python ``json`` output (``ensure_ascii=False``) into the escapes fastjson writes."""
    if text.isascii():  # the common case, checked without a per-position regex
        if "\x7f" not in text and _LOWER_HEX_ESCAPE.search(text) is None:
            return text
    elif _FIXUP_NEEDED.search(text) is None:
        return text
    return _FIXUP.sub(_fixup_sub, text)


def quote(s: str, browser_compatible: bool = False) -> str:
    """A Java String as fastjson writes it, quotes included."""
    if browser_compatible:
        return _BROWSER_FIXUP.sub(_browser_sub, _encode_basestring_ascii(s))
    return escape_fixup(_encode_basestring(s))


# ---- numbers -------------------------------------------------------------------------------------


def java_double(x: float) -> str:
    """``Double.toString`` (what fastjson's RyuDouble prints): ``1.0``, ``1.0E7``, ``1.0E-4``."""
    if math.isnan(x) or math.isinf(x):
        return "null"  # fastjson writes NaN/Infinity as null
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    if 1e-3 <= abs(x) < 1e7:
        r = repr(x)
        return r if "." in r else r + ".0"
    sign, digits, exponent = Decimal(repr(x)).as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    sci = len(digits) - 1 + int(exponent)
    return f"{'-' if sign else ''}{ds[0]}.{ds[1:] or '0'}E{sci}"


# ---- dumps ---------------------------------------------------------------------------------------


#: type -> writer(obj, pretty, browser_compatible, indent) -> text: beans written by a
#: function of their own (wire/bodies.py registers TopicConfig: a broker's table holds
#: thousands). Each must write exactly what the generic bean path writes (tests compare).
BeanWriter = Callable[[Any, bool, bool, int], str]
_BEAN_WRITERS: dict[type, BeanWriter] = {}


def register_bean_writer(cls: type, writer: BeanWriter) -> None:
    _BEAN_WRITERS[cls] = writer


def generic_bean_text(bean: Any, pretty: bool, browser: bool, indent: int) -> str:
    """``bean`` through the generic bean writer, bypassing a registered fast one (a fast
    writer's fallback for the beans it does not cover)."""
    w = _Writer(pretty, browser)
    w.indent = indent
    w.bean(bean, 0)
    return "".join(w.out)


class _Writer:
    __slots__ = ("out", "pretty", "browser", "indent")

    def __init__(self, pretty: bool, browser: bool) -> None:
        self.out: list[str] = []
        self.pretty = pretty
        self.browser = browser
        self.indent = 0

    def println(self) -> None:
        self.out.append("\n" + "\t" * self.indent)

    def value(self, v: Any, depth: int) -> None:
        if depth > _MAX_DEPTH:
            raise JsonError(f"object nested deeper than {_MAX_DEPTH} levels")
        out = self.out
        fast = _BEAN_WRITERS.get(type(v))
        if fast is not None:
            out.append(fast(v, self.pretty, self.browser, self.indent))
        elif v is None:
            out.append("null")
        elif v is True:
            out.append("true")
        elif v is False:
            out.append("false")
        elif isinstance(v, str):
            out.append(quote(v, self.browser))
        elif isinstance(v, Enum):
            out.append(quote(v.name, self.browser))
        elif isinstance(v, int):
            out.append(str(int(v)))
        elif isinstance(v, float):
            out.append(java_double(v))
        elif isinstance(v, dict):
            self.map(v, depth)
        elif isinstance(v, (list, tuple)):
            self.list(v, depth)
        elif isinstance(v, (set, frozenset)):
            # fastjson's CollectionCodec never pretty-prints
            out.append("[")
            for i, item in enumerate(v):
                if i:
                    out.append(",")
                self.value(item, depth + 1)
            out.append("]")
        elif isinstance(v, (bytes, bytearray, memoryview)):
            out.append('"' + base64.b64encode(bytes(v)).decode("ascii") + '"')
        elif dataclasses.is_dataclass(v) and not isinstance(v, type):
            self.bean(v, depth)
        elif hasattr(v, "to_fastjson"):
            self.value(v.to_fastjson(), depth)
        else:
            raise JsonError(f"cannot write a {type(v).__name__} as fastjson")

    def key(self, k: Any) -> None:
        out = self.out
        if isinstance(k, str):
            out.append(quote(k, self.browser))
        elif isinstance(k, Enum):
            out.append(quote(k.name, self.browser))
        elif isinstance(k, bool) or not isinstance(k, (int, float)):
            out.append(quote(str(k).lower() if isinstance(k, bool) else str(k), self.browser))
        elif self.browser:
            out.append('"' + (str(int(k)) if isinstance(k, int) else java_double(k)) + '"')
        else:
            out.append(str(int(k)) if isinstance(k, int) else java_double(k))
        out.append(":")

    def map(self, m: dict, depth: int) -> None:
        out = self.out
        out.append("{")
        self.indent += 1
        first = True
        for k, v in m.items():
            if v is None:
                continue
            if not first:
                out.append(",")
            if self.pretty and isinstance(k, str):
                self.println()
            self.key(k)
            first = False
            self.value(v, depth + 1)
        self.indent -= 1
        if self.pretty and m:
            self.println()
        out.append("}")

    def list(self, items: list | tuple, depth: int) -> None:
        out = self.out
        if not items:
            out.append("[]")
            return
        out.append("[")
        if self.pretty:
            self.indent += 1
            for i, item in enumerate(items):
                if i:
                    out.append(",")
                self.println()
                self.value(item, depth + 1)
            self.indent -= 1
            self.println()
        else:
            for i, item in enumerate(items):
                if i:
                    out.append(",")
                self.value(item, depth + 1)
        out.append("]")

    def bean(self, obj: Any, depth: int) -> None:
        out = self.out
        fields = sorted(f.name for f in dataclasses.fields(obj))
        out.append("{")
        if fields and self.pretty:
            self.indent += 1
            self.println()
        first = True
        for name in fields:
            v = getattr(obj, name)
            if v is None:
                continue
            if not first:
                out.append(",")
                if self.pretty:
                    self.println()
            out.append(quote(name, self.browser))
            out.append(":")
            self.value(v, depth + 1)
            first = False
        if fields and self.pretty:
            self.indent -= 1
            self.println()
        out.append("}")


def dumps(obj: Any, *, pretty: bool = False, browser_compatible: bool = False) -> str:
    """``JSON.toJSONString`` of RocketMQ's ``RemotingSerializable`` (``pretty`` = ``encode(true)``).

    dicts keep their order (a Java HashMap's iteration order is the caller's business);
    dataclasses are beans (fields alphabetical, ``None`` omitted); enums by name;
    bytes as base64.
    """
    w = _Writer(pretty, browser_compatible)
    w.value(obj, 0)
    return "".join(w.out)


# ---- loads ---------------------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_STD_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_WS = re.compile(r"[ \t\n\r\f\b]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_MAX_DEPTH = 256
_MAX_INT_DIGITS = 4000


class _Parser:
    __slots__ = ("s", "n")

    def __init__(self, s: str) -> None:
        self.s = s
        self.n = len(s)

    def fail(self, pos: int, what: str) -> JsonError:
        return JsonError(f"{what} at offset {pos}")

    def ws(self, pos: int) -> int:
        return _WS.match(self.s, pos).end()  # type: ignore[union-attr]

    def parse(self) -> Any:
        pos = self.ws(0)
        value, pos = self.value(pos, 0)
        pos = self.ws(pos)
        if pos != self.n:
            raise self.fail(pos, "unexpected text after the JSON value")
        return value

    def string(self, pos: int) -> tuple[str, int]:
        s = self.s
        q = s[pos]
        if q == '"':
            try:
                return _scanstring(s, pos + 1, False)
            except ValueError as e:
                raise self.fail(pos, f"bad string ({e.args[0].split(':')[0]})") from None
        # single-quoted: reuse scanstring on a double-quoted twin of the literal
        i = pos + 1
        buf = []
        while True:
            if i >= self.n:
                raise self.fail(pos, "unterminated string")
            c = s[i]
            if c == "'":
                break
            if c == "\\":
                if i + 1 >= self.n:
                    raise self.fail(i, "unterminated escape")
                nxt = s[i + 1]
                buf.append("'" if nxt == "'" else "\\" + nxt)
                i += 2
                continue
            buf.append('\\"' if c == '"' else c)
            i += 1
        try:
            text, _ = _scanstring('"' + "".join(buf) + '"', 1, False)
        except ValueError as e:
            raise self.fail(pos, f"bad string ({e.args[0].split(':')[0]})") from None
        return text, i + 1

    def number(self, pos: int) -> tuple[Any, int]:
        m = _NUMBER.match(self.s, pos)
        if m is None:
            raise self.fail(pos, "expected a value")
        text = m.group(0)
        if m.group(1) or m.group(2):
            return float(text), m.end()
        if len(text) > _MAX_INT_DIGITS:
            raise self.fail(pos, "integer literal too long")
        return int(text), m.end()

    def value(self, pos: int, depth: int) -> tuple[Any, int]:
        if pos >= self.n:
            raise self.fail(pos, "unexpected end of text, expected a value")
        c = self.s[pos]
        if c == "{":
            return self.obj(pos, depth + 1)
        if c == "[":
            return self.arr(pos, depth + 1)
        if c == '"' or c == "'":
            return self.string(pos)
        if c == "-" or "0" <= c <= "9":
            return self.number(pos)
        m = _IDENT.match(self.s, pos)
        if m is not None:
            word = m.group(0)
            if word == "true":
                return True, m.end()
            if word == "false":
                return False, m.end()
            if word == "null":
                return None, m.end()
        raise self.fail(pos, "expected a value")

    def obj(self, pos: int, depth: int) -> tuple[dict, int]:
        if depth > _MAX_DEPTH:
            raise self.fail(pos, f"nested deeper than {_MAX_DEPTH} levels")
        s = self.s
        result: dict = {}
        pos = self.ws(pos + 1)
        if pos < self.n and s[pos] == "}":
            return result, pos + 1
        while True:
            if pos >= self.n:
                raise self.fail(pos, "unterminated object")
            c = s[pos]
            key: Any
            if c == '"' or c == "'":
                key, pos = self.string(pos)
            elif c == "-" or "0" <= c <= "9":
                key, pos = self.number(pos)
            else:
                m = _IDENT.match(s, pos)
                if m is None:
                    raise self.fail(pos, "expected an object key")
                key, pos = m.group(0), m.end()
            pos = self.ws(pos)
            if pos >= self.n or s[pos] != ":":
                raise self.fail(pos, "expected ':' after an object key")
            value, pos = self.value(self.ws(pos + 1), depth)
            result[key] = value
            pos = self.ws(pos)
            if pos >= self.n:
                raise self.fail(pos, "unterminated object")
            c = s[pos]
            if c == ",":
                pos = self.ws(pos + 1)
                if pos < self.n and s[pos] == "}":  # fastjson tolerates a trailing comma
                    return result, pos + 1
                continue
            if c == "}":
                return result, pos + 1
            raise self.fail(pos, "expected ',' or '}' in an object")

    def arr(self, pos: int, depth: int) -> tuple[list, int]:
        if depth > _MAX_DEPTH:
            raise self.fail(pos, f"nested deeper than {_MAX_DEPTH} levels")
        s = self.s
        result: list = []
        pos = self.ws(pos + 1)
        if pos < self.n and s[pos] == "]":
            return result, pos + 1
        while True:
            value, pos = self.value(pos, depth)
            result.append(value)
            pos = self.ws(pos)
            if pos >= self.n:
                raise self.fail(pos, "unterminated array")
            c = s[pos]
            if c == ",":
                pos = self.ws(pos + 1)
                if pos < self.n and s[pos] == "]":
                    return result, pos + 1
                continue
            if c == "]":
                return result, pos + 1
            raise self.fail(pos, "expected ',' or ']' in an array")


def loads(text: str | bytes | bytearray | memoryview) -> Any:
    """Parse fastjson output (or standard JSON); integer map keys come back as ``int``.

    Raises :class:`JsonError` (a ``WireError``) with the offset of the first bad character.
    """
    if not isinstance(text, str):
        try:
            text = str(text, "utf-8")
        except UnicodeDecodeError as e:
            raise JsonError(f"JSON text is not UTF-8 at byte {e.start}") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        value = _STD_DECODER.decode(text)
    except (ValueError, RecursionError):
        try:
            value = _Parser(text).parse()
        except RecursionError:
            raise JsonError("JSON nested too deeply") from None
    return scrub_surrogates(value) if may_hold_lone_surrogates(text) else value


# A \uD800-\uDFFF escape: the only way a lone UTF-16 surrogate gets into a decoded string
# (strict UTF-8 decoding never yields one).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def may_hold_lone_surrogates(text: str) -> bool:
    return "\\u" in text and _SURROGATE_ESCAPE.search(text) is not None


def scrub_surrogates(value: Any) -> Any:
    """Lone surrogates in decoded strings (keys and values) become '?'.

    Why: Java keeps such a char in its String but writes it as '?' (String.getBytes(UTF_8))
    to the wire, the commit log and the config files; Python cannot encode it at all, so a
    client's "\\ud800" would fail later in whatever writes it. Replacing it at decode time
    gives the bytes Java writes, and no later encode can fail."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("?", value)
    if isinstance(value, dict):
        return {scrub_surrogates(k): scrub_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_surrogates(v) for v in value]
    return value


__all__ = ["dumps", "loads", "quote", "escape_fixup", "java_double", "JsonError", "may_hold_lone_surrogates",
           "scrub_surrogates"]
