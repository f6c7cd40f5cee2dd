"""HPACK (RFC 7541) for the gRPC listener: h2's header-block decoder and encoder, replaced.

Why our own: h2 hands every header block to hpack's Decoder and Encoder. For a 5.x Java client's
sixteen request headers hpack's Decoder spends ~360k instructions (a function call, a tuple
subclass and a debug log call per field, a copy of the block's rest per literal), more than a
whole Remoting send; its Encoder adds ~40k per response block. Both are plain objects h2 only
calls ``decode``/``encode`` on and sets a few sizes of, so GrpcConnection swaps in these:

- ``HpackDecoder`` keeps hpack's rules, limits and exceptions (h2 turns them into a connection
  error), decodes a block in one loop and is compiled with the hot modules (rmqd/_compiled.py).
  Huffman strings go through hpack's own decoder. A field sent never-indexed comes back as a
  plain tuple: a server never re-encodes what it received.
- ``StaticHpackEncoder`` never adds to the peer's dynamic table: every field is the static
  table's index or a literal without indexing, so a block's bytes depend only on its headers
  and the blocks a server sends over and over (the response headers, the OK trailers) are
  encoded once. When the peer's SETTINGS_HEADER_TABLE_SIZE changes it opens the next block with
  a size update to 0, which every limit allows (section 4.2).
"""

from __future__ import annotations

from collections.abc import Iterable

from hpack.exceptions import HPACKDecodingError, InvalidTableIndex, InvalidTableSizeError, OversizedHeaderListError
from hpack.huffman_table import HUFFMAN_COMPLETE, HUFFMAN_EMIT_SYMBOL, HUFFMAN_FAIL, HUFFMAN_TABLE
from hpack.table import HeaderTable

#: RFC 7541 appendix A: 61 (name, value) pairs, index 1 first
STATIC_TABLE: tuple[tuple[bytes, bytes], ...] = tuple(HeaderTable.STATIC_TABLE)
_STATIC_LEN = len(STATIC_TABLE)
#: SETTINGS_HEADER_TABLE_SIZE's initial value (RFC 9113 section 6.5.2)
DEFAULT_TABLE_SIZE = 4096
#: what hpack's Decoder allows before h2 sets the connection's own limit
DEFAULT_MAX_HEADER_LIST_SIZE = 1 << 16
#: an entry's size is its name's and value's lengths plus this (section 4.1)
ENTRY_OVERHEAD = 32
#: encoded blocks kept per encoder (error trailers carry free text: the cache stays bounded)
MAX_CACHED_BLOCKS = 256


#: hpack's Huffman state machine (RFC 7541 appendix B as a nibble-driven automaton: 256 states x 16
#: nibbles -> next state, flags, symbol) as three flat byte strings a compiled loop indexes
_H_STATE = bytes(entry[0] for entry in HUFFMAN_TABLE)
_H_FLAGS = bytes(entry[1] for entry in HUFFMAN_TABLE)
_H_SYMBOL = bytes(entry[2] or 0 for entry in HUFFMAN_TABLE)


def huffman_decode(data: bytes, start: int, end: int) -> bytes:
    """data[start:end] Huffman-decoded, with hpack's automaton and its errors (hpack's own
    decoder walks it in Python: ~2 us per request id a client sends, on every call)."""
    if start >= end:
        return b""
    states, flag_of, symbols = _H_STATE, _H_FLAGS, _H_SYMBOL
    fail, emit, complete = HUFFMAN_FAIL, HUFFMAN_EMIT_SYMBOL, HUFFMAN_COMPLETE  # C integers, compiled
    out = bytearray()
    state = flags = 0
    for pos in range(start, end):
        byte = data[pos]
        index = state * 16 + (byte >> 4)
        state, flags = states[index], flag_of[index]
        if flags & fail:
            raise HPACKDecodingError("Invalid Huffman string")
        if flags & emit:
            out.append(symbols[index])
        index = state * 16 + (byte & 0x0F)
        state, flags = states[index], flag_of[index]
        if flags & fail:
            raise HPACKDecodingError("Invalid Huffman string")
        if flags & emit:
            out.append(symbols[index])
    if not flags & complete:
        raise HPACKDecodingError("Incomplete Huffman string")
    return bytes(out)


