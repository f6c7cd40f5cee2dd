"""Spark schemas of the rows the ``rocketmq`` data source produces, and their Arrow twins.

Field names follow RocketMQ's own (MessageExt / ConsumeQueue / IndexFile) so a query reads like
the broker's code; ``file``/``filePos`` locate every row on disk. The Arrow schemas are derived
with PySpark's own converter, because the Python data source only accepts record batches whose
schema equals that conversion exactly (types and nullability).
"""
from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, IntegerType, LongType, MapType, StringType,
                               StructField, StructType)


def _f(name: str, typ, nullable: bool = False) -> StructField:
    return StructField(name, typ, nullable)


COMMITLOG_SCHEMA = StructType([
    _f("file", StringType()),              # commit-log file name (20-digit start offset)
    _f("filePos", LongType()),             # position of the record inside that file
    _f("totalSize", IntegerType()),
    _f("magic", IntegerType()),            # as Java's int: -626843481 (v1) / -626843477 (v2)
    _f("bodyCRC", IntegerType()),
    _f("queueId", IntegerType()),
    _f("flag", IntegerType()),
    _f("queueOffset", LongType()),
    _f("physicalOffset", LongType()),      # the stored PHYSICALOFFSET field
    _f("sysFlag", IntegerType()),
    _f("bornTimestamp", LongType()),       # ms since the epoch
    _f("bornHost", StringType()),          # "ip:port"
    _f("storeTimestamp", LongType()),
    _f("storeHost", StringType()),
    _f("reconsumeTimes", IntegerType()),
    _f("preparedTransactionOffset", LongType()),
    _f("bodyLength", IntegerType()),       # stored (possibly compressed) body length
    _f("body", BinaryType(), True),        # stored body; null when option body=false
    _f("topic", StringType()),
    _f("properties", MapType(StringType(), StringType(), True)),
    _f("tags", StringType(), True),
    _f("keys", StringType(), True),        # KEYS property as stored (space-separated)
    _f("uniqKey", StringType(), True),     # client msgId (UNIQ_KEY property)
    _f("offsetMsgId", StringType()),       # broker msgId: store host + physical offset
    _f("crc_ok", BooleanType(), True),     # stored BODYCRC == crc32(body) & 0x7FFFFFFF; null when not checked
])

CONSUMEQUEUE_SCHEMA = StructType([
    _f("topic", StringType()),
    _f("queueId", IntegerType()),
    _f("file", StringType()),              # consume-queue file name (20-digit start byte offset)
    _f("filePos", LongType()),
    _f("queueOffset", LongType()),         # logical offset of the unit in its queue
    _f("commitLogOffset", LongType()),
    _f("size", IntegerType()),
    _f("tagsCode", LongType()),
])

INDEX_SCHEMA = StructType([
    _f("file", StringType()),              # index file name (yyyyMMddHHmmssSSS)
    _f("filePos", LongType()),             # position of the entry
    _f("indexNo", IntegerType()),          # entry number (1..indexCount-1)
    _f("slot", IntegerType()),             # hash slot the key belongs to (keyHash % slots)
    _f("keyHash", IntegerType()),
    _f("commitLogOffset", LongType()),
    _f("timeDiff", IntegerType()),         # seconds after the file's beginTimestamp
    _f("prevIndex", IntegerType()),
    _f("beginTimestamp", LongType()),      # of the file's header (entry time = begin + timeDiff s)
    _f("reachable", BooleanType()),        # a lookup through its slot's chain finds this entry
])

# Narrow per-record rows for joining against the consume queues and the index: what such
# checks need of each record, with the per-record work (property parsing, the expected tags
# code, the index keys and their hashes) done in the Python reader, so no body, property map or
# Python UDF round trip is involved and only these small columns cross into the JVM. (``rmqd
# spark verify`` joined these once; it now matches inside Python tasks: spark/verify_plan.py.)
INDEX_KEY_TYPE = StructType([_f("key", StringType()), _f("keyHash", IntegerType())])
VERIFY_SCHEMA = StructType([
    _f("file", StringType()),
    _f("filePos", LongType()),
    _f("topic", StringType()),
    _f("queueId", IntegerType()),
    _f("queueOffset", LongType()),
    _f("totalSize", IntegerType()),
    _f("sysFlag", IntegerType()),
    _f("expectedTagsCode", LongType()),    # the tags code dispatch writes for it (ConsumeQueue)
    _f("indexKeys", ArrayType(INDEX_KEY_TYPE, False)),  # topic#UNIQ_KEY, topic#each KEYS token, hashed
])

PROBLEMS_SCHEMA = StructType([
    _f("file", StringType()),              # path relative to the store root, e.g. commitlog/000...
    _f("offset", LongType()),              # byte position inside that file
    _f("check", StringType()),             # which check found it
    _f("problem", StringType()),
])

SCHEMAS = {
    "commitlog": COMMITLOG_SCHEMA,
    "consumequeue": CONSUMEQUEUE_SCHEMA,
    "index": INDEX_SCHEMA,
    "problems": PROBLEMS_SCHEMA,
    "verify": VERIFY_SCHEMA,
}

ARROW_SCHEMAS: dict[str, pa.Schema] = {k: to_arrow_schema(v, timezone="UTC") for k, v in SCHEMAS.items()}
