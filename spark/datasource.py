"""The ``rocketmq`` Spark data source (Spark 4 Python Data Source API).

    spark.dataSource.register(RocketMQDataSource)
    spark.read.format("rocketmq").option("kind", "commitlog").load("/path/to/store")

Options (case-insensitive):
  kind            commitlog (default) | consumequeue | index | problems | verify
                  ("problems" = the file-level integrity checks of ``rmqd spark verify``:
                  one row per problem with file and offset; "verify" = narrow per-record rows
                  for queue and index checks of one's own, see spark/schemas.py VERIFY_SCHEMA;
                  ``rmqd spark verify`` itself matches them inside Python tasks instead, see
                  spark/verify_plan.py)
  messageDelayLevel  the broker's, for the verify kind's expected tags codes (default 4.9.8's)
  splitSize       bytes per commit-log partition (default 128 MiB; records belong to the split
                  they start in, so any value works)
  body            true (default) | false: leave the body column null (less data to move)
  checkCrc        true (default) | false: compute crc_ok
  batchRows       rows per Arrow batch (default 8192)
  partitionBytes  consume-queue / index bytes per partition (default 64 MiB)
  maxHashSlotNum, maxIndexNum        index geometry (default: inferred from the file size)
  mappedFileSizeConsumeQueue         consume-queue file size for the checks (default: inferred)

Column pruning: Spark does not tell a Python data source which columns a query uses, so every
column of the kind's schema is computed and crosses into the JVM. A query that needs only some
gives them as a schema, ``spark.read.format("rocketmq").schema("topic STRING, queueOffset
BIGINT, keys STRING").load(path)``: any subset of the kind's columns (names as in
spark/schemas.py, case-insensitive; same types), in any order. Columns not named are never
computed (no CRC without ``crc_ok``, no body copy without ``body``, no properties parsing
without ``properties``/``tags``/``keys``/``uniqKey``), which is several times faster.

Partitions are planned on the driver from file names and sizes only; executors open the files
themselves, so on a cluster the store path must be readable at the same path on every executor
(a shared or replicated file system) and the rmqd packages (spark, store, wire) must be shipped,
e.g. ``spark-submit --py-files rmqd.zip``. Rows leave the reader as Arrow record batches.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from rmqd.spark import scan, walk_hints
from rmqd.spark.schemas import ARROW_SCHEMAS, SCHEMAS

KINDS = ("commitlog", "consumequeue", "index", "problems", "verify")


@dataclass
class _Options:
    path: str
    kind: str
    split_size: int
    read_body: bool
    check_crc: bool
    batch_rows: int
    partition_bytes: int
    slot_num: int | None
    index_num: int | None
    cq_file_size: int | None
    delay_levels: str | None = None


def _bool(v: str | None, default: bool, name: str) -> bool:
    if v is None:
        return default
    s = str(v).strip().lower()
    if s not in ("true", "false"):
        raise ValueError(f"option {name}: expected true or false, got {v!r}")
    return s == "true"


def _int(v: str | None, default: int | None, name: str) -> int | None:
    if v is None or str(v).strip() == "":
        return default
    try:
        i = int(str(v).strip())
    except ValueError:
        raise ValueError(f"option {name}: expected an integer, got {v!r}") from None
    if i <= 0:
        raise ValueError(f"option {name}: must be positive, got {i}")
    return i


def parse_options(options: dict) -> _Options:
    opts = {str(k).lower(): v for k, v in dict(options).items()}
    path = opts.get("path")
    if not path:
        raise ValueError("rocketmq data source: give the store directory, e.g. .load('/path/to/store')")
    kind = str(opts.get("kind", "commitlog")).lower()
    if kind not in KINDS:
        raise ValueError(f"option kind: expected one of {', '.join(KINDS)}, got {kind!r}")
    return _Options(
        path=path, kind=kind,
        split_size=_int(opts.get("splitsize"), scan.DEFAULT_SPLIT_SIZE, "splitSize"),
        read_body=_bool(opts.get("body"), True, "body"),
        check_crc=_bool(opts.get("checkcrc"), True, "checkCrc"),
        batch_rows=_int(opts.get("batchrows"), scan.DEFAULT_BATCH_ROWS, "batchRows"),
        partition_bytes=_int(opts.get("partitionbytes"), 64 * 1024 * 1024, "partitionBytes"),
        slot_num=_int(opts.get("maxhashslotnum"), None, "maxHashSlotNum"),
        index_num=_int(opts.get("maxindexnum"), None, "maxIndexNum"),
        cq_file_size=_int(opts.get("mappedfilesizeconsumequeue"), None, "mappedFileSizeConsumeQueue"),
        delay_levels=_delay_levels(opts.get("messagedelaylevel")),
    )


def _delay_levels(v: str | None) -> str | None:
    """messageDelayLevel, checked on the driver (one clear error before any task runs)."""
    if v is None or not str(v).strip():
        return None
    scan.delay_table(str(v))  # raises ValueError naming the bad item
    return str(v)


class RocketMQDataSource(DataSource):
    """Reads a RocketMQ 4.9.x store directory (Apache RocketMQ's or rmqd's)."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> StructType:
        return SCHEMAS[parse_options(self.options).kind]

    def reader(self, schema: StructType) -> DataSourceReader:
        o = parse_options(self.options)
        return RocketMQReader(o, output_schema(o.kind, schema))


