"""The verify kind's narrow columns: computed vectorised in the reader, they must equal what
store/ computes record by record (tags_code_of; build_key + index_key_hash, as
IndexService.buildIndex puts keys) -- on the real RocketMQ stores and on random inputs."""
from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqd.spark import scan
from rmqd.spark.schemas import ARROW_SCHEMAS
from rmqd.store.consumequeue import tags_code_of
from rmqd.store.indexfile import build_key, index_key_hash
from rmqd.wire.javamap import java_string_hash
from fixtures import facts  # noqa: E402
from tests.spark.conftest import CLEAN, CRASHED


def _reference_keys(topic: str, uniq: str | None, keys: str | None) -> list[tuple[str, int]]:
    ks = [uniq] if uniq is not None else []
    if keys:
        ks += [k for k in keys.split(" ") if k]
    return [(build_key(topic, k), index_key_hash(build_key(topic, k))) for k in ks]


@pytest.mark.parametrize("fixture", [CLEAN, CRASHED], ids=["clean", "crashed"])
def test_verify_columns_match_store_functions(fixture):
    root = str(fixture / "store")
    table = scan.delay_table(None)
    rows = 0
    for sp in scan.plan_commitlog(root, 300_000):
        full = list(scan.scan_commitlog(sp))
        narrow = list(scan.scan_commitlog(sp, schema=ARROW_SCHEMAS["verify"]))
        assert [b.num_rows for b in full] == [b.num_rows for b in narrow]
        for fb, vb in zip(full, narrow):
            f, v = fb.to_pylist(), vb.to_pylist()
            for a, b in zip(f, v):
                assert (b["file"], b["filePos"], b["topic"], b["queueId"], b["queueOffset"], b["totalSize"],
                        b["sysFlag"]) == (a["file"], a["filePos"], a["topic"], a["queueId"], a["queueOffset"],
                                          a["totalSize"], a["sysFlag"])
                assert b["expectedTagsCode"] == tags_code_of(a["topic"], dict(a["properties"]), a["storeTimestamp"],
                                                             table)
                assert [(k["key"], k["keyHash"]) for k in b["indexKeys"]] == \
                    _reference_keys(a["topic"], a["uniqKey"], a["keys"])
                rows += 1
    assert rows == facts(fixture)["commitlog"]["messages"]  # as RocketMQ's MessageDecoder counted


_text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40)


@settings(max_examples=200, deadline=None)
@given(st.lists(_text, min_size=2, max_size=30))
def test_vectorised_java_hash(strings):
    arr = pa.array(strings, pa.string())
    assert scan._java_hashes(arr).tolist() == [java_string_hash(s) for s in strings]
    sliced = arr.slice(1)  # an array view that does not start at its buffers' beginning
    assert scan._java_hashes(sliced).tolist() == [java_string_hash(s) for s in strings[1:]]


_token = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters=" \x01\x02"), max_size=6)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["T", "Topic-é", "SCHEDULE_TOPIC_XXXX"]),
                          st.one_of(st.none(), _token.filter(bool)),
                          st.one_of(st.none(), st.lists(_token, max_size=4).map(" ".join))), max_size=20))
def test_index_keys_column(rows):
    topic = pa.array([r[0] for r in rows], pa.string())
    uniq = pa.array([r[1] for r in rows], pa.string())
    keys = pa.array([r[2] for r in rows], pa.string())
    got = scan.index_keys_column(topic, keys, uniq).to_pylist()
    assert [[(k["key"], k["keyHash"]) for k in g] for g in got] == [_reference_keys(*r) for r in rows]


def test_expected_tags_codes_schedule_topic():
    table = scan.delay_table("1s 5s")
    topic = pa.array(["T", "SCHEDULE_TOPIC_XXXX", "SCHEDULE_TOPIC_XXXX", "SCHEDULE_TOPIC_XXXX", "T"])
    tags = pa.array(["a", "b", None, "c", None])
    delay = pa.array([None, "2", "9", "x", "1"])
    ts = pa.array([10, 20, 30, 40, 50], pa.int64()).to_numpy()
    got = scan.expected_tags_codes(topic, tags, delay, ts, table).to_pylist()
    want = [tags_code_of(t, {k: v for k, v in (("TAGS", g), ("DELAY", d)) if v is not None}, s, table)
            for t, g, d, s in zip(topic.to_pylist(), tags.to_pylist(), delay.to_pylist(), ts.tolist())]
    assert got == want == [java_string_hash("a"), 20 + 5000, 30 + 5000, java_string_hash("c"), 0]
