"""Issue 46 item 2: a Remoting length word above the maximum frame size is refused, compiled too.

Compiled, ``_be_u32`` shifted each byte as a C ``int``: 0xFFFFFFFF came out as -1, which its
``except -1`` declaration reads as "an exception was raised", so ``FrameDecoder.next_command``
returned NULL with no exception set: no error, no answer, no close, and the request queued
behind it was never answered. 0x80000000 came out negative. 4.9.8's NettyDecoder is Netty's
LengthFieldBasedFrameDecoder(frameMaxLength = 16777216, 0, 4, 0, 4): the length word is read
unsigned, a frame (its length word included) longer than the maximum fails at once and the
decoder closes the channel. Both the module as imported (the Cython build where
scripts/build_ext made one) and its plain-Python source are held to that here.
"""

from __future__ import annotations

import os
import struct
from types import ModuleType

import pytest

from rmqd import _compiled
from rmqd.wire.errors import FrameTooLargeError

MAX = 16 * 1024 * 1024


def _modules() -> list[ModuleType]:
    import importlib

    mod = importlib.import_module("rmqd.wire.frame")
    built = not (mod.__file__ or "").endswith(".py")
    if not built and os.environ.get("RMQD_REQUIRE_ALL") and not _compiled.pure_forced():
        pytest.fail("rmqd.wire.frame is not compiled: scripts/dev setup runs scripts/build_ext")
    return [mod, _compiled.load_pure("rmqd.wire.frame")]


@pytest.fixture(params=["imported", "plain"])
def frame(request: pytest.FixtureRequest) -> ModuleType:
    imported, plain = _modules()
    return imported if request.param == "imported" else plain


def _valid(frame: ModuleType, opaque: int) -> bytes:
    return frame.encode_frame(frame.RemotingCommand(code=10, opaque=opaque, ext_fields={"k": "v"}, body=b"body"))


@pytest.mark.parametrize("word", [0xFFFFFFFF, 0x80000000, 0xFFFFFFFB, 0xFF000000, MAX - 4 + 1, 0x7FFFFFFF])
def test_a_length_word_above_the_maximum_is_refused(frame: ModuleType, word: int) -> None:
    dec = frame.FrameDecoder()
    dec.feed(_valid(frame, 1) + struct.pack(">I", word) + _valid(frame, 2))
    first = dec.next_command()
    assert first is not None and first.opaque == 1  # the frame before it is read
    with pytest.raises(FrameTooLargeError) as info:
        dec.next_command()
    assert info.value.args and str(word + 4) in str(info.value)


@pytest.mark.parametrize("word", [0xFFFFFFFF, 0x80000000, MAX - 4 + 1])
def test_the_length_word_alone_is_enough_to_refuse(frame: ModuleType, word: int) -> None:
    """failFast, as Netty's: no waiting for the bytes the word announces."""
    dec = frame.FrameDecoder()
    dec.feed(struct.pack(">I", word))
    with pytest.raises(FrameTooLargeError):
        dec.next_command()


def test_the_maximum_itself_waits_for_its_bytes(frame: ModuleType) -> None:
    dec = frame.FrameDecoder()
    dec.feed(struct.pack(">I", MAX - 4) + b"\x00" * 8)
    assert dec.next_command() is None
    assert dec.buffered == 12


@pytest.mark.parametrize("word", [0x80, 0xFF, 0x8000, 0xFFFF, 0x800000])
def test_length_bytes_with_their_high_bit_set_read_unsigned(frame: ModuleType, word: int) -> None:
    """The same widening for every byte of the word: 0x80 in any place is 128 there, not -128."""
    cmd = frame.RemotingCommand(code=10, opaque=7, body=b"x" * (word - 4 - len(frame.encode_json_header(
        frame.RemotingCommand(code=10, opaque=7)))))
    raw = frame.encode_frame(cmd)
    assert struct.unpack_from(">I", raw)[0] == word
    dec = frame.FrameDecoder()
    dec.feed(raw)
    got = dec.next_command()
    assert got is not None and got.opaque == 7 and got.body == cmd.body


def test_a_serialize_word_with_its_high_bit_set_is_an_unknown_type(frame: ModuleType) -> None:
    from rmqd.wire.errors import FrameError

    dec = frame.FrameDecoder()
    dec.feed(struct.pack(">II", 8, 0xFF000000) + b"\x00" * 4)
    with pytest.raises(FrameError, match="unknown serialize type 255"):
        dec.next_command()
