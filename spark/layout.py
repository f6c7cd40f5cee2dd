"""Vectorised views of the store layouts, derived from their one declaration.

spark/ never declares a layout: the commit-log record comes from ``wire.message.RECORD_FIELDS``,
the consume-queue unit from ``store.consumequeue.CQ_UNIT`` and the index header/entry/slot from
``store.indexfile``. Here they are turned into what a columnar reader needs: numpy dtypes (a
file becomes an array of units/entries without a Python object per row) and field positions
inside a record, so one fancy-indexing gather reads a field of every record at once.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
from construct import FormatField, Renamed, Struct

from rmqd.store.consumequeue import CQ_STORE_UNIT_SIZE, CQ_UNIT, INT_MAX, SCHEDULE_TOPIC
from rmqd.store.indexfile import (HASH_SLOT, HASH_SLOT_SIZE, INDEX_ENTRY, INDEX_ENTRY_SIZE, INDEX_HEADER,
                             INDEX_HEADER_SIZE, index_file_size)
from rmqd.wire.message import (BLANK_MAGIC_CODE, MAGIC_CODE_V1, MAGIC_CODE_V2, RECORD_FIELDS, MessageSysFlag)

__all__ = [
    "numpy_dtype", "CQ_DTYPE", "INDEX_HEADER_DTYPE", "INDEX_ENTRY_DTYPE", "SLOT_DTYPE", "RecordPositions",
    "record_positions", "MAGIC_CODE_V1", "MAGIC_CODE_V2", "BLANK_MAGIC_CODE", "MessageSysFlag",
    "CQ_STORE_UNIT_SIZE", "INDEX_HEADER_SIZE", "INDEX_ENTRY_SIZE", "HASH_SLOT_SIZE", "INT_MAX",
    "SCHEDULE_TOPIC", "index_file_size", "MIN_RECORD_SIZE", "NP_CODE", "head_dtype", "HEAD_DTYPE_V4",
]

# struct codes of RECORD_FIELDS -> big-endian numpy scalar types
NP_CODE = {"i": ">i4", "I": ">u4", "q": ">i8", "h": ">i2"}


def numpy_dtype(layout: Struct) -> np.dtype:
    """A packed numpy structured dtype equal to a construct Struct of fixed big-endian fields."""
    fields = []
    for sc in layout.subcons:
        inner = sc.subcon if isinstance(sc, Renamed) else sc
        if not isinstance(inner, FormatField) or inner.fmtstr[0] not in "><":
            raise TypeError(f"{sc!r} is not a fixed-size field")
        order, code = inner.fmtstr[0], inner.fmtstr[1:]
        size = struct.calcsize(inner.fmtstr)
        if code not in "bBhHiIlLqQ":
            raise TypeError(f"{sc!r}: only integer fields have a numpy view")
        fields.append((sc.name, f"{order}{'i' if code.islower() else 'u'}{size}"))
    dt = np.dtype(fields)
    if dt.itemsize != layout.sizeof():
        raise AssertionError(f"numpy view of {layout!r} has {dt.itemsize} bytes, not {layout.sizeof()}")
    return dt


CQ_DTYPE = numpy_dtype(CQ_UNIT)
INDEX_HEADER_DTYPE = numpy_dtype(INDEX_HEADER)
INDEX_ENTRY_DTYPE = numpy_dtype(INDEX_ENTRY)
SLOT_DTYPE = numpy_dtype(HASH_SLOT)
assert CQ_DTYPE.itemsize == CQ_STORE_UNIT_SIZE and INDEX_ENTRY_DTYPE.itemsize == INDEX_ENTRY_SIZE
assert INDEX_HEADER_DTYPE.itemsize == INDEX_HEADER_SIZE and SLOT_DTYPE.itemsize == HASH_SLOT_SIZE


@dataclass(frozen=True)
class RecordPositions:
    """Byte position and struct code of each head field of a record for one host-size combination."""

    pos: dict[str, int]
    code: dict[str, str]
    head_size: int  # position of the body bytes (after the body length)


def record_positions(born_v6: bool, store_v6: bool) -> RecordPositions:
    """Positions of RECORD_FIELDS for IPv4/IPv6 born and store hosts."""
    pos: dict[str, int] = {}
    code: dict[str, str] = {}
    p = 0
    for name, _typ, c in RECORD_FIELDS:
        c = c.format(born=16 if born_v6 else 4, store=16 if store_v6 else 4)
        pos[name] = p
        code[name] = c
        p += struct.calcsize(">" + c)
    return RecordPositions(pos, code, p)


POSITIONS = {(b, s): record_positions(b, s) for b in (False, True) for s in (False, True)}
V4 = POSITIONS[(False, False)]
# a record is at least its head plus a 1-byte topic length and a 2-byte properties length
MIN_RECORD_SIZE = V4.head_size + 3
# fields whose position does not depend on the host sizes (everything before the born host)
FIXED_FIELDS = tuple(n for n, _t, _c in RECORD_FIELDS[:RECORD_FIELDS.index(next(f for f in RECORD_FIELDS if f[0] == "born_ip"))])


def head_dtype(p: RecordPositions) -> np.dtype:
    """The whole record head of one host-size combination as one packed numpy record (hosts as
    byte arrays): an array of these with a stride of one byte over a mapped file lets a single
    fancy index copy the heads of a whole batch, instead of one gather per field."""
    names, formats, offsets = [], [], []
    for name, _t, _c in RECORD_FIELDS:
        code = p.code[name]
        names.append(name)
        offsets.append(p.pos[name])
        formats.append(("u1", (struct.calcsize(code),)) if code.endswith("s") else NP_CODE[code])
    dt = np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": p.head_size})
    assert dt.itemsize == p.head_size
    return dt


HEAD_DTYPE_V4 = head_dtype(V4)
