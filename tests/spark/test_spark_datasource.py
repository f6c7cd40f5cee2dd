"""The ``rocketmq`` data source on local Spark: counts equal the fixture manifests, the
schemas are the documented ones, export writes readable parquet."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import functions as F  # noqa: E402

from rmqd.spark.cli import export_main  # noqa: E402
from rmqd.spark.schemas import SCHEMAS  # noqa: E402
from rmqd.spark.session import read  # noqa: E402
from fixtures import facts, sent  # noqa: E402
from tests.spark.conftest import CLEAN, CRASHED  # noqa: E402

# what RocketMQ's MessageDecoder counted in the fixtures, and the index entries their files hold
N_CLEAN = facts(CLEAN)["commitlog"]["messages"]
N_CRASHED = facts(CRASHED)["commitlog"]["messages"]
INDEX_ENTRIES = sum(f["indexCount"] - 1 for f in facts(CLEAN)["index"])

pytestmark = pytest.mark.timeout(240)


def test_commitlog_counts_equal_manifests(spark):
    clean = read(spark, CLEAN / "store", "commitlog", splitSize=262144, body="false")
    assert clean.schema == SCHEMAS["commitlog"]
    assert clean.count() == N_CLEAN
    assert clean.rdd.getNumPartitions() == 4 * len(facts(CLEAN)["commitlog"]["files"])  # files x 4 byte ranges
    crashed = read(spark, CRASHED / "store", "commitlog")
    assert crashed.count() == N_CRASHED
    # every acknowledged traffic message of the crashed store is there, by client msgId
    sent = [json.loads(line) for line in open(CRASHED / "traffic-manifest.jsonl")]
    ok = {m["msgId"] for m in sent if m.get("sendStatus") == "SEND_OK"}
    reported = facts(CRASHED)["apacheRecovery"]["reported"]["topics"]["FixTrafficTopic"]
    assert len(ok) == sum(q["maxOffset"] for q in reported.values()) > 0
    got = {r.uniqKey for r in crashed.where(F.col("topic") == "FixTrafficTopic").select("uniqKey").collect()}
    assert got == ok


def test_rows_carry_every_field(spark):
    df = read(spark, CLEAN / "store", "commitlog")
    r = df.where(F.col("keys") == "key-props").first()
    assert r.topic == "FixTopicA" and r.tags == "TagC" and r.crc_ok
    assert r.properties["unicode"] == "ünïcødé-値" and r.properties["with space"] == "value with spaces"
    assert bytes(r.body) == b"message with user properties"
    assert r.offsetMsgId == sent(CLEAN, "normal-userprops")["offsetMsgId"] and r.storeHost == "127.0.0.1:10921"
    compressed = df.where((F.col("sysFlag").bitwiseAND(1)) == 1).count()
    assert compressed == 3  # the 4096 B, 150 KiB and 100 KiB+7 sends
    per_topic = {row.topic: row["count"] for row in df.groupBy("topic").count().collect()}
    assert per_topic["FixBulkTopic"] == 2000


def test_consumequeue_and_index_kinds(spark):
    cq = read(spark, CLEAN / "store", "consumequeue")
    assert cq.schema == SCHEMAS["consumequeue"]
    q = {(r.topic, r.queueId): r["count"] for r in cq.groupBy("topic", "queueId").count().collect()}
    assert q[("FixBulkTopic", 0)] == 500 and q[("SCHEDULE_TOPIC_XXXX", 2)] == 4 and q[("FixBatchTopic", 2)] == 5
    ix = read(spark, CLEAN / "store", "index")
    assert ix.schema == SCHEMAS["index"]
    assert ix.count() == INDEX_ENTRIES and ix.where(~F.col("reachable")).count() == 0
    assert read(spark, CRASHED / "store", "problems").count() == 0


def test_bad_option_is_a_clear_error(spark):
    with pytest.raises(Exception, match="option kind"):
        read(spark, CLEAN / "store", "nonsense").count()


def test_export_parquet(spark, tmp_path, capsys):
    out = tmp_path / "out"
    assert export_main([str(CLEAN / "store"), str(out), "--format", "parquet", "--master", "local[2]"]) == 0
    text = capsys.readouterr().out
    assert str(N_CLEAN) in text and str(INDEX_ENTRIES) in text
    back = spark.read.parquet(str(out / "commitlog"))
    assert back.count() == N_CLEAN and back.schema["properties"].dataType == SCHEMAS["commitlog"]["properties"].dataType
    assert export_main([str(CLEAN / "store"), str(out), "--master", "local[2]"]) == 2  # exists, no --overwrite
    assert "rmqd spark export" in capsys.readouterr().err
    assert export_main([str(tmp_path / "nope"), str(out)]) == 2


def test_missing_store_is_a_clear_error(spark, tmp_path):
    with pytest.raises(Exception, match="no such store directory"):
        read(spark, tmp_path / "absent", "commitlog").count()
    (tmp_path / "empty").mkdir()
    assert read(spark, tmp_path / "empty", "commitlog").count() == 0


def test_user_schema_selects_columns(spark):
    """.schema(...) with a subset of the columns (any order, any case) is Spark's only way to
    prune a Python data source: the rows equal those columns of the full read."""
    store = str(CLEAN / "store")
    ddl = "offsetMsgId STRING, QUEUEOFFSET BIGINT, topic STRING, keys STRING, crc_ok BOOLEAN, properties MAP<STRING, STRING>"
    slim = spark.read.format("rocketmq").schema(ddl).load(store)
    assert slim.columns == ["offsetMsgId", "QUEUEOFFSET", "topic", "keys", "crc_ok", "properties"]
    full = read(spark, CLEAN / "store", "commitlog").select("offsetMsgId", "queueOffset", "topic", "keys", "crc_ok",
                                                           "properties")
    assert sorted(map(tuple, slim.collect())) == sorted(map(tuple, full.collect()))
    assert slim.count() == N_CLEAN and slim.where("crc_ok").count() == N_CLEAN
    assert read(spark, CLEAN / "store", "commitlog", columns=["keys", "topic"]).columns == ["keys", "topic"]
    cq = spark.read.format("rocketmq").option("kind", "consumequeue").schema("tagsCode BIGINT, topic STRING").load(store)
    assert cq.columns == ["tagsCode", "topic"] and cq.count() == read(spark, CLEAN / "store", "consumequeue").count()


@pytest.mark.parametrize("ddl, message", [
    ("topic STRING, nosuch INT", "has no column 'nosuch'"),
    ("queueId BIGINT", "queueId is int, not bigint"),
    ("topic STRING, TOPIC STRING", "named twice"),
    ("tags STRING NOT NULL", "tags can be null"),
])
def test_user_schema_errors_are_clear(spark, ddl, message):
    with pytest.raises(Exception, match=message):
        spark.read.format("rocketmq").schema(ddl).load(str(CLEAN / "store")).count()