def output_schema(kind: str, schema: StructType | None) -> pa.Schema:
    """The Arrow schema the reader yields for the schema Spark passes: the kind's own, or a
    user-specified subset of its columns (checked here, on the driver, so a wrong name or type
    is one clear error before any task runs)."""
    full = SCHEMAS[kind]
    if schema is None or schema == full:
        return ARROW_SCHEMAS[kind]
    ours = {f.name.lower(): f for f in full.fields}
    seen: set[str] = set()
    for f in schema.fields:
        g = ours.get(f.name.lower())
        if g is None:
            raise ValueError(f"rocketmq data source: kind {kind} has no column {f.name!r}; "
                             f"columns: {', '.join(full.fieldNames())}")
        if g.name in seen:
            raise ValueError(f"rocketmq data source: column {g.name!r} is named twice in the schema")
        seen.add(g.name)
        if f.dataType != g.dataType:
            raise ValueError(f"rocketmq data source: column {g.name} is {g.dataType.simpleString()}, "
                             f"not {f.dataType.simpleString()}")
        if g.nullable and not f.nullable:
            raise ValueError(f"rocketmq data source: column {g.name} can be null; declare it nullable")
    return to_arrow_schema(schema, timezone="UTC")


class _Part(InputPartition):
    """One unit of work: (what, payload). Payloads are frozen dataclasses or tuples of them
    (picklable; at most a few hundred)."""

    def __init__(self, what: str, payload) -> None:
        super().__init__(what)
        self.what = what
        self.payload = payload


def plan_partitions(o: _Options) -> list[_Part]:
    """What each task reads; computed from directory listings only (the commit-log tasks also
    get the consume-queue listing their walk hints come from, see spark/walk_hints.py)."""
    if not os.path.isdir(o.path):
        raise FileNotFoundError(f"rocketmq data source: {o.path}: no such store directory")
    parts: list[_Part] = []
    if o.kind in ("commitlog", "problems", "verify"):
        what = {"commitlog": "commitlog", "verify": "commitlog"}.get(o.kind, "check-commitlog")
        splits = scan.plan_commitlog(o.path, o.split_size)
        if what == "commitlog":
            hints = walk_hints.hint_files(o.path) if splits else None
            parts += [_Part(what, (s, hints)) for s in splits]
        else:
            parts += [_Part(what, s) for s in splits]
    if o.kind in ("consumequeue", "problems"):
        files = scan.queue_files(o.path)
        what = "consumequeue" if o.kind == "consumequeue" else "check-consumequeue"
        size = o.cq_file_size or scan.infer_queue_file_size(files)
        for group in scan.group_by_size(files, lambda f: f.size, o.partition_bytes):
            parts.append(_Part(what, (tuple(group), size)))
    if o.kind in ("index", "problems"):
        what = "index" if o.kind == "index" else "check-index"
        for ref in scan.index_files(o.path):  # one file per task: chains are per file
            parts.append(_Part(what, ref))
    return parts


def read_partition(o: _Options, part: _Part, schema: pa.Schema | None = None) -> Iterator[pa.RecordBatch]:
    """Batches of one partition, with the columns of ``schema`` (default: the kind's own)."""
    w, p = part.what, part.payload
    if w == "commitlog":
        p, hints = p
        starts = walk_hints.record_starts(hints, p.base + p.start, p.base + p.end) if hints else None
        return scan.scan_commitlog(p, read_body=o.read_body, check_crc=o.check_crc, batch_rows=o.batch_rows,
                                   schema=schema if schema is not None else ARROW_SCHEMAS[o.kind],
                                   delay_levels=o.delay_levels, starts=starts)
    batches = _read_other(o, w, p)
    if schema is None or schema.equals(batches_schema := ARROW_SCHEMAS[o.kind]):
        return batches
    names = {n.lower(): n for n in batches_schema.names}
    return (pa.RecordBatch.from_arrays([b.column(names[f.name.lower()]) for f in schema], schema=schema)
            for b in batches)


def _read_other(o: _Options, w: str, p) -> Iterator[pa.RecordBatch]:
    if w == "check-commitlog":
        return scan.check_commitlog(p, batch_rows=o.batch_rows)
    if w == "consumequeue":
        return scan.scan_queue_files(list(p[0]))
    if w == "check-consumequeue":
        return scan.check_queue_files(list(p[0]), p[1])
    if w == "index":
        return scan.scan_index_files([p], o.slot_num, o.index_num)
    if w == "check-index":
        return scan.check_index_files([p], o.slot_num, o.index_num)
    raise ValueError(f"unknown partition kind {w!r}")


class RocketMQReader(DataSourceReader):
    def __init__(self, options: _Options, schema: pa.Schema | None = None) -> None:
        self.o = options
        self.schema = schema

    def partitions(self) -> list[InputPartition]:
        parts = plan_partitions(self.o)
        # Spark needs at least one partition; an empty store yields no rows
        return parts or [_Part("empty", None)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if partition.what == "empty":
            return iter(())
        return read_partition(self.o, partition, self.schema)
