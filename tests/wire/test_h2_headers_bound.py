"""Issue 46 item 3b: the per-field verdict cache of wire/h2_headers.py is bounded in bytes.

It lives as long as the process. It used to keep any field up to its 4,096 entries, whatever
its size: 4,000 requests with distinct 63 KB header values pinned ~490 MiB for good. Only short
fields are kept now, so it holds at most ``_MAX_CLEAN_BYTES`` of header bytes. Checked on the
module as imported (the Cython build where there is one) and on its plain-Python source.
"""

from __future__ import annotations

import os
import tracemalloc
from types import ModuleType

import pytest

from rmqd import _compiled

BASE = [(b":method", b"POST"), (b":scheme", b"http"), (b":path", b"/apache.rocketmq.v2.MessagingService/SendMessage"),
        (b":authority", b"127.0.0.1:8081"), (b"content-type", b"application/grpc"), (b"te", b"trailers")]


@pytest.fixture(params=["imported", "plain"])
def h2h(request: pytest.FixtureRequest) -> ModuleType:
    import importlib

    mod = importlib.import_module("rmqd.wire.h2_headers")
    if request.param == "plain":
        return _compiled.load_pure("rmqd.wire.h2_headers")
    if (mod.__file__ or "").endswith(".py") and os.environ.get("RMQD_REQUIRE_ALL") and not _compiled.pure_forced():
        pytest.fail("rmqd.wire.h2_headers is not compiled: scripts/dev setup runs scripts/build_ext")
    return mod


def _cached_bytes(h2h: ModuleType) -> int:
    return sum(len(name) + len(value) for name, value in h2h._CLEAN)


def test_distinct_long_values_are_not_kept(h2h: ModuleType) -> None:
    h2h._CLEAN.clear()
    for i in range(4000):
        value = b"%05d" % i + b"v" * 63_000
        metadata, problem = h2h.read_request_headers(BASE + [(b"x-big", value)])
        assert problem is None and metadata["x-big"] == value.decode()
    assert _cached_bytes(h2h) <= h2h._MAX_CLEAN_BYTES
    assert all(len(n) + len(v) <= h2h._MAX_CLEAN_FIELD for n, v in h2h._CLEAN)
    assert set(BASE) <= set(h2h._CLEAN)  # the short, repeated fields are still cached


def test_the_cache_never_holds_more_than_its_byte_bound(h2h: ModuleType) -> None:
    """Fields just under the per-field limit, many more than the entry bound."""
    h2h._CLEAN.clear()
    name = b"x-near"
    room = h2h._MAX_CLEAN_FIELD - len(name)
    for i in range(h2h._MAX_CLEAN + 500):
        h2h.request_header_problem(BASE + [(name, (b"%06d" % i).ljust(room, b"z"))])
        assert len(h2h._CLEAN) <= h2h._MAX_CLEAN
    assert _cached_bytes(h2h) <= h2h._MAX_CLEAN_BYTES <= 2 * 1024 * 1024


def test_long_values_leave_no_memory_behind(h2h: ModuleType) -> None:
    h2h._CLEAN.clear()
    h2h.read_request_headers(BASE)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(200):  # 12.6 MB of values through the check
            h2h.read_request_headers(BASE + [(b"x-big", b"%05d" % i + b"v" * 63_000)])
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 256 * 1024, held


def test_a_long_bad_value_is_still_refused(h2h: ModuleType) -> None:
    h2h._CLEAN.clear()
    bad = b"v" * 63_000 + b"\n"
    for _ in range(2):  # not remembered as clean the second time either
        assert "Illegal character" in (h2h.request_header_problem(BASE + [(b"x-big", bad)]) or "")