class HpackDecoder:
    """A connection's HPACK decoding context: the dynamic table the peer's encoder fills."""

    def __init__(self) -> None:
        #: the largest decoded header list accepted (h2 sets SETTINGS_MAX_HEADER_LIST_SIZE here)
        self.max_header_list_size = DEFAULT_MAX_HEADER_LIST_SIZE
        #: the largest table the peer may ask for (h2 sets our SETTINGS_HEADER_TABLE_SIZE here)
        self.max_allowed_table_size = DEFAULT_TABLE_SIZE
        #: the dynamic table, oldest entry first
        self._entries: list[tuple[bytes, bytes]] = []
        self._size = 0
        self._max_size = DEFAULT_TABLE_SIZE
        self._pos = 0

    @property
    def header_table_size(self) -> int:
        """The dynamic table's current maximum size (the last size update's)."""
        return self._max_size

    @header_table_size.setter
    def header_table_size(self, value: int) -> None:
        self._max_size = value
        self._evict()

    def decode(self, data: bytes, raw: bool = False) -> list[tuple[bytes, bytes]] | list[tuple[str, str]]:
        """The header list a block encodes, in order (bytes with ``raw``, else UTF-8 text).
        Raises hpack's HPACKDecodingError (or its subclasses) for any block that breaks the rules."""
        headers = self._decode(data if type(data) is bytes else bytes(data))
        if raw:
            return headers
        try:
            return [(name.decode("utf-8"), value.decode("utf-8")) for name, value in headers]
        except UnicodeDecodeError as exc:
            raise HPACKDecodingError("Unable to decode headers as UTF-8") from exc

    def _decode(self, data: bytes) -> list[tuple[bytes, bytes]]:
        headers: list[tuple[bytes, bytes]] = []
        limit = self.max_header_list_size
        listed = 0
        n = len(data)
        self._pos = 0
        while self._pos < n:
            first = data[self._pos]
            if first & 0x80:  # indexed field (6.1)
                entry = self._entry(self._integer(data, 7))
            elif first & 0x40:  # literal with incremental indexing (6.2.1)
                entry = self._literal(data, 6)
                self._add(entry)
            elif first & 0x20:  # dynamic table size update (6.3)
                if headers:
                    raise HPACKDecodingError("Table size update not at the start of the block")
                size = self._integer(data, 5)
                if size > self.max_allowed_table_size:
                    raise InvalidTableSizeError("Encoder exceeded max allowable table size")
                self._max_size = size
                self._evict()
                continue
            else:  # literal without indexing or never indexed (6.2.2, 6.2.3)
                entry = self._literal(data, 4)
            headers.append(entry)
            listed += len(entry[0]) + len(entry[1]) + ENTRY_OVERHEAD
            if listed > limit:
                raise OversizedHeaderListError(f"A header list larger than {limit} has been received")
        if self._max_size > self.max_allowed_table_size:
            raise InvalidTableSizeError("Encoder did not shrink table size to within the max")
        return headers

    def _integer(self, data: bytes, prefix_bits: int) -> int:
        """An integer of ``prefix_bits`` prefix at the position (5.1). Values beyond 2**28 are
        refused, as the RFC lets a decoder refuse what exceeds its limits: no index, length or
        table size that large can be valid here (and a C integer holds every accepted one)."""
        pos = self._pos
        n = len(data)
        if pos >= n:
            raise HPACKDecodingError("Truncated header block")
        mask = (1 << prefix_bits) - 1
        value = data[pos] & mask
        pos += 1
        if value == mask:
            shift = 0
            while True:
                if pos >= n:
                    raise HPACKDecodingError("Truncated HPACK integer")
                byte = data[pos]
                pos += 1
                if byte & 0x7F:
                    if shift > 21:
                        raise HPACKDecodingError("HPACK integer too large")
                    value += (byte & 0x7F) << shift
                if not byte & 0x80:
                    break
                shift += 7
        self._pos = pos
        return value

    def _string(self, data: bytes) -> bytes:
        """A string literal at the position (5.2), Huffman-decoded when flagged."""
        pos = self._pos
        if pos >= len(data):
            raise HPACKDecodingError("Truncated header block")
        huffman = data[pos] & 0x80
        length = self._integer(data, 7)
        start = self._pos
        end = start + length
        if end > len(data):
            raise HPACKDecodingError("Truncated header block")
        self._pos = end
        if huffman:
            return huffman_decode(data, start, end)
        return data[start:end]

    def _literal(self, data: bytes, prefix_bits: int) -> tuple[bytes, bytes]:
        """A literal field: the name by index (non-zero) or as a string, then the value."""
        index = self._integer(data, prefix_bits)
        name = self._entry(index)[0] if index else self._string(data)
        return (name, self._string(data))

    def _entry(self, index: int) -> tuple[bytes, bytes]:
        """The static (1-61) or dynamic (62 on, newest first) table's entry (2.3.3)."""
        if 0 < index <= _STATIC_LEN:
            return STATIC_TABLE[index - 1]
        entries = self._entries
        k = len(entries) - (index - _STATIC_LEN)
        if index <= 0 or k < 0:
            raise InvalidTableIndex(f"Invalid table index {index}")
        return entries[k]

    def _add(self, entry: tuple[bytes, bytes]) -> None:
        """A new entry (4.4): the oldest go until it fits; one larger than the table empties it."""
        size = len(entry[0]) + len(entry[1]) + ENTRY_OVERHEAD
        if size > self._max_size:
            self._entries.clear()
            self._size = 0
            return
        self._entries.append(entry)
        self._size += size
        self._evict()

    def _evict(self) -> None:
        entries = self._entries
        while self._size > self._max_size and entries:
            name, value = entries.pop(0)
            self._size -= len(name) + len(value) + ENTRY_OVERHEAD


