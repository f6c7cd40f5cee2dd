"""topics.json as a running broker saves it: put together from cached per-topic texts in the
Java order of remembered buckets, it must be what the generic fastjson writer makes of the
table, whatever sequence of creations, updates, deletions and order flags led there (and
across the table's resizes)."""
from __future__ import annotations

import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqd.store import topic_journal
from rmqd.store.topic_config import TopicConfigManager
from rmqd.wire import fastjson
from rmqd.wire.bodies import TopicConfig

names = st.text(alphabet="abcXYZ019_%-", min_size=1, max_size=6)
ops = st.lists(st.one_of(
    st.tuples(st.just("create"), names, st.integers(1, 16)),
    st.tuples(st.just("update"), names, st.integers(1, 16)),
    st.tuples(st.just("delete"), names, st.just(0)),
    st.tuples(st.just("order"), names, st.just(0)),
    st.tuples(st.just("save"), st.just(""), st.just(0)),
), max_size=60)


@pytest.fixture(autouse=True)
def _no_fdatasync(monkeypatch: pytest.MonkeyPatch) -> None:
    """Journal lines are what these tests read back, not their durability: no disk waits."""
    monkeypatch.setattr(topic_journal.os, "fdatasync", lambda fd: None)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops, st.integers(0, 300))
def test_saved_text_is_the_generic_writers_text(steps, bulk) -> None:
    m = TopicConfigManager(tempfile.mkdtemp())
    m.start_journal()  # journaled, not saved per change
    for i in range(bulk):
        m.create_topic_in_send_message_method(f"B{i}", "TBW102", 8, 0)
    for op, name, n in steps:
        if op == "create":
            m.create_topic_in_send_message_method(name, "TBW102", n, 0)
        elif op == "update":
            m.update_topic_config(TopicConfig(name, n, n, 6))
        elif op == "delete":
            m.delete_topic_config(name)
        elif op == "order":
            m.update_order_topic_config({name})
        else:
            assert m.encode(pretty=True) == fastjson.dumps(m.encode_obj(), pretty=True)
    assert m.encode(pretty=True) == fastjson.dumps(m.encode_obj(), pretty=True)


def test_saves_across_a_resize_of_the_java_table() -> None:
    m = TopicConfigManager(tempfile.mkdtemp())
    m.start_journal()  # journaled, not saved per change
    count = len(m.topic_config_table)
    for i in range(1536 - count - 3):
        m.create_topic_in_send_message_method(f"B{i}", "TBW102", 8, 0)
    assert m.encode(pretty=True) == fastjson.dumps(m.encode_obj(), pretty=True)
    for i in range(6):  # 1,536 = 3/4 of 2,048 buckets: the table doubles on the way
        m.create_topic_in_send_message_method(f"C{i}", "TBW102", 8, 0)
        assert m.encode(pretty=True) == fastjson.dumps(m.encode_obj(), pretty=True)
    for i in range(10):
        m.delete_topic_config(f"B{i}")
    assert m.encode(pretty=True) == fastjson.dumps(m.encode_obj(), pretty=True)
