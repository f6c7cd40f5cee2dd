"""Struct fast paths derived from construct declarations.

Every fixed on-disk layout of the store (consume-queue unit, index header and entry,
checkpoint) is declared once with construct; the runtime uses the ``struct.Struct`` made
from that declaration here, checked against it at import, so the two cannot drift apart."""

from __future__ import annotations

import struct

from construct import FormatField, Renamed, Struct


def struct_of(layout: Struct) -> struct.Struct:
    """The struct fast path of a construct Struct made only of fixed big-endian fields."""
    codes = []
    for sc in layout.subcons:
        inner = sc.subcon if isinstance(sc, Renamed) else sc
        if not isinstance(inner, FormatField) or inner.fmtstr[0] != ">":
            raise TypeError(f"{sc!r} is not a fixed big-endian field")
        codes.append(inner.fmtstr[1:])
    fast = struct.Struct(">" + "".join(codes))
    sample = {sc.name: i + 1 for i, sc in enumerate(layout.subcons)}
    if layout.build(sample) != fast.pack(*sample.values()) or fast.size != layout.sizeof():
        raise AssertionError(f"struct fast path disagrees with {layout!r}")
    return fast


__all__ = ["struct_of"]