def _static_index() -> tuple[dict[tuple[bytes, bytes], int], dict[bytes, int]]:
    full: dict[tuple[bytes, bytes], int] = {}
    names: dict[bytes, int] = {}
    for i, (name, value) in enumerate(STATIC_TABLE, 1):
        full.setdefault((name, value), i)
        names.setdefault(name, i)
    return full, names


_STATIC_FULL, _STATIC_NAMES = _static_index()


def encode_integer(value: int, prefix_bits: int, first: int) -> bytes:
    """``value`` with a ``prefix_bits`` prefix, the first byte's other bits ``first`` (5.1)."""
    mask = (1 << prefix_bits) - 1
    if value < mask:
        return bytes((first | value,))
    out = bytearray((first | mask,))
    value -= mask
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _encode_string(data: bytes) -> bytes:
    return encode_integer(len(data), 7, 0) + data


def encode_block(headers: Iterable[tuple[bytes, bytes]]) -> bytes:
    """A header block that leaves the dynamic table alone: a static table match as its index,
    anything else a literal without indexing (its name by static index where there is one)."""
    out = []
    for name, value in headers:
        index = _STATIC_FULL.get((name, value))
        if index is not None:
            out.append(encode_integer(index, 7, 0x80))
            continue
        index = _STATIC_NAMES.get(name)
        if index is not None:
            out.append(encode_integer(index, 4, 0))
        else:
            out.append(b"\x00" + _encode_string(name))
        out.append(_encode_string(value))
    return b"".join(out)


class StaticHpackEncoder:
    """h2's encoder for a connection: blocks by ``encode_block``, the repeated ones cached."""

    def __init__(self) -> None:
        self._limit = DEFAULT_TABLE_SIZE
        self._size_update_due = False
        self._cache: dict[tuple[tuple[bytes, bytes], ...], bytes] = {}

    @property
    def header_table_size(self) -> int:
        """The peer's SETTINGS_HEADER_TABLE_SIZE (the table itself stays empty)."""
        return self._limit

    @header_table_size.setter
    def header_table_size(self, value: int) -> None:
        if value != self._limit:
            self._limit = value
            self._size_update_due = True

    def encode(self, headers: Iterable[tuple[bytes, bytes]], huffman: bool = True) -> bytes:
        """The block for ``headers`` (byte-string pairs; ``huffman`` is accepted and unused:
        literals go as they are)."""
        key = tuple(headers)
        block = self._cache.get(key)
        if block is None:
            block = encode_block(key)
            if len(self._cache) < MAX_CACHED_BLOCKS:
                self._cache[key] = block
        if self._size_update_due:
            self._size_update_due = False
            return b"\x20" + block  # a size update to 0
        return block


__all__ = ["DEFAULT_MAX_HEADER_LIST_SIZE", "DEFAULT_TABLE_SIZE", "HpackDecoder", "STATIC_TABLE", "StaticHpackEncoder",
           "encode_block", "encode_integer"]
